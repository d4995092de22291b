"""The elementwise AscendC kernels on the emulator: op_host tiling, sizes and block counts, the RNG's
high index word, and GM traffic from the launch counters."""

import ml_dtypes
import numpy as np
import pytest
import torch

from ascend_acts.backends import sim
from ascend_acts.ops.leaky_relu import kernels as leaky_relu_sim
from ascend_acts.ops.leaky_relu import reference as leaky_relu_reference
from ascend_acts.ops.rrelu import kernels as rrelu_sim
from ascend_acts.ops.rrelu import reference as rrelu_reference
from ascend_acts.ops.rrelu import rng
from markers import fast_only, slow

pytestmark = pytest.mark.skipif(sim.unavailable_reason() is not None, reason=str(sim.unavailable_reason()))

SIZES = [0, 1, 7, 8, 31, 32, 33, 255, 256, 257, 4095, 65537, 10**6 + 3, 3 * 10**7]
PLATFORMS = {"ascend910b1": (48, 192 * 1024), "ascend910b3": (40, 192 * 1024), "ascend910_93": (48, 192 * 1024)}
OPS = ["leaky_relu", "leaky_relu_backward", "rrelu", "rrelu_backward"]
KERNEL = {"leaky_relu": "leaky_relu", "leaky_relu_backward": "leaky_relu_grad", "rrelu": "rrelu",
          "rrelu_backward": "rrelu_grad"}
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
# UB buffers per op: (inputs, float work vectors, mask bits) -- an independent copy of the kernels' needs
BUFFERS = {"leaky_relu": (1, 0, 0), "leaky_relu_backward": (2, 1, 1), "rrelu": (1, 4, 1), "rrelu_backward": (2, 4, 1)}


