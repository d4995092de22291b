"""`padding_mode` of the fused Conv -> norm -> activation (torch's Conv2d modes: F.pad's reflect, replicate, circular
before an unpadded convolution; "zeros" the convolution's own): conv_bn_activation and the ops against torch's
composite F.pad(mode) -> F.conv2d -> F.batch_norm / F.instance_norm / F.group_norm -> F.leaky_relu / F.relu, on
every CPU backend: values, every gradient, running statistics, derivatives of every order, layouts, what autograd
keeps, torch's errors, compile and export."""

import pytest
import torch
import torch.nn.functional as F

from ascend_acts import backends
from ascend_acts.ops.conv_bn_leaky_relu.function import conv_bn_activation
from ascend_acts.ops.conv_bn_leaky_relu.torch_ops import unpad_gradient
from conftest import backend_dtypes
from fused_block_checks import (
    assert_close,
    assert_compiled_and_exported_as_eager,
    assert_forward_mode_as_torch,
    assert_gradient_penalty_as_torch,
    assert_run_as_torch,
    copies,
    differentiable,
)
from markers import fast_only, slow

ops = torch.ops.ascend_acts
MODES = ("reflect", "replicate", "circular", "zeros")
# (N, C_in, C_out, H, W, kernel, stride, padding): "same" with an even kernel pads 1 before and 2 after each axis
LAYERS = {"strided": (2, 3, 4, 7, 6, 3, 2, 1), "asymmetric": (2, 3, 4, 6, 5, 4, 1, "same"),
          "tiny": (2, 2, 4, 3, 4, 2, 1, 1)}
# norm_groups: 0 BatchNorm, "C" InstanceNorm (with running statistics), 2 GroupNorm (two channels a group)
NORMS = (0, "C", 2)
ACTIVATIONS = {"leaky_relu": (0.2, False), "leaky_relu-0": (0.0, False), "relu": (0.0, True)}


def pads_of(layer):
    """(left, right, top, bottom), F.pad's order, as torch's Conv2d pads for its padding_mode."""
    *_, k, _, padding = LAYERS[layer]
    if padding == "same":
        return (k - 1) // 2, k // 2, (k - 1) // 2, k // 2
    return (padding,) * 4


def make_case(layer, norm_groups, dtype=torch.float64, seed=0):
    n, cin, cout, h, w, k, stride, padding = LAYERS[layer]
    g = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)

    groups = cout if norm_groups == "C" else norm_groups
    statistics = groups in (0, cout)
    tensors = {"input": randn(n, cin, h, w), "weight": randn(cout, cin, k, k) * 0.3, "bias": randn(cout),
               "bn_weight": randn(cout).abs() + 0.5, "bn_bias": randn(cout) * 0.3,
               "running_mean": randn(cout) * 0.2 if statistics else None,
               "running_var": randn(cout).abs() + 0.5 if statistics else None}
    return tensors, {"stride": stride, "padding": padding, "norm_groups": groups, "layer": layer}


def fused(t, options, training, slope, relu, mode, **extra):
    return conv_bn_activation(t["input"], t["weight"], t["bias"], t["running_mean"], t["running_var"], t["bn_weight"],
                              t["bn_bias"], training, 0.1, 1e-5, slope, options["stride"], options["padding"], 1, 1,
                              relu=relu, norm_groups=options["norm_groups"], padding_mode=mode, **extra)


def composite(t, options, training, slope, relu, mode):
    """torch's Conv2d(padding_mode=mode) -> norm -> activation."""
    x = F.pad(t["input"], pads_of(options["layer"]), **({} if mode == "zeros" else {"mode": mode}))
    conv = F.conv2d(x, t["weight"], t["bias"], options["stride"])
    groups = options["norm_groups"]
    if groups == 0:
        out = F.batch_norm(conv, t["running_mean"], t["running_var"], t["bn_weight"], t["bn_bias"], training, 0.1, 1e-5)
    elif groups == conv.shape[1]:
        out = F.instance_norm(conv, t["running_mean"], t["running_var"], t["bn_weight"], t["bn_bias"], training, 0.1,
                              1e-5)
    else:
        out = F.group_norm(conv, groups, t["bn_weight"], t["bn_bias"], 1e-5)
    return F.relu(out) if relu else F.leaky_relu(out, slope)





