"""The "sim" CPU backend: our AscendC kernels (op_kernel/) run by our emulator (ascendc_sim/).

The emulator library is built by CMake during `pip install`; it is loaded with ctypes. Every launch
is checked against the emulator's rules (UB capacity, alignment, queues, GM bounds, cross-core
writes, dtype support) and counted; `last_launch()` returns the counters of the current thread's latest
launch.

Threads: the emulator runs a launch in one global context, and ctypes releases the GIL during the call,
so launches are serialised by a lock (the emulator runs blocks one after another anyway); launch
settings and `last_launch()` belong to the calling context (thread).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import importlib.machinery
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np

from ..reference.conv_bn import output_shape
from ..reference.rng import MASK64

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_DTYPE_CODES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(ml_dtypes.bfloat16): 2}
_OPS = {"leaky_relu": 0, "leaky_relu_backward": 1, "rrelu": 2, "rrelu_backward": 3}
# the kernel entries, named as msopgen names their op types (ActsRRelu -> acts_r_relu)
_KERNELS = {"leaky_relu": "acts_leaky_relu", "leaky_relu_backward": "acts_leaky_relu_grad", "rrelu": "acts_r_relu",
            "rrelu_backward": "acts_r_relu_grad"}
_ERROR_BYTES = 1024
# The emulator records, per output byte, which block wrote it (2 bytes each, for the
# overlapping_core_writes and unwritten_output rules), so one launch over a 4 GiB output would hold
# 8 GiB more. Elementwise ops on more than this many bytes per operand run as several launches, each
# with its own tiling and indexBase = the flat index of its first element (op_host/elementwise_tiling.h),
# as a host may launch them in pieces; results are identical, RReLU noise included.
LAUNCH_BYTES = 1 << 23


class EmulatorError(RuntimeError):
    """A kernel broke an emulator rule; `.kernel`, `.block` (None: launch-level) and `.rule` say where and which."""

    def __init__(self, kernel: str, block: int | None, rule: str, message: str):
        where = f"block {block}" if block is not None else "launch"
        super().__init__(f"{kernel} ({where}): [{rule}] {message}")
        self.kernel, self.block, self.rule = kernel, block, rule


class Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "gm_bytes_in", "gm_bytes_out", "datacopy_calls", "vector_instructions", "vector_repeats", "peak_ub_bytes",
        "cube_iterations", "cube_macs")] + [
        ("block_dim", ctypes.c_uint32), ("tile_length", ctypes.c_uint32),
        ("block_bytes_in", ctypes.c_uint64 * 64), ("block_bytes_out", ctypes.c_uint64 * 64),
        ("buffer_bytes_in", ctypes.c_uint64 * 16), ("buffer_bytes_out", ctypes.c_uint64 * 16)]


class ElementwiseTiling(ctypes.Structure):
    """Mirror of op_host/elementwise_tiling.h's ElementwiseTiling."""
    _fields_ = [("total_length", ctypes.c_uint64), ("big_core_length", ctypes.c_uint64),
                ("small_core_length", ctypes.c_uint64), ("index_base", ctypes.c_uint64),
                ("block_dim", ctypes.c_uint32), ("big_core_count", ctypes.c_uint32), ("tile_length", ctypes.c_uint32),
                ("slope", ctypes.c_float), ("lower", ctypes.c_float), ("span", ctypes.c_float)]


class BatchNormTiling(ctypes.Structure):
    """Mirror of op_host/batch_norm_leaky_relu_tiling.h's BatchNormLeakyReluTiling."""
    _fields_ = [("batch", ctypes.c_uint32), ("channels", ctypes.c_uint32), ("plane_size", ctypes.c_uint64)] + [
        (name, ctypes.c_uint32) for name in ("used_core_num", "channels_per_core", "big_core_count", "tile_length",
                                             "stats_length", "reduce_work_length")] + [
        ("negative_slope", ctypes.c_float), ("eps", ctypes.c_float), ("momentum", ctypes.c_float),
        ("update_running_stats", ctypes.c_uint32), ("inverse_count", ctypes.c_float),
        ("unbias_factor", ctypes.c_float)]


