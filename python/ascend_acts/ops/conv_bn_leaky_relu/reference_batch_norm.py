"""The BatchNorm + LeakyReLU part of the fused block as the reference backend runs it: NumPy, in two passes.

reference.py's train_forward/train_backward are the float64 oracle, written for clarity (whole-array expressions);
these kernels compute the same in one compute dtype (float32, or float64) for speed. The (N, C, H, W) arrays are
seen as N*C rows of H*W elements and walked in cache-sized blocks of rows on numerics.parallel's threads, so each
pass reads memory once and its temporaries stay near the core:
- forward: (1) per row its sum and its centred sum of squares, merged per channel by Chan's formula (one
  read, no E[y^2] - E[y]^2 cancellation); (2) out = LeakyReLU((y - mean) * gamma * invstd + beta).
- backward (InPlace-ABN): (1) per row the sums of dz and dz * u, where dz is grad_out through the LeakyReLU
  and u is x-hat up to a per-row factor, both recovered from what was kept (the output, or the conv
  output); (2) grad_y = P dz + Q u + R with per-row P, Q, R.
`groups` (norm_groups) G >= 1 normalises per sample over groups of C/G channels (InstanceNorm: G == C, GroupNorm):
a group is C/G consecutive rows, so the same row passes serve, only the merges and the per-row factors differ; the
statistics are then (N, G).
Row sums use einsum (its own SIMD loops): BLAS gemv is faster alone but starts threads of its own inside
ours.
"""

from __future__ import annotations

import numpy as np

from ...numerics.elementwise import slope_factors
from ...numerics.parallel import CHUNK, for_chunks