def assert_as_torch(tensors, options, training, activation, mode, **extra):
    """Output, every gradient (input, conv weight and bias, norm weight and bias) and the running statistics."""
    slope, relu = ACTIVATIONS[activation]
    assert_run_as_torch(lambda t: fused(t, options, training, slope, relu, mode, **extra),
                        lambda t: composite(t, options, training, slope, relu, mode), tensors, tensors["input"].dtype)


EACH_BACKEND = pytest.mark.parametrize("backend", fast_only(backends.known_backends(), ["reference"]), indirect=True)
CASES = fast_only([(layer, norm, list(ACTIVATIONS)[(i + j + k) % 3], mode)
                   for i, layer in enumerate(("strided", "asymmetric")) for j, norm in enumerate(NORMS)
                   for k, mode in enumerate(MODES)],
                  [("asymmetric", "C", "relu", "reflect"), ("strided", 2, "leaky_relu-0", "circular")], unpack=True)


@pytest.mark.parametrize("layer, norm, activation, mode", CASES)
@backend_dtypes("conv_bn_leaky_relu_train", [torch.float64, torch.float32])
def test_training_values_gradients_and_running_statistics_as_torch(layer, norm, activation, mode, dtype, backend):
    tensors, options = make_case(layer, norm, dtype)
    assert_as_torch(tensors, options, True, activation, mode)


@pytest.mark.parametrize("mode", fast_only(MODES, ["reflect"]))
@backend_dtypes("conv_bn_leaky_relu_eval", [torch.float64, torch.float32])
def test_eval_as_torch(mode, dtype, backend):
    """BatchNorm folded into the conv (the emulator's eval kernel runs on the padded input) and InstanceNorm with
    running statistics; the gradients through eval (the eval backward op)."""
    for layer, norm in (("strided", 0), ("asymmetric", "C")):
        tensors, options = make_case(layer, norm, dtype)
        assert_as_torch(tensors, options, False, "leaky_relu", mode)


@pytest.mark.parametrize("mode", MODES[:3])
@pytest.mark.parametrize("pads", [(1, 2, 2, 1), (0, 3, 3, 0), (4, 0, 1, 2)], ids=str)
def test_the_pad_gradient_folds_as_torchs_pad_backward(mode, pads):
    """unpad_gradient against torch's autograd of F.pad(mode): circular up to a whole wrap (pad == size)."""
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64, requires_grad=True)
    if mode == "reflect":
        pads = tuple(min(p, 3) for p in pads)
    padded = F.pad(x, pads, mode=mode)
    grad = torch.randn_like(padded)
    (want,) = torch.autograd.grad(padded, x, grad)
    left, right, top, bottom = pads
    torch.testing.assert_close(unpad_gradient(grad, x.detach(), (top, bottom, left, right), mode), want,
                               rtol=0, atol=1e-14)


@slow
@pytest.mark.parametrize("mode", MODES[:3])
@pytest.mark.parametrize("norm", [0, 2])
def test_gradcheck_and_gradgradcheck_float64(mode, norm):
    """Through the ops' autograd: second order by the backward op's composite (F.pad with the mode)."""
    tensors, options = make_case("tiny", norm)
    names = [name for name, t in tensors.items() if t is not None and not name.startswith("running")]

    def block(*values):
        t = dict(tensors, **dict(zip(names, values)))
        t["running_mean"] = t["running_var"] = None
        return fused(t, options, True, 0.2, False, mode)

    leaves = differentiable(copies(tensors))
    assert torch.autograd.gradcheck(block, leaves, fast_mode=True)
    assert torch.autograd.gradgradcheck(block, leaves, fast_mode=True)


@slow
@pytest.mark.parametrize("mode", ["reflect", "circular"])
def test_eval_gradcheck_and_gradgradcheck_float64(mode):
    tensors, options = make_case("tiny", 0)
    names = ("input", "weight", "bias")

    def block(*values):
        return fused(dict(tensors, **dict(zip(names, values))), options, False, 0.2, False, mode)

    leaves = [tensors[name].clone().requires_grad_() for name in names]
    assert torch.autograd.gradcheck(block, leaves, fast_mode=True)
    assert torch.autograd.gradgradcheck(block, leaves, fast_mode=True)


