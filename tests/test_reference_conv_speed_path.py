"""The reference backend's fused ops (torch's convolution + the NumPy BatchNorm+LeakyReLU passes) against
the float64 NumPy oracle (the same module's train_forward, ...), and the fast NumPy kernels' exactness."""

import numpy as np
import pytest
import torch

from ascend_acts.numerics import elementwise
from ascend_acts.ops.conv_bn_leaky_relu import reference as backend  # the reference backend's functions
from ascend_acts.ops.conv_bn_leaky_relu import reference as oracle  # and, in the same module, the float64 oracle
from ascend_acts.ops.conv_bn_leaky_relu import reference_batch_norm as kernels
from ascend_acts.ops.leaky_relu import reference as activations
from markers import fast_only

ops = torch.ops.ascend_acts
# (N, C_in, C_out, H, W, kernel, stride, padding (top, bottom, left, right), dilation, groups, conv bias)
GEOMETRIES = [
    (4, 3, 8, 16, 16, (4, 4), (2, 2), (1, 1, 1, 1), (1, 1), 1, False),  # DCGAN block
    (2, 8, 16, 9, 7, (4, 4), (2, 2), (1, 1, 1, 1), (1, 1), 1, True),    # odd sizes, conv bias
    (3, 4, 6, 5, 5, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),     # 1x1
    (2, 6, 6, 12, 9, (3, 3), (2, 2), (2, 2, 2, 2), (2, 2), 3, False),   # dilation, groups
    (1, 3, 5, 8, 8, (2, 2), (1, 1), (0, 1, 0, 1), (1, 1), 1, True),     # asymmetric padding ("same", even kernel)
    (2, 2, 4, 7, 6, (3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 2, False),    # everything rectangular and uneven
    (2, 4, 4, 3, 1, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 4, True),     # six elements per channel, depthwise
]
DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
# max |result - exact| / max |exact|, for results computed in float32 (float64) and rounded to the dtype
TOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def make(geometry, dtype, seed=0):
    n, cin, cout, h, w, kernel, *_, groups, has_bias = geometry
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, cin, h, w, dtype=torch.float64, generator=gen)
    weight = torch.randn(cout, cin // groups, *kernel, dtype=torch.float64, generator=gen)
    bias = torch.randn(cout, dtype=torch.float64, generator=gen) if has_bias else None
    gamma = torch.empty(cout, dtype=torch.float64).uniform_(0.5, 1.5, generator=gen)
    beta = torch.empty(cout, dtype=torch.float64).uniform_(-0.3, 0.3, generator=gen)
    low = [None if t is None else t.to(dtype) for t in (x, weight, bias)]
    channel = torch.float64 if dtype == torch.float64 else torch.float32
    return low, [gamma.to(channel), beta.to(channel)]


def exact(t):
    """The float64 NumPy array of t's values (the oracle runs on the same, already rounded, inputs)."""
    return None if t is None else t.double().numpy()


def assert_near(result: torch.Tensor, expected: np.ndarray, dtype, what: str):
    assert result.dtype in (dtype, torch.float32) and tuple(result.shape) == expected.shape, what
    error = np.abs(result.double().numpy() - expected).max(initial=0) / max(np.abs(expected).max(initial=0), 1e-30)
    assert error <= TOL[dtype], (what, error)


def geometry_args(geometry):
    return geometry[6], geometry[7], geometry[8], geometry[9]


@pytest.mark.parametrize("save_output", [True, False])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: "x".join(map(str, g[:5])))
def test_train_forward_and_backward_match_the_float64_oracle(geometry, dtype, save_output):
    if geometry[3] * geometry[4] * geometry[0] < 8 and dtype in (torch.float16, torch.bfloat16):
        pytest.skip("a few values per channel: the gradients cancel to well below one half-precision rounding "
                    "of the kept tensors, so no relative tolerance holds (main's reference did no better)")
    (x, weight, bias), (gamma, beta) = make(geometry, dtype)
    stride, padding, dilation, groups = geometry_args(geometry)
    slope, eps = 0.2, 1e-5
    running_mean, running_var = torch.zeros_like(gamma), torch.ones_like(gamma)
    out, kept, mean, invstd = backend.conv_bn_leaky_relu_train(
        x, weight, bias, gamma, beta, running_mean, running_var, stride, padding, dilation, groups, 0.1, eps, slope,
        save_output)
    want_out, want_conv, want_mean, want_invstd, want_variance = oracle.train_forward(
        exact(x), exact(weight), exact(bias), exact(gamma), exact(beta), stride, padding, dilation, groups, eps, slope)
    assert out.dtype == dtype and kept.dtype == dtype
    assert_near(out, want_out, dtype, "out")
    assert_near(mean, want_mean, dtype, "mean")
    assert_near(invstd, want_invstd, dtype, "invstd")
    if save_output:
        assert kept.numel() == 0
    else:
        assert_near(kept, want_conv, dtype, "conv output")
    count = want_conv.size // want_conv.shape[1]
    unbiased = want_variance * count / (count - 1) if count > 1 else np.full_like(want_variance, np.inf)
    assert_near(running_mean, 0.1 * want_mean, dtype, "running_mean")
    if count > 1:
        assert_near(running_var, 0.9 + 0.1 * unbiased, dtype, "running_var")

    grad = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).to(dtype)
    saved = out if save_output else kept
    grads = backend.conv_bn_leaky_relu_train_backward(grad, saved, save_output, x, weight, gamma, beta, mean, invstd,
                                                      stride, padding, dilation, groups, slope)
    # exact gradients: the oracle from its own float64 conv output
    want = oracle.train_backward(exact(grad), want_conv, False, exact(x), exact(weight), exact(gamma), exact(beta),
                                 want_mean, want_invstd, stride, padding, dilation, groups, slope)
    likes = (x, weight, weight, gamma, beta)
    for name, got, expected, like in zip(("input", "weight", "bias", "bn_weight", "bn_bias"), grads, want, likes):
        assert got.dtype == like.dtype
        if name == "bias":  # a bias before BatchNorm has no effect: its exact gradient is 0
            scale = np.abs(want[0]).max()
            assert float(got.double().abs().max()) <= 10 * TOL[dtype] * max(scale, 1.0), name
        else:
            assert_near(got, expected, dtype, name)


