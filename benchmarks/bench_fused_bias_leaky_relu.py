"""StyleGAN2's fused bias + LeakyReLU, float32: ascend_acts.fused_bias_leaky_relu vs torch's composite
`F.leaky_relu(x + b.view(1, -1, 1, 1), 0.2) * sqrt(2)`, side by side in one run, on StyleGAN2's shapes
(the mapping network's 512-wide linear layers, 512-channel 4x4 and 16x16 convolutions, 256 channels at 64x64,
128 at 128x128; batch --batch).

CPU part: forward, backward (gradients of x and bias), forward+backward and the bytes autograd keeps for
the backward, for torch's composite and for ours on each available ascend_acts CPU backend (the emulator
backend `sim` only up to --sim-max-size elements: it interprets every vector instruction), the
implementations taking turns (common.interleaved_ms); and the largest error against the float64 composite.

Traffic part (the NPU side, modelled): the GM bytes our two kernels move, as counted by the emulator
(`ascend_acts.backends.sim`, shapes up to --traffic-max-size elements), next to
- the composite as CANN runs it: three elementwise aclnn ops each way (forward Add, LeakyRelu, Muls;
  backward Muls, LeakyReluBackward, ReduceSum for the bias gradient), each reading its inputs from GM and
  writing its output to GM once (every step is listed in the output);
- a kernel that reads a bias broadcast to the input's size, DrivingSDK's way (mx_driving's
  npu_fused_bias_leaky_relu: the bias is expanded to x's shape in GM, then the kernel reads x and the
  expanded bias and writes y; it defines no backward);
and a modelled Ascend 910B time = GM bytes / 1.6e12 B/s. Assumption: the op is memory-bound elementwise
work, so HBM bandwidth bounds it; 1.6 TB/s is the commonly quoted 910B figure (no official one found:
treat as +-30%); launch overhead (three launches each way for the composite, one or two for ours), vector
compute and caches are not modelled. The time is a floor, not a prediction.

    python benchmarks/bench_fused_bias_leaky_relu.py            # batch 8; a few minutes on 2 cores
    python benchmarks/bench_fused_bias_leaky_relu.py --quick    # smoke run: tiny shapes, 2 repeats
    python benchmarks/bench_fused_bias_leaky_relu.py --backends reference --threads 1
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

import ascend_acts
from ascend_acts import backends
from common import (
    MEASURED_BACKENDS,
    RESULTS_DIR,
    SIM_MAX_SIZE,
    backend_context,
    cpu_usage,
    interleaved_ms,
    markdown_table,
    median_ratio,
    other_processes_note,
    report,
    saved_bytes,
)

SLOPE, SCALE = 0.2, 2**0.5
HBM_BYTES_PER_S = 1.6e12  # 910B, commonly quoted; no official figure (treat as +-30%)
ELEMENT = 4  # float32
CPU_PHASES = ("forward", "backward", "forward+backward")
# (what the layer is in StyleGAN2, shape after the batch dimension)
SHAPES = [("mapping linear", (512,)), ("conv 4x4", (512, 4, 4)), ("conv 16x16", (512, 16, 16)),
          ("conv 64x64", (256, 64, 64)), ("conv 128x128", (128, 128, 128))]
QUICK_SHAPES = [("linear", (16,)), ("conv 4x4", (8, 4, 4)), ("conv 8x8", (16, 8, 8))]
QUICK_BATCH = 2
COMPOSITE = "composite (3 aclnn ops)"
BROADCAST = "broadcast bias (DrivingSDK-style)"
OURS_TRAFFIC = "ours (emulator counters)"


@dataclass
class BenchRow:
    part: str  # "cpu" or "traffic"
    shape: str
    elements: int
    channels: int
    impl: str  # cpu: "torch" or an ascend_acts backend; traffic: OURS_TRAFFIC, COMPOSITE or BROADCAST
    phase: str  # "forward", "backward" or "forward+backward"
    median_ms: float | None = None  # cpu
    ratio: float | None = None  # cpu: median over rounds of time / torch's; traffic: bytes / ours
    gb_per_s: float | None = None  # cpu: minimal bytes of the phase / median time
    saved_bytes: int | None = None  # cpu: saved-for-backward, unique storages
    max_rel_error: float | None = None  # cpu: max over y, dx, dbias of max|impl - exact| / max|exact|
    gm_bytes: int | None = None  # traffic
    launches: int | None = None  # traffic: kernel launches (aclnn ops) of the phase
    modelled_910b_us: float | None = None  # traffic: gm_bytes / HBM_BYTES_PER_S
    detail: str = ""  # cpu: which emulator kernels ran; traffic: the steps counted


def composite(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """torch's composite (rosinality's CPU path of fused_leaky_relu)."""
    return F.leaky_relu(x + bias.view(1, -1, *[1] * (x.ndim - 2)), SLOPE) * SCALE


def ours(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return ascend_acts.fused_bias_leaky_relu(x, bias, SLOPE, SCALE)


def ours_unavailable_reason() -> str | None:
    if not hasattr(ascend_acts, "fused_bias_leaky_relu"):
        return "ascend_acts.fused_bias_leaky_relu is not in this build"
    return None


def sim_traffic_unavailable_reason() -> str | None:
    reason = backends.unavailable_reason("sim")
    if reason is not None:
        return reason
    from ascend_acts.ops.fused_bias_leaky_relu import sim

    missing = [name for name in ("fused_bias_leaky_relu", "fused_bias_leaky_relu_backward") if not hasattr(sim, name)]
    return f"ascend_acts.ops.fused_bias_leaky_relu.sim has no {' or '.join(missing)}" if missing else None


def label(name: str, shape: tuple[int, ...]) -> str:
    return f"{name} {'x'.join(map(str, shape))}"


def make_inputs(shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(sum(shape))
    return {"x": torch.randn(shape, generator=gen), "bias": 0.1 * torch.randn(shape[1], generator=gen),
            "grad": torch.randn(shape, generator=gen)}


# --- emulator launches ------------------------------------------------------------------------------------
@contextlib.contextmanager
def recorded_launches():
    """The counters of every emulator launch made inside the block: an op may launch several kernels, or one
    kernel in pieces, and `last_launch()` keeps only the latest. The sim backend launches through
    `emulator.launch`; a launch made another way still shows as a changed `last_launch()` (then only that one
    is known, and the list holds it alone)."""
    from ascend_acts.backends.sim import emulator

    launches, original, before = [], emulator.launch, emulator.last_launch()

    def recording_launch(*args, **kwargs):
        counters = original(*args, **kwargs)
        launches.append(counters)
        return counters

    emulator.launch = recording_launch
    try:
        yield launches
    finally:
        emulator.launch = original
        latest = emulator.last_launch()
        if not launches and latest is not before:
            launches.append(latest)


def kernel_names(launches) -> str:
    counts = {}
    for launch in launches:
        counts[launch.kernel] = counts.get(launch.kernel, 0) + 1
    return ", ".join(f"{name} x{count}" for name, count in counts.items()) or "no emulator launch"


# --- CPU part ---------------------------------------------------------------------------------------------
def cpu_impls(elements: int, chosen: list[str], sim_max_size: int) -> tuple[list[str], dict[str, str]]:
    """(impls to measure on a shape of this many elements, {impl: why it is left out})."""
    impls, left_out = ["torch"], {}
    for name in chosen:
        if name == "sim" and elements > sim_max_size:
            left_out[name] = f"emulator measured only up to --sim-max-size {sim_max_size:,} elements (slow)"
        else:
            impls.append(name)
    return impls, left_out


def minimal_bytes(elements: int, channels: int) -> dict[str, int]:
    """forward reads x and bias, writes y; backward reads dy and the saved tensor, writes dx and dbias."""
    forward, backward = ELEMENT * (2 * elements + channels), ELEMENT * (3 * elements + channels)
    return {"forward": forward, "backward": backward, "forward+backward": forward + backward}


def max_rel_error(results: list[torch.Tensor], exact: list[torch.Tensor]) -> float:
    return max(((a.double() - b).abs().max() / b.abs().max().clamp_min(1e-300)).item() for a, b in zip(results, exact))


def output_and_gradients(function, inputs) -> list[torch.Tensor]:
    x, bias = (inputs[k].clone().requires_grad_() for k in ("x", "bias"))
    out = function(x, bias)
    return [out.detach(), *torch.autograd.grad(out, (x, bias), inputs["grad"])]


@dataclass
class Prepared:
    calls: dict[str, Callable[[], object]]
    saved: int
    error: float
    ran: str


def prepare_cpu(impl: str, inputs: dict[str, torch.Tensor], exact: list[torch.Tensor]) -> Prepared:
    function = composite if impl == "torch" else ours
    x, bias, grad = inputs["x"], inputs["bias"], inputs["grad"]
    leaves = [x.clone().requires_grad_(), bias.clone().requires_grad_()]
    with backend_context(impl):
        error = max_rel_error(output_and_gradients(function, inputs), exact)
        saved = saved_bytes(lambda: function(*leaves))
        ran = ""
        if impl == "sim":
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

    def in_backend(fn):
        def call():
            with backend_context(impl):
                return fn()
        return call

    return Prepared({phase: in_backend(fn) for phase, fn in phases.items()}, saved, error, ran)


def measure_cpu(name: str, shape: tuple[int, ...], impls: list[str], repeats: int) -> list[BenchRow]:
    inputs = make_inputs(shape)
    exact = output_and_gradients(composite, {k: v.double() for k, v in inputs.items()})
    prepared = {impl: prepare_cpu(impl, inputs, exact) for impl in impls}
    elements, channels = math.prod(shape), shape[1]
    traffic = minimal_bytes(elements, channels)
    rows = []
    for phase in CPU_PHASES:
        times = interleaved_ms({impl: p.calls[phase] for impl, p in prepared.items()}, repeats)
        for impl, p in prepared.items():
            milliseconds = statistics.median(times[impl])
            rows.append(BenchRow("cpu", label(name, shape), elements, channels, impl, phase, milliseconds,
                                 median_ratio(times[impl], times["torch"]), traffic[phase] / milliseconds / 1e6,
                                 p.saved, p.error, detail=p.ran))
    return rows


# --- traffic part -----------------------------------------------------------------------------------------
# Each step: (what runs, what it reads, what it writes), tensors sized "N" (the input's elements) or "C"
# (channels); every step reads its inputs from GM once and writes its output to GM once.
COMPOSITE_STEPS = {
    "forward": [("aclnnAdd: t = x + bias (bias broadcast over dim 1)", ("N", "C"), ("N",)),
                ("aclnnLeakyRelu: u = leaky_relu(t, 0.2)", ("N",), ("N",)),
                ("aclnnMuls: y = u * sqrt(2)", ("N",), ("N",))],
    "backward": [("aclnnMuls: du = dy * sqrt(2)", ("N",), ("N",)),
                 ("aclnnLeakyReluBackward: dt = du * (t > 0 ? 1 : 0.2), t kept from the forward", ("N", "N"), ("N",)),
                 ("aclnnReduceSum: grad_bias = dt summed over all dims but 1 (grad_input = dt, passed through "
                  "by Add's backward: no pass)", ("N",), ("C",))],
}
BROADCAST_STEPS = {
    "forward": [("expand: bias broadcast to x's shape, made contiguous in GM", ("C",), ("N",)),
                ("kernel: y = leaky_relu(x + expanded bias) * scale", ("N", "N"), ("N",))],
}


def steps_bytes(steps, elements: int, channels: int) -> int:
    size = {"N": elements, "C": channels}
    return sum(ELEMENT * (sum(size[t] for t in reads) + sum(size[t] for t in writes)) for _, reads, writes in steps)


def describe(steps) -> str:
    return "; ".join(f"{what}: read {' + '.join(reads)}, write {' + '.join(writes)}" for what, reads, writes in steps)


def measure_ours_traffic(shape: tuple[int, ...]) -> dict[str, tuple[int, int, str]]:
    """{phase: (GM bytes, launches, per-buffer detail)} of our kernels on the emulator. The backward runs from
    the forward's output (saved_is_result=True), which is what the op keeps for slope >= 0 and scale > 0."""
    from ascend_acts.ops.fused_bias_leaky_relu import sim as fused_bias_sim

    inputs = make_inputs(shape)
    with recorded_launches() as forward_launches:
        output = fused_bias_sim.fused_bias_leaky_relu(inputs["x"], inputs["bias"], SLOPE, SCALE)
    with recorded_launches() as backward_launches:
        fused_bias_sim.fused_bias_leaky_relu_backward(inputs["grad"], output, inputs["bias"], SLOPE, SCALE, True)
    result = {}
    for phase, launches in (("forward", forward_launches), ("backward", backward_launches)):
        if not launches:
            raise RuntimeError(f"the sim backend's fused_bias_leaky_relu {phase} made no emulator launch")
        buffers = {}
        for launch in launches:
            for direction, per_buffer in (("in", launch.buffer_bytes_in), ("out", launch.buffer_bytes_out)):
                for buffer, count in per_buffer.items():
                    if count:
                        buffers[f"{buffer} {direction}"] = buffers.get(f"{buffer} {direction}", 0) + count
        total = sum(launch.gm_bytes_in + launch.gm_bytes_out for launch in launches)
        detail = f"{kernel_names(launches)}: " + ", ".join(f"{k} {v:,} B" for k, v in buffers.items())
        result[phase] = (total, len(launches), detail)
    return result


