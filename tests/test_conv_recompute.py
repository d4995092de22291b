"""`recompute` of the fused Conv -> norm -> activation in training: autograd keeps no conv output (the op's conv_out
is empty) and the backward recomputes it from input, weight and bias. The same values and gradients as keeping it
(bit for bit, on every CPU backend and dtype) and as torch's composite; what autograd keeps; derivatives of every
order; the ops' refusals; compile, export, vmap and autocast."""

import pytest
import torch
import torch.nn.functional as F

from ascend_acts import backends
from ascend_acts.ops.conv_bn_leaky_relu.function import conv_bn_activation
from conftest import backend_dtypes
from fused_block_checks import (
    assert_close,
    assert_compiled_and_exported_as_eager,
    assert_forward_mode_as_torch,
    assert_gradient_penalty_as_torch,
    copies,
    differentiable,
)
from markers import fast_only, slow

ops = torch.ops.ascend_acts
# norm_groups: 0 BatchNorm, "C" InstanceNorm (running statistics), 2 GroupNorm (the conv bias shifts its statistics)
NORMS = (0, "C", 2)
# (slope, relu, keep_output): the runs that keep the conv output, which recompute replaces
ACTIVATIONS = {"relu": (0.0, True, True), "leaky_relu-0": (0.0, False, True), "leaky_relu-kept": (0.2, False, False)}


def make_case(norm_groups, dtype=torch.float64, seed=0, small=False):
    n, cin, cout, h, w = (2, 2, 4, 3, 4) if small else (2, 3, 4, 7, 6)
    g = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)

    groups = cout if norm_groups == "C" else norm_groups
    statistics = groups in (0, cout)
    tensors = {"input": randn(n, cin, h, w), "weight": randn(cout, cin, 3, 3) * 0.3, "bias": randn(cout),
               "bn_weight": randn(cout).abs() + 0.5, "bn_bias": randn(cout) * 0.3,
               "running_mean": randn(cout) * 0.2 if statistics else None,
               "running_var": randn(cout).abs() + 0.5 if statistics else None}
    return tensors, groups


def fused(t, norm_groups, activation, recompute, mode="zeros", training=True):
    slope, relu, keep_output = ACTIVATIONS[activation]
    return conv_bn_activation(t["input"], t["weight"], t["bias"], t["running_mean"], t["running_var"], t["bn_weight"],
                              t["bn_bias"], training, 0.1, 1e-5, slope, 2, 1, 1, 1, relu=relu,
                              keep_output=keep_output, norm_groups=norm_groups, padding_mode=mode,
                              recompute=recompute)


def composite(t, norm_groups, activation, mode="zeros"):
    slope, relu, _ = ACTIVATIONS[activation]
    x = F.pad(t["input"], (1, 1, 1, 1), **({} if mode == "zeros" else {"mode": mode}))
    conv = F.conv2d(x, t["weight"], t["bias"], 2)
    if norm_groups == 0:
        out = F.batch_norm(conv, t["running_mean"], t["running_var"], t["bn_weight"], t["bn_bias"], True, 0.1, 1e-5)
    elif norm_groups == conv.shape[1]:
        out = F.instance_norm(conv, t["running_mean"], t["running_var"], t["bn_weight"], t["bn_bias"], True, 0.1,
                              1e-5)
    else:
        out = F.group_norm(conv, norm_groups, t["bn_weight"], t["bn_bias"], 1e-5)
    return F.relu(out) if relu else F.leaky_relu(out, slope)





def run(tensors, norm_groups, activation, recompute, mode="zeros", grad=None):
    t = copies(tensors)
    out = fused(t, norm_groups, activation, recompute, mode)
    grad = torch.ones_like(out) if grad is None else grad
    return [out, *torch.autograd.grad(out, differentiable(t), grad),
            *(t[name] for name in ("running_mean", "running_var") if t[name] is not None)]


CASES = fast_only([(norm, activation, mode) for i, norm in enumerate(NORMS)
                   for j, activation in enumerate(ACTIVATIONS) for mode in (("zeros", "reflect")[(i + j) % 2],)],
                  [("C", "relu", "reflect")], unpack=True)


