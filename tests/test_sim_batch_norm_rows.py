"""The BatchNorm + activation training kernels' row mode (BatchNorm of short planes: (N, F) after a Linear, (N, C, L)
with a small L; op_host/batch_norm_leaky_relu/batch_norm_leaky_relu_tiling.h), on the emulator, called directly,
against torch in float64 (F.batch_norm + the activation, torch.autograd for the gradients); its independence of the
core count, its GM traffic and its DMA count from the emulator's counters, and the tiling rule that picks it."""

import math

import pytest
import torch
import torch.nn.functional as F

from ascend_acts import backends
from ascend_acts.ops.conv_bn_leaky_relu import kernels
from markers import fast_only

pytestmark = pytest.mark.skipif(backends.unavailable_reason("sim") is not None, reason="emulator not built")

EPS, MOMENTUM = 1e-5, 0.1
TOLERANCES = {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}
# PyTorch-GAN's MLP generators: Linear -> BatchNorm1d over (N, F); N from one sample to more than a tile's rows
# (rowSamples 32: 64 is two whole tiles, 130 ends with a short one), F from one feature to more than a chunk
FEATURES = [(n, f) for n in (1, 2, 3, 64, 130) for f in (1, 3, 17, 128, 1000, 4099)]
# (N, C, L) and (N, C, H, W) planes that fill no whole 32-byte block, below 1 KiB
SHORT_PLANES = [(2, 5, 3), (64, 96, 3), (1, 7, 9), (130, 17, 5), (3, 4, 100), (4, 6, 5, 7), (33, 3, 255)]
FAST_SHAPES = [(3, 17), (64, 128), (130, 17), (64, 96, 3)]
# (activation, backward from): LeakyReLU from its output (InPlace-ABN), LeakyReLU and ReLU from the conv output
MODES = [("leaky", True), ("leaky", False), ("relu", False)]


def sim():
    from ascend_acts.backends import sim as module

    return module


def inputs(shape, dtype, seed=0):
    """x with a mean far larger than its spread (the shifted sums must not cancel), weight of both signs, bias, an
    upstream gradient and running statistics."""
    generator = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=generator, dtype=torch.float64) * 3 + 50).to(dtype)
    c = shape[1]
    weight = torch.rand(c, generator=generator) + 0.5
    weight[::2] *= -1
    bias = torch.randn(c, generator=generator)
    grad = torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)
    running = torch.rand(c, generator=generator), torch.rand(c, generator=generator) + 1
    return x, weight, bias, grad, running


def reduced(shape):
    return (0, *range(2, len(shape)))


def forward(x, weight, bias, running, relu, slope=0.2):
    return kernels.batch_norm_leaky_relu(x, weight, bias, *running, slope, EPS, MOMENTUM, relu=relu)


def backward(grad, x, out, weight, bias, mean, invstd, relu, from_output, slope=0.2):
    if from_output:
        return kernels.batch_norm_leaky_relu_grad(grad, out, weight, bias, invstd, slope)
    return kernels.batch_norm_leaky_relu_grad(grad, x, weight, bias, invstd, slope, save_mean=mean,
                                              saved_is_result=False, relu=relu)


