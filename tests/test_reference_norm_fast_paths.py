"""The reference backend's fast paths for the norm + activation passes give what the plain paths give, bit for bit:
group statistics computed a block at a time (reference_batch_norm._forward_per_block / _backward_per_block) against
the three passes over the whole tensor, relu as np.maximum against the lane mask and against torch, and the short ufunc
buffer that speeds up column broadcasts stays inside its with-block; relu_gradient is torch's threshold_backward."""

import math

import numpy as np
import pytest
import torch

from ascend_acts.numerics import elementwise
from ascend_acts.ops.conv_bn_leaky_relu import reference_batch_norm
from markers import fast_only

SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.5, -1.5, 1e-45, -1e-45, 3e38, -3e38]


def bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).view(f"u{array.dtype.itemsize}")


def assert_same_bits(actual, expected):
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_array_equal(bits(a), bits(e))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("maximum_is_relu", [True, False])
def test_relu_values_is_torch_relu_bit_for_bit(monkeypatch, dtype, maximum_is_relu):
    monkeypatch.setattr(elementwise, "_MAXIMUM_IS_RELU", maximum_is_relu)
    rng = np.random.default_rng(0)
    values = np.concatenate([np.array(SPECIALS, dtype), rng.standard_normal(1000).astype(dtype)])
    rng.shuffle(values)
    expected = torch.relu(torch.from_numpy(values)).numpy()
    assert_same_bits([elementwise.relu_values(values, np.empty_like(values))], [expected])
    elementwise.relu_values(values, out=values)
    assert_same_bits([values], [expected])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_gradient_is_torchs_threshold_backward_bit_for_bit(dtype):
    rng = np.random.default_rng(1)
    z = np.concatenate([np.repeat(np.array(SPECIALS, dtype), len(SPECIALS)), rng.standard_normal(1000).astype(dtype)])
    grad = np.concatenate([np.tile(np.array(SPECIALS, dtype), len(SPECIALS)), rng.standard_normal(1000).astype(dtype)])
    expected = torch.ops.aten.threshold_backward(torch.from_numpy(grad), torch.from_numpy(z), 0).numpy()
    assert_same_bits([reference_batch_norm.relu_gradient(grad, z)], [expected])
    in_z = z.copy()
    reference_batch_norm.relu_gradient(grad, in_z, out=in_z)
    assert_same_bits([in_z], [expected])