def _for_rows(rows: int, row_size: int, body) -> None:
    for_chunks(rows, body, chunk=max(1, CHUNK // max(row_size, 1)))


def _row_size(a: np.ndarray) -> int:
    return int(np.prod(a.shape[2:]))


def _per_row(values: np.ndarray, batch: int) -> np.ndarray:
    """A per-channel vector as a column over the N*C rows (row n*C + c has channel c)."""
    return np.tile(values, batch)[:, None]


def _per_group_row(values: np.ndarray, rows_per_group: int) -> np.ndarray:
    """A per-(sample, group) (N, G) array as a column over the N*C rows (group g of sample n: C/G rows)."""
    return np.repeat(values.reshape(-1), rows_per_group)[:, None]


def _row_sums(block: np.ndarray, out: np.ndarray) -> None:
    np.einsum("ij->i", block, out=out)


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
    np.copyto(z, 0, where=z < 0)


def relu_gradient(grad: np.ndarray, z: np.ndarray) -> np.ndarray:
    """torch's relu backward (threshold_backward: 0 where relu(z) <= 0, else grad; grad * 0 would give -0 or NaN)."""
    return np.where(z <= 0, grad.dtype.type(0), grad)


def forward(y: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, slope: float, out: np.ndarray,
            relu: bool = False, groups: int = 0):
    """BatchNorm2d (batch statistics) + LeakyReLU (or ReLU) of y (N, C, H, W), written into out (which may be y);
    `groups` >= 1: group (instance) statistics instead. Returns (mean, invstd, biased variance) in y's dtype, per
    channel (C,), or per sample and group (N, G)."""
    n, c = y.shape[:2]
    dtype = y.dtype
    size = _row_size(y)
    rows_in, rows_out = y.reshape(n * c, size), out.reshape(n * c, size)
    sums, squares = np.empty(n * c, dtype), np.empty(n * c, dtype)

    def statistics(start: int, stop: int) -> None:
        block = rows_in[start:stop]
        with np.errstate(invalid="ignore", over="ignore"):  # an inf in the batch: inf - inf = NaN, as torch (quietly)
            _row_sums(block, sums[start:stop])
            centred = block - (sums[start:stop] / dtype.type(max(size, 1)))[:, None]
            np.einsum("ij,ij->i", centred, centred, out=squares[start:stop])

    _for_rows(n * c, size, statistics)
    with np.errstate(invalid="ignore", over="ignore"):
        if groups:  # a group's rows are the merge's rows: (C/G, N*G)
            per_group = c // groups
            mean, variance = _merge(sums.reshape(n * groups, per_group).T, squares.reshape(n * groups, per_group).T,
                                    size)
            mean, variance = mean.reshape(n, groups), variance.reshape(n, groups)
        else:
            mean, variance = _merge(sums.reshape(n, c), squares.reshape(n, c), size)
        mean, variance = mean.astype(dtype), variance.astype(dtype)
        invstd = 1 / np.sqrt(variance + dtype.type(eps))
    if groups:
        shift = _per_group_row(mean, per_group)
        scale = (np.repeat(invstd, per_group, axis=1) * gamma).reshape(-1, 1)
    else:
        shift, scale = _per_row(mean, n), _per_row(gamma * invstd, n)
    bias, slope = _per_row(beta, n), dtype.type(slope)

    def normalise(start: int, stop: int) -> None:
        block = rows_out[start:stop]
        np.subtract(rows_in[start:stop], shift[start:stop], out=block)
        block *= scale[start:stop]
        block += bias[start:stop]
        if relu:
            relu_in_place(block)
        else:
            _leaky_relu_in_place(block, slope)

    with np.errstate(invalid="ignore", over="ignore"):
        _for_rows(n * c, size, normalise)
    return mean, invstd, variance


def _merge(sums: np.ndarray, squares: np.ndarray, size: int):
    """Mean and biased variance per column from row sums and centred sums of squares of `size` elements each
    (Chan et al.; BatchNorm's columns are the channels, its rows the samples), in float64. An empty batch gives NaN,
    as a mean over nothing."""
    with np.errstate(invalid="ignore", divide="ignore"):
        sums, squares = sums.astype(np.float64), squares.astype(np.float64)
        count = sums.shape[0] * size
        mean = sums.sum(axis=0) / count
        row_means = sums / size if size else np.zeros_like(sums)
        spread = squares.sum(axis=0) + size * ((row_means - mean) ** 2).sum(axis=0)
        return mean, spread / count


def backward(grad_out: np.ndarray, saved: np.ndarray, saved_is_result: bool, gamma: np.ndarray,
             beta: np.ndarray, mean: np.ndarray, invstd: np.ndarray, slope: float, grad_y: np.ndarray,
             relu: bool = False, groups: int = 0):
    """Gradient of the BatchNorm + LeakyReLU (or ReLU) part, written into grad_y (which may be grad_out). `saved` is
    the output when saved_is_result (then slope > 0, no relu, and gamma has no zero), else the conv output;
    `groups` >= 1: group statistics, mean and invstd (N, G). Returns (grad_gamma, grad_beta) in the arrays' dtype."""
    n, c = grad_out.shape[:2]
    dtype = grad_out.dtype
    size = _row_size(grad_out)
    rows_grad, rows_saved, rows_result = (a.reshape(n * c, size) for a in (grad_out, saved, grad_y))
    slope = dtype.type(slope)
    per_group = c // groups if groups else 0
    if saved_is_result:  # z = output / LeakyReLU'; u = z - beta = gamma * x-hat
        u_to_xhat = 1 / gamma
        recover = _recovery(rows_grad, rows_saved, True, _per_row(beta, n), None, None, slope, relu)
    elif groups:  # u = y - mean = x-hat / invstd, per group
        u_to_xhat = np.repeat(invstd.astype(np.float64), per_group, axis=1)  # (N, C)
        recover = _recovery(rows_grad, rows_saved, False, _per_group_row(mean, per_group),
                            (u_to_xhat * gamma).astype(dtype).reshape(-1, 1), _per_row(beta, n), slope, relu)
    else:  # u = y - mean = x-hat / invstd; z = u * gamma * invstd + beta
        u_to_xhat = invstd
        recover = _recovery(rows_grad, rows_saved, False, _per_row(mean, n), _per_row(gamma * invstd, n),
                            _per_row(beta, n), slope, relu)
    sums_dz, sums_dz_u = np.empty(n * c, dtype), np.empty(n * c, dtype)

    def reduce(start: int, stop: int) -> None:
        dz, u = recover(start, stop)
        _row_sums(dz, sums_dz[start:stop])
        np.einsum("ij,ij->i", dz, u, out=sums_dz_u[start:stop])

    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        _for_rows(n * c, size, reduce)
        sums_dz, sums_dz_u = sums_dz.reshape(n, c).astype(np.float64), sums_dz_u.reshape(n, c).astype(np.float64)
        if groups:
            grad_gamma, grad_beta, p, q, r = _group_factors(sums_dz, sums_dz_u, u_to_xhat, gamma, invstd, size,
                                                            per_group, dtype)
        else:
            grad_gamma, grad_beta, p, q, r = _batch_factors(sums_dz, sums_dz_u, u_to_xhat, gamma, invstd, size,
                                                            dtype)

        def combine(start: int, stop: int) -> None:
            dz, u = recover(start, stop)
            block = rows_result[start:stop]  # written last: grad_y may be grad_out
            u *= q[start:stop]
            dz *= p[start:stop]
            dz += u
            np.add(dz, r[start:stop], out=block)

        _for_rows(n * c, size, combine)
    return grad_gamma.astype(dtype), grad_beta.astype(dtype)


def _recovery(rows_grad, rows_saved, saved_is_result, shift, scale, bias, slope, relu):
    """recover(start, stop) -> (dz, u) of a block of rows: dz is grad_out through the activation; u = z - beta from
    the output, or y - mean from the conv output, with the per-row columns `shift` (beta, or the mean), `scale`
    (gamma * invstd) and `bias` (beta)."""
    dtype = rows_grad.dtype

    def recover(start: int, stop: int):
        if saved_is_result:
            kept = rows_saved[start:stop]
            factors = slope_factors(kept > 0, slope, dtype)
            u = kept / factors
            u -= shift[start:stop]
            return rows_grad[start:stop] * factors, u
        u = rows_saved[start:stop] - shift[start:stop]
        z = u * scale[start:stop]
        z += bias[start:stop]
        if relu:
            return relu_gradient(rows_grad[start:stop], z), u
        return rows_grad[start:stop] * slope_factors(z > 0, slope, dtype), u

    return recover


def _batch_factors(sums_dz, sums_dz_u, u_to_xhat, gamma, invstd, size, dtype):
    """(grad_gamma, grad_beta) and the per-row P, Q, R of grad_y = P dz + Q u + R from the (N, C) row sums, with batch
    statistics: grad_y = k (dz - mean(dz) - x-hat mean(dz x-hat)), k = gamma * invstd, x-hat = u * u_to_xhat."""
    n = sums_dz.shape[0]
    grad_beta = sums_dz.sum(axis=0)
    count = n * size
    # an empty batch has NaN statistics (u_to_xhat may be NaN): its gradients are sums over nothing, 0
    grad_gamma = sums_dz_u.sum(axis=0) * (u_to_xhat if count else 0)
    k = gamma.astype(np.float64) * invstd
    p = _per_row(k.astype(dtype), n)
    q = _per_row((-k * u_to_xhat * grad_gamma / count).astype(dtype), n)
    r = _per_row((-k * grad_beta / count).astype(dtype), n)
    return grad_gamma, grad_beta, p, q, r


def _group_factors(sums_dz, sums_dz_u, u_to_xhat, gamma, invstd, size, per_group, dtype):
    """_batch_factors with group statistics: per (sample, group) of m = C/G * size values, A = mean(gamma dz) and
    B = mean(gamma dz x-hat), grad_y = invstd (gamma dz - A - x-hat B); u_to_xhat is per channel or (N, C)."""
    n, c = sums_dz.shape
    groups = c // per_group
    gamma = gamma.astype(np.float64)
    sums_dz_xhat = sums_dz_u * (u_to_xhat if size else 0)  # a plane of no values: NaN statistics, sums of nothing
    grad_beta, grad_gamma = sums_dz.sum(axis=0), sums_dz_xhat.sum(axis=0)
    count = per_group * size
    a = (sums_dz * gamma).reshape(n, groups, per_group).sum(axis=2) / count
    b = (sums_dz_xhat * gamma).reshape(n, groups, per_group).sum(axis=2) / count
    row_invstd = np.repeat(invstd.astype(np.float64), per_group, axis=1)
    p = (row_invstd * gamma).astype(dtype).reshape(-1, 1)
    q = (-np.repeat(invstd * b, per_group, axis=1) * u_to_xhat).astype(dtype).reshape(-1, 1)
    r = (-np.repeat(invstd * a, per_group, axis=1)).astype(dtype).reshape(-1, 1)
    return grad_gamma, grad_beta, p, q, r
