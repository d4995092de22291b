"""ascend_acts.bias_act, NVlabs' bias_act (stylegan2-ada-pytorch, stylegan3), against oracles written here from
its documented semantics: `act(x + b along dim) * gain` (the gain only when != 1), then clamped to
[-clamp, clamp] when clamp is given; `alpha`/`gain` None are each activation's default.

Two oracles: `composite` is that definition in torch.nn.functional ops in the input's dtype (what NVlabs'
reference runs off CUDA: the float32 bit-exactness target); `exact` evaluates it in float64 from elementwise
formulas (torch.where, exp, expm1, log1p), the accuracy target for half types.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ascend_acts
from ascend_acts.compat.nvlabs import bias_act as nvlabs_module
from markers import slow
from op_counter import OpCounter

SQRT2 = math.sqrt(2)
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
# NVlabs' documented defaults: name -> (default alpha, default gain)
DEFAULTS = {"linear": (0.0, 1.0), "relu": (0.0, SQRT2), "lrelu": (0.2, SQRT2), "tanh": (0.0, 1.0),
            "sigmoid": (0.0, 1.0), "elu": (0.0, 1.0), "selu": (0.0, 1.0), "softplus": (0.0, 1.0),
            "swish": (0.0, SQRT2)}
ACTS = list(DEFAULTS)
FUSED = ("linear", "relu", "lrelu")  # on our op (relu: its relu mode)
COMPOSITE_ACTS = {  # the activation in torch.nn.functional ops (alpha is lrelu's only)
    "linear": lambda t, a: t, "relu": lambda t, a: F.relu(t), "lrelu": lambda t, a: F.leaky_relu(t, a),
    "tanh": lambda t, a: torch.tanh(t), "sigmoid": lambda t, a: torch.sigmoid(t), "elu": lambda t, a: F.elu(t),
    "selu": lambda t, a: F.selu(t), "softplus": lambda t, a: F.softplus(t), "swish": lambda t, a: torch.sigmoid(t) * t,
}
EXACT_ACTS = {  # the same from elementwise formulas (float64)
    "linear": lambda t, a: t, "relu": lambda t, a: torch.where(t > 0, t, 0.0),
    "lrelu": lambda t, a: torch.where(t > 0, t, a * t), "tanh": lambda t, a: torch.tanh(t),
    "sigmoid": lambda t, a: 1 / (1 + torch.exp(-t)), "elu": lambda t, a: torch.where(t > 0, t, torch.expm1(t)),
    "selu": lambda t, a: SELU_SCALE * torch.where(t > 0, t, SELU_ALPHA * torch.expm1(t)),
    "softplus": lambda t, a: torch.where(t > 20, t, torch.log1p(torch.exp(t))),
    "swish": lambda t, a: t / (1 + torch.exp(-t)),
}
DIMS = (0, 1, 2, 3)  # of a 4-D input: 3 is the last
PARAMS = ((None, None), (0.1, 0.7))  # (alpha, gain): the defaults, or explicit ones (gain < 1: the op saves x, b)
CLAMPS = (None, 0.0, 0.8)


def _defined(act, alpha, gain):
    default_alpha, default_gain = DEFAULTS[act]
    return (default_alpha if alpha is None else alpha), (default_gain if gain is None else gain)


def composite(x, b=None, dim=1, act="linear", alpha=None, gain=None, clamp=None):
    alpha, gain = _defined(act, alpha, gain)
    if b is not None:
        x = x + b.reshape([-1 if i == dim else 1 for i in range(x.dim())])
    x = COMPOSITE_ACTS[act](x, alpha)
    if gain != 1:
        x = x * gain
    return x if clamp is None else x.clamp(-clamp, clamp)


def exact(x, b=None, dim=1, act="linear", alpha=None, gain=None, clamp=None):
    alpha, gain = _defined(act, alpha, gain)
    t = x.double()
    if b is not None:
        t = t + b.double().reshape([-1 if i == dim else 1 for i in range(x.dim())])
    y = EXACT_ACTS[act](t, alpha) * gain
    return y if clamp is None else torch.where(y > clamp, clamp, torch.where(y < -clamp, -clamp, y))


def same_bits(a, b, act):
    """Bit for bit (NaNs by their bits, zeros by their sign)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    bits = a.view(torch.int32 if a.dtype == torch.float32 else torch.int64) == b.view(
        torch.int32 if b.dtype == torch.float32 else torch.int64)
    return bool(bits.all())


