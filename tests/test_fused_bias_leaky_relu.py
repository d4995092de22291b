"""StyleGAN2's fused bias + LeakyReLU (ascend_acts.fused_bias_leaky_relu, nn.FusedLeakyReLU) against the float64
composite F.leaky_relu(x + bias.view(1, -1, 1, ...), slope) * scale of the same rounded inputs, on every backend
and dtype of the op table: float32 and float64 bit for bit as torch's own composite (values and input gradient),
the bias gradient within summation rounding; float16/bfloat16 within 2x torch's same-dtype composite error."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ascend_acts
from conftest import backend_dtypes
from markers import fast_only

ops = torch.ops.ascend_acts
F64 = torch.float64
SQRT2 = 2**0.5
NOT_REGISTERED = ".*autograd kernel was not registered.*"

SHAPES = {
    "rank2": (6, 7),
    "C1": (5, 1),
    "rank3-odd": (2, 5, 9),
    "spatial1x1": (4, 3, 1, 1),
    "rank4": (2, 7, 5, 6),
    "rank5": (2, 3, 2, 3, 4),
    "empty-batch": (0, 3, 4),
    "channels_last": (2, 5, 4, 3),
    "transposed": (3, 5, 4),
}
# (negative_slope, scale): StyleGAN2's default (the output is kept), slope 0, and the two that keep the input
ATTRS = [(0.2, SQRT2), (0.0, 1.0), (-0.3, 2.0), (0.2, -1.5)]


def make(name, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = SHAPES[name]
    x = torch.randn(shape, generator=g, dtype=F64).to(dtype)
    bias = torch.randn(shape[1], generator=g, dtype=F64).to(dtype)
    grad = torch.randn(shape, generator=g, dtype=F64).to(dtype)
    if name == "channels_last":
        x, grad = x.contiguous(memory_format=torch.channels_last), grad.contiguous(memory_format=torch.channels_last)
    if name == "transposed":  # a non-contiguous (N, C, L) view
        x = x.transpose(0, 2).contiguous().transpose(0, 2)
    return x, bias, grad


def composite(x, bias, slope, scale):
    pre = x if bias is None else x + bias.view(1, -1, *([1] * (x.dim() - 2)))
    return F.leaky_relu(pre, slope) * scale


def run(fn, x, bias, grad):
    """fn's output and its gradients w.r.t. x (and bias) for the incoming gradient `grad`."""
    x = x.detach().clone().requires_grad_()
    bias = None if bias is None else bias.detach().clone().requires_grad_()
    y = fn(x, bias)
    grads = torch.autograd.grad(y, [x] if bias is None else [x, bias], grad)
    return [y.detach(), *grads]


def assert_identical(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    assert actual.stride() == expected.stride() or actual.numel() <= 1, (actual.stride(), expected.stride())


def max_error(values, exact):
    return (values.double() - exact).abs().max().item() if values.numel() else 0.0


@pytest.mark.parametrize("with_bias", fast_only([True, False], [True]))
@pytest.mark.parametrize("attrs", fast_only(ATTRS, [(0.2, SQRT2), (-0.3, 2.0)]), ids=str)
@pytest.mark.parametrize("shape", fast_only(SHAPES, ["rank4", "C1", "channels_last"]))
@backend_dtypes("fused_bias_leaky_relu")
def test_values_and_gradients_match_the_composite(backend, shape, attrs, with_bias, dtype):
    slope, scale = attrs
    x, bias, grad = make(shape, dtype)
    bias = bias if with_bias else None
    ours = run(lambda a, b: ascend_acts.fused_bias_leaky_relu(a, b, slope, scale), x, bias, grad)
    same_dtype = run(lambda a, b: composite(a, b, slope, scale), x, bias, grad)
    exact = run(lambda a, b: composite(a, b, slope, scale), x.double(), None if bias is None else bias.double(),
                grad.double())
    assert [t.dtype for t in ours] == [dtype] * len(ours)
    assert ours[0].shape == x.shape and ours[-1].shape == exact[-1].shape
    if dtype in (torch.float32, F64):  # one rounding each, in torch's order: torch's own bits
        assert_identical(ours[0], same_dtype[0])
        assert_identical(ours[1], same_dtype[1])
        if with_bias:  # a sum: rounding of the summation order only
            tolerance = 1e-12 if dtype == F64 else 1e-5
            torch.testing.assert_close(ours[2].double(), exact[2], rtol=tolerance, atol=tolerance)
        return
    for name, got, theirs, want in zip(("output", "grad_input", "grad_bias"), ours, same_dtype, exact):
        assert got.stride() == theirs.stride() or got.numel() <= 1, name
        # at most twice torch's error, or one rounding of the largest value (both may be exact)
        one_rounding = torch.finfo(dtype).eps / 2 * (want.abs().max().item() if want.numel() else 0.0)
        assert max_error(got, want) <= max(2 * max_error(theirs, want), one_rounding), name


# --- StyleGAN2 layers: an R1 penalty through conv + FusedLeakyReLU and linear + fused_bias_leaky_relu ----------
class Rosinality(nn.Module):
    """rosinality's FusedLeakyReLU structure (op/fused_act.py): a `bias` parameter of zeros(channel) or none,
    negative_slope, scale; forward as its CPU path computes it, with the slope it is given."""

    def __init__(self, channel, bias=True, negative_slope=0.2, scale=2**0.5):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channel)) if bias else None
        self.negative_slope, self.scale = negative_slope, scale

    def forward(self, input):
        return composite(input, self.bias, self.negative_slope, self.scale)


