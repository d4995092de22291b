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


def fmix32(h: int) -> int:
    """MurmurHash3's 32-bit finaliser on a Python int (the host side: round keys)."""
    h &= MASK32
    h ^= h >> 16
    h = (h * MIX1) & MASK32
    h ^= h >> 13
    h = (h * MIX2) & MASK32
    return h ^ (h >> 16)


def _fmix32_inplace(h: np.ndarray, scratch: np.ndarray) -> None:
    """fmix32 on a uint32 array, in place (wrapping multiply), with no temporaries."""
    for shift, multiplier in ((16, MIX1), (13, MIX2)):
        np.right_shift(h, shift, out=scratch)
        h ^= scratch
        h *= np.uint32(multiplier)
    np.right_shift(h, 16, out=scratch)
    h ^= scratch


def round_keys(seed: int) -> tuple[int, int]:
    """The two 32-bit round keys of a seed (computed once per call, on the host)."""
    seed &= MASK64
    k0 = fmix32((seed & MASK32) ^ GOLDEN)
    k1 = fmix32(((seed >> 32) ^ k0) + GOLDEN)
    return k0, k1


def _hash(keys: tuple[int, int], lo: np.ndarray, hi: np.ndarray | int) -> np.ndarray:
    """h for index words (lo, hi); consumes `lo` (a fresh uint32 array) as the result buffer."""
    k0, k1 = keys
    scratch = np.empty_like(lo)
    h = lo
    h ^= np.uint32(k0)
    _fmix32_inplace(h, scratch)
    h ^= np.uint32(k1)
    if np.any(hi):
        h += np.asarray(hi, dtype=np.uint32) * np.uint32(GOLDEN)
    _fmix32_inplace(h, scratch)
    return h


def hash32(seed: int, index) -> np.ndarray:
    """h(seed, index): uint32 bits for each 64-bit flat element index (any shape)."""
    index = np.asarray(index, dtype=np.uint64)
    lo = (index & np.uint64(MASK32)).astype(np.uint32).reshape(-1)
    hi = (index >> np.uint64(32)).astype(np.uint32).reshape(-1)
    return _hash(round_keys(seed), lo, hi).reshape(index.shape)


def _hash_range(keys: tuple[int, int], start: int, stop: int) -> np.ndarray:
    """h for the consecutive indices start..stop-1 (the kernels' case)."""
    if start >> 32 == max(stop - 1, start) >> 32:  # i_hi is one scalar, as in a kernel tile
        first = start & MASK32
        return _hash(keys, np.arange(first, first + (stop - start), dtype=np.uint32), start >> 32)
    index = np.arange(start, stop, dtype=np.uint64)
    return _hash(keys, index.astype(np.uint32), (index >> np.uint64(32)).astype(np.uint32))


def _uniform_from_hash(h: np.ndarray) -> np.ndarray:
    u = (h >> np.uint32(8)).astype(np.float32)
    u *= UNIT  # exact: 24-bit integers times a power of two
    return u


def _noise_from_uniform(u: np.ndarray, lower: float, upper: float, dtype) -> np.ndarray:
    """float32: lo + span * u with two roundings (multiply, then add); float64: the same in float64."""
    if np.dtype(dtype) == np.float64:
        return lower + (upper - lower) * u.astype(np.float64)
    lo = np.float32(lower)
    u *= np.float32(np.float32(upper) - lo)
    u += lo
    return u


def uniform(seed: int, index) -> np.ndarray:
    """u in [0, 1) with 24 random bits, exact in float32."""
    return _uniform_from_hash(hash32(seed, index))


def noise(seed: int, index, lower: float, upper: float, dtype=np.float32) -> np.ndarray:
    """RReLU slopes in [lower, upper] for the given flat indices (float32 unless dtype is float64)."""
    return _noise_from_uniform(uniform(seed, index), lower, upper, dtype)


def noise_range(keys: tuple[int, int], start: int, stop: int, lower: float, upper: float,
                dtype=np.float32) -> np.ndarray:
    """Slopes of the consecutive flat elements start..stop-1, given round_keys(seed)."""
    return _noise_from_uniform(_uniform_from_hash(_hash_range(keys, start, stop)), lower, upper, dtype)


def noise_for_shape(seed: int, numel: int, lower: float, upper: float, dtype=np.float32) -> np.ndarray:
    """Slopes of elements 0..numel-1 of a tensor in row-major order."""
    return noise_range(round_keys(seed), 0, numel, lower, upper, dtype)