def test_column_buffers_shrink_the_buffer_only_inside_and_only_for_short_rows():
    default = np.getbufsize()
    with elementwise.column_buffers(4096):
        assert np.getbufsize() < default
    assert np.getbufsize() == default
    with pytest.raises(ValueError), elementwise.column_buffers(1024):
        raise ValueError
    assert np.getbufsize() == default
    for row in (16, default // 2 + 1, 65536):  # too short for a column, or already fast
        with elementwise.column_buffers(row):
            assert np.getbufsize() == default


# (shape, groups): instance norm of one and several blocks, group norm (blocks of whole samples, and of a run of one
# sample's groups), empty batches, planes of one value and of no value, planes longer than a summed segment and
# shorter than a column
GROUP_CASES = [((1, 64, 64, 64), 64), ((3, 16, 20, 20), 16), ((1, 128, 40, 40), 32), ((2, 12, 33, 33), 4),
               ((2, 6, 5, 7), 3), ((1, 4, 300, 300), 4), ((4, 64, 8, 8), 64), ((2, 64, 40, 40), 16), ((0, 4, 3, 3), 2),
               ((2, 4, 0, 3), 4), ((5, 6, 1, 1), 6)]
ACTIVATIONS = [(True, 0.0), (False, 0.2), (False, 1.0), (False, 0.0), (False, -0.5), (False, 1.7)]


def _inputs(shape, dtype, offset, special, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    y = (rng.standard_normal(shape) * 2 + offset).astype(dtype)
    if special and y.size:
        y.reshape(-1)[rng.integers(0, y.size, 6)] = np.array([np.nan, np.inf, -0.0, 0.0, -np.inf, 0.0], dtype)
    gamma = (rng.standard_normal(c) + 0.5).astype(dtype)
    gamma[gamma == 0] = 1
    beta = rng.standard_normal(c).astype(dtype)
    grad = rng.standard_normal(shape).astype(dtype)
    return y, gamma, beta, grad


def _run(y, gamma, beta, grad, relu, slope, groups):
    """Forward (into a new array and in place, centred on the shift and on the mean) and every backward the op runs,
    as lists of arrays."""
    results = []
    for centre_on_mean in (True, False):
        out = np.empty_like(y)
        statistics = reference_batch_norm.forward(y, gamma, beta, 1e-5, slope, out, relu, groups, centre_on_mean)
        in_place = y.copy()
        reference_batch_norm.forward(in_place, gamma, beta, 1e-5, slope, in_place, relu, groups, centre_on_mean)
        results += [out, in_place, *statistics]
    for saved_is_result in (False, True) if slope > 0 and not relu else (False,):
        saved = out if saved_is_result else y
        grad_y = np.empty_like(grad)
        results += [grad_y, *reference_batch_norm.backward(grad, saved, saved_is_result, gamma, beta, *statistics[:2],
                                                           slope, grad_y, relu, groups)]
        own = grad.copy()  # grad_y may be grad_out
        results += [own, *reference_batch_norm.backward(own, saved, saved_is_result, gamma, beta, *statistics[:2],
                                                        slope, own, relu, groups)]
    return results


FAST_GROUP_CASES = [GROUP_CASES[i] for i in (3, 6, 8, 9, 10)]


@pytest.mark.parametrize("shape,groups", fast_only(GROUP_CASES, FAST_GROUP_CASES, unpack=True))
@pytest.mark.parametrize("dtype", fast_only([np.float32, np.float64], [np.float32]))
def test_group_statistics_a_block_at_a_time_are_the_whole_tensor_passes_bit_for_bit(monkeypatch, shape, groups,
                                                                                    dtype):
    assert reference_batch_norm._blocks_hold_groups(groups, shape[1] // groups, math.prod(shape[2:]))
    for index, ((relu, slope), offset, special) in enumerate(
            [(activation, 0.0, False) for activation in ACTIVATIONS] + [(ACTIVATIONS[0], 300.0, False),
                                                                        (ACTIVATIONS[1], 0.0, True)]):
        arrays = _inputs(shape, dtype, offset, special, seed=index)
        per_block = _run(*arrays, relu, slope, groups)
        with monkeypatch.context() as patch:
            patch.setattr(reference_batch_norm, "_blocks_hold_groups", lambda *_: False)
            whole_tensor = _run(*arrays, relu, slope, groups)
        assert_same_bits(per_block, whole_tensor)



# BatchNorm over short planes (reference_batch_norm._forward_short_planes / _backward_short_planes): (N, F) of one and
# several of the blocks' passes' blocks, short sequences, an empty batch, one sample
SHORT_PLANE_CASES = [(64, 256, 1, 1), (4096, 96, 1, 1), (8, 3, 1, 1), (0, 5, 1, 1), (0, 5, 1, 3), (1, 7, 1, 1),
                     (32, 24, 1, 7), (5, 6, 1, 15), (300, 40, 3, 4)]


@pytest.mark.parametrize("shape", SHORT_PLANE_CASES, ids=str)
@pytest.mark.parametrize("dtype", fast_only([np.float32, np.float64], [np.float32]))
def test_batch_statistics_over_short_planes_are_the_blocks_passes(monkeypatch, shape, dtype):
    """The forward and the InPlace-ABN backward bit for bit; the backward from the conv output centres u on the batch
    totals instead of row by row: the two orders' float64 roundings, a random walk over the batch's rows of units of
    the largest gradient (the sums' terms are of its size; a gradient that cancels keeps their rounding)."""
    for index, ((relu, slope), offset, special) in enumerate(
            [(activation, 0.0, False) for activation in ACTIVATIONS] + [(ACTIVATIONS[1], 300.0, False),
                                                                        (ACTIVATIONS[1], 0.0, True)]):
        arrays = _inputs(shape, dtype, offset, special, seed=index)
        short = _run(*arrays, relu, slope, 0)
        with monkeypatch.context() as patch:
            patch.setattr(reference_batch_norm, "_SHORT_PLANE", 0)
            blocks = _run(*arrays, relu, slope, 0)
        forward = 10  # two forwards of (out, in place, mean, invstd, variance)
        assert_same_bits(short[:forward], blocks[:forward])
        from_conv_output, from_result = short[forward:forward + 6], short[forward + 6:]
        assert_same_bits(from_result, blocks[forward + 6:])
        for ours, theirs in zip(from_conv_output, blocks[forward:forward + 6]):
            unit = np.finfo(dtype).eps * max(1.0, float(np.nanmax(np.abs(theirs), initial=0)))
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=16 * unit * math.sqrt(max(shape[0], 1)))