def grid():
    for dim in DIMS:
        for with_bias in (False, True):
            for alpha, gain in PARAMS:
                for clamp in CLAMPS:
                    yield dim, with_bias, alpha, gain, clamp


def inputs(shape, dim, with_bias, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(dtype)
    b = torch.randn(shape[dim], generator=g).to(dtype) if with_bias else None
    return x, b


# sim runs our op only (float16/bfloat16/float32), which the composite activations do not use
BACKEND_ACTS = [(backend, act) for backend in ("reference", "torch", "sim") for act in ACTS
                if backend != "sim" or act in FUSED]


# --- values -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend, act", BACKEND_ACTS, indirect=["backend"])
def test_values_float32_bit_for_bit_and_float64_exact(backend, act):
    """Every dim x bias x alpha/gain x clamp: float32 is the composite bit for bit (its very ops for the torch
    composites; our op for linear/relu/lrelu), float64 the float64 formulas to rounding."""
    for dim, with_bias, alpha, gain, clamp in grid():
        case = (dim, with_bias, alpha, gain, clamp)
        x, b = inputs((2, 3, 4, 5), dim, with_bias)
        y = ascend_acts.bias_act(x, b, dim, act, alpha, gain, clamp)
        assert same_bits(y, composite(x, b, dim, act, alpha, gain, clamp), act), case
        if backend != "sim":
            x, b = x.double(), None if b is None else b.double()
            y = ascend_acts.bias_act(x, b, dim, act, alpha, gain, clamp)
            assert y.dtype == torch.float64
            torch.testing.assert_close(y, exact(x, b, dim, act, alpha, gain, clamp), rtol=1e-13, atol=1e-14,
                                       msg=str(case))


@pytest.mark.parametrize("backend", ["reference", "torch", "sim"], indirect=True)
@pytest.mark.parametrize("act", FUSED)
def test_fused_activations_gradients_float32_bit_for_bit(backend, act):
    """The input gradient is the composite's bit for bit, the bias gradient (a sum) to rounding."""
    for dim, with_bias, alpha, gain, clamp in grid():
        if not with_bias or clamp == 0.0:
            continue  # the bias's gradient is compared too; clamp 0 passes no gradient
        x, b = inputs((2, 3, 4, 5), dim, True)
        x.requires_grad_(True)
        b.requires_grad_(True)
        g = torch.randn(x.shape, generator=torch.Generator().manual_seed(5))
        ours = torch.autograd.grad(ascend_acts.bias_act(x, b, dim, act, alpha, gain, clamp), (x, b), g)
        theirs = torch.autograd.grad(composite(x, b, dim, act, alpha, gain, clamp), (x, b), g)
        assert same_bits(ours[0], theirs[0], act), (dim, alpha, gain, clamp)
        torch.testing.assert_close(ours[1], theirs[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["reference", "sim"], indirect=True)
@pytest.mark.parametrize("act", FUSED)
def test_fused_activations_one_kernel_each_way_no_copy_no_clamp_pass(backend, act):
    """Every dim, bias or none, gain, clamp: one forward kernel and one backward kernel (none for linear with gain 1
    and no clamp: the gradient passes through and a sum gives the bias's), and no other pass over x: no copy for
    another dim (a view of the contiguous x), no clamp, add or multiply."""
    for dim, with_bias, alpha, gain, clamp in grid():
        x, b = inputs((2, 3, 4, 5), dim, with_bias)
        x.requires_grad_(True)
        identity = act == "linear" and gain is None and clamp is None
        with OpCounter() as forward:
            y = ascend_acts.bias_act(x, b, dim, act, alpha, gain, clamp)
        if identity and b is None:
            assert y is x
            continue
        with OpCounter() as backward:
            torch.autograd.grad(y, x, torch.ones_like(y))
        case = (dim, with_bias, alpha, gain, clamp)
        passes = {"clamp", "add", "mul", "copy_", "clone", "contiguous", "movedim", "leaky_relu", "relu"}
        assert forward.calls["fused_bias_leaky_relu"] == 1 and not passes & set(forward.calls), (case, forward.calls)
        assert backward.calls["fused_bias_leaky_relu_backward"] == (0 if identity else 1), (case, backward.calls)
        assert not passes & set(backward.calls), (case, backward.calls)


def test_no_bias_and_unit_gain_linear_returns_x_itself():
    x = torch.randn(3, 4)
    assert ascend_acts.bias_act(x) is x  # as NVlabs' reference
    assert torch.equal(ascend_acts.bias_act(x, clamp=0.5), x.clamp(-0.5, 0.5))


@pytest.mark.parametrize("act", ["lrelu", "swish"])
def test_any_rank(act):
    """dim is ignored without a bias (NVlabs: any value); ranks 0 and 1 work (our op gets a (1, C) view)."""
    for shape, dim in (((), 5), ((6,), 0), ((6,), -3), ((4, 6), 0), ((4, 6), 1), ((2, 3, 4, 5, 6), 4)):
        x = torch.randn(shape)
        b = torch.randn(x.shape[dim]) if 0 <= dim < x.dim() else None
        y = ascend_acts.bias_act(x, b, dim, act, clamp=1.0)
        assert same_bits(y, composite(x, b, dim, act, clamp=1.0), act), (shape, dim)


@pytest.mark.parametrize("dim", [1, 3])
def test_layout_as_the_composite(dim):
    base = torch.randn(2, 3, 4, 5)
    for x in (base.contiguous(memory_format=torch.channels_last), base.transpose(2, 3), base[..., ::2]):
        b = torch.randn(x.shape[dim])
        ours, theirs = ascend_acts.bias_act(x, b, dim, "lrelu"), composite(x, b, dim, "lrelu")
        assert ours.stride() == theirs.stride() and same_bits(ours, theirs, "lrelu")


# --- half types ----------------------------------------------------------------------------------------------
def _half_case(backend, dtype, act, dim, clamp):
    x, b = inputs((4, 8, 16, 16), dim, True, seed=3)
    x = (x * 3).to(dtype).requires_grad_(True)
    b = b.to(dtype).requires_grad_(True)
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(4)).to(dtype)
    reference = exact(x, b, dim, act, clamp=clamp)
    ours = ascend_acts.bias_act(x, b, dim, act, clamp=clamp)
    theirs = composite(x, b, dim, act, clamp=clamp)
    assert ours.dtype == theirs.dtype == dtype
    error = lambda y, ref: (y.double() - ref).abs().max().item()  # noqa: E731
    assert error(ours, reference) <= 2 * error(theirs, reference), (act, dim)
    # gradients: against the float64 gradients of the float64 formula at the same (rounded) inputs. Where the
    # output is within rounding of +-clamp, the rounded output's side of the bound (clamp's gradient mask: 0 or
    # all of it) is a coin toss in both: those elements get no incoming gradient
    if clamp is not None:
        g = g.masked_fill((reference.abs() - clamp).abs() <= 4 * torch.finfo(dtype).eps * clamp, 0)
    x64, b64 = x.detach().double().requires_grad_(True), b.detach().double().requires_grad_(True)
    exact_grads = torch.autograd.grad(exact(x64, b64, dim, act, clamp=clamp), (x64, b64), g.double())
    ours_grads = torch.autograd.grad(ours, (x, b), g)
    theirs_grads = torch.autograd.grad(theirs, (x, b), g)
    for o, t, e in zip(ours_grads, theirs_grads, exact_grads):
        assert o.dtype == dtype
        assert error(o, e) <= 2 * error(t, e) + 1e-30, (act, dim)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("backend", ["reference", "torch", "sim"], indirect=True)
def test_half_types_within_twice_the_composites_error(backend, dtype):
    _half_case(backend, dtype, "lrelu", 3, 256.0)


@slow
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("backend, act", BACKEND_ACTS, indirect=["backend"])
def test_half_types_within_twice_the_composites_error_all(backend, act, dtype):
    for dim in DIMS:
        for clamp in (None, 2.0):
            _half_case(backend, dtype, act, dim, clamp)


# --- derivatives: gradcheck and gradgradcheck in float64 ---------------------------------------------------
def smooth_inputs(act, dim, with_bias, alpha, gain, clamp, shape=(2, 3, 2, 2)):
    """float64 inputs whose pre-activations stay 1e-3 away from 0 (relu/lrelu/elu/selu kinks) and whose nonzero
    outputs stay 1e-3 away from +-clamp (clamp's kinks), so finite differences see a smooth function."""
    for seed in range(100):
        x, b = inputs(shape, dim, with_bias, torch.float64, seed)
        t = x if b is None else x + b.reshape([-1 if i == dim else 1 for i in range(x.dim())])
        y = exact(x, b, dim, act, alpha, gain)
        near_clamp = ((y.abs() - clamp).abs() <= 1e-3) & (y != 0) if clamp is not None else y != y
        if t.abs().min() > 1e-3 and not near_clamp.any():  # y == 0 (relu's flat part) is smooth at clamp 0
            return x.requires_grad_(True), None if b is None else b.requires_grad_(True)
    raise AssertionError("no smooth inputs")


def check_derivatives(act, dim, with_bias, alpha, gain, clamp):
    x, b = smooth_inputs(act, dim, with_bias, alpha, gain, clamp)
    args = (x,) if b is None else (x, b)

    def f(x, b=None):
        return ascend_acts.bias_act(x, b, dim, act, alpha, gain, clamp)

    assert torch.autograd.gradcheck(f, args)
    assert torch.autograd.gradgradcheck(f, args)
    # and the composite's values of both derivatives (R1: gradient of a squared gradient norm)
    v = torch.randn(x.shape, dtype=torch.float64, requires_grad=True)
    results = []
    for fn in (f, lambda x, b=None: composite(x, b, dim, act, alpha, gain, clamp)):
        first = torch.autograd.grad(fn(*args), args, v, create_graph=True)
        penalty = sum((g * g).sum() for g in first)
        second = torch.autograd.grad(penalty, (*args, v), allow_unused=True, materialize_grads=True)
        results.append([*first, *second])
    for ours, theirs in zip(*results):
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("backend", ["reference", "torch"], indirect=True)
def test_first_and_second_derivatives(backend, act):
    check_derivatives(act, 2, True, 0.1, 0.7, 0.8)


@slow
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("backend", ["reference", "torch"], indirect=True)
def test_first_and_second_derivatives_every_case(backend, act):
    for case in grid():
        check_derivatives(act, *case)


@pytest.mark.parametrize("backend", ["sim"], indirect=True)
@pytest.mark.parametrize("act", FUSED)
def test_sim_first_and_second_derivatives_float32(backend, act):
    """sim has no float64: the first and second derivatives in float32 against the composite's."""
    for dim, with_bias, alpha, gain, clamp in grid():
        if not with_bias or clamp == 0.0 or dim in (0, 2):
            continue  # the fast subset; every case runs on reference and torch
        x, b = inputs((2, 3, 4, 5), dim, True)
        x.requires_grad_(True)
        b.requires_grad_(True)
        v = torch.randn(x.shape, requires_grad=True)
        results = []
        for fn in (ascend_acts.bias_act, composite):
            first = torch.autograd.grad(fn(x, b, dim, act, alpha, gain, clamp), (x, b), v, create_graph=True)
            penalty = sum((g * g).sum() for g in first)
            second = torch.autograd.grad(penalty, (x, b, v), allow_unused=True, materialize_grads=True)
            results.append([*first, *second])
        assert same_bits(results[0][0], results[1][0], act)
        for ours, theirs in zip(*results):
            torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act", ["linear", "relu", "lrelu", "tanh", "swish"])
@pytest.mark.parametrize("dim", [1, 3])
@pytest.mark.parametrize("clamp", [0.8, None])  # linear without a clamp: the gradient passes through (its own jvp)
def test_forward_ad(act, dim, clamp):
    x, b = smooth_inputs(act, dim, True, None, None, clamp, shape=(2, 3, 4, 5))
    tx, tb = torch.randn_like(x), torch.randn_like(b)
    ours = torch.func.jvp(lambda x, b: ascend_acts.bias_act(x, b, dim, act, clamp=clamp), (x, b), (tx, tb))
    theirs = torch.func.jvp(lambda x, b: composite(x, b, dim, act, clamp=clamp), (x, b), (tx, tb))
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    # and the dual-number API (forward AD through autograd, not functorch)
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        y = ascend_acts.bias_act(fwAD.make_dual(x.detach(), tx), fwAD.make_dual(b.detach(), tb), dim, act, clamp=clamp)
        torch.testing.assert_close(fwAD.unpack_dual(y).tangent, theirs[1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("act, clamp", [("linear", None), ("lrelu", 0.8)])
def test_forward_ad_of_one_argument(act, clamp):
    """A tangent for x only or b only (the other argument a plain tensor), against the composite's."""
    x, b = smooth_inputs(act, 2, True, None, None, clamp, shape=(2, 3, 4))
    x, b = x.detach(), b.detach()
    import torch.autograd.forward_ad as fwAD

    for tangents in ((torch.randn_like(x), None), (None, torch.randn_like(b))):
        with fwAD.dual_level():
            args = [t if tangent is None else fwAD.make_dual(t, tangent) for t, tangent in zip((x, b), tangents)]
            ours = fwAD.unpack_dual(ascend_acts.bias_act(*args, 2, act, clamp=clamp)).tangent
            theirs = fwAD.unpack_dual(composite(*args, 2, act, clamp=clamp)).tangent
        torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)


# --- autocast and compile -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("act", ["lrelu", "softplus"])
def test_autocast_as_the_composite(dtype, act):
    """Under autocast a linear layer's output is half; the composite's `x + b` with a float32 b promotes (autocast
    leaves additions alone), and so does ours; with b cast to the input's dtype both stay half."""
    z, w = torch.randn(8, 16), torch.randn(32, 16)
    b = torch.randn(32)
    with torch.autocast("cpu", dtype=dtype):
        x = F.linear(z, w)
        assert x.dtype == dtype
        for bias in (b, b.to(dtype)):
            ours = ascend_acts.bias_act(x, bias, act=act, clamp=4.0)
            theirs = composite(x, bias, act=act, clamp=4.0)
            assert ours.dtype == theirs.dtype
            if ours.dtype == torch.float32:
                assert same_bits(ours, theirs, act)
            else:
                reference = exact(x, bias, act=act, clamp=4.0)
                assert (ours.double() - reference).abs().max() <= 2 * (theirs.double() - reference).abs().max()


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(6, 4) / 2)
        self.bias = nn.Parameter(torch.randn(6))
        self.bias2 = nn.Parameter(torch.randn(5))

    def forward(self, x):  # x (N, 4, 5)
        h = ascend_acts.bias_act(torch.einsum("ncl,oc->nol", x, self.weight), self.bias, act="lrelu", clamp=1.5)
        h = ascend_acts.bias_act(h, self.bias2, dim=2, act="relu")
        h = ascend_acts.bias_act(h, self.bias2, dim=2)  # linear, gain 1, no clamp: the pass-through backward
        return ascend_acts.bias_act(h, None, act="swish", gain=0.5)


@slow
@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
def test_compile_fullgraph(compiler):
    torch._dynamo.reset()
    model, x = Small(), torch.randn(3, 4, 5, requires_grad=True)
    compiled = torch.compile(model, backend=compiler, fullgraph=True)
    eager_out, compiled_out = model(x), compiled(x)
    torch.testing.assert_close(compiled_out, eager_out)
    g = torch.randn_like(eager_out)
    params = (x, *model.parameters())
    for ours, theirs in zip(torch.autograd.grad(compiled_out, params, g), torch.autograd.grad(eager_out, params, g)):
        torch.testing.assert_close(ours, theirs)


# --- bad arguments -------------------------------------------------------------------------------------------
def test_bad_arguments_name_the_argument():
    x = torch.randn(2, 3, 4)
    cases = [
        (dict(act="gelu"), ValueError, "'act'"),  # NVlabs: KeyError
        (dict(act=None), ValueError, "'act'"),
        (dict(b=torch.randn(4)), RuntimeError, "'b'"),  # NVlabs: AssertionError
        (dict(b=torch.randn(3, 1)), RuntimeError, "'b'"),
        (dict(b=torch.ones(3, dtype=torch.int64)), RuntimeError, "'b'"),
        (dict(b=torch.randn(3, device="meta")), RuntimeError, "'b'"),
        (dict(b=[0.0, 1.0, 2.0]), TypeError, "'b'"),
        (dict(b=torch.randn(3), dim=-2), ValueError, "'dim'"),  # NVlabs: AssertionError (0 <= dim < x.ndim)
        (dict(b=torch.randn(3), dim=3), ValueError, "'dim'"),
        (dict(b=torch.randn(3), dim=1.0), TypeError, "'dim'"),
        (dict(clamp=-1), ValueError, "'clamp'"),  # NVlabs: AssertionError
        (dict(clamp=float("nan")), ValueError, "'clamp'"),
        (dict(clamp=1e39), RuntimeError, "'clamp'"),  # torch.clamp on a float32 x: "cannot be converted to type float"
        (dict(impl="triton"), ValueError, "'impl'"),  # NVlabs: AssertionError
        (dict(alpha="0.2", act="lrelu"), TypeError, "'alpha'"),
        (dict(gain=[2.0]), TypeError, "'gain'"),
    ]
    for kwargs, error, name in cases:
        with pytest.raises(error, match=name):
            ascend_acts.bias_act(x, **kwargs)
    with pytest.raises(TypeError, match="'x'"):
        ascend_acts.bias_act([1.0, 2.0])
    with pytest.raises(NotImplementedError, match="'x'"):
        ascend_acts.bias_act(torch.ones(2, 3, dtype=torch.int64), act="lrelu")
    # without a bias dim is ignored, as NVlabs'; impl 'ref' and 'cuda' are both accepted
    for impl in ("ref", "cuda"):
        assert same_bits(ascend_acts.bias_act(x, None, dim=-7, act="lrelu", impl=impl), composite(x, act="lrelu"),
                         "lrelu")


# --- the NVlabs stand-in --------------------------------------------------------------------------------------
def test_nvlabs_module_stands_in_for_torch_utils_ops_bias_act():
    """`from ascend_acts.compat.nvlabs import bias_act` gives a module used as NVlabs' networks use theirs."""
    assert nvlabs_module.bias_act is ascend_acts.bias_act
    for name, (alpha, gain) in DEFAULTS.items():
        spec = nvlabs_module.activation_funcs[name]
        assert (spec.def_alpha, spec.def_gain) == (alpha, gain) == (spec["def_alpha"], spec["def_gain"])
    assert set(nvlabs_module.activation_funcs) == set(DEFAULTS)
    assert nvlabs_module._init() is True  # nothing to build (scripts call it to build NVlabs' plugin early)


# --- a StyleGAN2-ADA-style mapping network and synthesis conv layer, trained with an R1 penalty ---------------
class FullyConnected(nn.Module):
    """Equalised learning rate, bias and activation through `bias_act` (as StyleGAN2-ADA's layer)."""

    def __init__(self, bias_act, in_features, out_features, activation="linear", lr_multiplier=1.0):
        super().__init__()
        self.bias_act, self.activation = bias_act, activation
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / lr_multiplier)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.weight_gain, self.bias_gain = lr_multiplier / math.sqrt(in_features), lr_multiplier

    def forward(self, x):
        return self.bias_act(x @ (self.weight * self.weight_gain).t(), self.bias * self.bias_gain,
                             act=self.activation)