class Discriminator(nn.Module):
    """StyleGAN2's ConvLayer (conv without bias, then the fused activation) and EqualLinear with activation
    (linear without bias, then the fused activation over (N, C))."""

    def __init__(self, activation):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, padding=1, bias=False)
        self.act = activation(5)
        self.linear = nn.Linear(5 * 4 * 4, 7, bias=False)
        self.linear_bias = nn.Parameter(torch.zeros(7))
        self.out = nn.Linear(7, 1, bias=False)  # a bias would get no R1 gradient
        self.functional = activation is not Rosinality

    def forward(self, x):
        h = self.linear(self.act(self.conv(x)).flatten(1))
        h = ascend_acts.fused_bias_leaky_relu(h, self.linear_bias * 0.5) if self.functional else \
            composite(h, self.linear_bias * 0.5, 0.2, SQRT2)
        return self.out(h)


@pytest.mark.parametrize("negative_slope", [0.2, -0.2])
@backend_dtypes("fused_bias_leaky_relu", [F64])
def test_r1_penalty_parameter_gradients_equal_the_composite(backend, dtype, negative_slope):
    torch.manual_seed(0)
    theirs = Discriminator(lambda c: Rosinality(c, negative_slope=negative_slope)).double()
    ours = Discriminator(lambda c: ascend_acts.nn.FusedLeakyReLU(c, negative_slope=negative_slope)).double()
    with torch.no_grad():
        theirs.act.bias.normal_(), theirs.linear_bias.normal_()
    ours.load_state_dict(theirs.state_dict())
    real = torch.randn(3, 3, 4, 4, dtype=F64, generator=torch.Generator().manual_seed(3))
    results = []
    for model in (theirs, ours):
        x = real.clone().requires_grad_()
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=NOT_REGISTERED)
            (grad,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)
            penalty = grad.pow(2).flatten(1).sum(1).mean()
            results.append(torch.autograd.grad(penalty, list(model.parameters())))
    names = [name for name, _ in ours.named_parameters()]
    for name, got, want in zip(names, results[1], results[0]):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12, msg=name)
    # through the op's double backward the penalty reaches the weights before it (the biases only move the
    # piecewise-linear kinks: their gradient is 0, as the composite's)
    assert results[1][names.index("conv.weight")].abs().max() > 1e-6


# --- what autograd keeps ---------------------------------------------------------------------------------
def saved_by(fn):
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        out = fn()
    return out, saved


@pytest.mark.parametrize("attrs", [(0.2, SQRT2), (0.0, 1.0)], ids=str)
def test_keeps_only_the_output_when_it_tells_the_sign(attrs, backend):
    x = torch.randn(4, 6, 5, requires_grad=True) * 1.0
    bias = torch.randn(6, requires_grad=True)
    y, saved = saved_by(lambda: ascend_acts.fused_bias_leaky_relu(x, bias, *attrs))
    assert len(saved) == 1 and saved[0].data_ptr() == y.data_ptr() and saved[0].shape == y.shape