@dataclass(frozen=True)
class Launch:
    """Counters of one kernel launch; `buffer_bytes_in/out` map each GM buffer of the launch to its traffic."""
    kernel: str
    gm_bytes_in: int
    gm_bytes_out: int
    datacopy_calls: int
    vector_instructions: int
    vector_repeats: int
    peak_ub_bytes: int
    cube_iterations: int
    cube_macs: int
    block_dim: int
    tile_length: int
    block_bytes_in: tuple[int, ...]
    block_bytes_out: tuple[int, ...]
    buffer_bytes_in: dict[str, int]
    buffer_bytes_out: dict[str, int]


def library_path(name: str = "_sim") -> Path:
    return _PACKAGE_DIR / (name + importlib.machinery.EXTENSION_SUFFIXES[0])


_library: ctypes.CDLL | None = None
_launch_lock = threading.Lock()  # one launch at a time: the emulator's launch context is global


def _renew_launch_lock() -> None:  # a fork while another thread held the lock must not leave it held
    global _launch_lock
    _launch_lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_renew_launch_lock)


def load_library(name: str = "_sim") -> ctypes.CDLL:
    path = library_path(name)
    if not path.exists():
        raise OSError(f"{path.name} is not built: reinstall with `pip install -e .` (needs cmake and g++)")
    return ctypes.CDLL(str(path))


def _lib() -> ctypes.CDLL:
    global _library
    if _library is None:
        library = load_library()
        library.acts_sim_elementwise.restype = ctypes.c_int
        library.acts_sim_elementwise_tiling.restype = ctypes.c_int
        library.acts_sim_batch_norm_tiling.restype = ctypes.c_int
        library.acts_sim_batch_norm_leaky_relu.restype = ctypes.c_int
        library.acts_sim_batch_norm_leaky_relu_grad.restype = ctypes.c_int
        library.acts_sim_conv_eval_tiling.restype = ctypes.c_int
        library.acts_sim_conv_bn_leaky_relu_eval.restype = ctypes.c_int
        library.acts_sim_platform_name.restype = ctypes.c_char_p
        _library = library  # published only once configured: another thread may be calling _lib() too
    return _library


def _launch(function: str, *arguments) -> int:
    """Calls the emulator's launch entry point `function`, one launch at a time across threads."""
    entry = getattr(_lib(), function)
    with _launch_lock:
        return entry(*arguments)


def unavailable_reason() -> str | None:
    try:
        _lib()
    except OSError as exc:
        return str(exc)
    return None


def platforms() -> list[str]:
    lib = _lib()
    return [lib.acts_sim_platform_name(i).decode() for i in range(lib.acts_sim_platform_count())]


@dataclass(frozen=True)
class _Settings:
    """Launch settings tests and benchmarks may change: platform index and cores to tile for (0 = all)."""
    platform: int = 0
    vector_cores: int = 0


_settings_var: contextvars.ContextVar[_Settings] = contextvars.ContextVar("ascend_acts_sim_settings",
                                                                         default=_Settings())
_last_var: contextvars.ContextVar[Launch | None] = contextvars.ContextVar("ascend_acts_sim_last", default=None)


def _settings() -> _Settings:
    return _settings_var.get()


@contextlib.contextmanager
def launch_settings(platform: str | None = None, vector_cores: int | None = None):
    """Run launches on another platform (see platforms()) or tiled for fewer cores, inside a `with` block
    (this context only)."""
    current = _settings()
    token = _settings_var.set(_Settings(
        current.platform if platform is None else platforms().index(platform),
        current.vector_cores if vector_cores is None else vector_cores))
    try:
        yield
    finally:
        _settings_var.reset(token)


def last_launch() -> Launch | None:
    """Counters of the latest launch made in this context (thread)."""
    return _last_var.get()


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


def _dtype_code(a: np.ndarray) -> int:
    code = _DTYPE_CODES.get(a.dtype)
    if code is None:
        raise TypeError(f"the sim backend takes float32, float16 or bfloat16, got {a.dtype}")
    return code