@pytest.mark.parametrize("slope", [0.2, 1.0, 0.0, -0.5, 3.0])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("geometry", GEOMETRIES[:2] + GEOMETRIES[4:6], ids=lambda g: "x".join(map(str, g[:5])))
def test_eval_op_and_its_backward_match_the_float64_oracle(geometry, dtype, slope):
    (x, weight, bias), _ = make(geometry, dtype, seed=2)
    bias = bias if bias is not None else torch.zeros(weight.shape[0], dtype=dtype)
    stride, padding, dilation, groups = geometry_args(geometry)
    out = backend.conv_bn_leaky_relu_eval(x, weight, bias, stride, padding, dilation, groups, slope)
    want_out = oracle.eval_forward(exact(x), exact(weight), exact(bias), stride, padding, dilation, groups, slope)
    assert out.dtype == dtype
    assert_near(out, want_out, dtype, "out")
    grad = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3)).to(dtype)
    grads = backend.conv_bn_leaky_relu_eval_backward(grad, x, weight, bias, stride, padding, dilation, groups, slope)
    want = oracle.eval_backward(exact(grad), exact(x), exact(weight), exact(bias), stride, padding, dilation, groups,
                                slope)
    for name, got, expected, like in zip(("input", "weight", "bias"), grads, want, (x, weight, bias)):
        assert got.dtype == like.dtype
        assert_near(got, expected, dtype, name)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_channels_last_through_the_op_matches_the_oracle(dtype):
    geometry = GEOMETRIES[1]
    (x, weight, bias), (gamma, beta) = make(geometry, dtype, seed=4)
    stride, padding, dilation, groups = geometry_args(geometry)
    x_cl = x.contiguous(memory_format=torch.channels_last)
    out, _, _, _ = ops.conv_bn_leaky_relu_train(x_cl, weight, bias, gamma, beta, None, None, stride, padding,
                                                dilation, groups, 0.1, 1e-5, 0.2, True)
    assert out.is_contiguous(memory_format=torch.channels_last)
    want = oracle.train_forward(exact(x), exact(weight), exact(bias), exact(gamma), exact(beta), stride, padding,
                                dilation, groups, 1e-5, 0.2)[0]
    assert_near(out, want, dtype, "out")