def tensor(a: np.ndarray) -> torch.Tensor:
    """A tensor sharing `a`'s memory (bfloat16 through its bits)."""
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def array(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def seed_tensor(seed: int) -> torch.Tensor:
    return torch.tensor([np.int64(np.uint64(seed))], dtype=torch.int64)


def core_ranges(t):
    ranges, first = [], 0
    for block in range(t.block_dim):
        nominal = t.big_core_length if block < t.big_core_count else t.small_core_length
        length = min(nominal, t.total_length - first)
        ranges.append((first, length))
        first += nominal
    return ranges


def ub_bytes(op, size, tile):
    inputs, work, mask = BUFFERS[op]
    return ((inputs + 1) * 2 * size * tile + (0 if size == 4 else (inputs + 1) * 4 * tile) + work * 4 * tile
            + mask * tile // 8)


def usable_ub(op, ub):
    """The ops with a mask use Select, whose temporary takes the top 8 KiB of UB (AscendC's TMP_UB_OFFSET)."""
    return ub - 8 * 1024 if BUFFERS[op][2] else ub


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("size", [4, 2])
def test_tiling_covers_every_element_once_and_fits(platform, op, size):
    cores, ub = PLATFORMS[platform]
    unit = 32 // size
    for n in SIZES + [2**31 + 5, 2**40 + 3]:
        t = leaky_relu_sim.tiling(KERNEL[op], n, size, platform=platform)
        ranges = core_ranges(t)
        assert t.block_dim == min(cores, -(-n // unit))
        covered = 0
        for first, length in ranges:
            assert first == covered and first * size % 32 == 0  # contiguous, 32-byte aligned starts
            assert length > 0  # no idle core
            covered += length
        assert covered == n
        # every DataCopy is whole 32-byte blocks except the single tail (DataCopyPad)
        tails = [length for _, length in ranges if length % t.tile_length and length % t.tile_length * size % 32]
        assert len(tails) <= 1 and (not tails or ranges[-1][1] % t.tile_length * size % 32)
        assert t.tile_length % 256 == 0 and ub_bytes(op, size, t.tile_length) <= usable_ub(op, ub)
        longest = max((length for _, length in ranges), default=0)
        if t.tile_length < longest:  # a core needing several tiles gets the largest tile the UB holds
            assert ub_bytes(op, size, t.tile_length + 256) > usable_ub(op, ub)
        else:  # otherwise one tile, no larger than the core's share needs
            assert t.tile_length - 256 < max(longest, 1)


def run(op, dtype, n, shape=None, vector_cores=0, seed=7, index_base=0):
    rs = np.random.default_rng(n)
    x = rs.standard_normal(n).astype(np.float32).astype(dtype)
    if shape is not None:
        x = x.reshape(shape)
    grad = rs.standard_normal(x.shape).astype(np.float32).astype(dtype)
    expected = np.empty_like(x)
    with sim.launch_settings(vector_cores=vector_cores):
        if op == "leaky_relu":
            out = leaky_relu_sim.leaky_relu(tensor(x), 0.2)
            leaky_relu_reference.forward(x, 0.2, expected)
        elif op == "leaky_relu_backward":
            out = leaky_relu_sim.leaky_relu_backward(tensor(grad), tensor(x), 0.2, False)
            leaky_relu_reference.backward(grad, x, 0.2, expected)
        elif op == "rrelu":
            out = rrelu_sim.rrelu(tensor(x), seed_tensor(seed), 0.1, 0.3, index_base=index_base)
            rrelu_reference.forward(x, 0.1, 0.3, seed, expected)
        else:
            out = rrelu_sim.rrelu_backward(tensor(grad), tensor(x), seed_tensor(seed), 0.1, 0.3, False,
                                               index_base=index_base)
            rrelu_reference.backward(grad, x, 0.1, 0.3, seed, expected)
    return x, array(out), expected


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", fast_only([1, 7, 8, 31, 32, 33, 255, 256, 257, 4095, 65537], [257]))
def test_kernels_match_reference_bit_for_bit(op, dtype, n):
    _, out, expected = run(op, dtype, n)
    assert np.array_equal(out.view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("vector_cores", [1, 5, 0])
def test_one_and_many_blocks_and_shapes(op, vector_cores):
    _, out, expected = run(op, np.float16, 3 * 17 * 29 * 5, shape=(3, 17, 29, 5), vector_cores=vector_cores)
    assert np.array_equal(out, expected)
    assert sim.last_launch().block_dim == (vector_cores or 48)
    assert sim.last_launch().kernel == "acts_" + KERNEL[op]


@slow
@pytest.mark.parametrize("op", ["leaky_relu", "rrelu_backward"])
def test_million_elements(op):
    _, out, expected = run(op, np.float32, 10**6 + 3)
    assert np.array_equal(out, expected)


@pytest.mark.parametrize("op", ["rrelu", "rrelu_backward"])
@pytest.mark.parametrize("base", fast_only([2**24 - 1234, 2**31 - 1234, 2**32 - 1234, 2**32 + 2**31 - 1234,
                                            2**40 + 2**24 + 5], [2**32 - 1234]))
@pytest.mark.parametrize("vector_cores", [1, 0])
def test_noise_at_large_flat_indices_is_the_reference(op, base, vector_cores):
    """Flat indices across 2^24 (where CANN 8.x's CreateVecIndex<int32_t> stops being exact), 2^31 (the
    int32 sign of the low word) and 2^32 (the high word), launched at `index_base` instead of allocating
    2^24+ elements: bit-identical to the reference noise, on one core and on many."""
    n = 5000
    x = -np.abs(np.random.default_rng(0).standard_normal(n)).astype(np.float32) - 0.5
    with sim.launch_settings(vector_cores=vector_cores):
        if op == "rrelu":
            out = rrelu_sim.rrelu(tensor(x), seed_tensor(99), 0.1, 0.3, index_base=base).numpy()
        else:
            out = rrelu_sim.rrelu_backward(tensor(np.ones_like(x)), tensor(x), seed_tensor(99), 0.1, 0.3, False,
                                               index_base=base).numpy()
    noise = rng.noise(99, np.arange(base, base + n, dtype=np.uint64), 0.1, 0.3)
    assert np.array_equal(out, noise if op == "rrelu_backward" else x * noise)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES)
@pytest.mark.parametrize("op, reads, seed_bytes", [
    ("leaky_relu", 1, 0), ("leaky_relu_backward", 2, 0), ("rrelu", 1, 8), ("rrelu_backward", 2, 8)])
@pytest.mark.parametrize("n", fast_only([33, 65537, 10**6 + 3], [65537]))
def test_gm_traffic(op, reads, seed_bytes, dtype, n):
    """n elements of s bytes: forward 2*n*s, gradients 3*n*s, no noise tensor; the seed is read
    once per block; padding adds nothing (the tails move exact bytes with DataCopyPad)."""
    run(op, dtype, n)
    launch, s = sim.last_launch(), np.dtype(dtype).itemsize
    assert launch.gm_bytes_out == n * s
    assert launch.gm_bytes_in == reads * n * s + seed_bytes * launch.block_dim
    assert sum(launch.block_bytes_out) == n * s and launch.peak_ub_bytes <= usable_ub(op, 192 * 1024)
    assert launch.peak_ub_bytes == ub_bytes(op, s, launch.tile_length)


def test_float64_is_refused():
    with pytest.raises(TypeError, match="no float64"):
        leaky_relu_sim.leaky_relu(torch.zeros(4, dtype=torch.float64), 0.1)


def test_other_platforms_run():
    for platform in PLATFORMS:
        with sim.launch_settings(platform=platform):
            _, out, expected = run("rrelu", np.float32, 70001)
        assert np.array_equal(out, expected)
        assert sim.last_launch().block_dim == PLATFORMS[platform][0]