def launch_from_stats(kernel: str, stats: Stats, buffers: tuple[str, ...] = ()) -> Launch:
    """`buffers` names the launch's GM buffers in the launcher's order."""
    blocks = min(stats.block_dim, 64)
    return Launch(kernel, stats.gm_bytes_in, stats.gm_bytes_out, stats.datacopy_calls, stats.vector_instructions,
                  stats.vector_repeats, stats.peak_ub_bytes, stats.cube_iterations, stats.cube_macs, stats.block_dim,
                  stats.tile_length,
                  tuple(stats.block_bytes_in[:blocks]), tuple(stats.block_bytes_out[:blocks]),
                  {name: stats.buffer_bytes_in[i] for i, name in enumerate(buffers)},
                  {name: stats.buffer_bytes_out[i] for i, name in enumerate(buffers)})


def _flat(a: np.ndarray, name: str, like: np.ndarray) -> np.ndarray:
    """A flat view of `a`, which must be a C-contiguous array of `like`'s dtype and size."""
    if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
        raise ValueError(f"{name}: the sim backend takes C-contiguous NumPy arrays")
    if a.dtype != like.dtype or a.size != like.size:
        raise ValueError(f"{name}: expected {like.size} elements of {like.dtype}, got {a.size} of {a.dtype}")
    return a.reshape(-1)


def _run(op: str, out, first, second=None, seed: int = 0, slope=0.0, lower=0.0, span=0.0, index_base: int = 0):
    if first.dtype == np.float64:
        raise TypeError("the sim backend runs the NPU kernels, which have no float64 (the 910B vector unit has none); "
                        "use the reference backend for float64")
    code = _dtype_code(first)
    first = _flat(first, "input", first)
    second = None if second is None else _flat(second, "saved", first)
    out = _flat(out, "out", first)
    # An output that is an input (in place) gets a temporary per launch below; one that overlaps an input
    # at another offset would overwrite elements a later launch still reads, so it gets one for the whole.
    shifted = any(np.shares_memory(out, a) and out.ctypes.data != a.ctypes.data for a in (first, second)
                  if a is not None)
    target = np.empty_like(out) if shifted else out
    step = LAUNCH_BYTES // first.itemsize
    for start in range(0, max(first.size, 1), step):  # one (empty) launch for an empty tensor
        piece = slice(start, start + step)
        _launch_elementwise(op, code, target[piece], first[piece], None if second is None else second[piece],
                            seed, slope, lower, span, index_base + start)
    if target is not out:
        np.copyto(out, target)


def _launch_elementwise(op: str, code: int, out, first, second, seed: int, slope, lower, span, index_base: int):
    # the emulator poisons outputs before a launch, so an output that aliases an input gets its own buffer
    aliased = any(np.shares_memory(out, a) for a in (first, second) if a is not None)
    target = np.empty_like(out) if aliased else out
    seed_box = ctypes.c_int64(np.int64(np.uint64(seed & MASK64)))
    stats, error, block = Stats(), ctypes.create_string_buffer(_ERROR_BYTES), ctypes.c_int64(-1)
    settings = _settings()
    status = _launch(
        "acts_sim_elementwise", ctypes.c_uint32(_OPS[op]), ctypes.c_uint32(code), ctypes.c_uint32(settings.platform),
        ctypes.c_uint32(settings.vector_cores), ctypes.c_uint64(first.size), _pointer(first), _pointer(second),
        ctypes.byref(seed_box), _pointer(target), ctypes.c_float(slope), ctypes.c_float(lower), ctypes.c_float(span),
        ctypes.c_uint64(index_base), ctypes.byref(stats), error, ctypes.c_uint64(_ERROR_BYTES), ctypes.byref(block))
    kernel = _KERNELS[op]
    raise_for_status(status, kernel, error, block)
    names = ("input", "output", "tiling") + (("saved",) if second is not None else ()) + (
        ("seed",) if op.startswith("rrelu") else ())
    _last_var.set(launch_from_stats(kernel, stats, names))
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


