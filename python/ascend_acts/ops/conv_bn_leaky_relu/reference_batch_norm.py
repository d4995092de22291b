"""The BatchNorm + LeakyReLU part of the fused block as the reference backend runs it: NumPy, in few passes.

reference.py's train_forward/train_backward are the float64 oracle, written for clarity (whole-array expressions);
these kernels compute the same in one compute dtype (float32, or float64) for speed. The (N, C, H, W) arrays are
seen as (N, C, H*W) and walked in cache-sized blocks (whole samples, or a run of one sample's channels) on
numerics.parallel's threads:
- forward: (1) per row (sample, channel) its sum, merged into an estimate of the mean (the shift) in float64; (2) the
  values centred on the shift (written into out) and per row their sum and sum of squares: the mean is the shift
  plus their mean (the estimate's error, which is some units of a large sum for values far from 0), the variance
  theirs less its square (no cancellation: the centred values are small and nearly exact); (3) out =
  LeakyReLU(centred * gamma * invstd + beta'), the mean's offset from the shift folded into beta'; or, where the
  backward recovers z from the conv output (centre_on_mean), LeakyReLU((y - mean) * (gamma * invstd) + beta), as
  it will, so that both take the same branch at every value.
- backward (InPlace-ABN): (1) per row the sums of dz and dz * u, where dz is grad_out through the LeakyReLU
  and u is x-hat up to a per-row factor, both recovered from what was kept (the output, or the conv
  output: then also the sum of u, which is y - the rounded mean and is centred exactly through the factors);
  (2) grad_y = P dz + Q u + R with per-row P, Q, R.
Rows longer than 2 * _SEGMENT are summed in segments merged in float64 (_row_sums).
A tensor of one block keeps what pass (1) or (2) made for the next pass; a larger one recomputes it per block, so
that each pass reads memory once and its temporaries stay near the core, except the backward's dz, which pass (1)
writes where the block's gradient goes (its recovery is most of the work; pass (2) recomputes only u).
`groups` (norm_groups) G >= 1 normalises per sample over groups of C/G channels (InstanceNorm: G == C, GroupNorm):
a group is C/G consecutive rows, so the same passes serve, only the merges and the per-row factors differ; the
statistics are then (N, G). Blocks then hold whole groups where a group fits in one: a block's statistics are its
own, so all its passes run in one visit while it is near the core (_forward_per_block, _backward_per_block: the same
operations in the same order, the same bits).
Batch statistics over planes shorter than _SHORT_PLANE values (BatchNorm1d over (N, F): planes of one value; short
sequences) take the same operations as whole-tensor passes over the (N, C * size) view (_forward_short_planes,
_backward_short_planes): per-channel constants repeated over a sample's planes broadcast along its row, the row sums'
batch totals added in float64 in the rows' order without a float64 copy of the (N, C) row sums, as many values as
the tensor itself for planes of one value.
Per-row constants broadcast as columns under numerics.elementwise.column_buffers (NumPy's default ufunc buffer makes
a column over rows of <= 4096 values several times slower than a contiguous pass); per-channel constants shared by
several samples are spread over a sample's small planes (`_Spread`), and planes too short for a column take spread
constants. Row sums use einsum (its own SIMD loops): BLAS gemv is faster alone but starts threads of its own inside
ours. ReLU is one np.maximum where that is torch's relu bit for bit (numerics.elementwise.relu_values), and with a
+0 beta (no affine) the add and the ReLU are one np.maximum (relu_of_sum_with_zero); no activation (slope 1) costs
no pass, nor does a zero beta in the backward's recovery. Blocks go to whichever thread is free next.
"""

from __future__ import annotations

import itertools
import math
from contextlib import nullcontext

import numpy as np

from ...numerics.elementwise import (
    column_buffers,
    quiet,
    relu_of_sum_with_zero,
    relu_values,
    slope_factors,
    zero_where,
)
from ...numerics.parallel import CHUNK, for_chunks, thread_count

# planes of at least this many values take a per-row constant as a column: under column_buffers its loop per row is
# then about as fast as a contiguous pass
_COLUMN_PLANE = 256
# below this many values a per-channel constant shared by several samples is spread over one sample's planes (read
# from cache, it is broadcast over the samples faster than a column)
_SPREAD_PLANE = 4096
# rows longer than twice this are summed in segments of this many values
_SEGMENT = 256
# batch statistics over planes shorter than this (BatchNorm1d over (N, F), or over short sequences) are summed over
# the batch axis of the (N, C * size) view (_forward_short_planes)
_SHORT_PLANE = 16


