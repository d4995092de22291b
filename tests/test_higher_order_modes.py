"""Modes past plain reverse and forward AD: the gradient of a forward-mode tangent (reverse-over-forward), compiled
autograd, third derivatives. Oracle: float64 finite differences (gradcheck) and torch's own modules."""

import copy

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

import ascend_acts
from ascend_acts import functional as AF
from markers import fast_only

F64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_torch_thread")

NORMS = {"bn": lambda: nn.BatchNorm2d(4), "gn": lambda: nn.GroupNorm(2, 4),
         "in": lambda: nn.InstanceNorm2d(4, affine=True, track_running_stats=True)}
ACTIVATIONS = {"lrelu": lambda: nn.LeakyReLU(0.2), "relu": nn.ReLU}


def _block(norm: str, activation: str, training: bool) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3), NORMS[norm](), ACTIVATIONS[activation]()).to(F64)
    return ascend_acts.convert(model).train(training)


def _inputs(*shapes, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g, dtype=F64) for shape in shapes]


def _tangent_of(function, tangents):
    """(primals) -> the tangent of function(*primals) along `tangents`: what reverse-over-forward differentiates."""
    def tangent(*primals):
        with fwAD.dual_level():
            out = function(*(fwAD.make_dual(p, t) for p, t in zip(primals, tangents)))
            return fwAD.unpack_dual(out).tangent
    return tangent


def _module_tangent(model):
    names = [name for name, _ in model.named_parameters()]
    return lambda x, *params: functional_call(model, dict(zip(names, params)), (x,))


@pytest.mark.slow  # fast: GroupNorm against torch, below
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("training", [True, False])
def test_reverse_over_forward_of_fused_block_matches_finite_differences(norm, activation, training):
    """The tangent's own gradient (the jvp's statistics carry their dependence on the input). torch's BN and IN get
    this wrong (their tangent's graph misses it too), so the oracle is gradcheck's finite differences."""
    model = _block(norm, activation, training)
    params = [p.detach() for p in model.parameters()]
    x, *_ = _inputs((2, 2, 4, 4))
    primals = [x, *params]
    tangents = _inputs(*(p.shape for p in primals), seed=2)
    function = _tangent_of(_module_tangent(model), tangents)
    primals = [p.clone().requires_grad_() for p in primals]
    assert torch.autograd.gradcheck(function, primals, atol=1e-6, rtol=1e-5)


def test_reverse_over_forward_of_group_norm_block_is_torchs():
    """GroupNorm, where torch's own reverse-over-forward is right: the same gradient as torch's module."""
    torch.manual_seed(0)
    theirs = nn.Sequential(nn.Conv2d(3, 4, 3), nn.GroupNorm(2, 4), nn.LeakyReLU(0.2)).to(F64)
    ours = ascend_acts.convert(copy.deepcopy(theirs))
    x0, t, r = _inputs((2, 3, 5, 5), (2, 3, 5, 5), (2, 4, 3, 3))
    grads = []
    for model in (theirs, ours):
        x = x0.clone().requires_grad_()
        (g,) = torch.autograd.grad((_tangent_of(model, [t])(x) * r).sum(), x)
        grads.append(g)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-10, atol=1e-12)


def _bias_act(act):
    return lambda x, b: ascend_acts.bias_act(x, b, act=act)


ELEMENTWISE = {
    "leaky_relu": lambda x, b: AF.leaky_relu(x, 0.2),
    "leaky_relu_inplace": lambda x, b: AF.leaky_relu(x * 1, 0.2, inplace=True),
    "rrelu_eval": lambda x, b: AF.rrelu(x, 0.1, 0.3, training=False),
    "fused_bias_leaky_relu": lambda x, b: AF.fused_bias_leaky_relu(x, b, 0.2, 2 ** 0.5),
    **{f"bias_act_{act}": _bias_act(act) for act in ("lrelu", "tanh", "sigmoid", "elu", "selu", "softplus", "swish")},
}


@pytest.mark.parametrize("op", fast_only(ELEMENTWISE, ["leaky_relu", "fused_bias_leaky_relu", "bias_act_tanh"]))
def test_reverse_over_forward_of_elementwise_ops_matches_finite_differences(op):
    function = ELEMENTWISE[op]
    x, b = _inputs((2, 3, 2, 2), (3,))
    tangents = _inputs((2, 3, 2, 2), (3,), seed=2)
    primals = [x.requires_grad_(), b.requires_grad_()]
    assert torch.autograd.gradcheck(_tangent_of(function, tangents), primals, atol=1e-6, rtol=1e-5)


def _third_derivative(model, x0, r):
    """d/dx sum(sin(d/dx |d/dx <r, model(x)>|^2)): an R1-like penalty differentiated once more."""
    x = x0.clone().requires_grad_()
    (g,) = torch.autograd.grad((model(x) * r).sum(), x, create_graph=True)
    (h,) = torch.autograd.grad(g.square().sum(), x, create_graph=True)
    (k,) = torch.autograd.grad(h.sin().sum(), x)
    return k


