"""A stand-in for the torch_npu extension, to drive the NPU branch of the launch sequences without a device.

`private_ops()` defines the extension's private ops (ascend_acts_npu::<kernel>, the table's `Kernel.npu_schema`)
with CPU kernels that check what the generated C++ checks (outputs preallocated contiguous, every tensor on one
device) and launch the kernel on the emulator with its family's tiling, recording each call. `npu_branch()` makes
`backends.launch` send CPU tensors to the private ops, as NPU tensors go, so every launch sequence takes the path
an NPU runs.
"""

from __future__ import annotations

import contextlib

import torch

from ascend_acts.backends import launch as launcher
from ascend_acts.backends.sim import emulator
from ascend_acts.op_table import FLOAT_TYPES, KERNELS, NPU_NAMESPACE


def _tiling(kernel, buffers, attrs):
    """The host tiling the op package's tiling function computes, from the private op's arguments alone: the same
    request (its inputs' shapes, input 0's element size, its attributes) given to the family's tiling on the
    emulator."""
    first = buffers[kernel.inputs[0].name]
    shapes = [None if buffers[t.name] is None else tuple(buffers[t.name].shape) for t in kernel.inputs]
    settings = emulator.settings()
    return getattr(emulator.binding(), f"{kernel.family}_tiling")(
        kernel.base, shapes, first.element_size(), attrs, settings.platform, settings.vector_cores)


def _kernel_function(kernel, calls):
    def run(*arguments):
        named = dict(zip((a.name for a in kernel.npu_arguments), arguments))
        calls.append((kernel.base, named))
        attrs = {a.name: named[a.name] for a in kernel.attrs}
        buffers = {t.name: named[t.name] for t in (*kernel.inputs, *kernel.outputs)}
        first = buffers[kernel.inputs[0].name]
        for t in kernel.outputs:  # the generated C++'s CheckWritable
            written = buffers[t.name]
            assert written.is_contiguous() and written.device == first.device, (kernel.base, t.name)
            assert written.numel() == 0 or written.data_ptr() % 32 == 0, (kernel.base, t.name, "32-byte aligned")
        # the OpDef's dtypes (AclType takes no float64): the combination is the first input's dtype's column
        column = FLOAT_TYPES.index(str(first.dtype).removeprefix("torch."))
        for t in (*kernel.inputs, *kernel.outputs):
            given = buffers[t.name]
            assert given is None or str(given.dtype).removeprefix("torch.") == t.dtypes[column], (
                kernel.base, t.name, given.dtype, t.dtypes[column])
        if first.numel() == 0:  # the generated C++ launches nothing over an empty grid
            return
        if attrs.get("update_running_stats") is False:  # placeholders the kernel does not touch: the emulator
            buffers.update({name: None for name in kernel.inplace})  # checks that by taking none
        emulator.launch(kernel.base, {n: None if t is None else t.contiguous() for n, t in buffers.items()},
                        _tiling(kernel, buffers, attrs))

    return run


@contextlib.contextmanager
def private_ops():
    """Defines the private namespace as the extension does; yields the list of (kernel, arguments by name) calls."""
    calls = []
    library = torch.library.Library(NPU_NAMESPACE, "DEF")
    try:
        for kernel in KERNELS:
            library.define(kernel.base + kernel.npu_schema)
            function = _kernel_function(kernel, calls)
            library.impl(kernel.base, function, "CPU")
            library.impl(kernel.base, function, "PrivateUse1")
        yield calls
    finally:
        library._destroy()


def npu_branch(monkeypatch) -> None:
    """Launches over CPU tensors take the NPU branch of `backends.launch` (the private ops)."""
    monkeypatch.setattr(launcher, "EMULATED_DEVICE_TYPE", None)