class Critic(nn.Module):
    """A mapping network z -> w (lrelu layers, a linear last layer) styling one 3x3 conv layer with StyleGAN2-ADA's
    conv_clamp=256 over the image: score = mean of the clamped lrelu features."""

    def __init__(self, bias_act, channels=4, z_dim=8, w_dim=16, conv_clamp=256.0):
        super().__init__()
        self.bias_act, self.conv_clamp = bias_act, conv_clamp
        self.mapping = nn.ModuleList([FullyConnected(bias_act, z_dim, w_dim, "lrelu", 0.01),
                                      FullyConnected(bias_act, w_dim, w_dim, "lrelu", 0.01),
                                      FullyConnected(bias_act, w_dim, channels, "linear", 0.01)])
        self.weight = nn.Parameter(torch.randn(channels, channels, 3, 3))
        self.bias = nn.Parameter(torch.randn(channels) * 0.1)

    def forward(self, img, z):
        w = z
        for layer in self.mapping:
            w = layer(w)
        x = F.conv2d(img * (1 + w[:, :, None, None]), self.weight / math.sqrt(self.weight[0].numel()), padding=1)
        gain = SQRT2  # lrelu's default gain, times the layer's gain 1
        x = self.bias_act(x, self.bias, act="lrelu", gain=gain, clamp=self.conv_clamp * gain)
        return x.mean([1, 2, 3])