@pytest.mark.parametrize("norm", fast_only(["bn", "gn"], ["bn"]))
def test_third_derivative_through_eval_relu_block_is_torchs(norm):
    """Eval Conv -> norm -> ReLU with a linear read-out: torch's third derivative is zeros (its relu backward stays
    connected to the input through the ReLU's result); ours the same, not an unused-input error."""
    torch.manual_seed(0)
    theirs = nn.Sequential(nn.Conv2d(3, 4, 3), NORMS[norm](), nn.ReLU()).to(F64).eval()
    ours = ascend_acts.convert(copy.deepcopy(theirs))
    x0, r = _inputs((2, 3, 5, 5), (2, 4, 3, 3))
    torch.testing.assert_close(_third_derivative(ours, x0, r), _third_derivative(theirs, x0, r), rtol=1e-9,
                               atol=1e-12)


@pytest.mark.parametrize("norm", ["bn", "in"])
@pytest.mark.parametrize("activation", fast_only(ACTIVATIONS, ["relu"]))
def test_third_derivative_through_train_block_matches_finite_differences(norm, activation):
    """torch's own third derivative through training BN/IN disagrees with finite differences; ours agrees."""
    model = _block(norm, activation, True)
    x0, r, v = _inputs((2, 2, 4, 4), (2, 4, 2, 2), (2, 2, 4, 4))

    def penalty(x):
        x = x.clone().requires_grad_()
        (g,) = torch.autograd.grad((model(x) * r).sum(), x, create_graph=True)
        (h,) = torch.autograd.grad(g.square().sum(), x, create_graph=True)
        return h.sin().sum().detach()

    eps = 1e-5
    finite_difference = (penalty(x0 + eps * v) - penalty(x0 - eps * v)) / (2 * eps)
    torch.testing.assert_close((_third_derivative(model, x0, r) * v).sum(), finite_difference, rtol=1e-5, atol=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("norm", ["bn", "gn"])
@pytest.mark.parametrize("training", [True, False])
def test_compiled_autograd_gives_eager_gradients(norm, training):
    """torch._dynamo's compiled autograd over a converted block's backward: eager's gradients (to float32 rounding:
    training's backward differs from eager's by an ulp there), as torch's model."""
    torch.manual_seed(0)
    theirs = nn.Sequential(nn.Conv2d(3, 4, 3), NORMS[norm](), nn.LeakyReLU(0.2)).train(training)
    ours = ascend_acts.convert(copy.deepcopy(theirs))
    x0, r = (t.float() for t in _inputs((2, 3, 5, 5), (2, 4, 3, 3)))

    def gradients(model, compiled):
        model.zero_grad(set_to_none=True)
        x = x0.clone().requires_grad_()
        if compiled:
            with torch._dynamo.compiled_autograd._enable(torch.compile(backend="aot_eager")):
                (model(x) * r).sum().backward()
        else:
            (model(x) * r).sum().backward()
        return [x.grad, *(p.grad for p in model.parameters())]

    torch._dynamo.reset()
    compiled = gradients(ours, True)
    for got, eager, torchs in zip(compiled, gradients(ours, False), gradients(theirs, False)):
        torch.testing.assert_close(got, eager)
        torch.testing.assert_close(got, torchs)


# --- the activation ops: what autograd hands their backward (zeros for a gradient that reaches no output) ----------
ACTIVATION_OPS = {
    "leaky_relu": (lambda t: F.leaky_relu(t, 0.2), lambda t: AF.leaky_relu(t, 0.2)),
    "rrelu eval": (lambda t: F.rrelu(t, training=False), lambda t: AF.rrelu(t, training=False)),
}


FLOAT64_BACKENDS = ("reference", "torch")  # sim runs the NPU kernels: no float64


@pytest.mark.parametrize("backend", FLOAT64_BACKENDS, indirect=True)
@pytest.mark.parametrize("op", ACTIVATION_OPS)
def test_a_penalty_only_backward_through_an_activation_gives_the_bias_before_it_torchs_zero_gradient(op, backend):
    """torch's leaky_relu_backward gives its input a zero gradient when differentiated again: an R1 penalty's own
    backward then leaves a zero-filled .grad on the bias before the activation (Adam's momentum moves it)."""
    grads = []
    for f in ACTIVATION_OPS[op]:
        x = torch.randn(2, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_()
        bias = torch.zeros(3, dtype=torch.float64, requires_grad=True)
        (g,) = torch.autograd.grad(f(x + bias).sum(), x, create_graph=True)
        g.square().sum().backward()
        grads.append(bias.grad)
    assert grads[1] is not None and grads[0] is not None
    assert torch.equal(grads[1], grads[0])


@pytest.mark.parametrize("backend", FLOAT64_BACKENDS, indirect=True)
def test_a_hessian_vector_product_through_leaky_relu_is_torchs(backend):
    x = torch.randn(2, 3, 2, 2, dtype=torch.float64)
    products = [torch.func.jvp(torch.func.grad(lambda z, f=f: f(z).sum()), (x,), (torch.ones_like(x),))[1]
                for f in ACTIVATION_OPS["leaky_relu"]]
    assert torch.equal(products[1], products[0])
