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

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

import ascend_acts
import bias_common
from ascend_acts import backends
from common import (
    MEASURED_BACKENDS,
    SIM_MAX_SIZE,
    add_backends_option,
    chosen_backends,
    comparison_parser,
    cpu_usage,
    kernel_names,
    other_processes_note,
    parse,
    pyplot,
    recorded_launches,
    report,
    save_figure,
)

SLOPE, SCALE = 0.2, 2**0.5
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
    modelled_910b_us: float | None = None  # traffic: gm_bytes / HBM bandwidth
    detail: str = ""  # cpu: which emulator kernels ran; traffic: the steps counted


def composite(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """torch's composite (rosinality's CPU path of fused_leaky_relu)."""
    return F.leaky_relu(x + bias.view(1, -1, *[1] * (x.ndim - 2)), SLOPE) * SCALE


def ours(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return ascend_acts.fused_bias_leaky_relu(x, bias, SLOPE, SCALE)


def label(name: str, shape: tuple[int, ...]) -> str:
    return f"{name} {'x'.join(map(str, shape))}"


def make_inputs(shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(sum(shape))
    return {"x": torch.randn(shape, generator=gen), "bias": 0.1 * torch.randn(shape[1], generator=gen),
            "grad": torch.randn(shape, generator=gen)}


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
    forward, backward = bias_common.ELEMENT * (2 * elements + channels), bias_common.ELEMENT * (3 * elements + channels)
    return {"forward": forward, "backward": backward, "forward+backward": forward + backward}


def measure_cpu(name: str, shape: tuple[int, ...], impls: list[str], repeats: int) -> list[BenchRow]:
    inputs = make_inputs(shape)
    exact = bias_common.output_and_gradients(composite, {k: v.double() for k, v in inputs.items()})
    prepared = {impl: bias_common.prepare_cpu(impl, composite if impl == "torch" else ours, inputs, exact,
                                              record_launches=impl == "sim") for impl in impls}
    elements, channels = math.prod(shape), shape[1]
    return bias_common.cpu_rows(BenchRow, label(name, shape), elements, channels, prepared, "torch", repeats,
                                minimal_bytes(elements, channels))


# --- traffic part -----------------------------------------------------------------------------------------
# The steps (bias_common.steps_bytes) of the composite as CANN runs it and of DrivingSDK's broadcast-bias kernel.
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


def measure_ours_traffic(shape: tuple[int, ...]) -> dict[str, tuple[int, int, str]]:
    """{phase: (GM bytes, launches, per-buffer detail)} of our kernels on the emulator. The backward runs from
    the forward's output (saved_is_result=True), which is what the op keeps for slope >= 0 and scale > 0."""
    from ascend_acts.ops.fused_bias_leaky_relu import kernels as fused_bias_sim

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
        total = bias_common.launches_bytes(launches)
        detail = f"{kernel_names(launches)}: " + ", ".join(f"{k} {v:,} B" for k, v in buffers.items())
        result[phase] = (total, len(launches), detail)
    return result


def measure_traffic(name: str, shape: tuple[int, ...], run_ours: bool) -> list[BenchRow]:
    elements, channels = math.prod(shape), shape[1]
    measured = {}
    if run_ours:
        measured[OURS_TRAFFIC] = measure_ours_traffic(shape)
    for impl, steps in ((COMPOSITE, COMPOSITE_STEPS), (BROADCAST, BROADCAST_STEPS)):
        measured[impl] = bias_common.steps_traffic(steps, elements, channels)
    return bias_common.traffic_rows(BenchRow, label(name, shape), elements, channels, measured, OURS_TRAFFIC)


# --- output -----------------------------------------------------------------------------------------------
CPU_HEADERS = {"shape": "shape", "baseline": "torch composite", "time": "{} ms (x torch)",
               "saved": "{} saved MiB (x torch)"}
TRAFFIC_COLUMNS = {OURS_TRAFFIC: "ours: GM bytes, launches, modelled 910B us",
                   COMPOSITE: "composite: the same (x ours)", BROADCAST: "broadcast-bias kernel: the same (x ours)"}
NOT_COUNTED = {OURS_TRAFFIC: "not run", COMPOSITE: "no backward", BROADCAST: "no backward"}


TITLE = "StyleGAN2 fused bias + LeakyReLU(0.2) * sqrt(2), float32: ascend_acts vs torch's composite"


def plot(cpu: list[BenchRow], traffic: list[BenchRow], impls: list[str], path: Path) -> None:
    """CPU forward+backward time and saved MiB per shape and impl; GM MB per shape for forward and backward."""
    panels = [("CPU forward+backward, median ms", cpu, impls, lambda r: r.median_ms, "forward+backward", True),
              ("saved for backward, MiB", cpu, impls, lambda r: r.saved_bytes / 2**20, "forward", False),
              ("GM traffic, forward, MB", traffic, [OURS_TRAFFIC, COMPOSITE, BROADCAST], lambda r: r.gm_bytes / 1e6,
               "forward", True),
              ("GM traffic, backward, MB", traffic, [OURS_TRAFFIC, COMPOSITE], lambda r: r.gm_bytes / 1e6,
               "backward", True)]
    shapes = list(dict.fromkeys(r.shape for r in cpu + traffic))
    fig, axes = pyplot().subplots(1, len(panels), figsize=(4.6 * len(panels), 1.2 + 0.55 * len(shapes)), sharey=True)
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
    save_figure(fig, TITLE, path)


def main(argv=None) -> None:
    parser = comparison_parser(__doc__, "smoke run: tiny shapes, two repeats")
    parser.add_argument("--batch", type=int, default=8, help="N of every shape")
    add_backends_option(parser)
    parser.add_argument("--sim-max-size", type=int, default=SIM_MAX_SIZE,
                        help="largest shape (elements) timed on the (slow) emulator backend")
    parser.add_argument("--traffic-max-size", type=int, default=SIM_MAX_SIZE,
                        help="largest shape (elements) whose GM traffic the emulator counts")
    args = parse(parser, argv)
    shapes, batch = SHAPES, args.batch
    if args.quick:
        shapes, batch, args.repeats = QUICK_SHAPES, QUICK_BATCH, 2
    shapes = [(name, (batch, *rest)) for name, rest in shapes]

    chosen = chosen_backends(parser, args.backends)
    not_measured = [f"ours on the {name} backend: {backends.unavailable_reason(name)}"
                    for name in MEASURED_BACKENDS if backends.unavailable_reason(name) is not None]
    traffic_reason = backends.unavailable_reason("sim")
    if traffic_reason:
        not_measured.append(f"our kernels' GM traffic: {traffic_reason}; only the modelled composite and "
                            "broadcast-bias traffic shown")

    usage_before = cpu_usage()
    cpu, traffic, impls = [], [], ["torch", *chosen]
    for name, shape in shapes:
        elements = math.prod(shape)
        shape_impls, left_out = cpu_impls(elements, chosen, args.sim_max_size)
        not_measured += [f"{impl} at {label(name, shape)}: {why}" for impl, why in left_out.items()]
        cpu += measure_cpu(name, shape, shape_impls, args.repeats)
        run_ours = traffic_reason is None and elements <= args.traffic_max_size
        if traffic_reason is None and not run_ours:
            not_measured.append(f"our GM traffic at {label(name, shape)}: above --traffic-max-size "
                                f"{args.traffic_max_size:,} elements (the emulator is slow)")
        traffic += measure_traffic(name, shape, run_ours)

    ran = {r.impl: r.detail for r in cpu if r.detail}
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
        "traffic, composite: "
        + " | ".join(f"{phase}: {bias_common.describe(steps)}" for phase, steps in COMPOSITE_STEPS.items())
        + f" (N = the input's elements, C = channels, {bias_common.ELEMENT} B each)",
        "traffic, broadcast-bias kernel (DrivingSDK's npu_fused_bias_leaky_relu: torch.broadcast_to(bias, x.shape)"
        ".contiguous() before the kernel; its autograd Function has no backward): "
        + bias_common.describe(BROADCAST_STEPS["forward"]),
        "traffic, ours: bytes in and out of GM counted by the emulator over every launch of "
        "ascend_acts.ops.fused_bias_leaky_relu.kernels.fused_bias_leaky_relu and ..._backward(dy, y, bias, 0.2, "
        "sqrt(2), saved_is_result=True)" + ("; per buffer: " + " | ".join(ours_details) if ours_details else ""),
        f"modelled 910B us = GM bytes / {bias_common.HBM_BYTES_PER_S / 1e12:.1f} TB/s (commonly quoted 910B HBM "
        "bandwidth, +-30%), assuming memory-bound elementwise work; launch overhead, vector compute and caches not "
        "modelled: a floor, not a prediction",
        other_processes_note(usage_before, cpu_usage()),
    ]
    notes += [f"not measured: {what}" for what in not_measured]
    table = (bias_common.cpu_tables(cpu, impls, "torch", CPU_HEADERS) + "\n\nGM traffic per call (NPU side; ours "
             "counted by the emulator, the others counted step by step):\n\n"
             + bias_common.traffic_table(traffic, TRAFFIC_COLUMNS, OURS_TRAFFIC, NOT_COUNTED, "shape"))
    report("fused_bias_leaky_relu", TITLE, cpu + traffic, table, notes, args.out,
           lambda path: plot(cpu, traffic, impls, path))


if __name__ == "__main__":
    main()