def train_critic(bias_act, steps=3):
    torch.manual_seed(0)
    model = Critic(bias_act)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    history = []
    for _ in range(steps):
        img = (torch.randn(4, 4, 8, 8, generator=g) * 300).requires_grad_(True)  # some outputs beyond the clamp
        z = torch.randn(4, 8, generator=g)
        score = model(img, z)
        (r1_grad,) = torch.autograd.grad(score.sum(), img, create_graph=True)
        loss = F.softplus(-score).mean() + 5.0 * r1_grad.square().sum([1, 2, 3]).mean()
        optimizer.zero_grad()
        loss.backward()
        history.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
        optimizer.step()
    return history


@pytest.mark.parametrize("backend", ["reference", "torch", "sim"], indirect=True)
def test_stylegan2_ada_style_training_with_r1(backend):
    ours, theirs = train_critic(ascend_acts.bias_act), train_critic(composite)
    for (loss, grads), (their_loss, their_grads) in zip(ours, theirs):
        torch.testing.assert_close(loss, their_loss, rtol=1e-6, atol=0)
        for grad, their_grad in zip(grads, their_grads):
            assert (grad - their_grad).abs().max() <= 1e-6 * their_grad.abs().max()
    # our op ran, forward and backward, in every layer
    torch.manual_seed(0)
    model = Critic(ascend_acts.bias_act)
    img, z = torch.randn(4, 4, 8, 8, requires_grad=True) * 300, torch.randn(4, 8)
    with OpCounter() as counter:
        score = model(img, z)
        torch.autograd.grad(score.sum(), list(model.parameters()))
    assert counter.calls["fused_bias_leaky_relu"] == 4  # 2 lrelu + 1 linear mapping layer, 1 conv layer
    # the linear layer (gain 1, no clamp) passes its gradient through and sums it for the bias, as the composite
    assert counter.calls["fused_bias_leaky_relu_backward"] == 3
    # the clamp mattered: some conv outputs were beyond 256 * sqrt(2)
    w = z
    for layer in model.mapping:
        w = layer(w)
    x = F.conv2d(img * (1 + w[:, :, None, None]), model.weight / 6, padding=1)
    assert (F.leaky_relu(x + model.bias[:, None, None], 0.2) * SQRT2).abs().max() > 256 * SQRT2


