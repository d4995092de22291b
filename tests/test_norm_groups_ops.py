"""InstanceNorm and GroupNorm in the fused block (`norm_groups`): conv_bn_activation against torch's composite
F.conv2d / F.conv_transpose2d -> F.instance_norm / F.group_norm -> leaky_relu / relu / none as the oracle, on every
CPU backend: values, every gradient, running statistics, torch's errors, double backward, 16-bit accuracy."""

import pytest
import torch
import torch.nn.functional as F

from ascend_acts import backends
from ascend_acts.ops.conv_bn_leaky_relu.function import conv_bn_activation
from conftest import backend_dtypes
from fused_block_checks import (
    assert_compiled_as_eager,
    assert_forward_mode_as_torch,
    assert_gradient_penalty_as_torch,
    assert_run_as_torch,
    copies,
    differentiable,
)
from markers import fast_only, slow

ops = torch.ops.ascend_acts

# (N, C_in, C_out, H, W, kernel, stride, padding, transposed, output_padding)
LAYERS = {
    "patchgan": (2, 3, 4, 9, 8, 4, 2, 1, False, 0),
    "one-sample": (1, 2, 6, 5, 5, 3, 1, 1, False, 0),
    "transposed": (2, 4, 6, 4, 3, 3, 2, 1, True, 1),
    "tiny": (2, 2, 4, 3, 2, 2, 1, 0, False, 0),  # for gradgradcheck
}
# (norm, groups: "C" for the output channels, affine, track_running_stats); an activation of slope 1 is "none"
NORMS = [("instance", "C", True, False), ("instance", "C", False, False), ("instance", "C", True, True),
         ("group", 1, True, False), ("group", 2, True, False)]
ACTIVATIONS = {"leaky_relu": (0.2, False), "relu": (0.0, True), "none": (1.0, False)}


def make_case(layer, norm, dtype=torch.float64, seed=0, bias=True):
    """(arguments of conv_bn_activation as a dict, torch's composite as a function of (input, conv weight, conv bias,
    norm weight, norm bias) and the running statistics)."""
    n, cin, cout, h, w, k, stride, padding, transposed, output_padding = LAYERS[layer]
    kind, groups, affine, track = norm
    groups = cout if groups == "C" else groups
    g = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)

    weight = randn(cin, cout, k, k) if transposed else randn(cout, cin, k, k)
    tensors = {"input": randn(n, cin, h, w), "weight": weight * 0.3, "bias": randn(cout) if bias else None,
               "bn_weight": (randn(cout).abs() + 0.5) if affine else None, "bn_bias": randn(cout) * 0.3 if affine
               else None,
               "running_mean": randn(cout) * 0.2 if track else None,
               "running_var": (randn(cout).abs() + 0.5) if track else None}
    options = {"stride": stride, "padding": padding, "groups": 1, "transposed": transposed,
               "output_padding": output_padding, "norm_groups": groups, "momentum": 0.1, "eps": 1e-5}
    return tensors, options, kind


def composite(tensors, options, kind, training, slope, relu):
    """torch's own modules' computation."""
    x, weight, bias = tensors["input"], tensors["weight"], tensors["bias"]
    if options["transposed"]:
        conv = F.conv_transpose2d(x, weight, bias, options["stride"], options["padding"], options["output_padding"])
    else:
        conv = F.conv2d(x, weight, bias, options["stride"], options["padding"])
    if kind == "instance":
        tracked = tensors["running_mean"] is not None
        out = F.instance_norm(conv, tensors["running_mean"], tensors["running_var"], tensors["bn_weight"],
                              tensors["bn_bias"], training or not tracked, options["momentum"], options["eps"])
    else:
        out = F.group_norm(conv, options["norm_groups"], tensors["bn_weight"], tensors["bn_bias"], options["eps"])
    return F.relu(out) if relu else F.leaky_relu(out, slope)


def fused(tensors, options, training, slope, relu):
    return conv_bn_activation(tensors["input"], tensors["weight"], tensors["bias"], tensors["running_mean"],
                              tensors["running_var"], tensors["bn_weight"], tensors["bn_bias"], training,
                              options["momentum"], options["eps"], slope, options["stride"], options["padding"], 1,
                              options["groups"], relu=relu, transposed=options["transposed"],
                              output_padding=options["output_padding"], norm_groups=options["norm_groups"])





