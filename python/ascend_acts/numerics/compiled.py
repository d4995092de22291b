"""The reference backend's compiled float32 passes: ascend_acts._cpu (cpu_kernel/, built by `pip install` with the
emulator), used where it is built and not switched off with ASCEND_ACTS_NUMPY_PASSES=1 (then, or without the
module, the NumPy passes it stands in for run: the oracle its tests compare against).

The module takes raw addresses of C-contiguous arrays (the callers check them and keep them alive), releases the
GIL and shares a large call out over torch's own OpenMP threads (cpu_kernel/module.cpp): as many as torch would use
on the calling thread (`threads()`; one in a DataLoader worker, as torch sets it there).
"""

from __future__ import annotations

import os

import numpy as np
import torch

try:
    from .. import _cpu
except ImportError:  # a source tree without the CMake build: the NumPy passes
    _cpu = None

NUMPY_PASSES = "ASCEND_ACTS_NUMPY_PASSES"


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


def threads() -> int:
    """The threads a large call may use: torch's intra-op thread count on the calling thread."""
    return torch.get_num_threads()
