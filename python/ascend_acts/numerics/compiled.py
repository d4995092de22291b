"""The reference backend's compiled float32 passes: ascend_acts._cpu (cpu_kernel/, built by `pip install` with the
emulator), used where it is built and not switched off with ASCEND_ACTS_NUMPY_PASSES=1 (then, or without the
module, the NumPy passes it stands in for run: the oracle its tests compare against).

The module takes raw addresses of C-contiguous arrays (the callers check them and keep them alive) and releases the
GIL. Work runs on the calling thread unless it is large: measured in a CycleGAN training step on 2 CPUs, handing
tensors of 2 Mi values to a second thread lost (the step 1.01x torch's against 0.98x), the hand-off and torch's
OpenMP threads, still spinning after its convolutions, costing more than the second core gained; alone, such a tensor
runs in about half the time on two threads.
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np

from .parallel import for_chunks, thread_count

try:
    from .. import _cpu
except ImportError:  # a source tree without the CMake build: the NumPy passes
    _cpu = None

NUMPY_PASSES = "ASCEND_ACTS_NUMPY_PASSES"
# work on fewer values runs on the calling thread (see above)
THREADED_VALUES = 1 << 24


def module():
    """ascend_acts._cpu, or None where it is not built or ASCEND_ACTS_NUMPY_PASSES=1."""
    return _cpu if _cpu is not None and os.environ.get(NUMPY_PASSES) != "1" else None


def module_for(*arrays: np.ndarray):
    """module() where it can take these arrays by address (C-contiguous float32, the passes' one dtype), else None."""
    passes = module()
    if passes is None or not all(a.dtype == np.float32 and a.flags.c_contiguous for a in arrays):
        return None
    return passes


def describe() -> str:
    """Which passes the reference backend runs in float32, for `python -m ascend_acts info`."""
    if _cpu is None:
        return "NumPy (ascend_acts._cpu is not built)"
    if module() is None:
        return f"NumPy ({NUMPY_PASSES}=1)"
    return f"compiled (ascend_acts._cpu, {_cpu.isa()})"


def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def for_ranges(items: int, values: int, body: Callable[[int, int], None]) -> None:
    """body(first, last) over [0, items) of `values` values in all: on the calling thread, or for a large tensor in one
    run per thread on numerics.parallel's threads (results must not depend on the split)."""
    threads = thread_count() if values >= THREADED_VALUES else 1
    for_chunks(items, body, chunk=max(1, -(-items // threads)))