FAST_CASES = [("patchgan", NORMS[2], "leaky_relu", True), ("patchgan", NORMS[2], "leaky_relu", False)]
# the fast subset runs the other backends in test_op_contract's samples: here the reference only
EACH_BACKEND = pytest.mark.parametrize("backend", fast_only(backends.known_backends(), ["reference"]), indirect=True)
# every layer with every norm, the activations in turn; eval where it differs from training (running statistics)
# and once where it does not (no running statistics: the input's statistics in eval too)
CASES = fast_only([*((layer, norm, list(ACTIVATIONS)[(i + j + 1) % 3], training)
                     for j, layer in enumerate(("patchgan", "one-sample", "transposed"))
                     for i, norm in enumerate(NORMS) for training in ((True, False) if norm[3] else (True,))),
                   ("one-sample", NORMS[0], "relu", False)], FAST_CASES, unpack=True)


@pytest.mark.parametrize("layer, norm, activation, training", CASES)
@backend_dtypes("conv_bn_leaky_relu_train", [torch.float64, torch.float32])
def test_values_gradients_and_running_statistics_as_torch(layer, norm, activation, training, dtype, backend):
    tensors, options, kind = make_case(layer, norm, dtype)
    slope, relu = ACTIVATIONS[activation]
    ours = assert_run_as_torch(lambda t: fused(t, options, training, slope, relu),
                               lambda t: composite(t, options, kind, training, slope, relu), tensors, dtype)
    for name in ("running_mean", "running_var"):
        if tensors[name] is not None:
            assert training or torch.equal(ours[name], tensors[name])


@slow
@pytest.mark.parametrize("norm", [NORMS[0], NORMS[4]])
def test_gradcheck_and_gradgradcheck_float64(norm):
    """Through the ops' autograd (the backward op's composite for the second order), the conv bias included: it
    shifts GroupNorm's statistics of several channels."""
    tensors, options, _ = make_case("tiny", norm)
    leaves = differentiable(copies(tensors))
    names = [name for name, t in tensors.items() if t is not None and not name.startswith("running")]

    def block(*values):
        return fused(dict(tensors, **dict(zip(names, values))), options, True, 0.2, False)

    assert torch.autograd.gradcheck(block, leaves, fast_mode=True)
    assert torch.autograd.gradgradcheck(block, leaves, fast_mode=True)


@EACH_BACKEND
@pytest.mark.parametrize("norm", fast_only([NORMS[0], NORMS[4]], [NORMS[0]]))
def test_gradient_penalty_through_an_instance_norm_critic_as_torch(norm, backend):
    """WGAN-GP: the gradient of the critic's input gradient norm, through the fused block's double backward."""
    tensors, options, kind = make_case("patchgan", norm, torch.float32 if backend == "sim" else torch.float64)
    runs = (lambda t: fused(t, options, True, 0.2, False), lambda t: composite(t, options, kind, True, 0.2, False))
    assert_gradient_penalty_as_torch(runs, tensors, tensors["input"].dtype)


@EACH_BACKEND
@pytest.mark.parametrize("norm", fast_only([NORMS[2], NORMS[4]], [NORMS[4]]))
def test_forward_mode_as_torch(norm, backend):
    dtype = torch.float32 if backend == "sim" else torch.float64
    tensors, options, kind = make_case("patchgan", norm, dtype)
    runs = (lambda t: fused(t, options, True, 0.2, False), lambda t: composite(t, options, kind, True, 0.2, False))
    assert_forward_mode_as_torch(runs, tensors, dtype)


