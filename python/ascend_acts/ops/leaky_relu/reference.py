"""LeakyReLU on the NumPy reference: the oracle every other backend is checked against (`forward`, `backward` on
arrays), and the "reference" backend's functions (`leaky_relu`, `leaky_relu_backward` on tensors).

The array functions take contiguous arrays of one floating dtype (float64, float32, float16 or ml_dtypes.bfloat16)
and write into `out`, which may be the input itself (in-place). Half types are computed in float32 and rounded to
nearest even once, like torch's CPU kernels and our AscendC kernels. The positive branch is `x > 0` (so -0.0, NaN
and the gradient at 0 take the negative branch).
"""

from __future__ import annotations

import numpy as np

from ...numerics import compiled
from ...numerics.dtypes import compute_dtype
from ...numerics.elementwise import leaky_relu_values, on_tensors, quiet, slope_factors
from ...numerics.parallel import for_chunks


def forward(x, negative_slope: float, out) -> None:
    ctype = compute_dtype(x.dtype)
    slope = ctype.type(negative_slope)
    passes = compiled.module_for(x, out)
    x, out = x.reshape(-1), out.reshape(-1)
    if passes is not None:  # the same operation per value (torch's formula), compiled
        passes.leaky_relu(compiled.address(x), compiled.address(out), x.size, float(slope), compiled.threads())
        return

    def body(start: int, stop: int) -> None:
        with quiet():
            if x.dtype == ctype:  # no rounding: written straight into out
                leaky_relu_values(x[start:stop], slope, out[start:stop])
            else:
                out[start:stop] = leaky_relu_values(x[start:stop].astype(ctype), slope)

    for_chunks(x.size, body)


def backward(grad, saved, negative_slope: float, out) -> None:
    """saved is the input, or the output when negative_slope >= 0 (same sign pattern)."""
    ctype = compute_dtype(grad.dtype)
    passes = compiled.module_for(grad, saved, out)
    grad, saved, out = grad.reshape(-1), saved.reshape(-1), out.reshape(-1)
    if passes is not None:
        slope = ctype.type(negative_slope)
        passes.leaky_relu_backward(*(compiled.address(a) for a in (grad, saved, out)), grad.size, float(slope),
                                   compiled.threads())
        return

    def body(start: int, stop: int) -> None:
        with quiet():
            factors = slope_factors(saved[start:stop] > 0, negative_slope, ctype)
            if grad.dtype == ctype:  # written last, so `out` may alias `grad` or `saved`
                np.multiply(factors, grad[start:stop], out=out[start:stop])
            else:
                factors *= grad[start:stop].astype(ctype)
                out[start:stop] = factors

    for_chunks(grad.size, body)


# --- the "reference" backend (ascend_acts.backends' protocol: tensors in, tensors out) ---------------------------
def leaky_relu(self, negative_slope, *, out=None):
    return on_tensors(forward, out, (self,), negative_slope)


def leaky_relu_backward(grad_output, self, negative_slope, saved_is_result):
    return on_tensors(backward, None, (grad_output, self), negative_slope)