def row_mode(shape, dtype, kernel="batch_norm_leaky_relu", **attrs):
    return kernels.batch_norm_leaky_relu_tiling(kernel, shape, torch.finfo(dtype).bits // 8, **attrs).row_mode == 1


def activate(z, relu, slope=0.2):
    return torch.relu(z) if relu else F.leaky_relu(z, slope)


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("shape", fast_only(FEATURES + SHORT_PLANES, FAST_SHAPES), ids=str)
def test_forward_matches_torch(shape, dtype):
    assert row_mode(shape, dtype)
    relu = sum(shape) % 2 == 1  # ReLU on about half the shapes, LeakyReLU on the rest
    x, weight, bias, _, running = inputs(shape, dtype)
    running_mean, running_var = running[0].clone(), running[1].clone()
    out, mean, invstd = forward(x, weight, bias, (running_mean, running_var), relu)

    x64, dims = x.double(), reduced(shape)
    count = x.numel() // shape[1]
    expected_mean, variance = x64.mean(dims), x64.var(dims, unbiased=False)
    view = (1, -1) + (1,) * (len(shape) - 2)
    z = (x64 - expected_mean.view(view)) * (variance + EPS).rsqrt().view(view) * weight.double().view(view)
    z = z + bias.double().view(view)
    if count > 1:  # torch's own batch norm (it refuses one value per channel)
        torch.testing.assert_close(z, F.batch_norm(x64, None, None, weight.double(), bias.double(), True, 0.0, EPS))
    rtol, atol = TOLERANCES[dtype]
    expected = activate(z, relu)
    if dtype == torch.float32 and count > 1:
        # two samples 0.1 apart around 50: (x - mean) / std has float32's own error of x - mean, torch's too
        x32 = x.float()
        theirs = activate(F.batch_norm(x32, None, None, weight, bias, True, 0.0, EPS), relu)
        atol = max(atol, 2 * float((theirs.double() - expected).abs().max()))
    torch.testing.assert_close(out.double(), expected.to(dtype).double(), rtol=rtol, atol=atol)
    torch.testing.assert_close(mean.double(), expected_mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(invstd.double(), (variance + EPS).rsqrt(), rtol=1e-4, atol=1e-6)
    unbiased = variance * (count / (count - 1) if count > 1 else 1.0)
    torch.testing.assert_close(running_mean.double(), (1 - MOMENTUM) * running[0].double() + MOMENTUM * expected_mean,
                               rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(running_var.double(), (1 - MOMENTUM) * running[1].double() + MOMENTUM * unbiased,
                               rtol=1e-4, atol=1e-6)


def torch_gradients(x, weight, bias, grad, relu, dtype):
    leaves = [t.to(dtype).requires_grad_() for t in (x, weight, bias)]
    activate(F.batch_norm(leaves[0], None, None, leaves[1], leaves[2], True, 0.0, EPS), relu).backward(grad.to(dtype))
    return [leaf.grad.double() for leaf in leaves]


# Many samples per channel: well-conditioned statistics (the few-sample cases follow)
@pytest.mark.parametrize("activation, from_output", MODES, ids=str)
@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("shape", fast_only([s for s in FEATURES + SHORT_PLANES if math.prod(s) // s[1] >= 5],
                                            FAST_SHAPES[1:]), ids=str)
def test_backward_matches_torch(shape, dtype, activation, from_output):
    relu = activation == "relu"
    assert row_mode(shape, dtype, "batch_norm_leaky_relu_grad", saved_is_result=from_output, relu=relu)
    x, weight, bias, grad, _ = inputs(shape, dtype)
    out, mean, invstd = forward(x, weight, bias, (None, None), relu)
    ours = backward(grad, x, out, weight, bias, mean, invstd, relu, from_output)
    grad_input, grad_weight, grad_bias = torch_gradients(x, weight, bias, grad, relu, torch.float64)
    rtol, atol = TOLERANCES[dtype]
    # the half types: the kept output (or x) is rounded: error relative to the largest gradient
    scale = 1.0 if dtype == torch.float32 else float(grad_input.abs().max())
    torch.testing.assert_close(ours[0].double(), grad_input, rtol=rtol, atol=atol * scale)
    sums_scale = 1.0 if dtype == torch.float32 else float(grad_weight.abs().max() + grad_bias.abs().max())
    torch.testing.assert_close(ours[2].double(), grad_bias, rtol=rtol, atol=atol * sums_scale)
    torch.testing.assert_close(ours[1].double(), grad_weight, rtol=rtol, atol=atol * sums_scale)


@pytest.mark.parametrize("relu", [False, True], ids=["leaky", "relu"])
@pytest.mark.parametrize("shape", fast_only([s for s in FEATURES + SHORT_PLANES if 1 < math.prod(s) // s[1] < 5],
                                            [(2, 128)]), ids=str)
def test_backward_with_few_samples_within_twice_torchs_error(shape, relu):
    """Two or three values per channel around 50: x - mean has float32's error of 50 and invstd is large, so every
    float32 result, torch's too, is far from float64 (grad_x cancels to nearly 0: exactly, but for eps, for two). From
    the conv output, the error is at most twice torch's float32 error plus one ulp of the largest value. (From the
    output, recovering x_hat from the rounded output adds an error that grows with invstd: the plane walk's too.)"""
    x, weight, bias, grad, _ = inputs(shape, torch.float32)
    out, mean, invstd = forward(x, weight, bias, (None, None), relu)
    ours = backward(grad, x, out, weight, bias, mean, invstd, relu, False)
    exact = torch_gradients(x, weight, bias, grad, relu, torch.float64)
    theirs = torch_gradients(x, weight, bias, grad, relu, torch.float32)
    for name, mine, torchs, expected in zip(("grad_input", "grad_weight", "grad_bias"), ours, theirs, exact):
        error = float((mine.double() - expected).abs().max())
        torch_error = float((torchs - expected).abs().max())
        floor = torch.finfo(torch.float32).eps * float(expected.abs().max())
        assert error <= 2 * torch_error + floor, f"{name}: {error:.2e} vs torch's {torch_error:.2e}"


@pytest.mark.parametrize("shape", fast_only([(130, 1000), (64, 96, 3), (3, 17)], [(64, 96, 3)]), ids=str)
def test_results_do_not_depend_on_the_core_count(shape):
    """Each channel's sums run over the same lanes in the same order (rowSamples from the shape alone) on any core
    count and chunking: bit-identical forward and both backwards on 1, 5 and 48 cores."""
    x, weight, bias, grad, running = inputs(shape, torch.float32)

    def run():
        assert all(row_mode(shape, torch.float32, kernel) for kernel in
                   ("batch_norm_leaky_relu", "batch_norm_leaky_relu_grad"))
        r = running[0].clone(), running[1].clone()
        out, mean, invstd = forward(x, weight, bias, r, False)
        relu_out, *_ = forward(x, weight, bias, (None, None), True)
        return [out, mean, invstd, *r, relu_out,
                *backward(grad, x, out, weight, bias, mean, invstd, False, True),
                *backward(grad, x, out, weight, bias, mean, invstd, True, False)]

    results = {}
    for cores in (1, 5, 48):
        with sim().launch_settings(platform="ascend910b1", vector_cores=cores):
            results[cores] = run()
            assert sim().last_launch().block_dim == min(cores, shape[1])
    for cores in (5, 48):
        assert all(torch.equal(a, b) for a, b in zip(results[cores], results[1])), cores


@pytest.mark.parametrize("shape, dtype", fast_only([(shape, dtype) for shape in [(64, 128), (130, 1000), (33, 3, 255)]
                                                   for dtype in (torch.float32, torch.float16)],
                                                  [((64, 128), torch.float32)], unpack=True), ids=str)
def test_traffic_is_the_ideal_with_few_copies(shape, dtype):
    """x read twice and y written once (dy and the output read twice, dx written once), every value once per pass:
    and one DMA per tile of rowSamples samples of a chunk, not one per value."""
    x, weight, bias, grad, running = inputs(shape, dtype)
    nbytes, c = x.numel() * x.element_size(), shape[1]
    tiling = kernels.batch_norm_leaky_relu_tiling("batch_norm_leaky_relu", shape, x.element_size())
    with sim().launch_settings(assumptions=sim().timeline.Assumptions()):  # the timeline counts the DMA instructions
        out, mean, invstd = forward(x, weight, bias, running, False)
    launch = sim().last_launch()
    assert launch.buffer_bytes_in["x"] == 2 * nbytes and launch.buffer_bytes_out["y"] == nbytes
    assert launch.buffer_bytes_in["y"] == 0 and launch.buffer_bytes_out["save_mean"] == 4 * c
    tiles = math.ceil(shape[0] / tiling.row_samples)
    for block, events in enumerate(launch.timeline.events):
        channels = tiling.groups_per_core + (block < tiling.big_core_count)
        chunks = math.ceil(channels / tiling.row_channels)
        # pass 1 and pass 2 read each tile once, pass 2 writes it; + weight, bias, running mean and var in, the
        # saved and running statistics out
        assert events["MTE2"] == 2 * chunks * tiles + 4 and events["MTE3"] == chunks * tiles + 4, block
    with sim().launch_settings(assumptions=sim().timeline.Assumptions()):
        backward(grad, x, out, weight, bias, mean, invstd, False, True)
    launch = sim().last_launch()
    assert launch.buffer_bytes_in["dy"] == 2 * nbytes and launch.buffer_bytes_in["saved"] == 2 * nbytes
    assert launch.buffer_bytes_out["dx"] == nbytes
    tiling = kernels.batch_norm_leaky_relu_tiling("batch_norm_leaky_relu_grad", shape, x.element_size())
    for block, events in enumerate(launch.timeline.events):
        channels = tiling.groups_per_core + (block < tiling.big_core_count)
        chunks = math.ceil(channels / tiling.row_channels)
        # dy and the output per tile and pass; weight, bias, invstd in; dx per tile, grad weight and bias out
        assert events["MTE2"] == 4 * chunks * tiles + 3 and events["MTE3"] == chunks * tiles + 2, block


def test_float32_error_stays_within_twice_torchs():
    """8192 samples of 48 features around 50: each channel's sums run over 256 tiles of 32 lanes, compensated, then
    folded: the float32 error against float64 is at most twice torch's own, plus one ulp of the largest value, for
    the output and the three gradients."""
    shape = (8192, 48)
    x, weight, bias, grad, _ = inputs(shape, torch.float32)
    x = (x.double() - 50) * (2 / 3) + 50  # std 2, the plane walk's test
    x = x.float()
    out, mean, invstd = forward(x, weight, bias, (None, None), False)
    grads = backward(grad.float(), x, out, weight, bias, mean, invstd, False, True)

    def torch_bn(dtype):
        leaves = [t.to(dtype).requires_grad_() for t in (x, weight, bias)]
        y = F.leaky_relu(F.batch_norm(leaves[0], None, None, leaves[1], leaves[2], True, 0.0, EPS), 0.2)
        y.backward(grad.to(dtype))
        return [y.detach()] + [leaf.grad for leaf in leaves]

    exact, torchs = torch_bn(torch.float64), torch_bn(torch.float32)
    for name, ours, theirs, expected in zip(["y", "grad_input", "grad_weight", "grad_bias"], [out, *grads], torchs,
                                            exact):
        error = float((ours.double() - expected).abs().max())
        torch_error = float((theirs.double() - expected).abs().max())
        floor = torch.finfo(torch.float32).eps * float(expected.abs().max())
        assert error <= 2 * torch_error + floor, f"{name}: {error:.2e} vs torch's {torch_error:.2e}"


def test_a_non_finite_channel_gives_torchs_inf_and_nan():
    """A channel with an inf (or a NaN) sums plainly, as the plane walk does: torch's non-finite statistics there,
    the other channels untouched."""
    x, weight, bias, grad, _ = inputs((64, 40), torch.float32)
    x[7, 3], x[9, 5] = math.inf, math.nan
    out, mean, invstd = forward(x, weight, bias, (None, None), False)
    expected = F.leaky_relu(F.batch_norm(x.double(), None, None, weight.double(), bias.double(), True, 0.0, EPS), 0.2)
    torch.testing.assert_close(out.double(), expected, rtol=2e-5, atol=2e-5, equal_nan=True)
    assert mean[3] == math.inf and math.isnan(mean[5]) and mean.isfinite().sum() == 38


@pytest.mark.parametrize("shape, dtype, norm_groups, rows", [
    ((64, 1024), torch.float32, 0, True),          # (N, F): planes of one value
    ((8, 128, 3), torch.float16, 0, True),         # Conv1d with a short L
    ((2, 3, 255), torch.float32, 0, True),         # 1020 bytes: just below the threshold
    ((2, 3, 256), torch.float32, 0, False),        # 1 KiB: one plane per DMA is efficient enough
    ((2, 3, 300), torch.float32, 0, False),        # above the threshold
    ((150, 2, 8, 8), torch.float32, 0, False),     # whole 32-byte blocks: moved many planes per DMA already
    ((8, 128, 16), torch.float16, 0, False),       # 32 bytes: the same
    ((8, 6, 3), torch.float32, 3, False),          # grouped norms keep their per-sample walk
    ((8, 6, 3), torch.float32, 6, False),
], ids=str)
def test_the_tiling_rule(shape, dtype, norm_groups, rows):
    """Row mode iff BatchNorm with planes below 1 KiB that fill no whole 32-byte block."""
    assert row_mode(shape, dtype, norm_groups=norm_groups, update_running_stats=norm_groups == 0) == rows