@pytest.mark.parametrize("backend", ["reference", "torch", "sim"], indirect=True)
@pytest.mark.parametrize("act", ["linear", "relu", "lrelu"])
def test_infinities_and_zeros_as_the_composite(backend, act):
    """-inf, +inf, NaN and zeros of both signs through the bias add and the activation: the composite's bits (relu
    of -inf is 0, found by a review when relu ran as a slope-0 LeakyReLU: NaN)."""
    x = torch.tensor([[-math.inf, math.inf, math.nan, -0.0, 0.0, -1.0, 2.0, 1.0, -3.0]])
    b = torch.zeros(9)
    assert same_bits(ascend_acts.bias_act(x, b, 1, act), composite(x, b, 1, act, None, None, None), act)
    # a -0.0 bias keeps x's -0.0, which relu keeps (torch.relu(-0.0) is -0.0: found by a review)
    negative_zero = torch.full((9,), -0.0)
    assert same_bits(ascend_acts.bias_act(x, negative_zero, 1, act),
                     composite(x, negative_zero, 1, act, None, None, None), act)
    # and the clamp's: values, and gradients passing at exactly +-clamp (1.0, -1.0 with gain 1), zero beyond
    g = torch.tensor([[1.5, -2.0, 3.0, -0.5, 0.25, -1.25, 2.5, 0.75, -1.0]])
    for gain in (1.0, None):
        for clamp in (1.0, 0.0, math.inf):
            x.requires_grad_(True)
            ours = ascend_acts.bias_act(x, b, 1, act, gain=gain, clamp=clamp)
            theirs = composite(x, b, 1, act, None, gain, clamp)
            assert same_bits(ours, theirs, act), (gain, clamp)
            grad = torch.autograd.grad(ours, x, g)[0]
            assert same_bits(grad, torch.autograd.grad(theirs, x, g)[0], act), (gain, clamp)


def test_activation_table_has_nvlabs_fields():
    """networks.py reads def_gain (and code may read the other fields of NVlabs' table entries)."""
    from ascend_acts.compat.nvlabs import bias_act as module

    table = module.activation_funcs
    assert [table[a].cuda_idx for a in ACTS] == list(range(1, len(ACTS) + 1))
    assert [a for a in ACTS if table[a].has_2nd_grad] == ["tanh", "sigmoid", "elu", "selu", "softplus", "swish"]
    assert table["swish"].ref == "x" and table["linear"].ref == "" and table["lrelu"]["ref"] == "y"
    x = torch.randn(5)
    assert torch.equal(table["lrelu"].func(x, alpha=0.1), F.leaky_relu(x, 0.1))
    assert torch.equal(table["tanh"].func(x), torch.tanh(x))
