"""The LeakyReLU (and ReLU) building blocks of the NumPy references (leaky_relu, rrelu, fused bias, BatchNorm +
LeakyReLU): exact, quiet IEEE arithmetic on arrays, the ufunc buffer size that keeps column broadcasts fast, and the
glue that runs an array kernel on tensors.

Half types are computed in float32 and rounded to nearest even once, like torch's CPU kernels and our AscendC
kernels. The positive branch is `x > 0` (so -0.0, NaN and the gradient at 0 take the negative branch).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable

import numpy as np
import torch

from .dtypes import to_array


def quiet() -> np.errstate:
    """IEEE results without NumPy's RuntimeWarnings (torch's kernels are silent): inf * 0, NaN, and the overflow
    of a rounding to float16/bfloat16. errstate is thread-local: a new one is entered in each chunk's body."""
    return np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore")


# NumPy (2.x) runs a ufunc whose operand broadcasts a column over rows of at most half its buffer size (8192 values
# by default) some 3x slower than over longer rows; with a buffer of this many values, rows of >= 256 values go at a
# contiguous pass's speed. Only the speed depends on the buffer size.
_SHORT_BUFFER = 256


class _BufferSize:
    """Sets NumPy's ufunc buffer size (thread-local) for the with-block."""

    def __init__(self, size: int):
        self.size = size

    def __enter__(self) -> None:
        self.old = np.setbufsize(self.size)

    def __exit__(self, *exc) -> None:
        np.setbufsize(self.old)


def column_buffers(row: int):
    """A context in which elementwise ufuncs broadcast a per-row constant (a column) over rows of `row` values at a
    contiguous pass's speed: a shorter ufunc buffer where NumPy's would make it slow, else nothing. Keep reductions
    that cast out of it: they are buffered too, and their rounding could depend on the buffer size."""
    if _SHORT_BUFFER <= row <= np.getbufsize() // 2:
        return _BufferSize(_SHORT_BUFFER)
    return nullcontext()


def _zeros(values: np.ndarray) -> np.ndarray | np.generic:
    """Zeros (+0.0) to take np.maximum with values: a read-only array of their shape where np.maximum(array, array)
    runs some 2x faster than np.maximum(scalar, array) (NumPy 2.x; float32/float64 arrays of up to _ZEROS_SIZE
    values), else the scalar. One calloc'd array per dtype, never written: its pages all map the kernel's zero page,
    so reading it costs cache, not memory."""
    dtype = values.dtype
    if values.size > _ZEROS_SIZE or dtype not in (np.float32, np.float64):
        return dtype.type(0)
    zeros = _ZEROS.get(dtype)
    if zeros is None:
        zeros = np.zeros(_ZEROS_SIZE, dtype)
        zeros.flags.writeable = False
        zeros = _ZEROS.setdefault(dtype, zeros)
    return zeros[:values.size].reshape(values.shape)


_ZEROS_SIZE = 1 << 20
_ZEROS: dict = {}


def _maximum_matches(zeros_first: bool, expected: Callable[[np.ndarray, np.ndarray], None]) -> bool:
    """Whether np.maximum of zeros and values (zeros first or second; a scalar and an array of zeros, see _zeros) is
    expected(values, out) bit for bit here, NaN payloads and -0.0 included: IEEE leaves max(+0, -0) and max(0, NaN)
    to the implementation, so this NumPy's is probed on every dtype we compute in, at lengths that reach its vector
    loops and their scalar tails."""
    for dtype, int_type in ((np.float32, np.uint32), (np.float64, np.uint64)):
        nans = np.array([0x7FC00001, 0xFFC00123] if dtype == np.float32 else
                        [0x7FF8000000000001, 0xFFF8000000000123], int_type).view(dtype)
        special = np.concatenate([np.array([0.0, -0.0, np.inf, -np.inf, 1.5, -1.5, np.nan, -np.nan], dtype), nans])
        for length in (1, 3, 7, 16, 17, 31, 67, 1000):
            values = np.roll(np.resize(special, special.size + length), length)  # every value, at shifting lanes
            wanted = values.copy()
            expected(values, wanted)
            for zeros in (dtype(0), _zeros(values)):
                result = np.maximum(zeros, values) if zeros_first else np.maximum(values, zeros)
                if not np.array_equal(result.view(int_type), wanted.view(int_type)):
                    return False
    return True