def test_the_reference_backend_runs_torchs_convolution():
    """Forward and backward of both ops go through aten::convolution / aten::convolution_backward (oneDNN on
    CPU), not the NumPy im2col of the oracle."""
    (x, weight, _), (gamma, beta) = make(GEOMETRIES[0], torch.float32)
    stride, padding, dilation, groups = geometry_args(GEOMETRIES[0])
    bias = torch.zeros(weight.shape[0])
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        out, _, mean, invstd = backend.conv_bn_leaky_relu_train(x, weight, None, gamma, beta, None, None, stride,
                                                                padding, dilation, groups, 0.1, 1e-5, 0.2, True)
        backend.conv_bn_leaky_relu_train_backward(torch.ones_like(out), out, True, x, weight, gamma, beta, mean,
                                                  invstd, stride, padding, dilation, groups, 0.2)
        backend.conv_bn_leaky_relu_eval(x, weight, bias, stride, padding, dilation, groups, 0.2)
        backend.conv_bn_leaky_relu_eval_backward(torch.ones_like(out), x, weight, bias, stride, padding, dilation,
                                              groups, 0.2)
    names = [event.name for event in profile.events()]
    assert names.count("aten::convolution") == 3  # train forward, eval forward, eval backward's recomputation
    assert names.count("aten::convolution_backward") == 2


def test_backward_writes_in_place_only_into_its_own_copy():
    """For float32 grad_out is the caller's tensor: it must come back unchanged."""
    (x, weight, _), (gamma, beta) = make(GEOMETRIES[0], torch.float32)
    geometry = geometry_args(GEOMETRIES[0])
    out, _, mean, invstd = backend.conv_bn_leaky_relu_train(x, weight, None, gamma, beta, None, None, *geometry,
                                                            0.1, 1e-5, 0.2, True)
    grad = torch.randn(out.shape)
    before, out_before = grad.clone(), out.clone()
    backend.conv_bn_leaky_relu_train_backward(grad, out, True, x, weight, gamma, beta, mean, invstd, *geometry, 0.2)
    assert torch.equal(grad, before) and torch.equal(out, out_before)


@pytest.mark.parametrize("save_output", [True, False])
def test_an_empty_batch_gives_empty_results_and_zero_parameter_gradients(save_output):
    """What torch's composite gives for N = 0 (the op-level API handles this before the backend; a direct
    call of the op must not produce NaN gradients either)."""
    (x, weight, bias), (gamma, beta) = make(GEOMETRIES[1], torch.float32)
    x = x[:0]
    geometry = geometry_args(GEOMETRIES[1])
    out, kept, mean, invstd = backend.conv_bn_leaky_relu_train(x, weight, bias, gamma, beta, None, None, *geometry,
                                                               0.1, 1e-5, 0.2, save_output)
    assert out.shape[0] == 0 and out.shape[1:] == (16, 4, 3)
    grads = backend.conv_bn_leaky_relu_train_backward(torch.ones_like(out), out if save_output else kept,
                                                      save_output, x, weight, gamma, beta, mean, invstd, *geometry,
                                                      0.2)
    assert grads[0].shape == x.shape
    for grad, like in zip(grads[1:], (weight, bias, gamma, beta)):
        assert grad.shape == like.shape and torch.equal(grad, torch.zeros_like(like))


# --- the NumPy kernels -----------------------------------------------------------------------------
SPECIALS = np.array([0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3e38, -3e38])


