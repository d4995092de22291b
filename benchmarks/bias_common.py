"""What the two bias + activation benchmarks share (bench_fused_bias_leaky_relu.py, bench_bias_act.py): an op
f(x, bias) timed side by side with a composite on the CPU, and GM traffic per call (ours counted by the emulator,
the others op by op, each op reading its inputs from GM once and writing its output once) as rows and tables.

The scripts' row dataclasses share the fields used here (part, shape, elements, channels, impl, phase, median_ms,
ratio, saved_bytes, max_rel_error, gm_bytes, launches, modelled_910b_us, detail).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from common import (
    backend_context,
    in_backend,
    kernel_names,
    markdown_table,
    max_rel_error,
    ratio_cell,
    recorded_launches,
    saved_bytes,
    saved_mib_cell,
    side_by_side,
)

HBM_BYTES_PER_S = 1.6e12  # 910B, commonly quoted; no official figure (treat as +-30%)
ELEMENT = 4  # float32
PHASES = ("forward", "backward", "forward+backward")


# --- CPU part ---------------------------------------------------------------------------------------------
def output_and_gradients(function, inputs) -> list[torch.Tensor]:
    """function(x, bias) and the gradients of x and bias for inputs["grad"]."""
    x, bias = (inputs[k].clone().requires_grad_() for k in ("x", "bias"))
    out = function(x, bias)
    return [out.detach(), *torch.autograd.grad(out, (x, bias), inputs["grad"])]


@dataclass
class Prepared:
    calls: dict[str, Callable[[], object]]
    saved: int
    error: float
    ran: str  # which emulator kernels ran ("" unless asked)


def prepare_cpu(impl: str, function, inputs: dict[str, torch.Tensor], exact: list[torch.Tensor],
                record_launches: bool = False) -> Prepared:
    """function(x, bias) under impl's backend: a call per phase, its bytes kept for the backward, its largest error
    against `exact` and (record_launches) the emulator kernels its forward and backward launch."""
    x, bias, grad = inputs["x"], inputs["bias"], inputs["grad"]
    leaves = [x.clone().requires_grad_(), bias.clone().requires_grad_()]
    with backend_context(impl):
        error = max_rel_error(output_and_gradients(function, inputs), exact)
        saved = saved_bytes(lambda: function(*leaves))
        ran = ""
        if record_launches:
            with recorded_launches() as forward_launches:
                output = function(*leaves)
            with recorded_launches() as backward_launches:
                torch.autograd.grad(output, leaves, grad)
            ran = f"forward: {kernel_names(forward_launches)}; backward: {kernel_names(backward_launches)}"
        output = function(*leaves)  # kept for the backward-only phase
    phases = {
        "forward": lambda: function(x, bias),
        "backward": lambda: torch.autograd.grad(output, leaves, grad, retain_graph=True),
        "forward+backward": lambda: torch.autograd.grad(function(*leaves), leaves, grad),
    }
    return Prepared(in_backend(impl, phases), saved, error, ran)


def cpu_rows(row_type, shape: str, elements: int, channels: int, prepared: dict[str, Prepared], baseline: str,
             repeats: int, minimal_bytes: dict[str, int] | None = None) -> list:
    """The prepared implementations timed side by side; with minimal_bytes (per phase) a gb_per_s column too."""
    rows = []
    for phase, impl, milliseconds, ratio in side_by_side({i: p.calls for i, p in prepared.items()}, PHASES, repeats,
                                                         baseline):
        p = prepared[impl]
        extra = {} if minimal_bytes is None else {"gb_per_s": minimal_bytes[phase] / milliseconds / 1e6}
        rows.append(row_type(part="cpu", shape=shape, elements=elements, channels=channels, impl=impl, phase=phase,
                             median_ms=milliseconds, ratio=ratio, saved_bytes=p.saved, max_rel_error=p.error,
                             detail=p.ran, **extra))
    return rows


def cpu_tables(rows: list, impls: list[str], baseline: str, headers: dict[str, str]) -> str:
    """Time per shape and phase, then saved MiB and errors per shape; "-" where an impl was not run.
    headers: "shape", "baseline" (the baseline's name), "time" and "saved" (formats of an impl's column)."""
    by_key = {(r.shape, r.impl, r.phase): r for r in rows}
    ours = [i for i in impls if i != baseline]
    time_lines, memory_lines = [], []
    for shape in dict.fromkeys(r.shape for r in rows):
        for phase in PHASES:
            cells = [shape, phase, f"{by_key[(shape, baseline, phase)].median_ms:.3g}"]
            for impl in ours:
                row = by_key.get((shape, impl, phase))
                cells.append("-" if row is None else ratio_cell(row.median_ms, row.ratio))
            time_lines.append(cells)
        base = by_key[(shape, baseline, "forward")].saved_bytes
        cells = [shape, f"{base / 2**20:.3g}"]
        for impl in ours:
            row = by_key.get((shape, impl, "forward"))
            if row is None:
                cells.append("-")
            else:  # a composite that keeps nothing (an Add): no ratio
                cells.append(saved_mib_cell(row.saved_bytes, base) if base else f"{row.saved_bytes / 2**20:.3g}")
        cells += ["-" if (shape, i, "forward") not in by_key else f"{by_key[(shape, i, 'forward')].max_rel_error:.1e}"
                  for i in impls]
        memory_lines.append(cells)
    time_table = markdown_table([f"{headers['shape']} (N x C x ...)", "phase", f"{headers['baseline']} ms",
                                 *[headers["time"].format(i) for i in ours]], time_lines)
    memory_table = markdown_table([headers["shape"], f"{headers['baseline']} saved MiB",
                                   *[headers["saved"].format(i) for i in ours],
                                   *[f"{i} max rel. error" for i in impls]], memory_lines)
    return time_table + "\n\n" + memory_table


# --- traffic part -----------------------------------------------------------------------------------------
# A step: (what runs, what it reads, what it writes), tensors sized "N" (the input's elements) or "C" (channels).
def steps_bytes(steps, elements: int, channels: int) -> int:
    size = {"N": elements, "C": channels}
    return sum(ELEMENT * (sum(size[t] for t in reads) + sum(size[t] for t in writes)) for _, reads, writes in steps)


def describe(steps) -> str:
    return "; ".join(f"{what}: read {' + '.join(reads)}, write {' + '.join(writes)}" for what, reads, writes in steps)


def steps_traffic(steps_by_phase: dict[str, list], elements: int, channels: int) -> dict[str, tuple[int, int, str]]:
    """{phase: (GM bytes, launches, what ran)} of a way counted op by op."""
    return {phase: (steps_bytes(steps, elements, channels), len(steps), describe(steps))
            for phase, steps in steps_by_phase.items()}


def launches_bytes(launches) -> int:
    return sum(launch.gm_bytes_in + launch.gm_bytes_out for launch in launches)


def traffic_rows(row_type, shape: str, elements: int, channels: int, measured: dict[str, dict], ours: str) -> list:
    """measured: {impl: {phase: (GM bytes, launches, detail)}}; forward+backward added where both exist, each
    row's ratio its bytes / ours (when ours was measured), its modelled time bytes / HBM bandwidth."""
    for phases in measured.values():
        if "forward" in phases and "backward" in phases:
            (forward, forward_launches, _), (backward, backward_launches, _) = phases["forward"], phases["backward"]
            phases["forward+backward"] = (forward + backward, forward_launches + backward_launches,
                                          "forward + backward")
    rows = []
    for impl, phases in measured.items():
        for phase, (count, launches, detail) in phases.items():
            ours_bytes = measured.get(ours, {}).get(phase, (None,))[0]
            rows.append(row_type(part="traffic", shape=shape, elements=elements, channels=channels, impl=impl,
                                 phase=phase, ratio=None if ours_bytes is None else count / ours_bytes,
                                 gm_bytes=count, launches=launches, modelled_910b_us=1e6 * count / HBM_BYTES_PER_S,
                                 detail=detail))
    return rows


def traffic_table(rows: list, columns: dict[str, str], ours: str, missing: dict[str, str], shape_header: str) -> str:
    """One line per shape and phase, a column per impl of `columns` (impl -> header): GM MB, launches, modelled us
    and bytes / ours; missing[impl] where it has no row."""
    by_key = {(r.shape, r.impl, r.phase): r for r in rows}
    lines = []
    for shape in dict.fromkeys(r.shape for r in rows):
        for phase in PHASES:
            cells = [shape, phase]
            for impl in columns:
                row = by_key.get((shape, impl, phase))
                if row is None:
                    cells.append(missing[impl])
                    continue
                ratio = "" if impl == ours or row.ratio is None else f" ({row.ratio:.2f}x ours)"
                cells.append(f"{row.gm_bytes / 1e6:.3g} MB, {row.launches} launch{'es' * (row.launches != 1)}, "
                             f"{row.modelled_910b_us:.3g} us{ratio}")
            lines.append(cells)
    return markdown_table([shape_header, "phase", *columns.values()], lines)
