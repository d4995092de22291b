"""Counter-based RNG for RReLU noise: a pure function of (64-bit seed, 64-bit flat element index).

Built only from 32-bit multiply-low, add, xor and shifts so that the AscendC kernels can compute the
same bits on the vector unit (910B has no Philox). The specification, with test vectors that every
backend must reproduce, is docs/rng.md.
"""

from __future__ import annotations

import numpy as np

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF
MIX1 = 0x85EBCA6B  # MurmurHash3 fmix32 multipliers
MIX2 = 0xC2B2AE35
GOLDEN = 0x9E3779B9  # 2^32 / golden ratio, odd
UNIT = np.float32(2.0**-24)


def fmix32(h):
    """MurmurHash3's 32-bit finaliser; works on Python ints and on uint32 arrays (wrapping)."""
    if isinstance(h, np.ndarray):
        h = h ^ (h >> np.uint32(16))
        h = h * np.uint32(MIX1)
        h = h ^ (h >> np.uint32(13))
        h = h * np.uint32(MIX2)
        return h ^ (h >> np.uint32(16))
    h &= MASK32
    h ^= h >> 16
    h = (h * MIX1) & MASK32
    h ^= h >> 13
    h = (h * MIX2) & MASK32
    return h ^ (h >> 16)


def round_keys(seed: int) -> tuple[int, int]:
    """The two 32-bit round keys of a seed (computed once per call, on the host)."""
    seed &= MASK64
    k0 = fmix32((seed & MASK32) ^ GOLDEN)
    k1 = fmix32((((seed >> 32) ^ k0) + GOLDEN) & MASK32)
    return k0, k1


def hash32(seed: int, index: np.ndarray | int) -> np.ndarray:
    """h(seed, index): uint32 bits for each 64-bit flat element index."""
    k0, k1 = round_keys(seed)
    index = np.asarray(index, dtype=np.uint64)
    shape = index.shape
    index = index.reshape(-1)  # 0-d arithmetic would give NumPy scalars, which warn on wrap-around
    lo = (index & np.uint64(MASK32)).astype(np.uint32)
    hi = (index >> np.uint64(32)).astype(np.uint32)
    h = fmix32(lo ^ np.uint32(k0))
    return fmix32((h ^ np.uint32(k1)) + hi * np.uint32(GOLDEN)).reshape(shape)


def uniform(seed: int, index: np.ndarray | int) -> np.ndarray:
    """u in [0, 1) with 24 random bits, exact in float32."""
    return (hash32(seed, index) >> np.uint32(8)).astype(np.float32) * UNIT


def noise(seed: int, index: np.ndarray | int, lower: float, upper: float,
          dtype=np.float32) -> np.ndarray:
    """RReLU slopes in [lower, upper].

    float32 (used for float32, float16 and bfloat16 data, as the kernels do):
    lower + (upper - lower) * u with the bounds and their difference rounded to float32 and two
    roundings, multiply then add (no fma). float64 data gets the same formula in float64.
    """
    u = uniform(seed, index)
    if np.dtype(dtype) == np.float64:
        return lower + (upper - lower) * u.astype(np.float64)
    lo = np.float32(lower)
    span = np.float32(np.float32(upper) - lo)
    return lo + span * u  # float32 * float32 -> rounded, then + -> rounded


def noise_for_shape(seed: int, numel: int, lower: float, upper: float, dtype=np.float32):
    """Noise for elements 0..numel-1 of a tensor in row-major order."""
    return noise(seed, np.arange(numel, dtype=np.uint64), lower, upper, dtype)