@EACH_BACKEND
@pytest.mark.parametrize("mode", fast_only(MODES[:3], ["circular"]))
def test_gradient_penalty_and_forward_mode_as_torch(mode, backend):
    """WGAN-GP's double backward, and torch.func.jvp, against torch's."""
    dtype = torch.float32 if backend == "sim" else torch.float64
    tensors, options = make_case("strided", "C", dtype)
    runs = (lambda t: fused(t, options, True, 0.2, False, mode),
            lambda t: composite(t, options, True, 0.2, False, mode))
    assert_gradient_penalty_as_torch(runs, tensors, dtype)
    assert_forward_mode_as_torch(runs, tensors, dtype)


@EACH_BACKEND
@pytest.mark.parametrize("dtype", fast_only([torch.float16, torch.bfloat16], [torch.bfloat16]), ids=str)
def test_half_types_no_worse_than_twice_torch(dtype, backend):
    """|ours - float64| <= 2 |torch's same-dtype result - float64| (+ a few of the dtype's units): one rounding."""
    for norm, mode in ((0, "reflect"), ("C", "circular")):
        tensors, options = make_case("strided", norm)
        exact = composite(copies(tensors, grad=False), options, True, 0.2, False, mode)
        low = {name: None if t is None else t.to(dtype) for name, t in tensors.items()}
        ours = (fused(copies(low, grad=False), options, True, 0.2, False, mode).double() - exact).abs().max()
        theirs = (composite(copies(low, grad=False), options, True, 0.2, False, mode).double() - exact).abs().max()
        assert ours <= 2 * theirs + 4 * torch.finfo(dtype).eps


@EACH_BACKEND
@pytest.mark.parametrize("mode", MODES[:3])
def test_autograd_keeps_the_unpadded_input_only(mode, backend):
    """The pad is the op's: autograd keeps the input itself and nothing of the padded size (torch's Conv2d with a
    padding_mode keeps the padded copy, and torch's pad module its own input too)."""
    tensors, options = make_case("strided", "C", torch.float32)
    t, saved = copies(tensors), []
    with torch.autograd.graph.saved_tensors_hooks(lambda s: saved.append(s) or s, lambda s: s):
        fused(t, options, True, 0.0, True, mode)
    padded = F.pad(t["input"], pads_of("strided"), mode=mode)
    assert any(s.data_ptr() == t["input"].data_ptr() and s.shape == t["input"].shape for s in saved)
    assert not any(s.shape == padded.shape for s in saved), [tuple(s.shape) for s in saved]


@EACH_BACKEND
@pytest.mark.parametrize("mode", fast_only(MODES[:3], ["circular"]))
def test_channels_last_layouts_follow_torch(mode, backend):
    """The output and every gradient laid out as torch's composite lays them out (its circular pad is contiguous)."""
    for norm, layout in ((0, "input"), (2, "weight"), ("C", "input")):
        tensors, options = make_case("strided", norm, torch.float32)
        tensors[layout] = tensors[layout].contiguous(memory_format=torch.channels_last)
        for training in (True, False):
            ours, theirs = copies(tensors), copies(tensors)
            out = fused(ours, options, training, 0.2, False, mode)
            want = composite(theirs, options, training, 0.2, False, mode)
            assert out.stride() == want.stride(), (norm, layout, training)
            for got, expected in zip(torch.autograd.grad(out.sum(), differentiable(ours)),
                                     torch.autograd.grad(want.sum(), differentiable(theirs))):
                assert got.stride() == expected.stride(), (norm, layout, training, got.shape)


def unchanged(tensors, before):
    return all(torch.equal(t, before[name][0]) and t._version == before[name][1]
               for name, t in tensors.items() if t is not None)


