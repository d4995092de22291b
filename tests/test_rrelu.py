"""RReLU: eval against torch (bit-exact), training by its defining properties and the RNG spec."""

import pytest
import torch
import torch.nn.functional as F

import ascend_acts
from ascend_acts.ops.rrelu import rng
from conftest import backend_dtypes
from markers import fast_only
from shapes import CASES, make, special_values
from test_leaky_relu import assert_identical

BOUNDS = [(1 / 8, 1 / 3), (0.0, 0.5), (-0.5, 0.25), (0.3, 0.3), (1.0, 2.0)]
RTOL = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}


@pytest.mark.parametrize("bounds", fast_only(BOUNDS, [(-0.5, 0.25)]), ids=str)
@pytest.mark.parametrize("case", fast_only(CASES, ["strided_slice"]))
@backend_dtypes("leaky_relu")
def test_eval_matches_torch(backend, case, bounds, dtype):
    x = make(case, dtype).requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    y = ascend_acts.rrelu(x, *bounds, training=False)
    y_ref = F.rrelu(x_ref, *bounds, training=False)
    assert_identical(y, y_ref)
    assert_identical(y, F.leaky_relu(x.detach(), (bounds[0] + bounds[1]) / 2))
    grad = make(case, dtype, seed=1)
    y.backward(grad)
    y_ref.backward(grad)
    assert_identical(x.grad, x_ref.grad)


def slopes_of(x, y):
    """The slope each element was multiplied by, where it can be read off to the dtype's precision
    (x < 0 and a normal, not subnormal, result)."""
    readable = (x < 0) & (y.abs() >= torch.finfo(y.dtype).tiny)
    return (y[readable].double() / x[readable].double()), readable


@pytest.mark.parametrize("bounds", fast_only(BOUNDS, [(-0.5, 0.25)]), ids=str)
@pytest.mark.parametrize("case", fast_only(CASES, ["33x17"]))
@backend_dtypes("rrelu")
def test_training_properties(backend, case, bounds, dtype):
    lower, upper = bounds
    x = make(case, dtype).requires_grad_()
    y = ascend_acts.rrelu(x, lower, upper, training=True)
    xd = x.detach()
    positive = xd > 0
    assert torch.equal(y.detach()[positive], xd[positive])  # slope 1, exactly
    slopes, negative = slopes_of(xd, y.detach())
    tol = RTOL[dtype] * max(abs(lower), abs(upper), 1)
    assert bool(((slopes >= lower - tol) & (slopes <= upper + tol)).all())
    # backward: dy/dx is 1 for x > 0 and the same slope as the forward for x <= 0
    y.backward(torch.ones_like(y))
    assert torch.equal(x.grad[positive], torch.ones_like(xd[positive]))
    torch.testing.assert_close(x.grad[negative].double(), slopes, rtol=2 * RTOL[dtype], atol=0)


def test_training_values_follow_the_rng_spec(backend):
    """y = x * noise(seed, flat index), the seed being the one drawn from the torch generator."""
    x = torch.randn(5, 7, 3)
    gen = torch.Generator().manual_seed(1234)
    seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64, generator=gen.clone_state()))
    y = ascend_acts.rrelu(x, 0.1, 0.3, training=True, generator=gen)
    noise = torch.from_numpy(rng.noise_for_shape(seed, x.numel(), 0.1, 0.3)).reshape(x.shape)
    assert torch.equal(y, torch.where(x > 0, x, x * noise))


def test_reproducible_under_manual_seed_and_generator(backend):
    x = torch.randn(1000)
    torch.manual_seed(7)
    a = ascend_acts.rrelu(x, training=True)
    torch.manual_seed(7)
    b = ascend_acts.rrelu(x, training=True)
    assert torch.equal(a, b)
    c = ascend_acts.rrelu(x, training=True, generator=torch.Generator().manual_seed(3))
    d = ascend_acts.rrelu(x, training=True, generator=torch.Generator().manual_seed(3))
    assert torch.equal(c, d)


def test_different_seeds_and_calls_differ(backend):
    x = -torch.rand(1000) - 0.1
    torch.manual_seed(7)
    a = ascend_acts.rrelu(x, training=True)
    b = ascend_acts.rrelu(x, training=True)  # the generator moved on
    torch.manual_seed(8)
    c = ascend_acts.rrelu(x, training=True)
    assert (a != b).float().mean() > 0.99 and (a != c).float().mean() > 0.99