@pytest.mark.parametrize("attrs", [(-0.3, SQRT2), (0.2, -1.0), (0.2, 0.0), (0.2, 0.5)], ids=str)
@pytest.mark.parametrize("with_bias", [True, False])
def test_keeps_the_input_and_bias_otherwise(attrs, with_bias, backend):
    x = torch.randn(4, 6, 5, requires_grad=True) * 1.0
    bias = torch.randn(6, requires_grad=True) if with_bias else None
    _, saved = saved_by(lambda: ascend_acts.fused_bias_leaky_relu(x, bias, *attrs))
    kept = {t.data_ptr() for t in saved}
    assert kept == {x.data_ptr()} | ({bias.data_ptr()} if with_bias else set())  # no pre-activation tensor
    assert sum(t.numel() for t in saved) == x.numel() + (6 if with_bias else 0)


@backend_dtypes("fused_bias_leaky_relu")
def test_gradient_of_a_positive_pre_activation_whose_scaled_output_underflows(backend, dtype):
    """0 < scale < 1: the smallest positive input times scale rounds to 0, so the output no longer tells the
    sign; the gradient must still be the positive branch's (scale), as the composite's, not slope * scale."""
    tiny = torch.tensor([[0.0, 0.0]], dtype=dtype)
    tiny[0, 0] = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps if dtype != F64 else 5e-324
    x = tiny.requires_grad_()
    y = ascend_acts.fused_bias_leaky_relu(x, torch.zeros(2, dtype=dtype), 0.2, 0.5)
    assert y[0, 0] == 0  # underflowed
    (grad,) = torch.autograd.grad(y.sum(), x)
    assert grad.tolist() == [[0.5, 0.2 * 0.5 if dtype == F64 else float(torch.tensor(0.1, dtype=dtype))]]


@pytest.mark.parametrize("attrs", [(0.2, SQRT2), (-0.3, 1.0), (0.2, 0.5)], ids=str)
def test_second_order_gradients_of_bias_and_input_are_zeros_as_the_composites(attrs, backend):
    """autograd.grad(|grad_x|^2, bias) (an R1 step asking for every parameter): zeros, not "not used"."""
    g = torch.Generator().manual_seed(3)
    dtype = torch.float32 if backend == "sim" else F64  # the emulator has no float64
    results = []
    for fn in (lambda x, b: composite(x, b, *attrs), lambda x, b: ascend_acts.fused_bias_leaky_relu(x, b, *attrs)):
        x = torch.randn(3, 4, 2, generator=g, dtype=dtype).requires_grad_()
        b = torch.randn(4, generator=g, dtype=dtype).requires_grad_()
        (grad_x,) = torch.autograd.grad(fn(x, b).sum(), x, create_graph=True)
        results.append(torch.autograd.grad(grad_x.square().sum(), [b, x]))
        g.manual_seed(3)
    for ours, theirs in zip(results[1], results[0]):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
        assert not ours.any()


# --- bad input: errors naming the argument, of the types torch raises ---------------------------------------
def test_bad_input_raises_naming_the_argument():
    x, bias = torch.randn(2, 3, 4), torch.randn(3)
    fn = ascend_acts.fused_bias_leaky_relu
    cases = [
        ((x, torch.randn(4)), RuntimeError, "'bias' must have shape \\(3,\\)"),
        ((x, torch.randn(1, 3)), RuntimeError, "'bias' must have shape \\(3,\\)"),
        ((x, torch.ones(3, dtype=torch.int64)), RuntimeError, "'bias' must be a floating-point tensor"),
        ((x, bias.double()), RuntimeError, "'bias' has dtype torch.float64 but 'input' has torch.float32"),
        ((x.half(), bias), RuntimeError, "'bias' has dtype torch.float32 but 'input' has torch.float16"),
        ((x, torch.empty(3, device="meta")), RuntimeError, "'bias' is on meta"),
        ((x, [0.0, 1.0, 2.0]), TypeError, "'bias' must be a torch.Tensor or None"),
        ((torch.ones(2, 3, dtype=torch.int32), None), NotImplementedError, "'input' must be a floating-point"),
        ((torch.randn(3), torch.randn(3)), ValueError, "'input' must have rank >= 2"),
        ((torch.randn(()), None), ValueError, "'input' must have rank >= 2"),
        (("x", None), TypeError, "'input' must be a torch.Tensor"),
        ((x, bias, "0.2"), TypeError, "'negative_slope' must be a real number"),
        ((x, bias, 0.2, None), TypeError, "'scale' must be a real number"),
    ]
    for args, error, message in cases:
        with pytest.raises(error, match=message):
            fn(*args)
    with pytest.raises(NotImplementedError):  # torch's own type for a non-floating input
        F.leaky_relu(torch.ones(2, 3, dtype=torch.int32), 0.2)


