"""Conv2d -> BatchNorm2d -> ReLU, and Conv2d -> BatchNorm2d with no activation (followed by anything else or by the
end of the Sequential), fused by `convert`: as the unconverted torch model on every CPU backend (values, gradients,
running statistics, steps, checkpoints, train/eval, channels_last, compile, double backward); torch's relu bit for
bit (+0.0 for negatives, -0.0 and NaN kept, 0 for -inf), while the public LeakyReLU with slope 0 keeps -0.0."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ascend_acts
from ascend_acts.nn import fusion
from gan_models import assert_compiled_as_torch, assert_gradient_penalty_as_torch, assert_training_step_as_torch
from markers import fast_only, slow
from op_counter import OpCounter

TAILS = {
    "relu": lambda: [nn.ReLU()],
    "relu inplace": lambda: [nn.ReLU(inplace=True)],
    "none then conv": lambda: [nn.Conv2d(8, 4, 1)],
    "none then dropout": lambda: [nn.Dropout(0.0)],
    "none at the end": lambda: [],
}


def model_with(tail: str, dtype=torch.float32, **bn) -> nn.Sequential:
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8, **bn), *TAILS[tail]()).to(dtype)
    if model[1].affine:
        with torch.no_grad():  # about half the BN outputs negative
            model[1].weight.uniform_(0.5, 1.5), model[1].bias.uniform_(-0.5, 0.5)
    return model


def dtype_of(backend):
    return torch.float64 if backend == "reference" else torch.float32  # the kernels have no float64


def tolerance(dtype):
    return dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=2e-4, atol=2e-4)


def no_negative_zero(t):
    return not torch.signbit(t[t == 0]).any()


BN_OPTIONS = {"default": {}, "momentum=None": {"momentum": None}, "affine=False": {"affine": False},
              "no running stats": {"track_running_stats": False}}


@pytest.mark.parametrize("bn", fast_only(BN_OPTIONS, ["default", "no running stats"]))
@pytest.mark.parametrize("tail", fast_only(TAILS, ["relu inplace", "none then conv"]))
def test_runs_fuse_and_train_like_torch(tail, bn, backend):
    dtype = dtype_of(backend)
    original = model_with(tail, dtype, **BN_OPTIONS[bn])
    converted = ascend_acts.convert(copy.deepcopy(original))
    tol = tolerance(dtype)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for m in (original, converted)]
    for step, training in enumerate([True, True, False, True, False]):
        original.train(training), converted.train(training)
        x = torch.randn(3, 3, 6, 6, dtype=dtype)
        if step == 3:
            x = x.contiguous(memory_format=torch.channels_last)
        xs, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
        with OpCounter() as counter:
            got = converted(xc)
        assert counter.fused == 1
        assert "relu" not in counter.calls and "batch_norm" not in "".join(counter.calls)  # nothing aten of its own
        expected = original(xs)
        torch.testing.assert_close(got, expected, **tol)
        if tail.startswith("relu"):
            assert no_negative_zero(got) and bool((got == 0).any())
        assert_training_step_as_torch(original, converted, optimizers, expected, got, xs, xc, step, **tol)
    # a checkpoint round trip: the converted model's state loads into torch's and back
    again = model_with(tail, dtype, **BN_OPTIONS[bn])
    again.load_state_dict(converted.state_dict())
    converted.load_state_dict(again.state_dict())
    x = torch.randn(2, 3, 6, 6, dtype=dtype)
    torch.testing.assert_close(converted.eval()(x), again.eval()(x), **tol)


@pytest.mark.parametrize("recompute", [False, True])
def test_the_op_keeps_the_conv_output_for_relu_and_with_no_activation(recompute, monkeypatch):
    """ReLU is not invertible: the op keeps the conv output (what the backward needs to rebuild x-hat where the
    output is 0). With no activation the output would do (slope 1), but the next module may change it in place
    before the backward (pix2pix's U-Net: an in-place LeakyReLU opens the inner block), so the conv output is kept,
    as torch's BN keeps its input; a LeakyReLU run keeps only its output (InPlace-ABN). Where the recompute rule
    holds (this conv's K = 27 does) the ReLU and no-activation runs keep nothing of either: the backward recomputes
    the conv output from the input."""
    if not recompute:
        monkeypatch.setattr(fusion, "recompute_is_cheaper", lambda macs: False)
    for tail, kept_conv_output in (("relu", True), ("none at the end", True), ("leaky", False)):
        model = ascend_acts.convert(model_with(tail) if tail in TAILS
                                    else nn.Sequential(*model_with("none at the end"), nn.LeakyReLU(0.2)))
        saved = []

        def keep(t, saved=saved):
            saved.append(t)
            return t

        with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
            out = model(torch.randn(2, 3, 6, 6))
        big = [t for t in saved if t.shape == out.shape]
        if recompute and kept_conv_output:
            assert big == [], tail
        else:
            assert len(big) == 1 and (big[0] is not out) == kept_conv_output, tail


@pytest.mark.parametrize("after", ["ReLU6(inplace)", "U-Net inner block"])
def test_a_module_changing_a_no_activation_output_in_place_trains_as_torch(after, backend):
    """Conv2d -> BatchNorm2d, then a module that changes its input in place (practitioner review: the fused run kept
    its output and the backward raised "modified by an inplace operation" where torch trains)."""
    dtype = dtype_of(backend)
    tail = (nn.ReLU6(inplace=True) if after == "ReLU6(inplace)"
            else nn.Sequential(nn.LeakyReLU(0.2, True), nn.Conv2d(8, 4, 3)).to(dtype))
    model = nn.Sequential(*model_with("none at the end", dtype), tail)
    converted = ascend_acts.convert(copy.deepcopy(model))
    x = torch.randn(2, 3, 6, 6, dtype=dtype)
    with OpCounter() as counter:
        out = converted(x)
    assert counter.fused == 1
    expected = model(x)
    torch.testing.assert_close(out, expected, **tolerance(dtype))
    out.square().sum().backward()
    expected.square().sum().backward()
    for ours, theirs in zip(converted.parameters(), model.parameters()):
        torch.testing.assert_close(ours.grad, theirs.grad, **tolerance(dtype))


def _bn_inputs(dtype=torch.float32):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 5, dtype=dtype)
    weight = torch.randn(4, 3, 1, 1, dtype=dtype)
    gamma = torch.tensor([1.0, 3e38, 1.0, -2.0], dtype=dtype)  # 3e38: (y - mean) * scale overflows to +-inf
    beta = torch.tensor([0.0, 0.0, -5.0, 0.5], dtype=dtype)
    return x, weight, gamma, beta


def test_relu_is_torchs_bit_for_bit_and_slope_zero_keeps_negative_zero(backend):
    from ascend_acts.ops.conv_bn_leaky_relu.function import conv_bn_activation

    x, weight, gamma, beta = _bn_inputs()
    conv = F.conv2d(x, weight)
    for relu in (True, False):
        got = conv_bn_activation(x, weight, None, None, None, gamma, beta, True, 0.1, 1e-5, 0.0, relu=relu)
        z = F.batch_norm(conv, None, None, gamma, beta, True, 0.1, 1e-5)
        expected = F.relu(z) if relu else F.leaky_relu(z, 0.0)
        finite = torch.isfinite(z) & (z.abs() > 1e-3)  # values whose sign does not depend on rounding
        assert torch.equal(torch.signbit(got[finite]), torch.signbit(expected[finite]))
        torch.testing.assert_close(got[finite], expected[finite])
        negative_infinity = z == -torch.inf
        assert bool(negative_infinity.any())
        if relu:  # torch's relu: -inf gives +0, negatives +0
            assert torch.equal(got[negative_infinity], torch.zeros_like(got[negative_infinity]))
            assert no_negative_zero(got) and not got[negative_infinity].signbit().any()
        else:  # torch's leaky_relu(z, 0): z * 0, -0.0 for negatives and NaN for -inf
            assert bool(got[negative_infinity].isnan().all())
            assert bool(torch.signbit(got[finite & (z < 0)]).all())
    public = ascend_acts.conv_bn_leaky_relu(x, weight, None, None, None, gamma, beta, True, negative_slope=0.0)
    assert bool(torch.signbit(public[(z < -1e-3) & torch.isfinite(z)]).all())


def test_relu_gradient_is_torchs_at_zero_and_for_infinite_gradients(backend):
    from ascend_acts.ops.conv_bn_leaky_relu.function import conv_bn_activation

    dtype = dtype_of(backend)
    x, weight, gamma, beta = _bn_inputs(dtype)
    gamma = torch.tensor([1.0, 2.0, 1.0, -2.0], dtype=dtype)
    grad = torch.randn(2, 4, 5, 5, dtype=dtype)
    grad[0, 0, 0, :] = -torch.inf  # torch's relu backward gives 0 where the output is 0, not -inf * 0 = NaN
    results = []
    for ours in (True, False):
        leaves = [t.clone().requires_grad_() for t in (x, weight, gamma, beta)]
        if ours:
            out = conv_bn_activation(leaves[0], leaves[1], None, None, None, leaves[2], leaves[3], True, relu=True)
        else:
            out = F.relu(F.batch_norm(F.conv2d(leaves[0], leaves[1]), None, None, leaves[2], leaves[3], True))
        mask = (out == 0)[0, 0, 0]
        results.append(torch.autograd.grad(out, leaves, grad))
    assert bool(mask.any())
    for a, b in zip(*results):
        assert torch.equal(a.isnan(), b.isnan())
        torch.testing.assert_close(a, b, equal_nan=True, **tolerance(dtype))


@pytest.mark.parametrize("tail", ["relu", "none at the end"])
def test_double_backward_as_torch(tail, backend):
    dtype = dtype_of(backend)
    original = model_with(tail, dtype)
    converted = ascend_acts.convert(copy.deepcopy(original))
    x = torch.randn(3, 3, 5, 5, dtype=dtype)
    assert_gradient_penalty_as_torch(original, converted, x, **tolerance(dtype))


def test_a_failed_call_changes_nothing():
    model = ascend_acts.convert(model_with("relu"))
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(RuntimeError):
        model(torch.randn(2, 3, 6, 6, dtype=torch.float64))  # float32 weights
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_the_op_refuses_to_keep_only_a_relu_output(backend):
    x, weight, gamma, beta = _bn_inputs()
    mean, var = torch.zeros(4), torch.ones(4)
    with pytest.raises(ValueError, match="'save_output' needs an invertible activation"):
        torch.ops.ascend_acts.conv_bn_leaky_relu_train(x, weight, None, gamma, beta, mean, var, [1, 1], [0] * 4,
                                                       [1, 1], 1, 0.1, 1e-5, 0.0, True, True)
    assert torch.equal(mean, torch.zeros(4)) and torch.equal(var, torch.ones(4))
    # nor its backward to read one (the adversarial review got NaN or wrong gradients, or a message about the slope)
    y = torch.relu(torch.randn(2, 4, 5, 5))
    with pytest.raises(ValueError, match="'saved_is_result' needs an invertible activation; relu is not"):
        torch.ops.ascend_acts.conv_bn_leaky_relu_train_backward(
            torch.ones_like(y), y, True, x, weight, gamma, beta, mean, var, [1, 1], [0] * 4, [1, 1], 1, 0.0, True)


@slow
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("tail", ["relu", "none then conv"])
def test_compile_fullgraph(tail, training, backend):
    original = model_with(tail).train(training)
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert_compiled_as_torch(original, converted, torch.randn(3, 3, 6, 6), **tolerance(torch.float32))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_relu_in_16_bit_types(dtype, backend):
    from ascend_acts.ops.conv_bn_leaky_relu.function import conv_bn_activation

    torch.manual_seed(0)
    x, weight = torch.randn(2, 3, 7, 7).to(dtype), torch.randn(5, 3, 3, 3).to(dtype)
    gamma, beta = torch.rand(5) + 0.5, torch.randn(5) * 0.5  # float32, as autocast keeps BN's parameters
    got = conv_bn_activation(x, weight, None, None, None, gamma, beta, True, relu=True)
    expected = F.relu(F.batch_norm(F.conv2d(x.float(), weight.float()), None, None, gamma, beta, True)).to(dtype)
    assert got.dtype == dtype and no_negative_zero(got) and bool((got == 0).any())
    torch.testing.assert_close(got.float(), expected.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("training", [True, False])
def test_the_public_function_takes_relu(training, backend):
    """ascend_acts.conv_bn_leaky_relu(..., relu=True) is torch's relu(batch_norm(conv2d(...))) (the review found the
    public function without the op's relu argument); a non-bool relu is refused by name."""
    dtype = dtype_of(backend)
    model = model_with("relu", dtype).train(training)
    conv, bn = model[0], model[1]
    x = torch.randn(2, 3, 6, 6, dtype=dtype)
    mean, var = bn.running_mean.clone(), bn.running_var.clone()
    ours = ascend_acts.conv_bn_leaky_relu(x, conv.weight, conv.bias, mean, var, bn.weight, bn.bias, training, 0.1,
                                          bn.eps, 0.2, 1, 1, relu=True)
    expected = model(x)
    torch.testing.assert_close(ours, expected, **tolerance(dtype))
    torch.testing.assert_close(mean, bn.running_mean, **tolerance(dtype))
    assert no_negative_zero(ours)
    with pytest.raises(TypeError, match="'relu' must be a bool"):
        ascend_acts.conv_bn_leaky_relu(x, conv.weight, conv.bias, mean, var, bn.weight, bn.bias, training, relu=1)


@slow
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("norm", ["batch", "instance"])
def test_16_bit_relu_gradient_is_that_of_its_own_output(backend, dtype, norm):
    """A ReLU run keeps the conv output rounded to the data dtype; the backward's ReLU decision must be the forward's,
    so the norm's bias gradient is exactly sum(grad_out over the elements the output kept > 0). When the forward
    normalised the unrounded conv output, a z near 0 took the other branch and moved that sum by whole elements."""
    for seed in range(3):
        torch.manual_seed(seed)
        normalisation = nn.BatchNorm2d(6) if norm == "batch" else nn.InstanceNorm2d(6, affine=True)
        model = nn.Sequential(nn.ConvTranspose2d(3, 6, 4, 2, 1, output_padding=1), normalisation, nn.ReLU())
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.3)
        model = ascend_acts.convert(model.to(dtype))
        out = model(torch.randn(2, 3, 10, 10).to(dtype))
        grad = torch.randn_like(out)
        out.backward(grad)
        kept_positive = (grad.float() * (out > 0)).sum((0, 2, 3))
        # the gradient is summed in float32 and rounded once to the dtype
        torch.testing.assert_close(model[1].bias.grad.float(), kept_positive, rtol=torch.finfo(dtype).eps, atol=1e-3)