# --- BatchNorm + LeakyReLU training kernels (the fused Conv+BN+LeakyReLU after the platform's conv) ---
def _stats_array(a: np.ndarray, name: str) -> np.ndarray:
    if a.dtype != np.float32 or not a.flags.c_contiguous:
        raise TypeError(f"{name}: the kernels keep per-channel statistics as contiguous float32")
    return a


def _nchw(a: np.ndarray) -> tuple[int, int, int]:
    n, c = a.shape[:2]
    return n, c, int(np.prod(a.shape[2:], dtype=np.int64))


def batch_norm_tiling(backward: bool, shape: tuple[int, ...], element_size: int, platform: str = "ascend910b1",
                      vector_cores: int = 0) -> BatchNormTiling:
    """The op_host tiling of the BatchNorm + LeakyReLU kernels (for inspection and tests)."""
    n, c = shape[:2]
    plane = int(np.prod(shape[2:], dtype=np.int64))
    tiling = BatchNormTiling()
    status = _lib().acts_sim_batch_norm_tiling(
        ctypes.c_uint32(int(backward)), ctypes.c_uint32(n), ctypes.c_uint32(c), ctypes.c_uint64(plane),
        ctypes.c_uint32(element_size), ctypes.c_uint32(platforms().index(platform)), ctypes.c_uint32(vector_cores),
        ctypes.c_float(0.2), ctypes.c_float(1e-5), ctypes.c_float(0.1), ctypes.c_uint32(1), ctypes.byref(tiling))
    if status != 0:
        raise ValueError(f"no BatchNorm tiling for shape {tuple(shape)} with {element_size}-byte elements on {platform}")
    return tiling


def _pointer(a):
    return ctypes.c_void_p(a.ctypes.data) if a is not None else None


def _launch_batch_norm(function: str, kernel: str, names: tuple[str, ...], *arguments) -> None:
    stats, error, block = Stats(), ctypes.create_string_buffer(_ERROR_BYTES), ctypes.c_int64(-1)
    status = _launch(function, *arguments, ctypes.byref(stats), error, ctypes.c_uint64(_ERROR_BYTES),
                     ctypes.byref(block))
    raise_for_status(status, kernel, error, block)
    _last_var.set(launch_from_stats(kernel, stats, names))


def batch_norm_leaky_relu_forward(x, gamma, beta, running_mean, running_var, negative_slope: float, eps: float,
                                  momentum: float, update_running_stats: bool, out, save_mean, save_invstd) -> None:
    """out = leaky_relu(batch_norm(x) * gamma + beta) over NC(spatial) `x`; batch mean and 1/sqrt(var + eps)
    into save_mean/save_invstd; running stats (float32) updated in place when update_running_stats."""
    n, c, plane = _nchw(x)
    arrays = {"gamma": gamma, "beta": beta, "save_mean": save_mean, "save_invstd": save_invstd}
    if update_running_stats:
        arrays.update(running_mean=running_mean, running_var=running_var)
    for name, a in arrays.items():
        _stats_array(a, name)
    names = ("x", "gamma", "beta", "out", "save_mean", "save_invstd", "tiling") + (
        ("running_mean", "running_var") if update_running_stats else ())
    _launch_batch_norm(
        "acts_sim_batch_norm_leaky_relu", "acts_batch_norm_leaky_relu", names,
        ctypes.c_uint32(_dtype_code(x)), ctypes.c_uint32(_settings().platform),
        ctypes.c_uint32(_settings().vector_cores), ctypes.c_uint32(n), ctypes.c_uint32(c), ctypes.c_uint64(plane),
        _pointer(x), _pointer(gamma), _pointer(beta), _pointer(running_mean if update_running_stats else None),
        _pointer(running_var if update_running_stats else None), _pointer(out), _pointer(save_mean),
        _pointer(save_invstd), ctypes.c_float(negative_slope), ctypes.c_float(eps), ctypes.c_float(momentum),
        ctypes.c_uint32(int(update_running_stats)))


