"""The RReLU counter-hash RNG: docs/rng.md test vectors, an independent scalar implementation, and
statistical quality."""

import math
import re
from pathlib import Path

import numpy as np
import pytest

from ascend_acts.ops.rrelu import rng

DOC = Path(__file__).resolve().parents[1] / "docs" / "rng.md"


def scalar_hash(seed: int, index: int) -> int:
    """Straight from the spec with Python integers: a second implementation to check the vectorised one."""
    def fmix(h):
        h ^= h >> 16
        h = (h * 0x85EBCA6B) % 2**32
        h ^= h >> 13
        h = (h * 0xC2B2AE35) % 2**32
        return h ^ (h >> 16)

    seed %= 2**64
    k0 = fmix((seed % 2**32) ^ 0x9E3779B9)
    k1 = fmix(((seed >> 32 ^ k0) + 0x9E3779B9) % 2**32)
    h = fmix((index % 2**32) ^ k0)
    return fmix(((h ^ k1) + (index >> 32) * 0x9E3779B9) % 2**32)


def doc_vectors():
    rows = re.findall(r"^\| (0x[0-9a-f]+) \| (\d+) \| (0x[0-9a-f]+) \| (0x[0-9a-f]+) \| (0x[0-9a-f]+) \| "
                      r"([0-9.e-]+) \| ([0-9.e-]+) \|$", DOC.read_text(), flags=re.M)
    assert len(rows) >= 30
    return rows


@pytest.mark.parametrize("row", doc_vectors(), ids=lambda r: f"{r[0]}-{r[1]}")
def test_documented_vectors(row):
    seed, index, k0, k1, h, u, noise = int(row[0], 16), int(row[1]), *(int(v, 16) for v in row[2:5]), \
        float(row[5]), float(row[6])
    assert rng.round_keys(seed) == (k0, k1)
    assert int(rng.hash32(seed, index)) == h == scalar_hash(seed, index)
    assert float(rng.uniform(seed, index)) == u == (h >> 8) / 2**24
    assert float(rng.noise(seed, index, 1 / 8, 1 / 3)) == noise


@pytest.mark.parametrize("seed", [0, 99, 2**63 - 1, 2**64 - 5])
def test_vectorised_matches_scalar(seed):
    index = np.array([0, 1, 77, 2**31, 2**32 - 1, 2**32, 2**33 + 5, 2**63], dtype=np.uint64)
    assert rng.hash32(seed, index).tolist() == [scalar_hash(seed, int(i)) for i in index]


def test_noise_is_float32_with_two_roundings():
    u = rng.uniform(3, np.arange(1000))
    lo, span = np.float32(0.1), np.float32(np.float32(0.7) - np.float32(0.1))
    expected = np.array([np.float32(lo + np.float32(span * ui)) for ui in u], dtype=np.float32)
    assert np.array_equal(rng.noise(3, np.arange(1000), 0.1, 0.7), expected)


@pytest.fixture(scope="module")
def draws():
    return rng.uniform(20241122, np.arange(10**6)).astype(np.float64)


def test_uniform_range_and_resolution(draws):
    assert draws.min() >= 0 and draws.max() < 1
    assert np.all((draws * 2**24) == np.floor(draws * 2**24))  # exactly 24 bits


def test_mean_and_variance(draws):
    n = draws.size
    assert abs(draws.mean() - 0.5) < 5 * math.sqrt(1 / 12 / n)
    assert abs(draws.var() - 1 / 12) < 5 * math.sqrt(1 / 180 / n)  # var of (u - 1/2)^2 is 1/180


def test_chi_square_64_bins(draws):
    counts = np.bincount((draws * 64).astype(np.int64), minlength=64)
    expected = draws.size / 64
    chi2 = ((counts - expected) ** 2 / expected).sum()
    # 63 degrees of freedom: mean 63, sd 11.2; 110 is beyond the 99.99th percentile
    assert chi2 < 110


def test_lag1_correlation(draws):
    r = np.corrcoef(draws[:-1], draws[1:])[0, 1]
    assert abs(r) < 5 / math.sqrt(draws.size)


def test_seeds_give_unrelated_streams():
    a = rng.uniform(1, np.arange(10**5)).astype(np.float64)
    b = rng.uniform(2, np.arange(10**5)).astype(np.float64)
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / math.sqrt(a.size)
    assert np.mean(np.isin(a, b)) < 0.01
