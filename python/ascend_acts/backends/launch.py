"""One launch of an AscendC kernel of the op table, on the device its tensors are on: CPU tensors on our emulator,
NPU (PrivateUse1) tensors through the op package, as the torch_npu extension's private op
`ascend_acts_npu::<kernel>` (op_table.Kernel.npu_schema, generated into csrc/npu_registrations.inc).

Each op's launch sequence (`ascend_acts.ops.<op>.kernels`) is the same Python for both devices and calls `launch`
once per kernel launch, with the kernel's tensors and attributes by their table names and the outputs allocated
(contiguous: the private ops refuse anything else rather than copy). Only the emulator needs a host tiling from
Python (the op package's tiling function runs on the NPU's host side), so the tiling is a callable, called only
there. This module imports no op layer.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

from ..op_table import NPU_NAMESPACE, Attr
from ..op_table import kernel as table_kernel
from .sim import emulator

# the device type whose tensors the emulator runs; every other one launches through the op package (a test drives
# that branch without an NPU by setting this to None: tests/npu_stand_in.py)
EMULATED_DEVICE_TYPE: str | None = "cpu"


def on_emulator(tensor: torch.Tensor) -> bool:
    """Whether launches over `tensor` run on the emulator (a CPU tensor) rather than the op package (an NPU one).
    The work only the emulator needs (its launch-size limits, its own tiling) is chosen by this."""
    return tensor.device.type == EMULATED_DEVICE_TYPE


def check_dtype(tensor: torch.Tensor) -> None:
    """The kernels' data types (float32, float16, bfloat16), said for the device that runs them: TypeError."""
    if on_emulator(tensor):
        emulator.check_dtype(tensor)
    elif tensor.dtype not in emulator.FLOAT_DTYPES:
        raise TypeError(f"ascend_acts: the NPU kernels take float32, float16 or bfloat16 tensors, got {tensor.dtype}")


def launch(kernel: str, buffers: Mapping[str, torch.Tensor | None], attrs: Mapping[str, Any],
           tiling: Callable[[], Any]):
    """Launches op-table kernel `kernel` (its base name) over `buffers` (every input and output by name; an absent
    optional input None) with `attrs` (every attribute by name), on the device of its first input. On the emulator
    `tiling()` gives the op_host tiling and the launch's counters are returned (`emulator.last_launch()`); on an NPU
    the outputs are written in place and None is returned."""
    spec = table_kernel(kernel)
    tensors = {t.name for t in (*spec.inputs, *spec.outputs)}
    if set(buffers) != tensors or set(attrs) != {a.name for a in spec.attrs}:
        raise ValueError(f"launch({kernel!r}): expected the tensors {sorted(tensors)} and the attributes "
                         f"{[a.name for a in spec.attrs]}, got {sorted(buffers)} and {sorted(attrs)}")
    if on_emulator(buffers[spec.inputs[0].name]):
        return emulator.launch(kernel, dict(buffers), tiling())
    arguments = [attrs[a.name] if isinstance(a, Attr) else buffers[a.name] for a in spec.npu_arguments]
    getattr(getattr(torch.ops, NPU_NAMESPACE), kernel)(*arguments)
    return None
