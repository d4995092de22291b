"""The "sim" CPU backend: our AscendC kernels (op_kernel/) run by our emulator (ascendc_sim/).

The emulator library is built by CMake during `pip install`; it is loaded with ctypes. Every launch
is checked against the emulator's rules (UB capacity, alignment, queues, GM bounds, cross-core
writes, dtype support) and counted; `last_launch()` returns the counters of the latest launch.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.machinery
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from ..reference.rng import MASK64

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_DTYPE_CODES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(ml_dtypes.bfloat16): 2}
_OPS = {"leaky_relu": 0, "leaky_relu_backward": 1, "rrelu": 2, "rrelu_backward": 3}
_ERROR_BYTES = 1024


class EmulatorError(RuntimeError):
    """A kernel broke an emulator rule; `.kernel`, `.block` (None: launch-level) and `.rule` say where and which."""

    def __init__(self, kernel: str, block: int | None, rule: str, message: str):
        where = f"block {block}" if block is not None else "launch"
        super().__init__(f"{kernel} ({where}): [{rule}] {message}")
        self.kernel, self.block, self.rule = kernel, block, rule


class Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "gm_bytes_in", "gm_bytes_out", "datacopy_calls", "vector_instructions", "vector_repeats", "peak_ub_bytes")] + [
        ("block_dim", ctypes.c_uint32), ("tile_length", ctypes.c_uint32),
        ("block_bytes_in", ctypes.c_uint64 * 64), ("block_bytes_out", ctypes.c_uint64 * 64)]


class ElementwiseTiling(ctypes.Structure):
    """Mirror of op_host/elementwise_tiling.h's ElementwiseTiling."""
    _fields_ = [("total_length", ctypes.c_uint64), ("big_core_length", ctypes.c_uint64),
                ("small_core_length", ctypes.c_uint64), ("index_base", ctypes.c_uint64),
                ("block_dim", ctypes.c_uint32), ("big_core_count", ctypes.c_uint32), ("tile_length", ctypes.c_uint32),
                ("slope", ctypes.c_float), ("lower", ctypes.c_float), ("span", ctypes.c_float)]


@dataclass(frozen=True)
class Launch:
    """Counters of one kernel launch."""
    kernel: str
    gm_bytes_in: int
    gm_bytes_out: int
    datacopy_calls: int
    vector_instructions: int
    vector_repeats: int
    peak_ub_bytes: int
    block_dim: int
    tile_length: int
    block_bytes_in: tuple[int, ...]
    block_bytes_out: tuple[int, ...]


def library_path(name: str = "_sim") -> Path:
    return _PACKAGE_DIR / (name + importlib.machinery.EXTENSION_SUFFIXES[0])


_library: ctypes.CDLL | None = None


def load_library(name: str = "_sim") -> ctypes.CDLL:
    path = library_path(name)
    if not path.exists():
        raise OSError(f"{path.name} is not built: reinstall with `pip install -e .` (needs cmake and g++)")
    return ctypes.CDLL(str(path))


def _lib() -> ctypes.CDLL:
    global _library
    if _library is None:
        _library = load_library()
        _library.acts_sim_elementwise.restype = ctypes.c_int
        _library.acts_sim_elementwise_tiling.restype = ctypes.c_int
        _library.acts_sim_platform_name.restype = ctypes.c_char_p
    return _library


def unavailable_reason() -> str | None:
    try:
        _lib()
    except OSError as exc:
        return str(exc)
    return None


def platforms() -> list[str]:
    lib = _lib()
    return [lib.acts_sim_platform_name(i).decode() for i in range(lib.acts_sim_platform_count())]


# Launch settings tests and benchmarks may change: platform index and cores to tile for (0 = all).
_settings = {"platform": 0, "vector_cores": 0}
_last: Launch | None = None


@contextlib.contextmanager
def launch_settings(platform: str | None = None, vector_cores: int | None = None):
    """Run launches on another platform (see platforms()) or tiled for fewer cores, inside a `with` block."""
    previous = dict(_settings)
    if platform is not None:
        _settings["platform"] = platforms().index(platform)
    if vector_cores is not None:
        _settings["vector_cores"] = vector_cores
    try:
        yield
    finally:
        _settings.update(previous)


def last_launch() -> Launch | None:
    return _last


