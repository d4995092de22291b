"""RReLU (training) written with torch tensor ops only, so it runs on any device: the "torch" backend's functions
(`out=` for the forward), bit-identical to the reference: the noise of docs/rng.md with int64 tensors held to
32 bits (multiply-low split into 16-bit halves so no product overflows), float32 noise with two roundings, half
types computed in float32 and rounded once.
"""

from __future__ import annotations

import numpy as np
import torch

from ..leaky_relu.torch_ops import select
from .rng import GOLDEN, MASK32, MIX1, MIX2

_UNIT = 2.0**-24


def _mul32(h: torch.Tensor, constant: int) -> torch.Tensor:
    """(h * constant) mod 2^32 for h in [0, 2^32): each partial product stays below 2^48."""
    low = h * (constant & 0xFFFF)
    high = ((h * (constant >> 16)) & 0xFFFF) << 16
    return (low + high) & MASK32


def _fmix32(h: torch.Tensor) -> torch.Tensor:
    h = h ^ (h >> 16)
    h = _mul32(h, MIX1)
    h = h ^ (h >> 13)
    h = _mul32(h, MIX2)
    return h ^ (h >> 16)


def noise(seed: torch.Tensor, numel: int, lower: float, upper: float, dtype: torch.dtype,
          index_base: int = 0) -> torch.Tensor:
    """Slopes of flat elements index_base .. index_base+numel-1 (float64 for float64 data, else float32)."""
    seed = seed.reshape(()).to(torch.int64)
    k0 = _fmix32((seed & MASK32) ^ GOLDEN)
    k1 = _fmix32((((seed >> 32) & MASK32) ^ k0) + GOLDEN & MASK32)
    index = torch.arange(numel, dtype=torch.int64, device=seed.device) + index_base
    h = _fmix32((index & MASK32) ^ k0)
    h = _fmix32(((h ^ k1) + _mul32(index >> 32, GOLDEN)) & MASK32)
    u = (h >> 8).to(torch.float32) * _UNIT
    if dtype == torch.float64:
        return lower + (upper - lower) * u.to(torch.float64)
    lo = np.float32(lower)
    span = float(np.float32(np.float32(upper) - lo))
    return u * span + float(lo)  # two float32 roundings


def rrelu(self: torch.Tensor, seed: torch.Tensor, lower: float, upper: float, *,
          out: torch.Tensor | None = None) -> torch.Tensor:
    slopes = noise(seed, self.numel(), lower, upper, self.dtype).reshape(self.shape)
    return select(self.contiguous(), self.contiguous(), slopes, out)


def rrelu_backward(grad_output: torch.Tensor, self: torch.Tensor, seed: torch.Tensor, lower: float,
                   upper: float, saved_is_result: bool) -> torch.Tensor:
    slopes = noise(seed, grad_output.numel(), lower, upper, grad_output.dtype).reshape(grad_output.shape)
    return select(grad_output.contiguous(), self.contiguous(), slopes, None)
