"""The channel layout: per-channel vectors over dimension 1 (N, C, ...), as BatchNorm and a conv bias apply."""

from __future__ import annotations

import math


def channel_view(values, rank: int = 4):
    """A (C,) tensor or array shaped (1, C, 1, ...) to broadcast over dimension 1 of a rank-`rank` one (a view)."""
    return values.reshape(1, -1, *([1] * (rank - 2)))


def batch_channels_spatial(shape) -> tuple[int, int, int]:
    """N, C and the product of the remaining sizes of a shape of rank >= 2: how the kernels see an (N, C, ...)
    tensor."""
    return shape[0], shape[1], math.prod(shape[2:])
