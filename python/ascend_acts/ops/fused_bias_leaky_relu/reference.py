"""StyleGAN2's fused bias + LeakyReLU on the NumPy reference: y = leaky_relu(x + bias[c], slope) * scale, the bias
over dimension 1 of x (viewed as rows (n, c) of S = prod(shape[2:]) elements; S = 1 for a rank-2 input), with
NVlabs bias_act's modes: `relu` (torch.relu in place of the LeakyReLU) and `clamp` (>= 0: torch.clamp to
[-clamp, clamp] after the scale). The oracle (`forward`, `backward` on arrays) and the "reference" backend's
functions (the op's names, on tensors).

The rounding order is the AscendC kernels' (op_kernel/fused_bias_leaky_relu/), so that the emulator's results
equal these bit for bit, in the compute dtype (float64 for float64, float32 otherwise; half types round once at
the end):
- forward: t = x + bias; u = act(t) * scale with act(t) = t > 0 ? t : t * slope, or (relu) t < 0 ? +0.0 : t;
  y = clamp(u);
- backward: d = clamp's gradient (dy where -clamp <= u <= clamp, else +0.0; u recomputed from input + bias);
  g = d * scale; dx = pre > 0 ? g : g * slope, or (relu) pre <= 0 ? +0.0 : g, pre read from the output
  (`saved_is_result`, valid for slope >= 0, scale >= 1 and no clamp) or from input + bias; grad_bias[c] = the sum
  of the unrounded dx over every dimension but 1, accumulated in float64 and rounded once.
In float32 these are torch's composite `F.leaky_relu(x + bias.view(1, -1, 1, ...), slope) * scale` (F.relu for
relu), then `.clamp(-clamp, clamp)`, and its autograd, step by step. `x > 0` is the positive test, so the
LeakyReLU's gradient at 0 (and -0.0, NaN) is slope * scale; relu's is 0 at 0 and -0.0 and passes at NaN, as
torch's threshold_backward.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ...numerics.dtypes import compute_dtype, to_array
from ...numerics.elementwise import leaky_relu_values, quiet, slope_factors, take_where
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


def _activated(pre: np.ndarray, slope, factor, relu: bool) -> np.ndarray:
    """act(pre) * scale, a new array."""
    if relu:
        result = np.where(pre < 0, pre.dtype.type(0), pre)  # -0.0 stays, as in torch.relu
    else:
        result = leaky_relu_values(pre, slope)
    result *= factor
    return result


def forward(x: np.ndarray, bias: np.ndarray | None, negative_slope: float, scale: float, out: np.ndarray,
            clamp: float = -1.0, relu: bool = False) -> None:
    ctype = compute_dtype(x.dtype)
    with quiet():  # a scale beyond float32's range is inf in float32, as torch's `* scale` makes it: silently
        slope, factor, bound = ctype.type(negative_slope), ctype.type(scale), ctype.type(clamp)
    rows, out_rows = _rows(x), _rows(out)

    def body(start: int, stop: int) -> None:
        with quiet():
            result = _activated(_plus_bias(rows, bias, start, stop, ctype), slope, factor, relu)
            if clamp >= 0:  # beyond a bound: the bound (NaN compares false: kept, as torch.clamp)
                take_where(result > bound, np.full_like(result, bound), result)
                take_where(result < -bound, np.full_like(result, -bound), result)
            out_rows[start:stop] = result  # last: `out` may alias `x`

    for_chunks(rows.shape[0], body, _chunk_rows(rows))


def backward(grad: np.ndarray, saved: np.ndarray, bias: np.ndarray | None, negative_slope: float, scale: float,
             saved_is_result: bool, out: np.ndarray, grad_bias: np.ndarray, clamp: float = -1.0,
             relu: bool = False) -> None:
    """Writes dx into `out` (grad's shape) and the per-channel sums of dx into `grad_bias` (C,)."""
    ctype = compute_dtype(grad.dtype)
    with quiet():
        slope, factor, bound = ctype.type(negative_slope), ctype.type(scale), ctype.type(clamp)
    grad_rows, saved_rows, out_rows = _rows(grad), _rows(saved), _rows(out)
    row_sums = np.zeros(grad_rows.shape[0], np.float64)

    def body(start: int, stop: int) -> None:
        with quiet():
            pre = _plus_bias(saved_rows, None if saved_is_result else bias, start, stop, ctype)
            passed = grad_rows[start:stop].astype(ctype, copy=True)
            if clamp >= 0:  # torch.clamp's gradient: dy inside [-clamp, clamp] (bounds included), else +0.0
                unclamped = _activated(pre, slope, factor, relu)
                take_where(~((unclamped >= -bound) & (unclamped <= bound)), np.zeros_like(passed), passed)
            passed *= factor
            if relu:  # threshold_backward: +0.0 where pre <= 0
                dx = passed
                take_where(pre <= 0, np.zeros_like(dx), dx)
            else:
                dx = slope_factors(pre > 0, negative_slope, ctype)
                dx *= passed
            row_sums[start:stop] = dx.sum(axis=1, dtype=np.float64)
            out_rows[start:stop] = dx  # last: `out` may alias `grad` or `saved`

    for_chunks(grad_rows.shape[0], body, _chunk_rows(grad_rows))
    with quiet():
        grad_bias[...] = row_sums.reshape(-1, grad.shape[1]).sum(axis=0)


# --- the "reference" backend (ascend_acts.backends' protocol: tensors in, tensors out) ---------------------------
def fused_bias_leaky_relu(input, bias, negative_slope, scale, clamp=-1.0, relu=False):
    out = torch.empty_like(input)
    forward(to_array(input), None if bias is None else to_array(bias), negative_slope, scale, to_array(out), clamp,
            relu)
    return out


def fused_bias_leaky_relu_backward(grad_output, saved, bias, negative_slope, scale, saved_is_result, clamp=-1.0,
                                   relu=False):
    grad_input, grad_bias = torch.empty_like(saved), saved.new_empty(saved.shape[1])
    if saved.numel() == 0:  # nothing to sum: a zero bias gradient (and no (N * C, S) view of zero channels)
        return grad_input, grad_bias.zero_()
    backward(to_array(grad_output), to_array(saved), None if bias is None else to_array(bias), negative_slope, scale,
             saved_is_result, to_array(grad_input), to_array(grad_bias), clamp, relu)
    return grad_input, grad_bias
