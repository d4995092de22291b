"""LeakyReLU on our AscendC kernels: on the emulator for CPU tensors (the "sim" backend's functions), through the
op package on NPU tensors (the NPU's functions once the extension is loaded), one launch sequence for both
(`backends.launch`); and the helpers of their kernel family (op_kernel/ family "elementwise", RReLU's kernels too:
`tiling`, `run`).

On the emulator large tensors run in pieces: it records, per output byte, which block wrote it (2 bytes each,
for the overlapping_core_writes and unwritten_output rules), so one launch over a 4 GiB output would hold
8 GiB more. An op on more than LAUNCH_BYTES per operand runs as several launches, each with its own tiling
and indexBase = the flat index of its first element (op_host/elementwise/elementwise_tiling.h), as a host may launch
them in pieces; results are identical, RReLU noise included. `last_launch()` has the last piece's counters. An NPU
launches the whole tensor at once.
"""

from __future__ import annotations

import torch

from ...backends.launch import check_dtype, launch, on_emulator
from ...backends.sim import emulator
from ...op_table import kernel as table_kernel

LAUNCH_BYTES = 1 << 23


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two contiguous tensors share bytes."""
    if a.numel() == 0 or b.numel() == 0:
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.nbytes and b0 < a0 + a.nbytes


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1)  # a view: the backend gets contiguous tensors


def tiling(kernel: str, total_length: int, element_size: int, index_base: int = 0, platform: str | None = None,
           vector_cores: int | None = None, **attrs):
    """The op_host tiling (ascend_acts._sim.ElementwiseTiling) `kernel` runs with here (for inspection and tests):
    over `total_length` elements, with the kernel's attributes `attrs` (the op table's defaults for those not
    given)."""
    spec = table_kernel(kernel)
    current = emulator.settings()
    inputs = [(total_length,)] + [(1,)] * (len(spec.inputs) - 1)  # the data, then RReLU's one-element seed
    return emulator.binding().elementwise_tiling(
        kernel, inputs, element_size, {a.name: a.default for a in spec.attrs} | attrs,
        current.platform if platform is None else platform,
        current.vector_cores if vector_cores is None else vector_cores, index_base)


def run(kernel: str, out: torch.Tensor | None, inputs: tuple[torch.Tensor, ...], attrs: dict,
        index_base: int = 0) -> torch.Tensor:
    """`kernel` over `inputs` (its op-table inputs in order: the data tensors, then RReLU's seed) with the kernel's
    attributes `attrs`, into `out` (a new tensor when None); on the emulator in pieces of at most LAUNCH_BYTES."""
    data = inputs[0]
    check_dtype(data)
    spec = table_kernel(kernel)
    if index_base and not on_emulator(data):
        raise ValueError("index_base: an NPU launches the whole tensor from flat index 0")
    result = torch.empty_like(data, memory_format=torch.contiguous_format) if out is None else out
    target = result if result.is_contiguous() else torch.empty_like(data, memory_format=torch.contiguous_format)
    flat_out = _flat(target)
    flats = [_flat(t) if t.numel() == data.numel() and t.dtype == data.dtype else t.contiguous() for t in inputs]
    per_element = [t.numel() == data.numel() and t.dtype == data.dtype for t in inputs]
    # An output that is an input (in place) gets a temporary per launch below; one that overlaps an input at
    # another offset would overwrite elements a later launch still reads, so it gets one for the whole.
    shifted = any(_overlaps(flat_out, t) and flat_out.data_ptr() != t.data_ptr()
                  for t, split in zip(flats, per_element) if split)
    written = torch.empty_like(flat_out) if shifted else flat_out
    step = max(LAUNCH_BYTES // data.element_size(), 1) if on_emulator(data) else max(data.numel(), 1)
    # the emulator poisons outputs before a launch, so an output that aliases an input is launched into a
    # temporary of one piece's size, one for all pieces (allocated once: no allocator churn per piece)
    aliased = any(_overlaps(written, t) for t, split in zip(flats, per_element) if split)
    scratch = torch.empty(min(step, written.numel()), dtype=written.dtype, device=written.device) if aliased else None
    for start in range(0, max(data.numel(), 1), step):  # one (empty) launch for an empty tensor
        piece = slice(start, start + step)
        pieces = [t[piece] if split else t for t, split in zip(flats, per_element)]
        _launch_piece(spec, written[piece], pieces, index_base + start, attrs, scratch)
    if written is not flat_out:
        flat_out.copy_(written)
    if target is not result:
        result.copy_(target)
    return result


def _launch_piece(spec, out, inputs, index_base, attrs, scratch) -> None:
    target = out if scratch is None else scratch[:out.numel()]

    def tiling():  # the op package's tiling, from the piece's inputs and the kernel's attributes
        settings = emulator.settings()
        return emulator.binding().elementwise_tiling(
            spec.base, [tuple(t.shape) for t in inputs], out.element_size(), attrs, settings.platform,
            settings.vector_cores, index_base)

    buffers = {t.name: tensor for t, tensor in zip(spec.inputs, inputs)} | {spec.outputs[0].name: target}
    launch(spec.base, buffers, attrs, tiling)
    if target is not out:
        out.copy_(target)


def leaky_relu(self: torch.Tensor, negative_slope: float, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return run("leaky_relu", out, (self,), {"negative_slope": negative_slope})


def leaky_relu_backward(grad_output: torch.Tensor, self: torch.Tensor, negative_slope: float,
                        saved_is_result: bool) -> torch.Tensor:
    return run("leaky_relu_grad", None, (grad_output, self), {"negative_slope": negative_slope})
