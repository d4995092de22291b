"""The reference backend's cheaper norm + activation passes give what the general ones give, bit for bit: a +0 beta's
add and ReLU as one np.maximum, a zero beta's skipped pass in the backward's recovery, relu against an array of zeros
(and the scalar beyond it), the backward's dz kept in the gradient's place between its passes and u recovered there,
and the padding check remembered per shape."""

import numpy as np
import pytest
import torch

from ascend_acts.numerics import elementwise
from ascend_acts.ops.conv_bn_leaky_relu import reference_batch_norm, torch_ops
from markers import fast_only

SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.5, -1.5, 1e-45, -1e-45, 3e38, -3e38]
ACTIVATIONS = [(True, 0.0), (False, 0.2), (False, 1.0), (False, 0.0), (False, -0.5), (False, 1.7)]
# (shape, groups): instance norm a block at a time, group norm, batch norm over several blocks and over one, short
# planes, planes longer than a summed segment
CASES = [((1, 64, 40, 40), 64), ((2, 12, 33, 33), 4), ((16, 16, 24, 24), 0), ((4, 8, 6, 6), 0), ((32, 24, 1, 7), 0),
         ((1, 4, 70, 70), 4)]


def bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).view(f"u{array.dtype.itemsize}")


def assert_same_bits(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_array_equal(bits(a), bits(e))


def _specials(rng, dtype, size):
    values = np.concatenate([np.array(SPECIALS, dtype), rng.standard_normal(size).astype(dtype)])
    rng.shuffle(values)
    return values


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("one_pass", [True, False])
def test_relu_of_sum_with_zero_is_torchs_relu_of_the_sum(monkeypatch, dtype, one_pass):
    monkeypatch.setattr(elementwise, "_MAXIMUM_ADDS_ZERO", one_pass)
    values = _specials(np.random.default_rng(0), dtype, 1000)
    expected = torch.relu(torch.from_numpy(values) + 0.0).numpy()
    assert_same_bits([elementwise.relu_of_sum_with_zero(values, np.empty_like(values))], [expected])
    elementwise.relu_of_sum_with_zero(values, out=values)
    assert_same_bits([values], [expected])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_beyond_the_zeros_array_takes_the_scalar(monkeypatch, dtype):
    monkeypatch.setattr(elementwise, "_ZEROS_SIZE", 16)
    values = _specials(np.random.default_rng(1), dtype, 100)
    assert isinstance(elementwise._zeros(values), np.generic)
    assert_same_bits([elementwise.relu_values(values, np.empty_like(values)),
                      elementwise.relu_of_sum_with_zero(values, np.empty_like(values))],
                     [torch.relu(torch.from_numpy(values)).numpy(), torch.relu(torch.from_numpy(values) + 0.0).numpy()])


def _inputs(shape, dtype, beta_kind, seed):
    rng = np.random.default_rng(seed)
    c = shape[1]
    y = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    y.reshape(-1)[rng.integers(0, y.size, 6)] = np.array([np.nan, np.inf, -0.0, 0.0, -np.inf, 0.0], dtype)
    # the first channel all zeros, a third of them -0.0: its mean is +0, so z = (y - mean) * scale is -0 there
    y[:, 0] = np.where(rng.random(y[:, 0].shape) < 1 / 3, -0.0, 0.0)
    beta = {"+0": np.zeros(c, dtype), "-0": np.full(c, -0.0, dtype),
            "+-0": np.where(np.arange(c) % 2, 0.0, -0.0).astype(dtype)}[beta_kind]
    grad = rng.standard_normal(shape).astype(dtype)
    grad.reshape(-1)[rng.integers(0, grad.size, 6)] = np.array([np.nan, np.inf, -0.0, 0.0, -np.inf, -0.0], dtype)
    return y, np.ones(c, dtype), beta, grad


def _run(y, gamma, beta, grad, relu, slope, groups):
    """Forward (into a new array, and in place) centred on the mean and on the shift, and every backward the op runs
    (into a new array, and into grad_out's own copy)."""
    results = []
    for centre_on_mean in (True, False):
        out = np.empty_like(y)
        statistics = reference_batch_norm.forward(y, gamma, beta, 1e-5, slope, out, relu, groups, centre_on_mean)
        in_place = y.copy()
        reference_batch_norm.forward(in_place, gamma, beta, 1e-5, slope, in_place, relu, groups, centre_on_mean)
        results += [out, in_place, *statistics]
    for saved_is_result in (False, True) if slope > 0 and not relu else (False,):
        saved = out if saved_is_result else y
        grad_y, own = np.empty_like(grad), grad.copy()
        for target, source in ((grad_y, grad), (own, own)):
            results += [target, *reference_batch_norm.backward(source, saved, saved_is_result, gamma, beta,
                                                               *statistics[:2], slope, target, relu, groups)]
    return results


@pytest.mark.parametrize("shape,groups", fast_only(CASES, CASES[:3], unpack=True))
@pytest.mark.parametrize("dtype", fast_only([np.float32, np.float64], [np.float32]))
def test_zero_beta_passes_are_the_general_passes_bit_for_bit(monkeypatch, shape, groups, dtype):
    for index, (relu, slope) in enumerate(ACTIVATIONS):
        for beta_kind in ("+0", "-0", "+-0"):
            arrays = _inputs(shape, dtype, beta_kind, seed=index)
            fast = _run(*arrays, relu, slope, groups)
            with monkeypatch.context() as patch:
                patch.setattr(reference_batch_norm, "_is_zero", lambda values: False)
                patch.setattr(reference_batch_norm, "_is_positive_zero", lambda values: False)
                general = _run(*arrays, relu, slope, groups)
            assert_same_bits(fast, general)


@pytest.mark.parametrize("shape,groups", fast_only(CASES, CASES[:3], unpack=True))
def test_the_backward_over_many_blocks_is_the_backward_of_one(monkeypatch, shape, groups):
    """Several blocks keep dz in the gradient's place between the passes (batch statistics) or recover u there
    (group statistics); one block keeps both in temporaries."""
    rng = np.random.default_rng(3)
    c = shape[1]
    y, _, _, grad = _inputs(shape, np.float32, "+0", seed=3)
    gamma, beta = (rng.standard_normal(c) + 2).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    for relu, slope in ACTIVATIONS:
        with monkeypatch.context() as patch:
            patch.setattr(reference_batch_norm, "CHUNK", 1 << 30)
            one = _run(y, gamma, beta, grad, relu, slope, groups)
        with monkeypatch.context() as patch:
            patch.setattr(reference_batch_norm, "CHUNK", 2048)
            many = _run(y, gamma, beta, grad, relu, slope, groups)
        assert_same_bits(many, one)


def test_check_pad_remembers_a_pad_that_passed_and_raises_torchs_error_each_time(monkeypatch):
    calls = []
    real_pad = torch_ops.pad
    monkeypatch.setattr(torch_ops, "pad", lambda *args: calls.append(args) or real_pad(*args))
    monkeypatch.setattr(torch_ops, "_PADS_CHECKED", set())
    x = torch.randn(1, 2, 5, 6)
    for _ in range(3):
        torch_ops.check_pad(x, (1, 2, 3, 1), "reflect")
    assert len(calls) == 1
    torch_ops.check_pad(x, (1, 2, 3, 1), "replicate")
    torch_ops.check_pad(x.double(), (1, 2, 3, 1), "reflect")
    assert len(calls) == 3
    for _ in range(2):
        with pytest.raises(RuntimeError, match="Padding size should be less than"):
            torch_ops.check_pad(x, (5, 5, 1, 1), "reflect")
    assert len(calls) == 5