class _Spread:
    """A per-channel (C,) or per-row (N, C) constant as an array that broadcasts against a block's (samples,
    channels, plane) view. NumPy broadcasts a column with an inner loop per row, several times a contiguous pass when
    planes are small (under column_buffers: below _COLUMN_PLANE values); a per-channel constant spread over one
    sample's planes (1/N of the data, made once) is broadcast over the samples at the speed of a contiguous pass. A
    per-row constant, or one sample's, would have to be spread over all the data: it stays a column where that is
    fast."""

    def __init__(self, values: np.ndarray, size: int, samples: int):
        values = values.reshape(-1, values.shape[-1])  # (1, C) or (N, C)
        if values.shape[0] == 1 and (size < _COLUMN_PLANE or (samples > 1 and size < _SPREAD_PLANE)):
            self.array = np.repeat(values, size, axis=1).reshape(*values.shape, size)
        else:
            self.array = values[:, :, None]
        self.size = size

    def buffers(self):
        """The context to broadcast it in: see column_buffers."""
        return column_buffers(self.size) if self.array.shape[2] < self.size else nullcontext()

    def __getitem__(self, block) -> np.ndarray:
        samples, channels = block
        return self.array[(samples if self.array.shape[0] > 1 else slice(0, 1)), channels]


def _columns(values: np.ndarray, size: int) -> np.ndarray:
    """A block's per-row (samples, channels) constant as an array that broadcasts against its planes: a column, or
    spread over the planes when they are too short for a column's loop per row."""
    if size >= _COLUMN_PLANE:
        return values[:, :, None]
    return np.repeat(values, size, axis=1).reshape(*values.shape, size)