def traffic_rows(name: str, shape: tuple[int, ...], run_ours: bool) -> list[BenchRow]:
    elements, channels = math.prod(shape), shape[1]
    measured = {}
    if run_ours:
        measured[OURS_TRAFFIC] = measure_ours_traffic(shape)
    for impl, steps in ((COMPOSITE, COMPOSITE_STEPS), (BROADCAST, BROADCAST_STEPS)):
        measured[impl] = {phase: (steps_bytes(s, elements, channels), len(s), describe(s))
                          for phase, s in steps.items()}
    for phases in measured.values():
        if "forward" in phases and "backward" in phases:
            (forward, forward_launches, _), (backward, backward_launches, _) = phases["forward"], phases["backward"]
            phases["forward+backward"] = (forward + backward, forward_launches + backward_launches,
                                          "forward + backward")
    rows = []
    for impl, phases in measured.items():
        for phase, (count, launches, detail) in phases.items():
            ours_bytes = measured.get(OURS_TRAFFIC, {}).get(phase, (None,))[0]
            rows.append(BenchRow("traffic", label(name, shape), elements, channels, impl, phase,
                                 ratio=None if ours_bytes is None else count / ours_bytes, gm_bytes=count,
                                 launches=launches, modelled_910b_us=1e6 * count / HBM_BYTES_PER_S, detail=detail))
    return rows