def batch_norm_leaky_relu_backward(grad_out, output, gamma, beta, invstd, negative_slope: float, grad_input,
                                   grad_gamma, grad_beta) -> None:
    """Gradients of x, gamma, beta from the forward's output (needs negative_slope > 0 and no zero gamma)."""
    if not negative_slope > 0:
        raise ValueError(f"negative_slope: the output-based backward needs a slope > 0, got {negative_slope}")
    n, c, plane = _nchw(grad_out)
    for name, a in {"gamma": gamma, "beta": beta, "invstd": invstd, "grad_gamma": grad_gamma,
                    "grad_beta": grad_beta}.items():
        _stats_array(a, name)
    if not np.all(gamma != 0):
        raise ValueError("gamma: the output-based backward divides by gamma; a zero entry needs the conv output kept")
    names = ("grad_out", "output", "gamma", "beta", "invstd", "grad_input", "grad_gamma", "grad_beta", "tiling")
    _launch_batch_norm(
        "acts_sim_batch_norm_leaky_relu_grad", "acts_batch_norm_leaky_relu_grad", names,
        ctypes.c_uint32(_dtype_code(grad_out)), ctypes.c_uint32(_settings().platform),
        ctypes.c_uint32(_settings().vector_cores), ctypes.c_uint32(n), ctypes.c_uint32(c), ctypes.c_uint64(plane),
        _pointer(grad_out), _pointer(output), _pointer(gamma), _pointer(beta), _pointer(invstd), _pointer(grad_input),
        _pointer(grad_gamma), _pointer(grad_beta), ctypes.c_float(negative_slope))


# --- the eval kernel of the fused Conv+BN+LeakyReLU: conv on the cube with BN folded, LeakyReLU epilogue ---
_GEOMETRY_FIELDS = ("batch", "in_channels", "height", "width", "out_channels", "kernel_h", "kernel_w", "stride_h",
                    "stride_w", "pad_top", "pad_left", "dilation_h", "dilation_w", "out_height", "out_width")
_CUBE_FIELDS = ("usedCoreNum", "M", "N", "Ka", "Kb", "singleCoreM", "singleCoreN", "singleCoreK", "baseM", "baseN",
                "baseK", "depthA1", "depthB1", "stepM", "stepN", "stepKa", "stepKb", "isBias", "iterateOrder", "dbL0A",
                "dbL0B", "dbL0C")


class CubeTiling(ctypes.Structure):
    """Mirror of op_host/conv_bn_leaky_relu_eval_tiling.h's CubeTilingFields (TCubeTiling names)."""
    _fields_ = [(name, ctypes.c_int32) for name in _CUBE_FIELDS]


class ConvEvalTiling(ctypes.Structure):
    """Mirror of op_host/conv_bn_leaky_relu_eval_tiling.h's ConvBnLeakyReluEvalTiling."""
    _fields_ = [(name, ctypes.c_uint32) for name in _GEOMETRY_FIELDS] + [
        (name, ctypes.c_uint32) for name in ("reduction", "column_tile", "tiles_per_image", "work_items",
                                             "used_core_num", "block_dim", "band_rows")] + [
        ("workspace_slab", ctypes.c_uint64), ("negative_slope", ctypes.c_float), ("cube", CubeTiling)]


def _conv_geometry(x_shape, weight_shape, stride, padding, dilation):
    """The kernel's geometry: padding is (top, bottom, left, right); bottom/right only set the output size."""
    n, cin, h, w = x_shape
    cout, _, kh, kw = weight_shape
    top, _, left, _ = padding
    oh, ow = output_shape(x_shape, weight_shape, stride, padding, dilation)[2:]
    values = (n, cin, h, w, cout, kh, kw, stride[0], stride[1], top, left, dilation[0], dilation[1], oh, ow)
    return (ctypes.c_uint32 * len(values))(*values), (n, cout, oh, ow)


def conv_eval_tiling(x_shape, weight_shape, stride, padding, dilation, element_size: int,
                     platform: str = "ascend910b1") -> ConvEvalTiling:
    """The op_host tiling of the eval kernel (for inspection and tests)."""
    geometry, _ = _conv_geometry(x_shape, weight_shape, stride, padding, dilation)
    tiling = ConvEvalTiling()
    status = _lib().acts_sim_conv_eval_tiling(geometry, ctypes.c_uint32(element_size),
                                              ctypes.c_uint32(platforms().index(platform)), ctypes.c_float(0.0),
                                              ctypes.byref(tiling))
    if status != 0:
        raise ValueError(f"no eval tiling for input {tuple(x_shape)}, weight {tuple(weight_shape)} on {platform}")
    return tiling


