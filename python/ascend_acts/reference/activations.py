"""NumPy reference kernels for LeakyReLU and RReLU: the oracle every other backend is checked against.

Every function takes contiguous arrays of one floating dtype (float64, float32, float16 or
ml_dtypes.bfloat16) and writes into `out`, which may be the input itself (in-place). Half types are
computed in float32 and rounded to nearest even once, like torch's CPU kernels and our AscendC kernels.
The positive branch is `x > 0` (so -0.0, NaN and the gradient at 0 take the negative branch).
"""

from __future__ import annotations

import numpy as np

from . import rng


def compute_dtype(dtype) -> np.dtype:
    """float64 stays float64; everything else is computed in float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _scale_where_not_positive(values, test, scale, out) -> None:
    """out = test > 0 ? values : values * scale, computed in the compute dtype, rounded once."""
    ctype = compute_dtype(values.dtype)
    v = values.astype(ctype, copy=False)
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 and NaN compare as IEEE says
        scaled = v * (scale.astype(ctype, copy=False) if isinstance(scale, np.ndarray) else ctype.type(scale))
        result = np.where(test > 0, v, scaled)
    np.copyto(out, result.astype(out.dtype, copy=False).reshape(out.shape))


def leaky_relu(x, negative_slope: float, out) -> None:
    _scale_where_not_positive(x, x, negative_slope, out)


def leaky_relu_backward(grad, saved, negative_slope: float, out) -> None:
    """saved is the input, or the output when negative_slope >= 0 (same sign pattern)."""
    _scale_where_not_positive(grad, saved, negative_slope, out)


def rrelu_noise(seed: int, size: int, lower: float, upper: float, dtype) -> np.ndarray:
    """Slopes for elements 0..size-1, in the compute dtype of `dtype`."""
    return rng.noise_for_shape(seed, size, lower, upper, compute_dtype(dtype))


def rrelu(x, lower: float, upper: float, seed: int, out) -> None:
    """RReLU training forward: x for x > 0, x * noise(seed, index) otherwise."""
    slopes = rrelu_noise(seed, x.size, lower, upper, x.dtype).reshape(x.shape)
    _scale_where_not_positive(x, x, slopes, out)


def rrelu_backward(grad, saved, lower: float, upper: float, seed: int, out) -> None:
    """Regenerates the noise from the seed: no noise tensor is kept between forward and backward."""
    slopes = rrelu_noise(seed, grad.size, lower, upper, grad.dtype).reshape(grad.shape)
    _scale_where_not_positive(grad, saved, slopes, out)