# --- output -----------------------------------------------------------------------------------------------
def cpu_tables(rows: list[BenchRow], impls: list[str]) -> str:
    by_key = {(r.shape, r.impl, r.phase): r for r in rows}
    shapes = list(dict.fromkeys(r.shape for r in rows))
    ours_impls = [i for i in impls if i != "torch"]
    time_lines, memory_lines = [], []
    for shape in shapes:
        for phase in CPU_PHASES:
            cells = [shape, phase, f"{by_key[(shape, 'torch', phase)].median_ms:.3g}"]
            for impl in ours_impls:
                row = by_key.get((shape, impl, phase))
                cells.append("-" if row is None else f"{row.median_ms:.3g} ({row.ratio:.2f}x)")
            time_lines.append(cells)
        torch_row = by_key[(shape, "torch", "forward")]
        cells = [shape, f"{torch_row.saved_bytes / 2**20:.3g}"]
        for impl in ours_impls:
            row = by_key.get((shape, impl, "forward"))
            cells.append("-" if row is None else f"{row.saved_bytes / 2**20:.3g} "
                                                 f"({row.saved_bytes / torch_row.saved_bytes:.2f}x)")
        cells += ["-" if (shape, i, "forward") not in by_key else f"{by_key[(shape, i, 'forward')].max_rel_error:.1e}"
                  for i in impls]
        memory_lines.append(cells)
    time_table = markdown_table(["shape (N x C x ...)", "phase", "torch composite ms",
                                 *[f"{i} ms (x torch)" for i in ours_impls]], time_lines)
    memory_table = markdown_table(["shape", "torch composite saved MiB",
                                   *[f"{i} saved MiB (x torch)" for i in ours_impls],
                                   *[f"{i} max rel. error" for i in impls]], memory_lines)
    return time_table + "\n\n" + memory_table