def test_degenerate_range_is_deterministic_leaky_relu(backend):
    x = torch.randn(300)
    y = ascend_acts.rrelu(x, 0.25, 0.25, training=True)
    assert_identical(y, F.leaky_relu(x, 0.25))


def test_gradient_at_zero_is_the_noise(backend):
    x = torch.zeros(64, requires_grad=True)
    y = ascend_acts.rrelu(x, 0.1, 0.3, training=True)
    y.backward(torch.ones_like(y))
    assert bool(((x.grad >= 0.1) & (x.grad <= 0.3)).all()) and x.grad.unique().numel() > 32


@backend_dtypes("rrelu")
def test_training_special_values(backend, dtype):
    x = special_values(dtype)
    y = ascend_acts.rrelu(x, 0.1, 0.3, training=True)
    assert torch.isnan(y[2]) and y[3] == float("inf") and y[4] == -float("inf")
    assert y[0] == 0 and torch.signbit(y[0]) and y[1] == 0 and not torch.signbit(y[1])


@pytest.mark.parametrize("bounds", fast_only([(1 / 8, 1 / 3), (0.0, 1.0), (-0.5, 0.25), (-0.8, -0.2)], [(-0.5, 0.25)]),
                         ids=str)
def test_inplace_training_matches_out_of_place(backend, bounds):
    base = torch.randn(10, 11, requires_grad=True)
    expected = ascend_acts.rrelu(base, *bounds, training=True, generator=torch.Generator().manual_seed(9))
    expected.backward(torch.ones_like(expected))
    x = base.detach().clone().requires_grad_()
    y = x * 1.0
    out = ascend_acts.rrelu(y, *bounds, training=True, inplace=True, generator=torch.Generator().manual_seed(9))
    assert out is y
    assert torch.equal(out, expected)
    out.backward(torch.ones_like(out))
    assert torch.equal(x.grad, base.grad)


@backend_dtypes("rrelu_")
def test_inplace_training_negative_lower_gradients_by_hand(backend, dtype):
    """In-place RReLU training with lower < 0 (torch allows it): the gradient is 1 where x > 0 (x = 0, -0.0
    and NaN take the noise) and the forward's slope elsewhere, checked against a float64 hand computation
    from the slopes the forward used (y / x)."""
    x = torch.cat([torch.randn(203, dtype=torch.float64), torch.tensor([0.0, -0.0, float("nan"), 3.0, -2.0])])
    x = x.to(dtype)
    leaf = x.clone().requires_grad_()
    y = leaf * 1.0
    ascend_acts.rrelu(y, -0.6, 0.3, training=True, inplace=True, generator=torch.Generator().manual_seed(11))
    grad = torch.randn(x.shape, dtype=torch.float64).to(dtype)
    y.backward(grad)
    slopes = ascend_acts.rrelu(-torch.ones_like(x), -0.6, 0.3, training=True,
                               generator=torch.Generator().manual_seed(11)).neg().double()
    positive = x.double() > 0
    expected = torch.where(positive, grad.double(), grad.double() * slopes)
    # atol: one step of the dtype's subnormals, where a product rounded once has fewer significant bits than rtol
    subnormal_step = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps
    torch.testing.assert_close(leaf.grad.double(), expected, rtol=RTOL[dtype], atol=subnormal_step)
    out_of_place = ascend_acts.rrelu(x, -0.6, 0.3, training=True, generator=torch.Generator().manual_seed(11))
    torch.testing.assert_close(y.detach(), out_of_place, rtol=0, atol=0, equal_nan=True)


def test_inplace_eval_negative_slope_backward_raises_like_torch(backend):
    x = torch.randn(5, requires_grad=True) * 1.0
    y = ascend_acts.rrelu(x, -0.8, -0.2, training=False, inplace=True)
    with pytest.raises(RuntimeError, match="please call out-of-place version"):
        y.sum().backward()


def test_module_matches_torch_module_and_modes(backend):
    ours, theirs = ascend_acts.nn.RReLU(0.1, 0.4), torch.nn.RReLU(0.1, 0.4)
    assert ours.extra_repr() == theirs.extra_repr() and ours.lower == 0.1 and ours.upper == 0.4
    x = torch.randn(50)
    ours.eval(), theirs.eval()
    assert_identical(ours(x), theirs(x))
    ours.train()
    torch.manual_seed(0)
    a = ours(x)
    torch.manual_seed(0)
    assert torch.equal(a, ascend_acts.rrelu(x, 0.1, 0.4, training=True))
