"""The reference backend's fast paths for the norm + activation passes give what the plain paths give, bit for bit:
group statistics computed a block at a time (reference_batch_norm._forward_per_block / _backward_per_block) against
the three passes over the whole tensor, relu as np.maximum against the lane mask and against torch, and the short ufunc
buffer that speeds up column broadcasts stays inside its with-block; relu_gradient is torch's threshold_backward. Also
the cheaper passes: a +0 beta's add and ReLU as one np.maximum, a zero beta's skipped pass in the backward's recovery,
relu against an array of zeros (and the scalar beyond it), the backward's dz kept in the gradient's place between its
passes and u recovered there; and the padding check remembered per shape."""

import math

import numpy as np
import pytest
import torch

from ascend_acts.numerics import elementwise
from ascend_acts.ops.conv_bn_leaky_relu import reference_batch_norm, torch_ops
from markers import fast_only

SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.5, -1.5, 1e-45, -1e-45, 3e38, -3e38]


def bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).view(f"u{array.dtype.itemsize}")


def assert_same_bits(actual, expected):
    assert len(actual) == len(expected)
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


# the cheaper passes (a zero beta, relu against zeros, many blocks' backward) against the general ones
# (shape, groups): instance norm a block at a time, group norm, batch norm over several blocks and over one, short
# planes, planes longer than a summed segment
CHEAPER_PASS_CASES = [((1, 64, 40, 40), 64), ((2, 12, 33, 33), 4), ((16, 16, 24, 24), 0), ((4, 8, 6, 6), 0),
                      ((32, 24, 1, 7), 0), ((1, 4, 70, 70), 4)]


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


def _zero_beta_inputs(shape, dtype, beta_kind, seed):
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


@pytest.mark.parametrize("shape,groups", fast_only(CHEAPER_PASS_CASES, CHEAPER_PASS_CASES[:3], unpack=True))
@pytest.mark.parametrize("dtype", fast_only([np.float32, np.float64], [np.float32]))
def test_zero_beta_passes_are_the_general_passes_bit_for_bit(monkeypatch, shape, groups, dtype):
    for index, (relu, slope) in enumerate(ACTIVATIONS):
        for beta_kind in ("+0", "-0", "+-0"):
            arrays = _zero_beta_inputs(shape, dtype, beta_kind, seed=index)
            fast = _run(*arrays, relu, slope, groups)
            with monkeypatch.context() as patch:
                patch.setattr(reference_batch_norm, "_is_zero", lambda values: False)
                patch.setattr(reference_batch_norm, "_is_positive_zero", lambda values: False)
                general = _run(*arrays, relu, slope, groups)
            assert_same_bits(fast, general)


@pytest.mark.parametrize("shape,groups", fast_only(CHEAPER_PASS_CASES, CHEAPER_PASS_CASES[:3], unpack=True))
def test_the_backward_over_many_blocks_is_the_backward_of_one(monkeypatch, shape, groups):
    """Several blocks keep dz in the gradient's place between the passes (batch statistics) or recover u there
    (group statistics); one block keeps both in temporaries."""
    rng = np.random.default_rng(3)
    c = shape[1]
    y, _, _, grad = _zero_beta_inputs(shape, np.float32, "+0", seed=3)
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