def traffic_table(rows: list[BenchRow]) -> str:
    by_key = {(r.shape, r.impl, r.phase): r for r in rows}
    lines = []
    for shape in dict.fromkeys(r.shape for r in rows):
        for phase in CPU_PHASES:
            cells = [shape, phase]
            for impl in (OURS_TRAFFIC, COMPOSITE, BROADCAST):
                row = by_key.get((shape, impl, phase))
                if row is None:
                    cells.append("not run" if impl == OURS_TRAFFIC else "no backward")
                    continue
                ratio = "" if impl == OURS_TRAFFIC or row.ratio is None else f" ({row.ratio:.2f}x ours)"
                cells.append(f"{row.gm_bytes / 1e6:.3g} MB, {row.launches} launch{'es' * (row.launches != 1)}, "
                             f"{row.modelled_910b_us:.3g} us{ratio}")
            lines.append(cells)
    return markdown_table(["shape", "phase", "ours: GM bytes, launches, modelled 910B us",
                           "composite: the same (x ours)", "broadcast-bias kernel: the same (x ours)"], lines)


def plot(cpu_rows: list[BenchRow], traffic: list[BenchRow], impls: list[str], path: Path) -> None:
    """CPU forward+backward time and saved MiB per shape and impl; GM MB per shape for forward and backward."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("CPU forward+backward, median ms", cpu_rows, impls, lambda r: r.median_ms, "forward+backward", True),
              ("saved for backward, MiB", cpu_rows, impls, lambda r: r.saved_bytes / 2**20, "forward", False),
              ("GM traffic, forward, MB", traffic, [OURS_TRAFFIC, COMPOSITE, BROADCAST], lambda r: r.gm_bytes / 1e6,
               "forward", True),
              ("GM traffic, backward, MB", traffic, [OURS_TRAFFIC, COMPOSITE], lambda r: r.gm_bytes / 1e6,
               "backward", True)]
    shapes = list(dict.fromkeys(r.shape for r in cpu_rows + traffic))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 1.2 + 0.55 * len(shapes)), sharey=True)
    for ax, (title, rows, names, value, phase, log) in zip(axes, panels):
        by_key = {(r.shape, r.impl): r for r in rows if r.phase == phase}
        height = 0.8 / len(names)
        for index, name in enumerate(names):
            points = [(position, value(by_key[(shape, name)])) for position, shape in enumerate(shapes)
                      if (shape, name) in by_key]
            if points:
                positions, values = zip(*points)
                ax.barh([p + index * height for p in positions], values, height=height, label=name, color=f"C{index}")
        ax.set(title=title, xscale="log" if log else "linear")
        ax.legend(fontsize=7)
    axes[0].set_yticks([i + 0.4 - 0.4 / len(panels) for i in range(len(shapes))], shapes, fontsize=8)
    axes[0].invert_yaxis()
    fig.suptitle("StyleGAN2 fused bias + LeakyReLU(0.2) * sqrt(2), float32: ascend_acts vs torch's composite")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny shapes, two repeats")
    parser.add_argument("--batch", type=int, default=8, help="N of every shape")
    parser.add_argument("--repeats", type=int, default=9, help="timed rounds per phase (every implementation once "
                        "per round)")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's default)")
    parser.add_argument("--backends", nargs="+", metavar="NAME",
                        help="ascend_acts CPU backends to measure (default: every available one)")
    parser.add_argument("--sim-max-size", type=int, default=SIM_MAX_SIZE,
                        help="largest shape (elements) timed on the (slow) emulator backend")
    parser.add_argument("--traffic-max-size", type=int, default=SIM_MAX_SIZE,
                        help="largest shape (elements) whose GM traffic the emulator counts")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="where CSV/Markdown/PNG go")
    args = parser.parse_args(argv)
    if args.batch < 1 or args.repeats < 1:
        parser.error("--batch and --repeats must be at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    shapes, batch = SHAPES, args.batch
    if args.quick:
        shapes, batch, args.repeats = QUICK_SHAPES, QUICK_BATCH, 2
    shapes = [(name, (batch, *rest)) for name, rest in shapes]

    not_measured = []
    ours_reason = ours_unavailable_reason()
    available = [] if ours_reason else [n for n in MEASURED_BACKENDS if backends.unavailable_reason(n) is None]
    if args.backends and not ours_reason:
        unknown = [name for name in args.backends if name not in available]
        if unknown:
            parser.error(f"backends not available here: {unknown} (available: {available})")
    chosen = args.backends or available
    if ours_reason:
        not_measured.append(f"ours on the CPU: {ours_reason}; only torch's composite measured")
    not_measured += [f"ours on the {name} backend: {backends.unavailable_reason(name)}"
                     for name in MEASURED_BACKENDS if backends.unavailable_reason(name) is not None]
    traffic_reason = sim_traffic_unavailable_reason()
    if traffic_reason:
        not_measured.append(f"our kernels' GM traffic: {traffic_reason}; only the modelled composite and "
                            "broadcast-bias traffic shown")

    usage_before = cpu_usage()
    cpu_rows, traffic, impls = [], [], ["torch", *chosen]
    for name, shape in shapes:
        elements = math.prod(shape)
        shape_impls, left_out = cpu_impls(elements, chosen, args.sim_max_size)
        not_measured += [f"{impl} at {label(name, shape)}: {why}" for impl, why in left_out.items()]
        cpu_rows += measure_cpu(name, shape, shape_impls, args.repeats)
        run_ours = traffic_reason is None and elements <= args.traffic_max_size
        if traffic_reason is None and not run_ours:
            not_measured.append(f"our GM traffic at {label(name, shape)}: above --traffic-max-size "
                                f"{args.traffic_max_size:,} elements (the emulator is slow)")
        traffic += traffic_rows(name, shape, run_ours)

    ran = {r.impl: r.detail for r in cpu_rows if r.detail}
    ours_details = [f"{r.shape} {r.phase}: {r.detail}" for r in traffic
                    if r.impl == OURS_TRAFFIC and r.phase != "forward+backward"]
    notes = [
        f"float32, LeakyReLU({SLOPE}) * sqrt(2), bias over dim 1; CPU: per phase {args.repeats} rounds after 2 "
        "warm-up runs, the implementations taking turns within a round: median ms, and (x torch) the median of the "
        "per-round ratios",
        "torch composite: F.leaky_relu(x + b.view(1, -1, 1, 1), 0.2) * sqrt(2) (rosinality's CPU path); ours: "
        "ascend_acts.fused_bias_leaky_relu under ascend_acts.use_backend(name)"
        + "".join(f"; {impl} ran {how}" for impl, how in ran.items()),
        "backward: torch.autograd.grad of x and bias from an output computed once (retain_graph); saved MiB: unique "
        "storages autograd keeps for the backward (saved_tensors_hooks), the bias included",
        "max rel. error: max over y, dx and dbias of max|result - exact| / max|exact|, exact = the composite in "
        "float64 on the same inputs",
        "traffic, composite: " + " | ".join(f"{phase}: {describe(steps)}" for phase, steps in COMPOSITE_STEPS.items())
        + f" (N = the input's elements, C = channels, {ELEMENT} B each)",
        "traffic, broadcast-bias kernel (DrivingSDK's npu_fused_bias_leaky_relu: torch.broadcast_to(bias, x.shape)"
        ".contiguous() before the kernel; its autograd Function has no backward): "
        + describe(BROADCAST_STEPS["forward"]),
        "traffic, ours: bytes in and out of GM counted by the emulator over every launch of "
        "ascend_acts.ops.fused_bias_leaky_relu.sim.fused_bias_leaky_relu and ..._backward(dy, y, bias, 0.2, sqrt(2), "
        "saved_is_result=True)" + ("; per buffer: " + " | ".join(ours_details) if ours_details else ""),
        f"modelled 910B us = GM bytes / {HBM_BYTES_PER_S / 1e12:.1f} TB/s (commonly quoted 910B HBM bandwidth, "
        "+-30%), assuming memory-bound elementwise work; launch overhead, vector compute and caches not modelled: "
        "a floor, not a prediction",
        other_processes_note(usage_before, cpu_usage()),
    ]
    notes += [f"not measured: {what}" for what in not_measured]
    title = "StyleGAN2 fused bias + LeakyReLU(0.2) * sqrt(2), float32: ascend_acts vs torch's composite"
    table = (cpu_tables(cpu_rows, impls) + "\n\nGM traffic per call (NPU side; ours counted by the emulator, the "
             "others counted step by step):\n\n" + traffic_table(traffic))
    report("fused_bias_leaky_relu", title, cpu_rows + traffic, table, notes, args.out,
           lambda path: plot(cpu_rows, traffic, impls, path))


if __name__ == "__main__":
    main()
