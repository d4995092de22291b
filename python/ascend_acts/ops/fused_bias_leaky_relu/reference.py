"""StyleGAN2's fused bias + LeakyReLU on the NumPy reference: y = leaky_relu(x + bias[c], slope) * scale, the bias
over dimension 1 of x (viewed as rows (n, c) of S = prod(shape[2:]) elements; S = 1 for a rank-2 input). The
oracle (`forward`, `backward` on arrays) and the "reference" backend's functions (the op's names, on tensors).

The rounding order is the AscendC kernels' (op_kernel/fused_bias_leaky_relu/), so that the emulator's results
equal these bit for bit, in the compute dtype (float64 for float64, float32 otherwise; half types round once at
the end):
- forward: t = x + bias; y = (t > 0 ? t : t * slope) * scale;
- backward: g = dy * scale; dx = (pre > 0 ? g : g * slope), pre > 0 read from the output (`saved_is_result`,
  valid for slope >= 0 and scale >= 1) or from input + bias; grad_bias[c] = the sum of the unrounded dx over
  every dimension but 1, accumulated in float64 and rounded once.
In float32 these are torch's composite `F.leaky_relu(x + bias.view(1, -1, 1, ...), slope) * scale` and its
autograd, step by step. `x > 0` is the positive test, so the gradient at 0 (and -0.0, NaN) is slope * scale.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ...numerics.dtypes import compute_dtype, to_array
from ...numerics.elementwise import leaky_relu_values, quiet, slope_factors
from ...numerics.parallel import CHUNK, for_chunks


def _rows(array: np.ndarray) -> np.ndarray:
    """(N * C, S) rows of a contiguous array of rank >= 2."""
    return array.reshape(array.shape[0] * array.shape[1], math.prod(array.shape[2:]))


def _chunk_rows(rows: np.ndarray) -> int:
    return max(CHUNK // max(rows.shape[1], 1), 1)


def _plus_bias(rows: np.ndarray, bias: np.ndarray | None, start: int, stop: int, ctype) -> np.ndarray:
    """rows start..stop-1 plus the bias of their channels (row r is channel r % C), a new compute-dtype array."""
    values = rows[start:stop].astype(ctype, copy=True)
    if bias is not None:
        values += bias.astype(ctype, copy=False)[np.arange(start, stop) % bias.shape[0]][:, None]
    return values


def forward(x: np.ndarray, bias: np.ndarray | None, negative_slope: float, scale: float, out: np.ndarray) -> None:
    ctype = compute_dtype(x.dtype)
    with quiet():  # a scale beyond float32's range is inf in float32, as torch's `* scale` makes it: silently
        slope, factor = ctype.type(negative_slope), ctype.type(scale)
    rows, out_rows = _rows(x), _rows(out)

    def body(start: int, stop: int) -> None:
        with quiet():
            result = leaky_relu_values(_plus_bias(rows, bias, start, stop, ctype), slope)
            result *= factor
            out_rows[start:stop] = result  # last: `out` may alias `x`

    for_chunks(rows.shape[0], body, _chunk_rows(rows))


def backward(grad: np.ndarray, saved: np.ndarray, bias: np.ndarray | None, negative_slope: float, scale: float,
             saved_is_result: bool, out: np.ndarray, grad_bias: np.ndarray) -> None:
    """Writes dx into `out` (grad's shape) and the per-channel sums of dx into `grad_bias` (C,)."""
    ctype = compute_dtype(grad.dtype)
    with quiet():
        factor = ctype.type(scale)
    grad_rows, saved_rows, out_rows = _rows(grad), _rows(saved), _rows(out)
    row_sums = np.zeros(grad_rows.shape[0], np.float64)

    def body(start: int, stop: int) -> None:
        with quiet():
            pre = _plus_bias(saved_rows, None if saved_is_result else bias, start, stop, ctype)
            dx = slope_factors(pre > 0, negative_slope, ctype)
            dx *= grad_rows[start:stop].astype(ctype, copy=False) * factor
            row_sums[start:stop] = dx.sum(axis=1, dtype=np.float64)
            out_rows[start:stop] = dx  # last: `out` may alias `grad` or `saved`

    for_chunks(grad_rows.shape[0], body, _chunk_rows(grad_rows))
    with quiet():
        grad_bias[...] = row_sums.reshape(-1, grad.shape[1]).sum(axis=0)


# --- the "reference" backend (ascend_acts.backends' protocol: tensors in, tensors out) ---------------------------
def fused_bias_leaky_relu(input, bias, negative_slope, scale):
    out = torch.empty_like(input)
    forward(to_array(input), None if bias is None else to_array(bias), negative_slope, scale, to_array(out))
    return out


def fused_bias_leaky_relu_backward(grad_output, saved, bias, negative_slope, scale, saved_is_result):
    grad_input, grad_bias = torch.empty_like(saved), saved.new_empty(saved.shape[1])
    if saved.numel() == 0:  # nothing to sum: a zero bias gradient (and no (N * C, S) view of zero channels)
        return grad_input, grad_bias.zero_()
    backward(to_array(grad_output), to_array(saved), None if bias is None else to_array(bias), negative_slope, scale,
             saved_is_result, to_array(grad_input), to_array(grad_bias))
    return grad_input, grad_bias