def elementwise_tiling(op: str, total_length: int, element_size: int, platform: str = "ascend910b1",
                       vector_cores: int = 0) -> ElementwiseTiling:
    """The op_host tiling the kernels run with (for inspection and tests)."""
    tiling = ElementwiseTiling()
    status = _lib().acts_sim_elementwise_tiling(
        ctypes.c_uint32(_OPS[op]), ctypes.c_uint64(total_length), ctypes.c_uint32(element_size),
        ctypes.c_uint32(platforms().index(platform)), ctypes.c_uint32(vector_cores), ctypes.byref(tiling))
    if status != 0:
        raise ValueError(f"no tiling for {op} with {total_length} elements of {element_size} bytes on {platform}")
    return tiling


def raise_for_status(status: int, kernel: str, error: ctypes.Array, block: ctypes.c_int64) -> None:
    if status == 1:
        rule, _, message = error.value.decode().partition("\t")
        raise EmulatorError(kernel, block.value if block.value >= 0 else None, rule, message)
    if status != 0:
        raise ValueError(f"{kernel}: arguments rejected by the emulator library")


def launch_from_stats(kernel: str, stats: Stats) -> Launch:
    blocks = min(stats.block_dim, 64)
    return Launch(kernel, stats.gm_bytes_in, stats.gm_bytes_out, stats.datacopy_calls, stats.vector_instructions,
                  stats.vector_repeats, stats.peak_ub_bytes, stats.block_dim, stats.tile_length,
                  tuple(stats.block_bytes_in[:blocks]), tuple(stats.block_bytes_out[:blocks]))


def _run(op: str, out, first, second=None, seed: int = 0, slope=0.0, lower=0.0, span=0.0, index_base: int = 0):
    global _last
    if first.dtype == np.float64:
        raise TypeError("the sim backend runs the NPU kernels, which have no float64 (the 910B vector unit has none); "
                        "use the reference backend for float64")
    code = _DTYPE_CODES.get(first.dtype)
    if code is None:
        raise TypeError(f"the sim backend takes float32, float16 or bfloat16, got {first.dtype}")
    arrays = [a for a in (first, second) if a is not None]
    # the emulator poisons outputs before a launch, so an output that aliases an input gets its own buffer
    target = np.empty_like(out) if any(np.shares_memory(out, a) for a in arrays) else out
    seed_box = ctypes.c_int64(np.int64(np.uint64(seed & MASK64)))
    stats, error, block = Stats(), ctypes.create_string_buffer(_ERROR_BYTES), ctypes.c_int64(-1)

    def pointer(a):
        return ctypes.c_void_p(a.ctypes.data) if a is not None else None

    status = _lib().acts_sim_elementwise(
        ctypes.c_uint32(_OPS[op]), ctypes.c_uint32(code), ctypes.c_uint32(_settings["platform"]),
        ctypes.c_uint32(_settings["vector_cores"]), ctypes.c_uint64(first.size), pointer(first), pointer(second),
        ctypes.byref(seed_box), pointer(target), ctypes.c_float(slope), ctypes.c_float(lower), ctypes.c_float(span),
        ctypes.c_uint64(index_base), ctypes.byref(stats), error, ctypes.c_uint64(_ERROR_BYTES), ctypes.byref(block))
    kernel = "acts_" + op.replace("_backward", "_grad")
    raise_for_status(status, kernel, error, block)
    _last = launch_from_stats(kernel, stats)
    if target is not out:
        np.copyto(out, target)


def _bounds(lower: float, upper: float) -> tuple[float, float]:
    lo = np.float32(lower)
    return float(lo), float(np.float32(np.float32(upper) - lo))


def leaky_relu(x, negative_slope: float, out) -> None:
    _run("leaky_relu", out, x, slope=negative_slope)


def leaky_relu_backward(grad, saved, negative_slope: float, out) -> None:
    _run("leaky_relu_backward", out, grad, saved, slope=negative_slope)


def rrelu(x, lower: float, upper: float, seed: int, out, index_base: int = 0) -> None:
    lo, span = _bounds(lower, upper)
    _run("rrelu", out, x, seed=seed, lower=lo, span=span, index_base=index_base)


def rrelu_backward(grad, saved, lower: float, upper: float, seed: int, out, index_base: int = 0) -> None:
    lo, span = _bounds(lower, upper)
    _run("rrelu_backward", out, grad, saved, seed=seed, lower=lo, span=span, index_base=index_base)