def conv_bn_leaky_relu_eval(x, weight, bias, stride, padding, dilation, negative_slope: float, out) -> ConvEvalTiling:
    """out = leaky_relu(conv2d(x, weight) + bias) in one launch, weight/bias already BN-folded; groups = 1.
    `bias` is float32; x, weight and out share one dtype. Returns the tiling the launch ran with."""
    if weight.dtype != x.dtype or out.dtype != x.dtype:
        raise TypeError(f"weight and out must have the input's dtype {x.dtype}, got {weight.dtype} and {out.dtype}")
    _stats_array(bias, "bias")
    geometry, out_shape = _conv_geometry(x.shape, weight.shape, stride, padding, dilation)
    if tuple(out.shape) != out_shape:
        raise ValueError(f"out: expected shape {out_shape}, got {tuple(out.shape)}")
    if weight.shape[1] != x.shape[1]:
        raise ValueError("weight: the eval kernel supports groups = 1 only (weight.shape[1] == input channels)")
    tiling = ConvEvalTiling()
    stats, error, block = Stats(), ctypes.create_string_buffer(_ERROR_BYTES), ctypes.c_int64(-1)
    status = _launch(
        "acts_sim_conv_bn_leaky_relu_eval", ctypes.c_uint32(_dtype_code(x)), ctypes.c_uint32(_settings().platform),
        geometry, _pointer(x),
        _pointer(weight), _pointer(bias), _pointer(out), ctypes.c_float(negative_slope), ctypes.byref(tiling),
        ctypes.byref(stats), error, ctypes.c_uint64(_ERROR_BYTES), ctypes.byref(block))
    kernel = "acts_conv_bn_leaky_relu_eval"
    raise_for_status(status, kernel, error, block)
    _last_var.set(launch_from_stats(kernel, stats, ("x", "weight", "bias", "out", "workspace", "tiling")))
    return tiling


# the fused Conv+BN+LeakyReLU ops (backends.FUSED_KERNELS)
from .sim_conv_bn import (  # noqa: E402,F401
    conv_bias_leaky_relu, conv_bias_leaky_relu_backward, conv_bn_leaky_relu_train, conv_bn_leaky_relu_train_backward)


# --- protocol bridge (replaced by the sim package) --------------------------------------------------------------
# The elementwise ops under the backend protocol of ascend_acts.backends (tensors in, tensors out, `out=`) over
# the array functions above; leaky_relu and leaky_relu_backward still answer NumPy callers with the array API.
import torch  # noqa: E402

from .reference import seed_value, to_array  # noqa: E402

_array_leaky_relu, _array_leaky_relu_backward = leaky_relu, leaky_relu_backward


def _on_tensors(run, out, inputs, *attributes):
    result = torch.empty_like(inputs[0]) if out is None else out
    run(*(to_array(t) for t in inputs), *attributes, to_array(result))
    return result


def leaky_relu(self, negative_slope, array_out=None, *, out=None):  # noqa: F811
    if isinstance(self, np.ndarray):
        return _array_leaky_relu(self, negative_slope, array_out)
    return _on_tensors(_array_leaky_relu, out, (self,), negative_slope)


def leaky_relu_backward(grad_output, self, negative_slope, self_is_result_or_array_out):  # noqa: F811
    if isinstance(grad_output, np.ndarray):
        return _array_leaky_relu_backward(grad_output, self, negative_slope, self_is_result_or_array_out)
    return _on_tensors(_array_leaky_relu_backward, None, (grad_output, self), negative_slope)


def rrelu_with_seed(self, seed, lower, upper, *, out=None):
    return _on_tensors(rrelu, out, (self,), lower, upper, seed_value(seed))


def rrelu_with_seed_backward(grad_output, self, seed, lower, upper, self_is_result):
    return _on_tensors(rrelu_backward, None, (grad_output, self), lower, upper, seed_value(seed))