def _blocks(n: int, c: int, size: int, per_group: int = 1) -> list[tuple[slice, slice]]:
    """(samples, channels) slices of about CHUNK values each: whole samples, or a run of one sample's channels, whole
    groups of per_group channels when they fit."""
    rows = max(1, CHUNK // max(size, 1))
    if per_group * size <= CHUNK:
        rows = max(per_group, rows - rows % per_group)
    if rows >= c:
        per = rows // max(c, 1)
        return [(slice(first, min(first + per, n)), slice(0, c)) for first in range(0, n, per)] or \
            [(slice(0, 0), slice(0, c))]
    return [(slice(sample, sample + 1), slice(first, min(first + rows, c)))
            for sample in range(n) for first in range(0, c, rows)]


def _for_blocks(blocks, body) -> None:
    """body(block) for every block: one inline (under the caller's errstate), several on the threads (each quiet),
    each thread taking the next block not yet taken, so that a thread the machine's other work slows takes fewer
    (a block's results are its own: which thread runs it changes no bit)."""
    if len(blocks) == 1:
        body(blocks[0])
        return
    taken = itertools.count()  # next() on it is atomic under the GIL

    def run(start: int, stop: int) -> None:
        with quiet():
            for index in iter(taken.__next__, None):
                if index >= len(blocks):
                    return
                body(blocks[index])

    threads = min(thread_count(), len(blocks))
    for_chunks(threads, run, chunk=1)


def _add_and_activate(z: np.ndarray, bias, bias_is_zero: bool, relu: bool, slope) -> None:
    """z = activation(z + bias), in place: with bias_is_zero (every value +0.0) and ReLU in one pass (see
    relu_of_sum_with_zero)."""
    if relu and bias_is_zero:
        relu_of_sum_with_zero(z, out=z)
        return
    z += bias
    _activate(z, relu, slope)


def _is_zero(values: np.ndarray) -> bool:
    """Whether every value is +0.0 or -0.0."""
    return not values.any()


def _is_positive_zero(values: np.ndarray) -> bool:
    """Whether every value is +0.0 (a norm without affine parameters: its beta)."""
    return _is_zero(values) and not np.signbit(values).any()


def _activate(z: np.ndarray, relu: bool, slope) -> None:
    """z = ReLU(z) or LeakyReLU(z), in place; slope 1 (no activation) leaves z as it is: z * 1 is z (an arithmetic
    result is never a signalling NaN)."""
    if relu:
        relu_in_place(z)
    elif slope != 1:
        _leaky_relu_in_place(z, slope)


def _leaky_relu_in_place(z: np.ndarray, slope) -> None:
    """z = z > 0 ? z : z * slope, exactly (NaN, -0.0 and infinities included)."""
    scaled = z * slope
    if 0 < slope <= 1:  # z > 0: z >= z * slope; otherwise z * slope >= z; NaN propagates
        np.maximum(z, scaled, out=z)
    elif slope > 1:
        np.minimum(z, scaled, out=z)
    else:
        np.multiply(z, slope_factors(z > 0, slope, z.dtype), out=z)


def relu_in_place(z: np.ndarray) -> None:
    """z = z < 0 ? +0 : z, torch's relu (-0.0 and NaN stay; -inf gives +0, where z * 0 would give NaN)."""
    relu_values(z, out=z)


def relu_gradient(grad: np.ndarray, z: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """torch's relu backward (threshold_backward: 0 where relu(z) <= 0, else grad; grad * 0 would give -0 or NaN), into
    out (which may be z) or a new array."""
    return zero_where(z <= 0, grad, np.empty_like(grad) if out is None else out)


def _row_sums(planes: np.ndarray, other: np.ndarray | None, out: np.ndarray) -> None:
    """out = the sums per row of a (samples, channels, plane) block's values (or of their products with other's).
    einsum accumulates a row in its own dtype, in order; a row longer than _SEGMENT is summed in segments merged in
    out's float64 (see _sums_dtype), so that its error stays that of a segment (torch's and the kernel's are about
    one rounding)."""
    size = planes.shape[2]
    if out.dtype == planes.dtype:
        np.einsum("ncs->nc", planes, out=out) if other is None else np.einsum("ncs,ncs->nc", planes, other, out=out)
        return
    whole = size - size % _SEGMENT
    shape = (*planes.shape[:2], -1, _SEGMENT)
    if other is None:
        head = np.einsum("ncks->nck", planes[:, :, :whole].reshape(shape))
    else:
        head = np.einsum("ncks,ncks->nck", planes[:, :, :whole].reshape(shape), other[:, :, :whole].reshape(shape))
    np.add.reduce(head, axis=2, dtype=np.float64, out=out)
    # a tail of no values would add einsum's +0, which changes no sum of segments: einsum's sums start from +0, so
    # none is -0, nor is their total
    if whole < size:
        out += np.einsum("ncs->nc", planes[:, :, whole:]) if other is None else \
            np.einsum("ncs,ncs->nc", planes[:, :, whole:], other[:, :, whole:])


def _sums_dtype(dtype: np.dtype, size: int) -> np.dtype:
    """The row sums' dtype for planes of `size` values: a few segments' sums are kept in float64."""
    return dtype if size <= 2 * _SEGMENT else np.dtype(np.float64)


def _group_sums(per_row: np.ndarray, groups: int) -> np.ndarray:
    """(N, C) float64 row values summed per channel over the batch (groups 0: (C,)) or per sample and group (N, G)."""
    if groups:
        n, c = per_row.shape
        if c == groups:  # a sum of one value, as the reduction makes it: 0 + the value (-0.0 gives +0.0)
            return per_row + 0.0
        return per_row.reshape(n, groups, c // groups).sum(axis=2)
    return per_row.sum(axis=0)


def _per_row(values: np.ndarray, c: int, groups: int) -> np.ndarray:
    """Statistics (C,) or (N, G) as the (C,) or (N, C) constant of their rows."""
    return np.repeat(values, c // groups, axis=1) if groups and groups != c else values


def forward(y: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, slope: float, out: np.ndarray,
            relu: bool = False, groups: int = 0, centre_on_mean: bool = False):
    """BatchNorm2d (batch statistics) + LeakyReLU (or ReLU) of y (N, C, H, W), written into out (which may be y);
    `groups` >= 1: group (instance) statistics instead. Returns (mean, invstd, biased variance) in y's dtype, per
    channel (C,), or per sample and group (N, G). An inf in the batch gives NaN statistics, as torch's (quietly).
    `centre_on_mean`: out = act((y - mean) * (gamma * invstd) + beta) with the returned (rounded) statistics, the
    operations the backward from the conv output recovers z with, so that its activation branch is the forward's for
    every value (a z within a rounding of 0 of the shift's form could take the other one); its error, half a unit of
    the mean times the scale, is no more than torch's own. Otherwise centred on the shift, the offset in the bias:
    as accurate as the inputs allow, which the backward from the output (InPlace-ABN) needs to recover x-hat."""
    with quiet():
        return _forward(y, gamma, beta, eps, slope, out, relu, groups, centre_on_mean)


def _forward(y, gamma, beta, eps, slope, out, relu, groups, centre_on_mean):
    n, c = y.shape[:2]
    dtype = y.dtype
    size = math.prod(y.shape[2:])
    planes_in, planes_out = y.reshape(n, c, size), out.reshape(n, c, size)
    per_group = c // groups if groups else 1
    blocks = _blocks(n, c, size, per_group)
    count = (per_group if groups else n) * size
    slope = dtype.type(slope)
    if not groups and 0 < size < _SHORT_PLANE:
        return _forward_short_planes(planes_in, planes_out, gamma, beta, eps, slope, relu, centre_on_mean)
    sums, centred_sums, squares = (np.empty((n, c), _sums_dtype(dtype, size)) for _ in range(3))
    if _blocks_hold_groups(groups, per_group, size):
        return _forward_per_block(planes_in, planes_out, gamma, beta, eps, slope, relu, groups, blocks,
                                  (sums, centred_sums, squares), count, centre_on_mean)
    keep = len(blocks) == 1 and not centre_on_mean  # pass (2) leaves the centred values in out for pass (3)

    def row_sums(block) -> None:
        _row_sums(planes_in[block], None, sums[block])

    _for_blocks(blocks, row_sums)
    shift = _shift(sums, groups, count, dtype)
    spread_shift = _Spread(_per_row(shift, c, groups), size, n)

    def centred_moments(block) -> None:
        with spread_shift.buffers():
            centred = np.subtract(planes_in[block], spread_shift[block], out=planes_out[block] if keep else None)
        _row_sums(centred, None, centred_sums[block])
        _row_sums(centred, centred, squares[block])

    _for_blocks(blocks, centred_moments)
    mean, invstd, variance, row_scale, row_bias = _normalisation(shift, centred_sums, squares, groups, count, gamma,
                                                                 beta, eps)
    if centre_on_mean:
        spread_shift, row_bias = _Spread(_per_row(mean, c, groups), size, n), beta
    scale, bias = _Spread(row_scale, size, n), _Spread(row_bias, size, n)
    bias_is_zero = centre_on_mean and _is_positive_zero(beta)

    def normalise(block) -> None:
        target = planes_out[block]
        with scale.buffers():
            if not keep:
                np.subtract(planes_in[block], spread_shift[block], out=target)
            target *= scale[block]
            _add_and_activate(target, bias[block], bias_is_zero, relu, slope)

    _for_blocks(blocks, normalise)
    return mean, invstd, variance


def _forward_short_planes(planes_in, planes_out, gamma, beta, eps, slope, relu, centre_on_mean):
    """_forward with batch statistics over planes shorter than _SHORT_PLANE (a BatchNorm1d over (N, F) above all): the
    same operations on the same values, but each a NumPy pass over a run of channels of the (N, C * size) view (one
    run per thread, _channel_runs) with per-channel constants repeated over one sample's planes (a contiguous
    broadcast along rows), and the batch totals summed in float64 in the rows' order straight from the row sums. The
    blocks' passes make float64 copies of (N, C) row sums and broadcast over planes of a few values: for planes of one
    value, several times the cost of the normalisation."""
    n, c, size = planes_in.shape
    dtype = planes_in.dtype
    values, target = planes_in.reshape(n, c * size), planes_out.reshape(n, c * size)
    count = n * size
    statistics = tuple(np.empty(c, dtype) for _ in range(3))  # mean, invstd, variance
    bias_is_zero = centre_on_mean and _is_positive_zero(beta)

    def normalise(channels) -> None:
        columns = slice(channels.start * size, channels.stop * size)
        run_in, run_out = values[:, columns], target[:, columns]  # run_out may be run_in
        shift = _shift(_batch_totals(_short_plane_sums(run_in, None, size)), 0, count, dtype)
        centred = np.subtract(run_in, np.repeat(shift, size), out=None if centre_on_mean else run_out)
        centred_sums = _batch_totals(_short_plane_sums(centred, None, size))
        squares = _batch_totals(_short_plane_sums(centred, centred, size))
        mean, invstd, variance, scale, bias = _normalisation(shift, centred_sums, squares, 0, count, gamma[channels],
                                                             beta[channels], eps)
        if centre_on_mean:
            np.subtract(run_in, np.repeat(mean, size), out=run_out)
            bias = beta[channels]
        run_out *= np.repeat(scale, size)
        _add_and_activate(run_out, np.repeat(bias, size), bias_is_zero, relu, slope)
        for whole, run in zip(statistics, (mean, invstd, variance)):
            whole[channels] = run

    _for_blocks(_channel_runs(n, c, size), normalise)
    return statistics


def _channel_runs(n: int, c: int, size: int) -> list[slice]:
    """Runs of whole channels, one per thread for a tensor of several chunks: a channel's statistics are its own, and
    its rows are summed in their order on one thread."""
    runs = max(1, min(thread_count(), n * c * size // CHUNK, c))
    per = -(-c // runs) if c else 1
    return [slice(first, min(first + per, c)) for first in range(0, c, per)] or [slice(0, 0)]


def _short_plane_sums(values: np.ndarray, other: np.ndarray | None, size: int) -> np.ndarray:
    """The (N, C) sums per plane of a (N, C * size) view's values (or of their products with other's), as _row_sums
    makes them for short planes: its einsum; for planes of one value the values (or products) themselves."""
    if size == 1:
        return values if other is None else values * other
    planes = values.reshape(values.shape[0], values.shape[1] // size, size)  # -1 is ambiguous in an empty batch
    if other is None:
        return np.einsum("ncs->nc", planes)
    return np.einsum("ncs,ncs->nc", planes, other.reshape(planes.shape))


def _batch_totals(per_row: np.ndarray) -> np.ndarray:
    """The (1, C) float64 totals over the batch of (N, C) per-row sums, added in the rows' order from +0 (as einsum
    starts its sums), without the float64 copy of the rows."""
    return per_row.sum(axis=0, dtype=np.float64, keepdims=True, initial=0.0)


def _blocks_hold_groups(groups: int, per_group: int, size: int) -> bool:
    """Whether every block holds whole groups (see _blocks), so that one visit of a block can do all the passes."""
    return groups > 0 and (per_group == 1 or per_group * size <= CHUNK)


def _shift(sums: np.ndarray, groups: int, count: int, dtype: np.dtype) -> np.ndarray:
    """The statistics' estimate of the mean from the rows' sums: off by some units of the (large) float32 sums when
    the values sit far from 0. An empty batch: NaN."""
    return (_group_sums(sums.astype(np.float64), groups) / count).astype(dtype)


def _normalisation(shift, centred_sums, squares, groups, count, gamma, beta, eps):
    """(mean, invstd, variance) and the per-row (C,) or (N, C) scale and bias of out = centred * scale + bias, from
    the rows' sums of the centred values and of their squares (rows of `groups` groups, or of the batch's channels,
    or their batch totals as one row)."""
    dtype = shift.dtype
    c = centred_sums.shape[1]
    # the centred values are (nearly) exact and small: their sums give the mean's offset from the shift and the
    # variance without cancellation; an inf in the batch leaves the shift as it is and NaN moments
    offset = _group_sums(centred_sums.astype(np.float64), groups) / count
    offset = np.where(np.isfinite(offset), offset, 0)
    mean = (shift + offset).astype(dtype)
    square_sums = _group_sums(squares.astype(np.float64), groups)
    # squares whose sum overflows the dtype once rounded to it (float32: values near 1e19, torch's float32 sum is then
    # inf, whatever our partial sums did), or overflow themselves (values near float64's range): torch's variance is
    # inf, not inf - inf
    square_sums[np.isinf(square_sums.astype(dtype))] = np.inf
    square_mean = square_sums / count
    variance = np.maximum(np.where(square_mean == np.inf, square_mean, square_mean - offset ** 2), 0).astype(dtype)
    invstd = 1 / np.sqrt(variance + dtype.type(eps))
    row_scale = _per_row(invstd, c, groups) * gamma if groups else gamma * invstd
    # out = (y - shift - offset) * scale + beta: the offset (the rounding of the mean included) goes into the bias, so
    # that an output near 0 is as accurate as its inputs allow
    row_bias = (beta - _per_row(offset, c, groups) * row_scale).astype(dtype)
    return mean, invstd, variance, row_scale, row_bias


def _forward_per_block(planes_in, planes_out, gamma, beta, eps, slope, relu, groups, blocks, sums, count,
                       centre_on_mean):
    """_forward when every block holds whole groups: each block's statistics are its own, so a block is read from
    memory once and its three passes run while it is near the core (the same operations, in the same order)."""
    (n, c, size), dtype = planes_in.shape, planes_in.dtype
    per_group = c // groups
    sums, centred_sums, squares = sums
    mean, invstd, variance = (np.empty((n, groups), dtype) for _ in range(3))
    bias_is_zero = centre_on_mean and _is_positive_zero(beta)
    apart = not np.may_share_memory(planes_in, planes_out)

    def normalise(block) -> None:
        samples, channels = block
        block_groups = (channels.stop - channels.start) // per_group
        planes, target = planes_in[block], planes_out[block]  # target may be planes
        _row_sums(planes, None, sums[block])
        shift = _shift(sums[block], block_groups, count, dtype)
        rows = shift.shape[1] * per_group
        # the centred values go into target, which centring on the mean overwrites later, unless target is planes,
        # which that reads again (a temporary then)
        with column_buffers(size):
            centred = np.subtract(planes, _columns(_per_row(shift, rows, block_groups), size),
                                  out=None if centre_on_mean and not apart else target)
        _row_sums(centred, None, centred_sums[block])
        _row_sums(centred, centred, squares[block])
        statistics = _normalisation(shift, centred_sums[block], squares[block], block_groups, count,
                                    gamma[channels], beta[channels], eps)
        in_groups = samples, slice(channels.start // per_group, channels.stop // per_group)
        mean[in_groups], invstd[in_groups], variance[in_groups] = statistics[:3]
        with column_buffers(size):
            bias = statistics[4]
            if centre_on_mean:
                np.subtract(planes, _columns(_per_row(statistics[0], rows, block_groups), size), out=target)
                bias = beta[None, channels]
            target *= _columns(statistics[3], size)
            _add_and_activate(target, _columns(bias, size), bias_is_zero, relu, slope)

    _for_blocks(blocks, normalise)
    return mean, invstd, variance


def backward(grad_out: np.ndarray, saved: np.ndarray, saved_is_result: bool, gamma: np.ndarray,
             beta: np.ndarray, mean: np.ndarray, invstd: np.ndarray, slope: float, grad_y: np.ndarray,
             relu: bool = False, groups: int = 0):
    """Gradient of the BatchNorm + LeakyReLU (or ReLU) part, written into grad_y (which may be grad_out). `saved` is
    the output when saved_is_result (then slope > 0, no relu, and gamma has no zero), else the conv output;
    `groups` >= 1: group statistics, mean and invstd (N, G). Returns (grad_gamma, grad_beta) in the arrays' dtype."""
    with quiet():
        return _backward(grad_out, saved, saved_is_result, gamma, beta, mean, invstd, slope, grad_y, relu, groups)


def _backward(grad_out, saved, saved_is_result, gamma, beta, mean, invstd, slope, grad_y, relu, groups):
    n, c = grad_out.shape[:2]
    dtype = grad_out.dtype
    size = math.prod(grad_out.shape[2:])
    planes_grad, planes_saved, planes_result = (a.reshape(n, c, size) for a in (grad_out, saved, grad_y))
    slope = dtype.type(slope)
    if size == 0:  # planes of no values: nothing to write, and the parameters' gradients are sums over nothing
        # (taken here: two full-suite runs read recycled memory there, through either path, in 4 of 4 channels)
        return np.zeros(c, dtype), np.zeros(c, dtype)
    if not groups and 0 < size < _SHORT_PLANE:
        return _backward_short_planes(planes_grad, planes_saved, saved_is_result, gamma, beta, mean, invstd, slope,
                                      planes_result, relu)
    row_invstd = _per_row(invstd.astype(np.float64), c, groups)  # (C,) or (N, C)
    if saved_is_result:  # z = output / LeakyReLU'; u = z - beta = gamma * x-hat
        u_to_xhat = 1 / gamma
        recover, recover_u = _recovery(planes_grad, planes_saved, True, _Spread(beta, size, n), None, None, slope,
                                       relu, beta)
    else:  # u = y - mean = x-hat / invstd; z = u * gamma * invstd + beta
        u_to_xhat = row_invstd
        recover, recover_u = _recovery(planes_grad, planes_saved, False, _Spread(_per_row(mean, c, groups), size, n),
                                       _Spread((row_invstd * gamma).astype(dtype), size, n), _Spread(beta, size, n),
                                       slope, relu, beta)
    per_group = c // groups if groups else 1
    blocks = _blocks(n, c, size, per_group)
    sums_dtype = _sums_dtype(dtype, size)
    sums = tuple(np.empty((n, c), sums_dtype) for _ in range(3))  # of dz, dz * u and u
    if _blocks_hold_groups(groups, per_group, size):
        return _backward_per_block(recover, planes_result, saved_is_result, gamma, u_to_xhat, row_invstd, groups,
                                   blocks, sums, (planes_grad, planes_saved),
                                   u_in_result=saved_is_result or relu or slope != 1)
    kept = {}  # a tensor of one block: (dz, u) of pass (1) for pass (2)

    def reduce(block) -> None:
        # dz goes where the block's gradient will (grad_out's block may be that place: pass (2) reads dz instead),
        # so that pass (2) recovers only u
        dz, u = recover(block, planes_result[block])
        _reduce(dz, u, saved_is_result, tuple(row_sums[block] for row_sums in sums))
        if len(blocks) == 1:
            kept[0] = dz, u

    _for_blocks(blocks, reduce)
    sums_dz, sums_dz_u, centre = _centred(sums, saved_is_result, groups, (per_group if groups else n) * size)
    if groups:
        grad_gamma, grad_beta = _group_gradients(sums_dz, sums_dz_u, u_to_xhat, size)
        p, q, r = _group_factors(sums_dz, sums_dz_u, u_to_xhat, gamma, row_invstd, size, per_group, dtype)
    else:
        grad_gamma, grad_beta, p, q, r = _batch_factors(sums_dz, sums_dz_u, u_to_xhat, gamma, invstd, n * size,
                                                        dtype)
    r = (r - q.astype(np.float64) * centre).astype(dtype)
    p, q, r = (_Spread(factor, size, n) for factor in (p, q, r))

    def combine(block) -> None:
        if kept:
            dz, u = kept.pop(0)
        else:
            dz, u = planes_result[block], recover_u(block)
            if not relu and slope == 1 and not saved_is_result:  # dz is grad_out (see _recovery), not yet written
                dz = planes_grad[block].view()
                dz.flags.writeable = False
        _combine(dz, u, p[block], q[block], r[block], planes_result[block], p.buffers())

    _for_blocks(blocks, combine)
    return grad_gamma.astype(dtype), grad_beta.astype(dtype)


def _backward_short_planes(planes_grad, planes_saved, saved_is_result, gamma, beta, mean, invstd, slope,
                           planes_result, relu):
    """_backward with batch statistics over planes shorter than _SHORT_PLANE, as _forward_short_planes: each pass over
    a run of channels of the (N, C * size) views with per-channel constants repeated over one sample's planes, the
    row sums' batch totals in float64 in the rows' order. The u of a conv output is centred on the totals (sum(dz u)
    - centre sum(dz)), not row by row: the same float64 accuracy, not the same bits as the blocks' passes."""
    n, c, size = planes_grad.shape
    dtype = planes_grad.dtype
    grad, saved, result = (a.reshape(n, c * size) for a in (planes_grad, planes_saved, planes_result))
    count = n * size
    grad_gamma, grad_beta = np.empty(c, dtype), np.empty(c, dtype)

    def backward_run(channels) -> None:
        columns = slice(channels.start * size, channels.stop * size)
        run_grad, run_saved, run_result = grad[:, columns], saved[:, columns], result[:, columns]
        run_gamma, run_beta = gamma[channels], beta[channels]
        if saved_is_result:  # as _backward
            u_to_xhat = 1 / run_gamma
            recover = _recovery(run_grad, run_saved, True, _Repeated(run_beta, size), None, None, slope, relu,
                                run_beta)[0]
        else:
            u_to_xhat = invstd[channels].astype(np.float64)
            recover = _recovery(run_grad, run_saved, False, _Repeated(mean[channels], size),
                                _Repeated((u_to_xhat * run_gamma).astype(dtype), size), _Repeated(run_beta, size),
                                slope, relu, run_beta)[0]
        dz, u = recover(...)
        totals = [_batch_totals(_short_plane_sums(dz, None, size)), _batch_totals(_short_plane_sums(dz, u, size))]
        if not saved_is_result:
            totals.append(_batch_totals(_short_plane_sums(u, None, size)))
        sums_dz, sums_dz_u, centre = _centred(totals, saved_is_result, 0, count)
        grad_gamma[channels], grad_beta[channels], p, q, r = _batch_factors(
            sums_dz, sums_dz_u, u_to_xhat, run_gamma, invstd[channels], count, dtype)
        r = (r - q.astype(np.float64) * centre).astype(dtype)
        _combine(dz, u, *(np.repeat(factor, size) for factor in (p, q, r)), run_result, nullcontext())

    _for_blocks(_channel_runs(n, c, size), backward_run)
    return grad_gamma, grad_beta


class _Repeated:
    """A per-channel (C,) constant repeated over one sample's planes of `size` values, for _recovery over (N, C * size)
    views: it broadcasts along their rows, a contiguous pass."""

    def __init__(self, values: np.ndarray, size: int):
        self.array = np.repeat(values, size)

    def buffers(self):
        return nullcontext()

    def __getitem__(self, block) -> np.ndarray:
        return self.array


def _reduce(dz, u, saved_is_result, sums) -> None:
    """Pass (1)'s row sums of a block, into `sums` (of dz, dz * u and, for a conv output, u)."""
    _row_sums(dz, None, sums[0])
    _row_sums(dz, u, sums[1])
    if not saved_is_result:
        _row_sums(u, None, sums[2])


def _centred(sums, saved_is_result, groups, count):
    """The float64 row sums of dz and dz * u, the latter for u centred exactly, and the centre (per row, or 0)."""
    sums_dz, sums_dz_u = sums[0].astype(np.float64), sums[1].astype(np.float64)
    centre = 0
    if not saved_is_result:
        # y - mean does not sum to 0 over the statistics' values (the mean is rounded): the gradient would not sum to
        # 0 either, and a conv weight's gradient (its input times it) can be off by far more than itself (an input far
        # from 0, a small spread). Centre u exactly: u - centre, its sums corrected and R - Q centre below.
        c = sums_dz.shape[1]
        centre = _per_row(_group_sums(sums[2].astype(np.float64), groups) / count, c, groups)
        centre = np.where(np.isfinite(centre), centre, 0)  # an empty batch, or NaN statistics: as they are
        sums_dz_u -= centre * sums_dz
    return sums_dz, sums_dz_u, centre


def _combine(dz, u, p, q, r, result, buffers) -> None:
    """result = (P dz + Q u) + R, u overwritten and dz too unless it is grad_out's block (no activation: then it is
    read once, into result, which may be that same block)."""
    with buffers:
        u *= q
        if dz.flags.writeable:
            dz *= p
            dz += u
            np.add(dz, r, out=result)  # written last: result may be grad_out's block
        else:
            np.multiply(dz, p, out=result)
            result += u
            result += r


def _backward_per_block(recover, planes_result, saved_is_result, gamma, u_to_xhat, row_invstd, groups, blocks,
                        sums, inputs, u_in_result):
    """_backward when every block holds whole groups: a block's factors need only its own sums, so it is recovered
    once and combined while it is near the core (the same operations, in the same order)."""
    (n, c, size), dtype = planes_result.shape, planes_result.dtype
    per_group = c // groups
    sums_dz, sums_dz_u = (np.empty((n, c)) for _ in range(2))  # float64, centred: for the gradients
    u_in_result = u_in_result and not any(np.may_share_memory(planes_result, planes) for planes in inputs)

    def reduce_and_combine(block) -> None:
        samples, channels = block
        block_groups = (channels.stop - channels.start) // per_group
        # u in the block's gradient place, which _combine writes last (a temporary less near the core), unless that
        # place is an input, or grad_out is dz itself (no activation), which _combine multiplies into it first
        dz, u = recover(block, None, planes_result[block] if u_in_result else None)
        _reduce(dz, u, saved_is_result, tuple(row_sums[block] for row_sums in sums))
        block_dz, block_dz_u, centre = _centred(tuple(row_sums[block] for row_sums in sums), saved_is_result,
                                                block_groups, per_group * size)
        sums_dz[block], sums_dz_u[block] = block_dz, block_dz_u
        block_u_to_xhat = u_to_xhat[channels] if saved_is_result else u_to_xhat[block]
        p, q, r = _group_factors(block_dz, block_dz_u, block_u_to_xhat, gamma[channels], row_invstd[block], size,
                                 per_group, dtype)
        r = (r - q.astype(np.float64) * centre).astype(dtype)
        _combine(dz, u, _columns(p, size), _columns(q, size), _columns(r, size), planes_result[block],
                 column_buffers(size))

    _for_blocks(blocks, reduce_and_combine)
    grad_gamma, grad_beta = _group_gradients(sums_dz, sums_dz_u, u_to_xhat, size)
    return grad_gamma.astype(dtype), grad_beta.astype(dtype)


def _recovery(planes_grad, planes_saved, saved_is_result, shift, scale, bias, slope, relu, beta):
    """recover(block, dz_out=None, u_out=None) -> (dz, u) of a block: dz is grad_out through the activation (written
    into dz_out when given, unless it is grad_out itself), u into u_out when given; u = z - beta from the output, or
    y - mean from the conv output, with the spread constants `shift` (beta, or the mean), `scale` (gamma * invstd)
    and `bias` (beta). recover_u(block, out=None) -> u alone. A zero beta costs no pass: z - (+0) is z, bit for bit,
    and z = u * scale + (+-0) has the sign (and is 0) where u * scale has (is), which is all the activation's
    gradient reads of z."""
    beta_is_zero, beta_is_positive_zero = _is_zero(beta), _is_positive_zero(beta)

    def recover_u(block, out=None):
        if saved_is_result:  # slope > 0: z = output where output > 0, else output / slope
            kept = planes_saved[block]
            u = np.divide(kept, slope, out=out)
            (np.minimum if slope <= 1 else np.maximum)(kept, u, out=u)
            if not beta_is_positive_zero:
                u -= shift[block]
            return u
        return np.subtract(planes_saved[block], shift[block], out=out)

    def recover(block, dz_out=None, u_out=None):
        u = recover_u(block, u_out)
        if saved_is_result:
            return _leaky_relu_gradient(planes_saved[block] > 0, planes_grad[block], slope, dz_out), u
        if not relu and slope == 1:  # grad_out * 1 is grad_out: its block, read-only (see _combine)
            dz = planes_grad[block].view()
            dz.flags.writeable = False
            return dz, u
        z = u * scale[block]
        if not beta_is_zero:
            z += bias[block]
        if relu:
            return relu_gradient(planes_grad[block], z, out=z if dz_out is None else dz_out), u
        return _leaky_relu_gradient(z > 0, planes_grad[block], slope, dz_out), u

    def in_buffers(function):
        def run(*args):
            with shift.buffers():
                return function(*args)

        return run

    return in_buffers(recover), in_buffers(recover_u)


def _leaky_relu_gradient(positive: np.ndarray, grad: np.ndarray, slope, out: np.ndarray | None) -> np.ndarray:
    """grad * (1 where positive, else slope), into out (which may be grad) or a new array."""
    factors = slope_factors(positive, slope, grad.dtype)
    return np.multiply(factors, grad, out=factors if out is None else out)


def _batch_factors(sums_dz, sums_dz_u, u_to_xhat, gamma, invstd, count, dtype):
    """(grad_gamma, grad_beta) and the per-channel P, Q, R of grad_y = P dz + Q u + R from the (N, C) row sums (or
    their batch totals as one row) of `count` values per channel, with batch statistics: grad_y = k (dz - mean(dz) -
    x-hat mean(dz x-hat)), k = gamma * invstd, x-hat = u * u_to_xhat."""
    grad_beta = sums_dz.sum(axis=0)
    # an empty batch has NaN statistics (u_to_xhat may be NaN): its gradients are sums over nothing, 0
    grad_gamma = sums_dz_u.sum(axis=0) * (u_to_xhat if count else 0)
    k = gamma.astype(np.float64) * invstd
    return (grad_gamma, grad_beta, k.astype(dtype), (-k * u_to_xhat * grad_gamma / count).astype(dtype),
            (-k * grad_beta / count).astype(dtype))


def _group_gradients(sums_dz, sums_dz_u, u_to_xhat, size):
    """(grad_gamma, grad_beta) from the (N, C) row sums with group statistics (u_to_xhat per channel or (N, C))."""
    sums_dz_xhat = sums_dz_u * (u_to_xhat if size else 0)  # a plane of no values: NaN statistics, sums of nothing
    return sums_dz_xhat.sum(axis=0), sums_dz.sum(axis=0)


def _group_factors(sums_dz, sums_dz_u, u_to_xhat, gamma, row_invstd, size, per_group, dtype):
    """The per-row P, Q, R of grad_y = P dz + Q u + R with group statistics, from rows of whole groups: per (sample,
    group) of m = C/G * size values, A = mean(gamma dz) and B = mean(gamma dz x-hat), grad_y = invstd (gamma dz - A -
    x-hat B); u_to_xhat is per channel or per row, the factors per row."""
    gamma = gamma.astype(np.float64)
    sums_dz_xhat = sums_dz_u * (u_to_xhat if size else 0)
    count = per_group * size
    groups = sums_dz.shape[1] // per_group
    a = _per_row(_group_sums(sums_dz * gamma, groups) / count, per_group * groups, groups)
    b = _per_row(_group_sums(sums_dz_xhat * gamma, groups) / count, per_group * groups, groups)
    return ((row_invstd * gamma).astype(dtype), (-row_invstd * b * u_to_xhat).astype(dtype),
            (-row_invstd * a).astype(dtype))
