"""torch.func transforms (jvp, grad, vjp, vmap, jacfwd, hessian) over every op, against torch's own functions (RReLU
with our noise: torch.where with the slopes). (Each op's forward-mode gradcheck: tests/test_op_contract.py.)"""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.func import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

import ascend_acts
from markers import fast_only

ops = torch.ops.ascend_acts
F64 = torch.float64
SEED = torch.tensor(1234)
GEOMETRY = ([2, 1], [1, 0, 1, 1], [1, 1], 2)  # stride, (top, bottom, left, right), dilation, groups


def _constants():
    g = torch.Generator().manual_seed(0)
    return dict(weight=torch.randn(6, 2, 3, 3, generator=g, dtype=F64), bias=torch.randn(6, generator=g, dtype=F64),
                gamma=torch.rand(6, generator=g, dtype=F64) + 0.5, beta=torch.randn(6, generator=g, dtype=F64) * 0.3)


C = _constants()


def _noise(shape, lower, upper):
    """Our slopes for SEED (rrelu of -1 is -slope), computed outside any transform."""
    return NOISE[lower, upper][: shape[-2], : shape[-1]] if len(shape) == 2 else None


NOISE = {bounds: ops.rrelu(-torch.ones(3, 5, dtype=F64), SEED, *bounds).neg()
         for bounds in ((0.1, 0.3), (-0.5, 0.3))}


def _conv(x, weight, bias=None):
    return F.conv2d(F.pad(x, (1, 1, 1, 0)), weight, bias, GEOMETRY[0], 0, 1, GEOMETRY[3])


# name -> (ours(x), torch's(x), input shape); functions of one tensor so every transform applies
CASES = {
    "leaky_relu": (lambda x: ascend_acts.leaky_relu(x, 0.2), lambda x: F.leaky_relu(x, 0.2), (3, 5)),
    "leaky_relu_negative": (lambda x: ascend_acts.leaky_relu(x, -0.3), lambda x: F.leaky_relu(x, -0.3), (3, 5)),
    "leaky_relu_inplace": (lambda x: ascend_acts.leaky_relu(x * 1, 0.2, inplace=True),
                           lambda x: F.leaky_relu(x, 0.2), (3, 5)),
    "rrelu": (lambda x: ops.rrelu(x, SEED, 0.1, 0.3),
              lambda x: torch.where(x > 0, x, x * _noise(x.shape, 0.1, 0.3)), (3, 5)),
    "rrelu_negative_lower": (lambda x: ops.rrelu(x, SEED, -0.5, 0.3),
                             lambda x: torch.where(x > 0, x, x * _noise(x.shape, -0.5, 0.3)), (3, 5)),
    "rrelu_inplace_negative_lower": (lambda x: _rrelu_inplace(x, -0.5, 0.3),
                                     lambda x: torch.where(x > 0, x, x * _noise(x.shape, -0.5, 0.3)), (3, 5)),
    "leaky_relu_backward": (lambda g: ops.leaky_relu_backward(g, SAVED, 0.2, False),
                            lambda g: torch.where(SAVED > 0, g, g * 0.2), (3, 5)),
    "conv_bn_leaky_relu_train": (
        lambda x: ops.conv_bn_leaky_relu_train(x, C["weight"], C["bias"], C["gamma"], C["beta"], None, None, *GEOMETRY,
                                               0.1, 1e-5, 0.2, True)[0],
        lambda x: F.leaky_relu(F.batch_norm(_conv(x, C["weight"], C["bias"]), None, None, C["gamma"], C["beta"], True,
                                            eps=1e-5), 0.2), (3, 4, 5, 5)),
    "conv_bn_leaky_relu_eval": (lambda x: ops.conv_bn_leaky_relu_eval(x, C["weight"], C["bias"], *GEOMETRY, -0.2),
                             lambda x: F.leaky_relu(_conv(x, C["weight"], C["bias"]), -0.2), (2, 4, 5, 5)),
    # StyleGAN2's fused bias + LeakyReLU, differentiated in the input (the output is kept; the input and bias are)
    # and in the bias
    "fused_bias_leaky_relu": (lambda x: ascend_acts.fused_bias_leaky_relu(x, BIAS, 0.2, 2**0.5),
                              lambda x: F.leaky_relu(x + BIAS.view(1, -1, 1), 0.2) * 2**0.5, (3, 5, 2)),
    "fused_bias_leaky_relu_negative": (lambda x: ascend_acts.fused_bias_leaky_relu(x, BIAS[:5], -0.3, 2.0),
                                       lambda x: F.leaky_relu(x + BIAS[:5], -0.3) * 2.0, (3, 5)),
    "fused_bias_leaky_relu_bias": (lambda b: ascend_acts.fused_bias_leaky_relu(FUSED_INPUT, b, -0.3, 2.0),
                                   lambda b: F.leaky_relu(FUSED_INPUT + b.view(1, -1, 1), -0.3) * 2.0, (5,)),
    "fused_bias_leaky_relu_backward": (lambda g: ops.fused_bias_leaky_relu_backward(g, SAVED, BIAS[:5], -0.3, 2.0,
                                                                                     False)[1],
                                       lambda g: torch.where(SAVED + BIAS[:5] > 0, g, g * -0.3).mul(2.0).sum(0),
                                       (3, 5)),
}
BIAS = torch.randn(5, dtype=F64, generator=torch.Generator().manual_seed(8))
FUSED_INPUT = torch.randn(3, 5, 2, dtype=F64, generator=torch.Generator().manual_seed(9))


def _rrelu_inplace(x, lower, upper):
    y = x * 1
    ops.rrelu_(y, SEED, lower, upper)
    return y


