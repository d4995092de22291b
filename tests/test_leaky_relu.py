"""LeakyReLU forward and backward against torch.nn.functional (bit-exact: same single rounding)."""

import pytest
import torch
import torch.nn.functional as F

import ascend_acts
from conftest import backend_dtypes
from markers import fast_only
from shapes import CASES, make, special_values

SLOPES = [0.0, 0.01, 0.2, -0.5, 2.0]


def assert_identical(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    numbers = ~torch.isnan(expected)  # a NaN's sign bit carries no meaning
    assert torch.equal(torch.signbit(actual[numbers]), torch.signbit(expected[numbers])), "sign of zero differs"


@pytest.mark.parametrize("slope", fast_only(SLOPES, [0.2]))
@pytest.mark.parametrize("case", fast_only(CASES, ["strided_slice"]))
@backend_dtypes("leaky_relu")
def test_forward_backward_match_torch(backend, case, slope, dtype):
    x = make(case, dtype).requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    y = ascend_acts.leaky_relu(x, slope)
    y_ref = F.leaky_relu(x_ref, slope)
    assert y.shape == y_ref.shape and y.dtype == y_ref.dtype
    assert_identical(y, y_ref)
    grad = make(case, dtype, seed=1)
    y.backward(grad)
    y_ref.backward(grad)
    assert_identical(x.grad, x_ref.grad)


@pytest.mark.parametrize("slope", fast_only(SLOPES, [-0.5]))
@backend_dtypes("leaky_relu")
def test_special_values(backend, slope, dtype):
    x = special_values(dtype)
    assert_identical(ascend_acts.leaky_relu(x, slope), F.leaky_relu(x, slope))


@pytest.mark.parametrize("slope", fast_only([0.01, 0.2, -0.5, 2.0], [0.2]))
def test_gradient_at_zero_is_the_slope(backend, slope):
    x = torch.tensor([0.0, -0.0], requires_grad=True)
    ascend_acts.leaky_relu(x, slope).sum().backward()
    assert x.grad.tolist() == [pytest.approx(slope, rel=1e-7)] * 2


def test_negative_zero_stays_negative(backend):
    y = ascend_acts.leaky_relu(torch.tensor([-0.0]), 0.2)
    assert y.item() == 0.0 and torch.signbit(y).item()


@pytest.mark.parametrize("slope", fast_only([0.0, 0.2, 2.0], [0.2]))
def test_inplace_matches_out_of_place_and_backward(backend, slope):
    base = torch.randn(6, 7, requires_grad=True)
    x = base * 1.0
    y = ascend_acts.leaky_relu(x, slope, inplace=True)
    assert y is x
    assert_identical(y, F.leaky_relu(base.detach(), slope))
    y.sum().backward()
    ref = base.detach().clone().requires_grad_()
    F.leaky_relu(ref * 1.0, slope).sum().backward()
    assert_identical(base.grad, ref.grad)


def test_inplace_on_noncontiguous_view_writes_through(backend):
    x = torch.randn(8, 9)
    expected = x.clone()
    expected[:, ::2] = F.leaky_relu(expected[:, ::2], 0.3)
    ascend_acts.leaky_relu(x[:, ::2], 0.3, inplace=True)
    assert_identical(x, expected)


def test_inplace_negative_slope_backward_raises_like_torch(backend):
    x = torch.randn(5, requires_grad=True) * 1.0
    y = ascend_acts.leaky_relu(x, -0.5, inplace=True)
    with pytest.raises(RuntimeError, match="please call out-of-place version"):
        y.sum().backward()
    x_ref = torch.randn(5, requires_grad=True) * 1.0
    with pytest.raises(RuntimeError, match="please call out-of-place version"):
        F.leaky_relu(x_ref, -0.5, inplace=True).sum().backward()


def test_inplace_on_leaf_requiring_grad_raises_and_leaves_input_intact(backend):
    x = torch.randn(5, requires_grad=True)
    before = x.detach().clone()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        ascend_acts.leaky_relu(x, 0.2, inplace=True)
    assert torch.equal(x.detach(), before)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        F.leaky_relu(x, 0.2, inplace=True)


def test_inplace_on_overlapping_memory_raises_and_leaves_input_intact(backend):
    storage = -torch.rand(3)
    before = storage.clone()
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        ascend_acts.leaky_relu(storage.expand(4, 3), 0.2, inplace=True)
    assert torch.equal(storage, before)


def test_module_matches_torch_module(backend):
    x = torch.randn(3, 4, requires_grad=True)
    ours, theirs = ascend_acts.nn.LeakyReLU(0.3), torch.nn.LeakyReLU(0.3)
    assert_identical(ours(x), theirs(x))
    assert repr(ours).endswith(repr(theirs)) and ours.extra_repr() == theirs.extra_repr()