@pytest.mark.parametrize("norm, activation, mode", CASES)
@backend_dtypes("conv_bn_leaky_relu_train")
def test_recompute_gives_what_keeping_gives_bit_for_bit(norm, activation, mode, dtype, backend):
    """Output, every gradient and the running statistics: the backward normalises the same conv output, whether
    kept or recomputed (16-bit inputs too: rounded once, as the forward rounded it)."""
    tensors, groups = make_case(norm, dtype)
    grad = torch.randn(2, 4, 4, 3, dtype=torch.float64).to(dtype)
    for kept, recomputed in zip(run(tensors, groups, activation, False, mode, grad),
                                run(tensors, groups, activation, True, mode, grad)):
        assert torch.equal(kept, recomputed)


@pytest.mark.parametrize("norm, activation, mode", CASES)
@backend_dtypes("conv_bn_leaky_relu_train", [torch.float64, torch.float32])
def test_recompute_as_torch(norm, activation, mode, dtype, backend):
    tensors, groups = make_case(norm, dtype)
    theirs = copies(tensors)
    want = composite(theirs, groups, activation, mode)
    grad = torch.randn_like(want)
    expected = [want, *torch.autograd.grad(want, differentiable(theirs), grad),
                *(theirs[name] for name in ("running_mean", "running_var") if theirs[name] is not None)]
    for got, wanted in zip(run(tensors, groups, activation, True, mode, grad), expected):
        assert_close(got, wanted, dtype)


@pytest.mark.parametrize("backend", fast_only(backends.known_backends(), ["reference"]), indirect=True)
@pytest.mark.parametrize("mode", ["zeros", "circular"])
def test_autograd_keeps_no_conv_output(mode, backend):
    """Kept: the (unpadded) input, the conv weight (and, with recompute, a copy of it and of the conv bias as the
    forward used them), the norm's weight and bias and O(N C) statistics; without recompute the conv output besides."""
    tensors, groups = make_case("C", torch.float32)
    for recompute in (False, True):
        t, saved = copies(tensors), []
        with torch.autograd.graph.saved_tensors_hooks(lambda s, saved=saved: saved.append(s) or s, lambda s: s):
            out = fused(t, groups, "relu", recompute, mode)
        conv_sized = [s for s in saved if s.shape == out.shape]
        assert len(conv_sized) == (0 if recompute else 1), [tuple(s.shape) for s in saved]
        if recompute:
            large = [s for s in saved if s.numel() > 2 * out.shape[0] * out.shape[1]]
            originals = {t["input"].data_ptr(), t["weight"].data_ptr()}
            copies_ = [s for s in large if s.data_ptr() not in originals]
            assert {s.data_ptr() for s in large} - {s.data_ptr() for s in copies_} == originals
            assert [(s.shape, torch.equal(s, t["weight"])) for s in copies_] == [(t["weight"].shape, True)]
            # the conv bias only as a copy (torch's convolution keeps none: changing it in place is no error)
            assert not any(s.data_ptr() == t["bias"].data_ptr() for s in saved)
            assert any(s.shape == t["bias"].shape and torch.equal(s, t["bias"]) for s in saved)


@pytest.mark.parametrize("backend", fast_only(backends.known_backends(), ["reference"]), indirect=True)
def test_a_weight_changed_through_data_before_backward_gives_torchs_gradients(backend):
    """torch keeps the conv output, so a conv weight (and bias) changed without a version bump between forward and
    backward (a `.data` update, WGAN's clipping) leaves it; its conv backward reads the changed weight. Recompute
    gives the same: the conv output from the weight as the forward used it."""
    dtype = torch.float32 if backend == "sim" else torch.float64
    tensors, groups = make_case(0, dtype)
    results = []
    for run in (lambda t: fused(t, groups, "relu", True), lambda t: composite(t, groups, "relu")):
        t = copies(tensors)
        out = run(t)
        t["weight"].data.clamp_(-0.05, 0.05)
        t["bias"].data.mul_(-3)
        results.append(torch.autograd.grad(out, differentiable(t), torch.ones_like(out)))
    for ours, theirs in zip(*results):
        assert_close(ours, theirs, dtype)


