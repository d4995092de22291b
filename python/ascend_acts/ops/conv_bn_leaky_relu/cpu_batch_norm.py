"""The reference backend's float32 normalisation + activation passes, compiled: ascend_acts._cpu
(cpu_kernel/norm_activation.cpp), with reference_batch_norm.forward/backward's signatures and results.

The same statistics, factors and per-value operations in the same roundings as reference_batch_norm.py's NumPy
passes; the row sums are float32 lanes of 32 values merged in float64 (at least as accurate as the NumPy segments).
Each statistics set (a channel over the batch, a sample's group) is visited whole while it is near the core, so a
forward reads its input about once from memory and a backward its two inputs about twice, where NumPy's passes,
one ufunc each, gain nothing from a second thread on a small machine (docs/benchmarks.md). Sets are shared out
to numerics.parallel's threads for large tensors, the GIL released in the module.

NumPy's passes stay the oracle of these and run where these do not: float64, empty tensors, batch statistics over
planes shorter than reference_batch_norm._SHORT_PLANE values (their whole-tensor passes), a build without the
module, and with ASCEND_ACTS_NUMPY_PASSES=1 (to compare the two).
"""

from __future__ import annotations

import math
import os

import numpy as np

from ...numerics.elementwise import quiet
from ...numerics.parallel import for_chunks, thread_count
from . import reference_batch_norm

try:
    from ... import _cpu
except ImportError:  # a source tree without the CMake build: NumPy's passes
    _cpu = None

# tensors of fewer values run on the calling thread: a pool's hand-off costs more than a second thread gains
_THREADED_VALUES = 1 << 24
NUMPY_PASSES = "ASCEND_ACTS_NUMPY_PASSES"


def available() -> bool:
    """Whether the compiled passes are built and not switched off (ASCEND_ACTS_NUMPY_PASSES=1)."""
    return _cpu is not None and os.environ.get(NUMPY_PASSES) != "1"


def describe() -> str:
    """Which passes the reference backend's float32 norms run, for `python -m ascend_acts info`."""
    if _cpu is None:
        return "NumPy (ascend_acts._cpu is not built)"
    if not available():
        return f"NumPy ({NUMPY_PASSES}=1)"
    return f"compiled (ascend_acts._cpu, {_cpu.isa()})"


def handles(values: np.ndarray, groups: int) -> bool:
    """Whether these passes run the normalisation of `values` (N, C, ...) with `groups` (0: batch statistics)."""
    if values.dtype != np.float32 or values.size == 0 or not values.flags.c_contiguous or not available():
        return False
    return groups > 0 or math.prod(values.shape[2:]) >= reference_batch_norm._SHORT_PLANE


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _activation(relu: bool, slope: np.float32) -> int:
    """cpu_kernel's Activation: 1 ReLU, 0 none (slope 1: z * 1 is z), 2 LeakyReLU."""
    return 1 if relu else 0 if slope == 1 else 2


def _for_sets(sets: int, values: int, body) -> None:
    """body(first, last) over the statistics sets [0, sets): on the calling thread, or for a large tensor in runs of
    sets on numerics.parallel's threads (a set's results are its own: which thread runs it changes no bit)."""
    threads = thread_count() if values >= _THREADED_VALUES else 1
    for_chunks(sets, body, chunk=max(1, -(-sets // threads)))


def _float32(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float32)


def forward(y: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, slope: float, out: np.ndarray,
            relu: bool = False, groups: int = 0, centre_on_mean: bool = False):
    """reference_batch_norm.forward (see there) for float32, C-contiguous y and out (handles(y, groups))."""
    n, c = y.shape[:2]
    size = math.prod(y.shape[2:])
    assert y.flags.c_contiguous and out.flags.c_contiguous and out.shape == y.shape and out.dtype == y.dtype
    gamma, beta = _float32(gamma), _float32(beta)
    slope = np.float32(slope)
    sets = n * groups if groups else c
    mean, invstd, variance = (np.empty((n, groups) if groups else c, np.float32) for _ in range(3))

    def run(first: int, last: int) -> None:
        _cpu.forward(_address(y), _address(out), n, c, size, groups, first, last, _address(gamma), _address(beta),
                     float(eps), _activation(relu, slope), float(slope), centre_on_mean, _address(mean),
                     _address(invstd), _address(variance))

    with quiet():
        _for_sets(sets, y.size, run)
    return mean, invstd, variance


def backward(grad_out: np.ndarray, saved: np.ndarray, saved_is_result: bool, gamma: np.ndarray,
             beta: np.ndarray, mean: np.ndarray, invstd: np.ndarray, slope: float, grad_y: np.ndarray,
             relu: bool = False, groups: int = 0):
    """reference_batch_norm.backward (see there) for float32, C-contiguous arrays (handles(grad_out, groups))."""
    n, c = grad_out.shape[:2]
    size = math.prod(grad_out.shape[2:])
    assert all(a.flags.c_contiguous and a.shape == grad_out.shape and a.dtype == np.float32
               for a in (saved, grad_y)) and grad_out.flags.c_contiguous
    gamma, beta, mean, invstd = (_float32(a) for a in (gamma, beta, mean, invstd))
    slope = np.float32(slope)
    sets = n * groups if groups else c
    # float64 sums: per channel (batch statistics) or per row, added over the batch below (group statistics)
    grad_gamma, grad_beta = (np.empty((n, c) if groups else c) for _ in range(2))

    def run(first: int, last: int) -> None:
        _cpu.backward(_address(grad_out), _address(saved), _address(grad_y), saved_is_result, n, c, size, groups,
                      first, last, _address(gamma), _address(beta), _address(mean), _address(invstd),
                      _activation(relu, slope), float(slope), _address(grad_gamma), _address(grad_beta))

    with quiet():
        _for_sets(sets, grad_out.size, run)
        if groups:
            grad_gamma, grad_beta = grad_gamma.sum(axis=0), grad_beta.sum(axis=0)
    return grad_gamma.astype(np.float32), grad_beta.astype(np.float32)