@pytest.mark.parametrize("slope", [0.2, 1.0, 0.0, -0.5, 3.0, 1e-30])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_leaky_relu_fast_paths_are_bitwise_the_definition(slope, dtype):
    """max/min/slope-factor forms against x > 0 ? x : x * slope, bit for bit (NaN, -0.0, infinities, overflow)."""
    x = np.concatenate([SPECIALS, np.random.default_rng(0).standard_normal(1000)]).astype(dtype)
    s = dtype(slope)
    with np.errstate(all="ignore"):
        want = np.where(x > 0, x, x * s)
        out = np.empty_like(x)
        activations.forward(x, slope, out)
        grad = x[::-1].copy()
        grad_out = np.empty_like(x)
        activations.backward(grad, x, slope, grad_out)
        want_grad = np.where(x > 0, grad, grad * s)
        z = x.copy()[None, None]
        kernels._leaky_relu_in_place(z, s)
    assert np.array_equal(out.view(np.uint8), want.view(np.uint8))
    assert np.array_equal(grad_out.view(np.uint8), want_grad.view(np.uint8))
    assert np.array_equal(z.reshape(-1).view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("slope", [0.2, 0.01, 0.999, 1.0, 0.0, 1e-30, -0.5, 3.0])
def test_slope_factors_are_exactly_one_or_the_slope(slope):
    positive = np.array([True, False] * 5)
    for dtype in (np.float32, np.float64):
        factors = elementwise.slope_factors(positive, slope, dtype)
        assert factors.dtype == dtype
        assert np.array_equal(factors, np.where(positive, dtype(1), dtype(slope)))


@pytest.mark.parametrize("norm_groups", fast_only([0, 1, 5], [0, 5]))
@pytest.mark.parametrize("saved_is_result", [True, False])
def test_batch_norm_kernels_match_the_oracle_across_many_chunks(saved_is_result, norm_groups, monkeypatch):
    """Rows spread over several chunks and threads (a small CHUNK): the per-row sums merge into the same
    statistics (per channel, or per sample and group: norm_groups) and gradients as the oracle's whole-array ones;
    large mean, small spread."""
    from ascend_acts.numerics import parallel

    monkeypatch.setattr(kernels, "CHUNK", 64)
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        rng = np.random.default_rng(5)
        y = (100 + rng.standard_normal((6, 5, 7, 3))).astype(np.float64)
        gamma, beta = rng.uniform(0.5, 1.5, 5), rng.uniform(-0.3, 0.3, 5)
        out = np.empty_like(y)
        mean, invstd, variance = kernels.forward(y, gamma, beta, 1e-5, 0.2, out, groups=norm_groups)
        want_mean, want_variance = oracle.batch_statistics(y, norm_groups)
        np.testing.assert_allclose(mean, want_mean, rtol=1e-14)
        np.testing.assert_allclose(variance, want_variance, rtol=1e-10)
        channel = np.s_[None, :, None, None]
        xhat = ((y - oracle.statistic_view(want_mean, y.shape, norm_groups))
                / np.sqrt(oracle.statistic_view(want_variance, y.shape, norm_groups) + 1e-5))
        want_out = oracle._leaky(xhat * gamma[channel] + beta[channel], 0.2)
        np.testing.assert_allclose(out, want_out, rtol=1e-10, atol=1e-12)
        grad = rng.standard_normal(y.shape)
        grad_y = np.empty_like(y)
        saved = out if saved_is_result else y
        grad_gamma, grad_beta = kernels.backward(grad, saved, saved_is_result, gamma, beta, mean, invstd, 0.2, grad_y,
                                                 groups=norm_groups)
        want = oracle.batch_norm_leaky_relu_backward(grad, saved, saved_is_result, gamma, beta, mean, invstd, 0.2,
                                                     norm_groups=norm_groups)
        for got, expected in zip((grad_y, grad_gamma, grad_beta), want):
            np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-10 * np.abs(expected).max())
    finally:
        torch.set_num_threads(previous)
    assert parallel.CHUNK == 1 << 17  # only the kernels' view was changed