def relu_values(values: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = values < 0 ? +0 : values, torch's relu (-0.0 and NaN stay; -inf gives +0, where values * 0 would give
    NaN); out may be values. One np.maximum pass where it is exactly that (see _maximum_matches), else a lane mask."""
    if _MAXIMUM_IS_RELU:
        return np.maximum(_zeros(values), values, out=out)
    return zero_where(values < 0, values, out)


def relu_of_sum_with_zero(values: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = relu(values + 0.0), i.e. values <= 0 ? +0 : values (NaN stays): what adding a +0 bias and then relu make,
    in one np.maximum pass where that is exactly it (its tie max(-0, +0) gives the second operand), else the two;
    out may be values."""
    if _MAXIMUM_ADDS_ZERO:
        return np.maximum(values, _zeros(values), out=out)
    np.add(values, values.dtype.type(0), out=out)
    return relu_values(out, out)


def take_where(mask: np.ndarray, source: np.ndarray, target: np.ndarray) -> None:
    """target[mask] = source[mask], exactly, by bit blending: NumPy's masked copy (copyto with
    where=) is some 40x slower than a plain pass when the mask is random, as activations' are."""
    int_type = np.int64 if target.dtype == np.float64 else np.int32
    bits = mask.view(np.int8).astype(int_type)
    np.negative(bits, out=bits)  # 0 or all ones
    target_bits = target.view(int_type)
    difference = np.bitwise_xor(target_bits, source.view(int_type))
    difference &= bits
    target_bits ^= difference


def zero_where(zero: np.ndarray, values: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = zero ? +0.0 : values, exactly (NaN and -0.0 kept as they are), by a bitwise AND with lane masks built in
    out (unless out is values): NumPy's np.where and masked copies are some 40x slower than a plain pass when the mask
    is random. `zero` is read before out is written, so out may also be what zero was computed from."""
    int_type = np.dtype(f"i{values.dtype.itemsize}")
    lanes = np.empty(values.shape, int_type) if np.may_share_memory(out, values) else out.view(int_type)
    keep = np.subtract(zero.view(np.int8), np.int8(1))  # 0 or all ones, in bytes: a quarter of a pass on wide lanes
    np.copyto(lanes, keep, casting="unsafe")  # sign-extended (a plain cast: a ufunc's would be buffered)
    np.bitwise_and(values.view(int_type), lanes, out=out.view(int_type))
    return out


_MAXIMUM_IS_RELU = _maximum_matches(True, lambda values, out: zero_where(values < 0, values, out))
_MAXIMUM_ADDS_ZERO = _maximum_matches(False, lambda values, out: zero_where(values <= 0, values, out))


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
        take_where(~positive, np.full_like(factors, slope), factors)
    return factors


def leaky_relu_values(values: np.ndarray, slope, out: np.ndarray | None = None) -> np.ndarray:
    """values > 0 ? values : values * slope, exactly, for a constant slope of values' dtype: into `out` (of values'
    dtype; it may be values itself) or a new array, which is returned."""
    if slope > 0:  # values > 0: values >= values * slope (slope <= 1, else the reverse); NaN propagates
        apart = out is not None and not np.may_share_memory(values, out)
        scaled = np.multiply(values, slope, out=out if apart else None)
        return (np.maximum if slope <= 1 else np.minimum)(values, scaled, out=scaled if out is None else out)
    scaled = values * slope
    take_where(values > 0, values, scaled)
    if out is None:
        return scaled
    np.copyto(out, scaled)
    return out


def on_tensors(kernel: Callable, out: torch.Tensor | None, inputs: tuple[torch.Tensor, ...], *attributes):
    """Runs the array kernel `kernel(*arrays, *attributes, out_array)` on NumPy views of contiguous CPU tensors;
    the result is `out` or a new tensor like inputs[0]."""
    result = torch.empty_like(inputs[0]) if out is None else out
    kernel(*(to_array(t) for t in inputs), *attributes, to_array(result))
    return result
