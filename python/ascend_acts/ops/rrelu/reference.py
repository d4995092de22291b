"""RReLU (training) on the NumPy reference: the oracle (`forward`, `backward` on arrays, the noise of docs/rng.md
from `rng`) and the "reference" backend's functions (`rrelu`, `rrelu_backward` on tensors). Arrays as
leaky_relu's reference takes them; half types are computed in float32 and rounded once."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ...numerics.dtypes import compute_dtype
from ...numerics.elementwise import on_tensors, quiet, take_where
from ...numerics.parallel import for_chunks
from . import rng

# slopes(start, stop, dtype) -> the slopes of flat elements start..stop-1 (a scalar or an array)
Slopes = Callable[[int, int, np.dtype], "np.ndarray | np.generic"]


def _select(values, test, slopes: Slopes, out) -> None:
    """out = test > 0 ? values : values * slope, in the compute dtype, rounded once to out's dtype."""
    ctype = compute_dtype(values.dtype)
    values, test, out = values.reshape(-1), test.reshape(-1), out.reshape(-1)

    def body(start: int, stop: int) -> None:
        with quiet():
            v = values[start:stop].astype(ctype, copy=False)
            result = np.multiply(v, slopes(start, stop, ctype))
            take_where(test[start:stop] > 0, v, result)
            out[start:stop] = result  # last, so `out` may alias `values` or `test`

    for_chunks(values.size, body)


def _noise(seed: int, lower: float, upper: float) -> Slopes:
    keys = rng.round_keys(seed)
    return lambda start, stop, ctype: rng.noise_range(keys, start, stop, lower, upper, ctype)


def forward(x, lower: float, upper: float, seed: int, out) -> None:
    """RReLU training forward: x for x > 0, x * noise(seed, flat index) otherwise."""
    _select(x, x, _noise(seed, lower, upper), out)


def backward(grad, saved, lower: float, upper: float, seed: int, out) -> None:
    """Regenerates the noise from the seed: no noise tensor is kept between forward and backward."""
    _select(grad, saved, _noise(seed, lower, upper), out)


# --- the "reference" backend (ascend_acts.backends' protocol: tensors in, tensors out) ---------------------------
def seed_value(seed: torch.Tensor) -> int:
    """The RReLU seed (a one-element int64 tensor) as the unsigned 64-bit key of docs/rng.md."""
    return int(seed.item()) & rng.MASK64


def rrelu(self, seed, lower, upper, *, out=None):
    return on_tensors(forward, out, (self,), lower, upper, seed_value(seed))


def rrelu_backward(grad_output, self, seed, lower, upper, saved_is_result):
    return on_tensors(backward, None, (grad_output, self), lower, upper, seed_value(seed))