def test_the_ops_check_their_arguments():
    x, bias = torch.randn(2, 3, 4), torch.randn(3)
    with pytest.raises(RuntimeError, match="'bias' must have shape \\(3,\\)"):
        ops.fused_bias_leaky_relu(x, torch.randn(2), 0.2, SQRT2)
    with pytest.raises(RuntimeError, match="'bias' must have the input's dtype torch.float32"):
        ops.fused_bias_leaky_relu(x, bias.double(), 0.2, SQRT2)
    with pytest.raises(ValueError, match="'input' must have rank >= 2"):
        ops.fused_bias_leaky_relu(torch.randn(3), bias, 0.2, SQRT2)
    with pytest.raises(RuntimeError, match="saved_is_result=True needs negative_slope >= 0 and scale >= 1"):
        ops.fused_bias_leaky_relu_backward(x, x, None, -0.2, SQRT2, True)
    with pytest.raises(RuntimeError, match="'grad_output' .* must have the shape, dtype and device of 'saved'"):
        ops.fused_bias_leaky_relu_backward(x[:1], x, None, 0.2, SQRT2, True)
    # the fake kernels (torch.compile, meta) raise the same
    with pytest.raises(RuntimeError, match="'bias' must have shape"):
        ops.fused_bias_leaky_relu(x.to("meta"), torch.empty(2, device="meta"), 0.2, SQRT2)


def test_a_failed_module_call_changes_nothing():
    module = ascend_acts.nn.FusedLeakyReLU(3)
    with torch.no_grad():
        module.bias.normal_()
    before, version = module.bias.detach().clone(), module.bias._version
    with pytest.raises(RuntimeError, match="'bias' must have shape \\(4,\\) .* got \\(3,\\)"):
        module(torch.randn(2, 4, 5))
    assert torch.equal(module.bias.detach(), before) and module.bias._version == version and module.bias.grad is None


# --- the module: rosinality's drop-in -----------------------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False])
def test_module_state_dict_loads_both_ways_with_rosinalitys(bias):
    ours, theirs = ascend_acts.nn.FusedLeakyReLU(5, bias=bias), Rosinality(5, bias=bias)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == (["bias"] if bias else [])
    if bias:
        with torch.no_grad():
            theirs.bias.normal_()
        assert ours.bias.dtype == torch.float32 and torch.equal(ours.bias.detach(), torch.zeros(5))
    ours.load_state_dict(theirs.state_dict(), strict=True)
    x = torch.randn(3, 5, 4, 4)
    assert_identical(ours(x), theirs(x))
    theirs.load_state_dict(ours.state_dict(), strict=True)
    assert (ours.negative_slope, ours.scale, ours.bias is None) == (0.2, SQRT2, not bias)


def test_module_casts_its_bias_to_the_input_dtype_and_grads_reach_it(backend):
    """As mmcv's fused_bias_leakyrelu: a float32 module takes a half input; the bias gradient is float32."""
    module = ascend_acts.nn.FusedLeakyReLU(4)
    with torch.no_grad():
        module.bias.normal_()
    x = torch.randn(2, 4, 3, 3).bfloat16()
    y = module(x)
    assert y.dtype == torch.bfloat16
    assert_identical(y, ascend_acts.fused_bias_leaky_relu(x, module.bias.detach().bfloat16()))
    y.float().sum().backward()
    assert module.bias.grad.dtype == torch.float32 and module.bias.grad.abs().min() > 0


def test_module_refuses_mmcvs_positional_slope():
    with pytest.raises(TypeError, match="'bias' must be a bool, got float"):
        ascend_acts.nn.FusedLeakyReLU(8, 0.1)
    assert ascend_acts.nn.FusedLeakyReLU(8, negative_slope=0.1).negative_slope == 0.1


def test_module_repr():
    assert repr(ascend_acts.nn.FusedLeakyReLU(8, bias=False, negative_slope=0.1, scale=1.0)) == \
        "FusedLeakyReLU(8, bias=False, negative_slope=0.1, scale=1.0)"