@EACH_BACKEND
@pytest.mark.parametrize("dtype", fast_only([torch.float16, torch.bfloat16], [torch.bfloat16]), ids=str)
@pytest.mark.parametrize("norm", fast_only([NORMS[1], NORMS[4]], [NORMS[1]]))
def test_half_types_no_worse_than_twice_torch(norm, dtype, backend):
    """|ours - float64| <= 2 |torch's same-dtype result - float64| (+ a floor of a few of the dtype's units)."""
    tensors, options, kind = make_case("patchgan", norm)
    exact = composite(tensors, options, kind, True, 0.2, False)
    low = {name: None if t is None else t.to(dtype) for name, t in tensors.items()}
    ours = (fused(low, options, True, 0.2, False).double() - exact).abs().max()
    theirs = (composite(low, options, kind, True, 0.2, False).double() - exact).abs().max()
    assert ours <= 2 * theirs + 4 * torch.finfo(dtype).eps


@EACH_BACKEND
def test_keeps_only_the_output_for_an_invertible_instance_norm(backend):
    """InPlace-ABN: affine=False is gamma = 1, beta = 0: the output, the input, the weight and O(N C) statistics;
    with ReLU the conv output instead of the output."""
    tensors, options, _ = make_case("patchgan", NORMS[1], torch.float32)
    for relu, kept in ((False, "out"), (True, "conv")):
        t, saved = copies(tensors), []
        with torch.autograd.graph.saved_tensors_hooks(lambda s, saved=saved: saved.append(s) or s, lambda s: s):
            out = fused(t, options, True, 0.2, relu)
        big = [s for s in saved if s.numel() == out.numel()]
        assert len(big) == 1, [tuple(s.shape) for s in saved]
        assert (big[0].data_ptr() == out.data_ptr()) == (kept == "out")
        assert sum(s.numel() for s in saved) <= (out.numel() + t["input"].numel() + t["weight"].numel()
                                                 + 8 * out.shape[0] * out.shape[1])


def test_one_spatial_value_is_refused_as_torch_refuses_it():
    """InstanceNorm of 1x1 planes: torch's ValueError whenever it uses the input's statistics (training, or no
    running statistics); GroupNorm of several channels computes; eval with running statistics computes."""
    x, weight = torch.randn(2, 3, 1, 1), torch.randn(4, 3, 1, 1)
    conv = F.conv2d(x, weight)
    for training, statistics in ((True, False), (False, False), (True, True)):
        running = (torch.zeros(4), torch.ones(4)) if statistics else (None, None)
        with pytest.raises(ValueError) as theirs:
            F.instance_norm(conv, *[None if r is None else r.clone() for r in running], use_input_stats=True)
        with pytest.raises(ValueError) as ours:
            conv_bn_activation(x, weight, None, *running, None, None, training, norm_groups=4)
        assert str(ours.value) == str(theirs.value)
        assert not statistics or (torch.equal(running[0], torch.zeros(4)) and torch.equal(running[1], torch.ones(4)))
    running = (torch.randn(4), torch.rand(4) + 0.5)
    want = F.leaky_relu(F.instance_norm(conv, *running, use_input_stats=False), 0.01)
    torch.testing.assert_close(conv_bn_activation(x, weight, None, *running, None, None, False, norm_groups=4), want)
    torch.testing.assert_close(conv_bn_activation(x, weight, None, None, None, None, None, True, norm_groups=2),
                               F.leaky_relu(F.group_norm(conv, 2), 0.01))


BAD_CALLS = {  # (norm_groups, running statistics) -> torch's error type, a word of our message
    "groups not dividing C": (3, False, RuntimeError, "norm_groups"),
    "running statistics with GroupNorm": (2, True, ValueError, "running_mean"),
    "negative groups": (-1, False, ValueError, "norm_groups"),
    "bool groups": (True, False, TypeError, "norm_groups"),
}


@EACH_BACKEND
@pytest.mark.parametrize("case", BAD_CALLS)
def test_bad_norm_groups_are_refused_by_name_and_change_nothing(case, backend):
    norm_groups, statistics, error, word = BAD_CALLS[case]
    tensors, options, _ = make_case("patchgan", NORMS[2] if statistics else NORMS[0], torch.float32)
    before = {name: None if t is None else (t.clone(), t._version) for name, t in tensors.items()}
    with pytest.raises(error, match=word):
        fused(tensors, dict(options, norm_groups=norm_groups), True, 0.2, False)
    for name, t in tensors.items():
        if t is not None:
            assert torch.equal(t, before[name][0]) and t._version == before[name][1]