BAD_CALLS = {  # name -> (changes to the case, error type, message pattern)
    "unknown mode": ({"padding_mode": "mirror"}, ValueError, "'padding_mode' must be one of 'zeros', 'reflect'"),
    "transposed with a mode": ({"padding_mode": "reflect", "transposed": True}, ValueError, "transposed"),
    "reflect pad as large as the input": ({"padding_mode": "reflect", "padding": 3}, RuntimeError,
                                          "Padding size should be less than the corresponding input dimension"),
    "circular pad wrapping twice": ({"padding_mode": "circular", "padding": 4}, RuntimeError,
                                    "Padding value causes wrapping around more than once"),
    # torch's conv2d refuses it in every mode (a crop is F.pad's); the op's backward could not fold it back
    "a negative amount": ({"padding_mode": "circular", "padding": -1}, RuntimeError, "'padding' must be non-negative"),
    "a negative zero pad": ({"padding_mode": "zeros", "padding": -1}, RuntimeError, "'padding' must be non-negative"),
}


@EACH_BACKEND
@pytest.mark.parametrize("case", BAD_CALLS)
def test_bad_padding_is_refused_and_changes_nothing(case, backend):
    changes, error, pattern = BAD_CALLS[case]
    tensors, options = make_case("tiny", "C", torch.float32)
    tensors["input"] = tensors["input"][:, :, :3, :3].contiguous()
    if changes.get("transposed"):
        tensors["weight"] = tensors["weight"].transpose(0, 1).contiguous()
    before = {name: None if t is None else (t.clone(), t._version) for name, t in tensors.items()}
    padding = changes.get("padding", 1)
    extra = {"transposed": True} if changes.get("transposed") else {}
    with pytest.raises(error, match=pattern):
        fused(tensors, dict(options, padding=padding), True, 0.2, False, changes["padding_mode"], **extra)
    assert unchanged(tensors, before)
    # the op checks it too, before anything runs
    t = tensors
    geometry = ([1, 1], [padding] * 4, [1, 1], 1)
    with pytest.raises(error, match=pattern):
        ops.conv_bn_leaky_relu_train(t["input"], t["weight"], t["bias"], t["bn_weight"], t["bn_bias"],
                                     t["running_mean"], t["running_var"], *geometry, 0.1, 1e-5, 0.2, False, False,
                                     bool(extra), [0, 0], t["weight"].shape[1 if extra else 0], False,
                                     changes["padding_mode"])
    assert unchanged(tensors, before)
    with pytest.raises(error, match=pattern):
        ops.conv_bn_leaky_relu_eval(t["input"], t["weight"], t["bias"], *geometry, 0.2, False, bool(extra), [0, 0],
                                    changes["padding_mode"])


def test_a_torch_conv2d_with_a_mode_is_what_the_function_computes():
    """torch's own nn.Conv2d(padding_mode=...) (its _reversed_padding_repeated_twice) as the oracle of the amounts."""
    for mode in MODES[:3]:
        conv = torch.nn.Conv2d(3, 4, 4, padding="same", padding_mode=mode, dtype=torch.float64)
        norm = torch.nn.InstanceNorm2d(4, affine=True, dtype=torch.float64)
        x = torch.randn(2, 3, 6, 5, dtype=torch.float64)
        want = F.relu(norm(conv(x)))
        got = conv_bn_activation(x, conv.weight, conv.bias, None, None, norm.weight, norm.bias, True, relu=True,
                                 padding="same", norm_groups=4, padding_mode=mode)
        assert_close(got, want, torch.float64)


def test_vmap_and_autocast():
    tensors, options = make_case("strided", 2, torch.float32)
    batch = torch.stack([tensors["input"], tensors["input"] * 2])

    def one(x):
        return fused(dict(tensors, input=x), options, True, 0.2, False, "reflect")

    torch.testing.assert_close(torch.vmap(one)(batch), torch.stack([one(x) for x in batch]))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fused(copies(tensors), options, True, 0.2, False, "reflect")
        want = composite(copies(tensors), options, True, 0.2, False, "reflect")
    assert out.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), want.float(), rtol=0.05, atol=0.05)


@slow
@pytest.mark.parametrize("mode", ["reflect", "circular"])
def test_compile_fullgraph_and_export_as_eager(mode):
    tensors, options = make_case("strided", "C", torch.float32)
    assert_compiled_and_exported_as_eager(lambda t: fused(t, options, True, 0.0, True, mode),
                                          lambda t: fused(t, options, True, 0.2, False, mode), tensors)