SAVED = torch.randn(3, 5, dtype=F64, generator=torch.Generator().manual_seed(7))


def _input(shape, seed=1):
    x = torch.randn(shape, dtype=F64, generator=torch.Generator().manual_seed(seed))
    return torch.where(x.abs() < 1e-2, x + 0.05, x)


def close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", fast_only(CASES, ["leaky_relu_inplace", "rrelu_negative_lower",
                                                   "leaky_relu_backward"]))
def test_func_transforms_equal_torch(case):
    ours, theirs, shape = CASES[case]
    x, t = _input(shape), _input(shape, seed=2)
    for transform in (
        lambda f: jvp(f, (x,), (t,))[1],
        lambda f: grad(lambda a: f(a).pow(2).sum())(x),
        lambda f: vjp(f, x)[1](torch.ones_like(f(x)))[0],
        lambda f: jvp(grad(lambda a: f(a).pow(3).sum()), (x,), (t,))[1],  # forward over reverse
        lambda f: grad(lambda a: (grad(lambda b: f(b).pow(3).sum())(a) * t).sum())(x),  # reverse over reverse
    ):
        close(transform(ours), transform(theirs))


@pytest.mark.parametrize("case", fast_only(["leaky_relu", "rrelu_negative_lower", "conv_bn_leaky_relu_eval",
                                            "fused_bias_leaky_relu", "fused_bias_leaky_relu_negative"],
                                           ["rrelu_negative_lower", "fused_bias_leaky_relu"]))
def test_jacobians_and_hessian_equal_torch(case):
    ours, theirs, shape = CASES[case]
    x = _input(shape)[:2]
    for transform in (jacfwd, jacrev):
        close(transform(ours)(x), transform(theirs)(x))
    close(hessian(lambda a: ours(a).pow(3).sum())(x), hessian(lambda a: theirs(a).pow(3).sum())(x))


@pytest.mark.parametrize("case", fast_only([c for c in CASES if "inplace" not in c], ["rrelu"]))
def test_vmap_equals_a_loop(case):
    """Values and per-sample gradients; the ops without randomness have batching rules, so torch's fallback (and its
    "performance drop" warning, which torch's own ops never give) is not used."""
    ours, theirs, shape = CASES[case]
    xs = torch.stack([_input(shape, seed=s) for s in range(3)])
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*performance drop.*")
        close(vmap(ours)(xs), torch.stack([theirs(x) for x in xs]))
        close(vmap(grad(lambda a: ours(a).pow(2).sum()))(xs), torch.stack([grad(lambda a: theirs(a).pow(2).sum())(x)
                                                                           for x in xs]))


def test_vmap_rrelu_randomness_follows_torch():
    """The seed is drawn with torch.randint, so vmap's randomness modes apply to values and gradients:
    'error' raises torch's error, 'same' gives every sample the same slopes, 'different' different ones."""
    xs = -torch.rand(2, 50, dtype=F64) - 0.5
    with pytest.raises(RuntimeError, match="randomness"):
        vmap(lambda a: ascend_acts.rrelu(a, training=True))(xs)
    for randomness in ("same", "different"):
        def per_sample(a):
            return grad(lambda b: ascend_acts.rrelu(b, -0.5, 0.3, training=True).sum())(a)
        slopes = vmap(per_sample, randomness=randomness)(xs)
        values = vmap(lambda a: ascend_acts.rrelu(a, -0.5, 0.3, training=True), randomness=randomness)(xs) / xs
        assert bool(((slopes >= -0.5) & (slopes <= 0.3)).all()) and bool(((values >= -0.5) & (values <= 0.3)).all())
        if randomness == "same":
            close(slopes[0], slopes[1]), close(values[0], values[1])
        else:
            assert (slopes[0] - slopes[1]).abs().min() > 0 and (values[0] - values[1]).abs().min() > 0


def test_inplace_limits_raise_torchs_errors():
    """Forward AD through in-place LeakyReLU with a negative slope raises torch's own error (torch refuses it
    too); vmap over an in-place op raises torch's error for ops without a batching rule."""
    x, t = _input((4,)), _input((4,), seed=2)
    for fn in (lambda a: ascend_acts.leaky_relu(a * 1, -0.2, inplace=True), lambda a: F.leaky_relu(a * 1, -0.2, True)):
        with pytest.raises(RuntimeError, match="please call out-of-place version"):
            jvp(fn, (x,), (t,))
    with pytest.raises(RuntimeError, match="Batching rule not implemented for ascend_acts::leaky_relu_"):
        vmap(lambda a: ascend_acts.leaky_relu(a, 0.2, inplace=True))(torch.randn(2, 3))


@pytest.mark.slow
@pytest.mark.parametrize("training", [True, False])
def test_public_function_gradcheck_forward_mode(training):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 2, 5, 5, dtype=F64, generator=g, requires_grad=True)
    params = [t.clone().requires_grad_() for t in (C["weight"][:3, :], C["bias"][:3], C["gamma"][:3], C["beta"][:3])]
    running = (torch.zeros(3, dtype=F64), torch.ones(3, dtype=F64))

    def fn(x, weight, bias, gamma, beta):
        stats = (None, None) if training else running
        return ascend_acts.conv_bn_leaky_relu(x, weight, bias, *stats, gamma, beta, training=training,
                                              negative_slope=0.2, padding=1)

    assert torch.autograd.gradcheck(fn, (x, *params), check_forward_ad=True, check_backward_ad=True,
                                    check_batched_grad=True, check_batched_forward_grad=True, fast_mode=True)