def test_the_op_refuses_running_statistics_without_instance_norm_and_wrong_statistics_shapes():
    tensors, options, _ = make_case("patchgan", NORMS[2], torch.float32)
    x, weight, gamma, beta = (tensors[name] for name in ("input", "weight", "bn_weight", "bn_bias"))
    geometry = ([2, 2], [1, 1, 1, 1], [1, 1], 1)
    with pytest.raises(ValueError, match="running_mean"):
        ops.conv_bn_leaky_relu_train(x, weight, None, gamma, beta, tensors["running_mean"], tensors["running_var"],
                                     *geometry, 0.1, 1e-5, 0.2, True, False, False, [0, 0], 2)
    out, _, mean, invstd = ops.conv_bn_leaky_relu_train(x, weight, None, gamma, beta, None, None, *geometry, 0.1, 1e-5,
                                                        0.2, True, False, False, [0, 0], 2)
    assert mean.shape == invstd.shape == (x.shape[0], 2)
    with pytest.raises(RuntimeError, match="'mean' must have shape"):
        ops.conv_bn_leaky_relu_train_backward(out, out, True, x, weight, gamma, beta, mean[:, :1], invstd, *geometry,
                                              0.2, False, False, [0, 0], 2)


@pytest.mark.parametrize("norm", [NORMS[0], NORMS[2], NORMS[4]])
def test_an_empty_batch_behaves_as_torch(norm):
    tensors, options, kind = make_case("patchgan", norm, torch.float32)
    tensors["input"] = tensors["input"][:0]
    outcomes = []
    for run in (lambda t: fused(t, options, True, 0.2, False), lambda t: composite(t, options, kind, True, 0.2, False)):
        t = copies(tensors)
        try:
            out = run(t)
            grads = torch.autograd.grad(out.sum(), differentiable(t), allow_unused=True)
            outcomes.append((out.shape, [None if g is None else g.abs().sum().item() for g in grads]))
        except Exception as error:  # torch's InstanceNorm with running statistics refuses an empty batch
            outcomes.append((type(error), str(error)))
    assert outcomes[0] == outcomes[1]


def test_momentum_none_is_instance_norms_zero():
    tensors, options, kind = make_case("patchgan", NORMS[2], torch.float32)
    ours = copies(tensors, grad=False)
    fused(ours, dict(options, momentum=None), True, 0.2, False)
    assert torch.equal(ours["running_mean"], tensors["running_mean"])
    assert torch.equal(ours["running_var"], tensors["running_var"])


@EACH_BACKEND
def test_channels_last_layouts_follow_torch(backend):
    """torch's instance_norm returns a contiguous output, its group_norm a channels_last one."""
    for norm in (NORMS[0], NORMS[2], NORMS[4]):
        tensors, options, kind = make_case("patchgan", norm, torch.float32)
        tensors["input"] = tensors["input"].contiguous(memory_format=torch.channels_last)
        for training in (True, False):
            ours = copies(tensors)
            out = fused(ours, options, training, 0.2, False)
            want = composite(copies(tensors), options, kind, training, 0.2, False)
            assert out.stride() == want.stride(), (norm, training)
            (grad,) = torch.autograd.grad(out.sum(), ours["input"])
            assert grad.is_contiguous(memory_format=torch.channels_last)


def test_vmap_and_autocast():
    tensors, options, kind = make_case("patchgan", NORMS[4], torch.float32)
    batch = torch.stack([tensors["input"], tensors["input"] * 2])

    def one(x):
        return fused(dict(tensors, input=x), options, True, 0.2, False)

    torch.testing.assert_close(torch.vmap(one)(batch), torch.stack([one(x) for x in batch]))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fused(copies(tensors), options, True, 0.2, False)
        want = composite(copies(tensors), options, kind, True, 0.2, False)
    assert out.dtype == want.dtype == torch.bfloat16


@slow
@pytest.mark.parametrize("norm", [NORMS[2], NORMS[4]])
def test_compile_fullgraph_as_eager(norm):
    tensors, options, _ = make_case("patchgan", norm, torch.float32)
    assert_compiled_as_eager(lambda t: fused(t, options, True, 0.2, False), tensors)