def test_the_op_returns_no_conv_output_and_refuses_recompute_with_save_output():
    tensors, groups = make_case(0, torch.float32)
    t = tensors
    args = (t["input"], t["weight"], t["bias"], t["bn_weight"], t["bn_bias"], t["running_mean"], t["running_var"],
            [2, 2], [1, 1, 1, 1], [1, 1], 1, 0.1, 1e-5, 0.2)
    before = [(s.clone(), s._version) for s in (t["running_mean"], t["running_var"])]
    with pytest.raises(ValueError, match="'recompute' and 'save_output'"):
        ops.conv_bn_leaky_relu_train(*args, True, False, False, [0, 0], 0, True)
    for s, (value, version) in zip((t["running_mean"], t["running_var"]), before):
        assert torch.equal(s, value) and s._version == version
    out, conv_out, mean, invstd = ops.conv_bn_leaky_relu_train(*args, False, False, False, [0, 0], 0, True)
    assert conv_out.numel() == 0 and out.shape == (2, 4, 4, 3) and mean.shape == invstd.shape == (4,)
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fake = ops.conv_bn_leaky_relu_train(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a
                                              for a in args], False, False, False, [0, 0], 0, True)
    assert [tuple(f.shape) for f in fake] == [tuple(r.shape) for r in (out, conv_out, mean, invstd)]


def test_recompute_is_ignored_where_the_output_is_kept():
    """An invertible run keeps the output (InPlace-ABN), less than recomputing would keep: unchanged by recompute."""
    tensors, _ = make_case(0, torch.float32)
    t, saved = copies(tensors), []
    with torch.autograd.graph.saved_tensors_hooks(lambda s: saved.append(s) or s, lambda s: s):
        out = conv_bn_activation(t["input"], t["weight"], t["bias"], None, None, t["bn_weight"], t["bn_bias"], True,
                                 negative_slope=0.2, padding=1, recompute=True)
    assert any(s.data_ptr() == out.data_ptr() for s in saved)
    with pytest.raises(TypeError, match="recompute"):
        conv_bn_activation(t["input"], t["weight"], t["bias"], None, None, t["bn_weight"], t["bn_bias"], True,
                           recompute="yes")


@pytest.mark.parametrize("backend", fast_only(backends.known_backends(), ["reference"]), indirect=True)
@pytest.mark.parametrize("norm", fast_only([0, 2], [2]))
def test_gradient_penalty_and_forward_mode_as_torch(norm, backend):
    """The backward op's own derivative recomputes from input and weight: recompute adds no second path."""
    dtype = torch.float32 if backend == "sim" else torch.float64
    tensors, groups = make_case(norm, dtype)
    runs = (lambda t: fused(t, groups, "relu", True, "replicate"), lambda t: composite(t, groups, "relu", "replicate"))
    assert_gradient_penalty_as_torch(runs, tensors, dtype)
    assert_forward_mode_as_torch(runs, tensors, dtype)


@slow
@pytest.mark.parametrize("norm", [0, 2])
def test_gradcheck_and_gradgradcheck_float64(norm):
    tensors, groups = make_case(norm, small=True)
    names = [name for name, t in tensors.items() if t is not None and not name.startswith("running")]

    def block(*values):
        t = dict(tensors, **dict(zip(names, values)))
        t["running_mean"] = t["running_var"] = None
        return fused(t, groups, "leaky_relu-0", True, "reflect")

    leaves = differentiable(copies(tensors))
    assert torch.autograd.gradcheck(block, leaves, fast_mode=True)
    assert torch.autograd.gradgradcheck(block, leaves, fast_mode=True)


def test_channels_last_vmap_and_autocast():
    tensors, groups = make_case(2, torch.float32)
    cl = dict(tensors, input=tensors["input"].contiguous(memory_format=torch.channels_last))
    for recompute in (False, True):
        got = run(cl, groups, "relu", recompute)
        assert got[0].is_contiguous(memory_format=torch.channels_last)
        assert got[1].is_contiguous(memory_format=torch.channels_last)
    for kept, recomputed in zip(run(cl, groups, "relu", False), run(cl, groups, "relu", True)):
        assert torch.equal(kept, recomputed)
    batch = torch.stack([tensors["input"], tensors["input"] * 2])

    def one(x):
        return fused(dict(tensors, input=x), groups, "relu", True)

    torch.testing.assert_close(torch.vmap(one)(batch), torch.stack([one(x) for x in batch]))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        outs = [run(tensors, groups, "relu", recompute) for recompute in (False, True)]
    assert outs[1][0].dtype == torch.bfloat16
    for kept, recomputed in zip(*outs):
        assert torch.equal(kept, recomputed)


@slow
def test_compile_fullgraph_and_export_as_eager():
    tensors, groups = make_case("C", torch.float32)
    assert_compiled_and_exported_as_eager(lambda t: fused(t, groups, "relu", True, "reflect"),
                                          lambda t: fused(t, groups, "relu", True), tensors)
