"""NumPy reference kernels for LeakyReLU and RReLU: the oracle every other backend is checked against.

Every function takes contiguous arrays of one floating dtype (float64, float32, float16 or
ml_dtypes.bfloat16) and writes into `out`, which may be the input itself (in-place). Half types are
computed in float32 and rounded to nearest even once, like torch's CPU kernels and our AscendC kernels.
The positive branch is `x > 0` (so -0.0, NaN and the gradient at 0 take the negative branch).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from . import rng
from .parallel import for_chunks


def quiet() -> np.errstate:
    """IEEE results without NumPy's RuntimeWarnings (torch's kernels are silent): inf * 0, NaN, and the overflow
    of a rounding to float16/bfloat16. errstate is thread-local: a new one is entered in each chunk's body."""
    return np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore")


# slopes(start, stop, dtype) -> the slopes of flat elements start..stop-1 (a scalar or an array)
Slopes = Callable[[int, int, np.dtype], "np.ndarray | np.generic"]


def compute_dtype(dtype) -> np.dtype:
    """float64 stays float64; everything else is computed in float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _take_where(mask: np.ndarray, source: np.ndarray, target: np.ndarray) -> None:
    """target[mask] = source[mask], exactly, by bit blending: NumPy's masked copy (copyto with
    where=) is some 40x slower than a plain pass when the mask is random, as activations' are."""
    int_type = np.int64 if target.dtype == np.float64 else np.int32
    bits = mask.view(np.int8).astype(int_type)
    np.negative(bits, out=bits)  # 0 or all ones
    target_bits = target.view(int_type)
    difference = np.bitwise_xor(target_bits, source.view(int_type))
    difference &= bits
    target_bits ^= difference


def slope_factors(positive: np.ndarray, slope, dtype) -> np.ndarray:
    """1 where positive, else slope, in dtype: the LeakyReLU derivative, so that x * factor is exactly
    x > 0 ? x : x * slope. For +0 <= slope <= 1 by arithmetic, which is exact: (1 - s) + s rounds to 1; not for
    -0.0, which 0 * (1 - s) + s would turn into +0.0 (torch's grad * -0.0 flips the gradient's sign)."""
    dtype = np.dtype(dtype)
    slope = dtype.type(slope)
    factors = positive.astype(dtype)
    if not np.signbit(slope) and slope <= 1:
        factors *= dtype.type(1) - slope
        factors += slope
    else:
        _take_where(~positive, np.full_like(factors, slope), factors)
    return factors


def leaky_relu_values(values: np.ndarray, slope) -> np.ndarray:
    """values > 0 ? values : values * slope (a new array), exactly, for a constant slope of values' dtype."""
    scaled = values * slope
    if 0 < slope <= 1:  # values > 0: values >= values * slope; otherwise the reverse; NaN propagates
        np.maximum(values, scaled, out=scaled)
    elif slope > 1:
        np.minimum(values, scaled, out=scaled)
    else:
        _take_where(values > 0, values, scaled)
    return scaled


def _select(values, test, slopes: Slopes, out) -> None:
    """out = test > 0 ? values : values * slope, in the compute dtype, rounded once to out's dtype."""
    ctype = compute_dtype(values.dtype)
    values, test, out = values.reshape(-1), test.reshape(-1), out.reshape(-1)

    def body(start: int, stop: int) -> None:
        with quiet():
            v = values[start:stop].astype(ctype, copy=False)
            result = np.multiply(v, slopes(start, stop, ctype))
            _take_where(test[start:stop] > 0, v, result)
            out[start:stop] = result  # last, so `out` may alias `values` or `test`

    for_chunks(values.size, body)


def _noise(seed: int, lower: float, upper: float) -> Slopes:
    keys = rng.round_keys(seed)
    return lambda start, stop, ctype: rng.noise_range(keys, start, stop, lower, upper, ctype)


def leaky_relu(x, negative_slope: float, out) -> None:
    ctype = compute_dtype(x.dtype)
    slope = ctype.type(negative_slope)
    x, out = x.reshape(-1), out.reshape(-1)

    def body(start: int, stop: int) -> None:
        with quiet():
            out[start:stop] = leaky_relu_values(x[start:stop].astype(ctype, copy=False), slope)

    for_chunks(x.size, body)


def leaky_relu_backward(grad, saved, negative_slope: float, out) -> None:
    """saved is the input, or the output when negative_slope >= 0 (same sign pattern)."""
    ctype = compute_dtype(grad.dtype)
    grad, saved, out = grad.reshape(-1), saved.reshape(-1), out.reshape(-1)

    def body(start: int, stop: int) -> None:
        with quiet():
            factors = slope_factors(saved[start:stop] > 0, negative_slope, ctype)
            factors *= grad[start:stop].astype(ctype, copy=False)
            out[start:stop] = factors  # last, so `out` may alias `grad` or `saved`

    for_chunks(grad.size, body)


def rrelu(x, lower: float, upper: float, seed: int, out) -> None:
    """RReLU training forward: x for x > 0, x * noise(seed, flat index) otherwise."""
    _select(x, x, _noise(seed, lower, upper), out)


def rrelu_backward(grad, saved, lower: float, upper: float, seed: int, out) -> None:
    """Regenerates the noise from the seed: no noise tensor is kept between forward and backward."""
    _select(grad, saved, _noise(seed, lower, upper), out)
