"""NVlabs' bias_act (StyleGAN2-ADA / StyleGAN3), float32: ascend_acts.bias_act vs NVlabs' reference semantics
as a plain torch composite (x + b.view(...), the activation, * gain, clamp), side by side in one run, on
StyleGAN2-ADA's layer shapes (batch --batch): the mapping network's 512-wide lrelu layers, a style affine layer
(512 wide, linear, gain 1, no clamp), synthesis convs (512 channels at 8x8, 256 at 32x32) lrelu with conv_clamp
256, ToRGB (3 channels at 32x32) linear with clamp.

CPU part: forward, backward (gradients of x and b), forward+backward and the bytes autograd keeps for the
backward, the composite and ours on the ascend_acts `reference` backend (--backends for others) taking turns
(common.interleaved_ms); and the largest error against the float64 composite. Inputs are 100 x N(0, 1), so that
the clamp bites (about 4% of lrelu * sqrt(2) beyond 256) and its gradient mask matters.

Traffic part (the NPU side): the GM bytes of our launches counted by the emulator (`sim` backend, through
ascend_acts.bias_act itself: forward, then torch.autograd.grad; the clamp is inside the kernels; linear with gain 1
and no clamp runs no backward kernel, its bias gradient a torch sum, charged its ideal: read N, write C), next to
the composite's ideal traffic (each of its ops reads and writes the
whole tensor once: Add, LeakyRelu, Muls, Clamp and their backwards, ReduceSum for the bias gradient), each turned
into bytes / 1.6 TB/s (a floor for memory-bound work, as bench_fused_bias_leaky_relu.py).

Modelled 910B time: benchmarks/perf_model.py's bias_act cases at these shapes (our kernel scheduled on the
emulator's pipe timeline, vs the composite as aclnn ops each at its
ideal + a launch each, the assumptions perf_model.py uses for every CANN-way row).

    python benchmarks/bench_bias_act.py            # batch 8; a few minutes on 2 cores
    python benchmarks/bench_bias_act.py --quick    # smoke run: tiny shapes, two repeats (into outputs/benchmarks)
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
    add_backends_option,
    chosen_backends,
    comparison_parser,
    cpu_usage,
    kernel_names,
    markdown_table,
    other_processes_note,
    output_dir,
    parse,
    plot_bars,
    recorded_launches,
    report,
)

CONV_CLAMP = 256.0
# (layer, shape after the batch dimension, act, clamp)
SHAPES = [("mapping FC", (512,), "lrelu", None), ("style affine FC", (512,), "linear", None),
          ("synthesis conv 8x8", (512, 8, 8), "lrelu", CONV_CLAMP),
          ("synthesis conv 32x32", (256, 32, 32), "lrelu", CONV_CLAMP),
          ("ToRGB 32x32", (3, 32, 32), "linear", CONV_CLAMP)]
QUICK_SHAPES = [("mapping FC", (16,), "lrelu", None), ("style affine FC", (16,), "linear", None),
                ("synthesis conv", (8, 8, 8), "lrelu", CONV_CLAMP),
                ("ToRGB", (3, 8, 8), "linear", CONV_CLAMP)]
QUICK_BATCH = 2
COMPOSITE = "NVlabs composite"
OURS_TRAFFIC = "ours (emulator counters)"
DEFAULTS = {"linear": (0.0, 1.0), "lrelu": (0.2, math.sqrt(2))}  # act: (alpha, gain), NVlabs' defaults


@dataclass
class BenchRow:
    part: str  # "cpu", "traffic" or "model"
    shape: str
    elements: int
    channels: int
    impl: str  # cpu: COMPOSITE or an ascend_acts backend; traffic: OURS_TRAFFIC or COMPOSITE; model: "ours"
    phase: str
    median_ms: float | None = None  # cpu
    ratio: float | None = None  # cpu: median over rounds of time / the composite's; traffic: bytes / ours;
    # model: the CANN way's time / ours
    saved_bytes: int | None = None  # cpu
    max_rel_error: float | None = None  # cpu
    gm_bytes: int | None = None  # traffic
    launches: int | None = None  # traffic
    modelled_910b_us: float | None = None  # traffic: gm_bytes / HBM; model: ours (perf_model)
    cann_way_us: float | None = None  # model: the composite as aclnn ops (perf_model)
    detail: str = ""


def composite(x: torch.Tensor, b: torch.Tensor, act: str, clamp: float | None) -> torch.Tensor:
    """NVlabs' reference semantics: act(x + b along dim 1) * gain, clamped; each step a torch op."""
    alpha, gain = DEFAULTS[act]
    x = x + b.reshape([-1 if i == 1 else 1 for i in range(x.ndim)])
    if act == "lrelu":
        x = F.leaky_relu(x, alpha)
    if gain != 1:
        x = x * gain
    return x if clamp is None else x.clamp(-clamp, clamp)


def ours(x: torch.Tensor, b: torch.Tensor, act: str, clamp: float | None) -> torch.Tensor:
    return ascend_acts.bias_act(x, b, act=act, clamp=clamp)


def label(name: str, shape: tuple[int, ...], act: str, clamp) -> str:
    return f"{name} {'x'.join(map(str, shape))} {act}{'' if clamp is None else f' clamp {clamp:g}'}"


def make_inputs(shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(sum(shape))
    return {"x": 100 * torch.randn(shape, generator=gen), "bias": torch.randn(shape[1], generator=gen),
            "grad": torch.randn(shape, generator=gen)}


# --- CPU part ---------------------------------------------------------------------------------------------
def measure_cpu(tag: str, shape, act: str, clamp, impls: list[str], repeats: int) -> list[BenchRow]:
    inputs = make_inputs(shape)
    exact = bias_common.output_and_gradients(lambda a, b: composite(a, b, act, clamp),
                                             {k: v.double() for k, v in inputs.items()})
    prepared = {}
    for impl in impls:
        base = composite if impl == COMPOSITE else ours
        prepared[impl] = bias_common.prepare_cpu(impl, lambda a, b, base=base: base(a, b, act, clamp), inputs, exact)
    return bias_common.cpu_rows(BenchRow, tag, math.prod(shape), shape[1], prepared, COMPOSITE, repeats)


# --- traffic part -----------------------------------------------------------------------------------------
def composite_steps(act: str, clamp) -> dict[str, list]:
    """The composite's ops, each reading its inputs and writing its output once ("N": the input's elements, "C":
    channels); backward in autograd's order (the bias gradient a ReduceSum of the Add's incoming gradient)."""
    _, gain = DEFAULTS[act]
    forward = [("Add: x + b", ("N", "C"), ("N",))]
    backward = []
    if act == "lrelu":
        forward.append(("LeakyRelu", ("N",), ("N",)))
        backward.insert(0, ("LeakyReluBackward (dy, kept x + b)", ("N", "N"), ("N",)))
    if gain != 1:
        forward.append(("Muls: * gain", ("N",), ("N",)))
        backward.insert(0, ("Muls: dy * gain", ("N",), ("N",)))
    if clamp is not None:
        forward.append(("Clamp", ("N",), ("N",)))
        backward.insert(0, ("Clamp's gradient (dy, kept input)", ("N", "N"), ("N",)))
    backward.append(("ReduceSum: grad_b", ("N",), ("C",)))
    return {"forward": forward, "backward": backward}


def host_steps(act: str, clamp) -> dict[str, list]:
    """Ours besides the kernels: linear with gain 1 and no clamp sums the gradient for the bias with torch (the
    gradient itself passes through, as the composite's Add's)."""
    identity = act == "linear" and DEFAULTS[act][1] == 1 and clamp is None
    return {"forward": [], "backward": [("ReduceSum: grad_b (torch.sum)", ("N",), ("C",))] if identity else []}


def measure_traffic(tag: str, shape, act: str, clamp, run_ours: bool) -> list[BenchRow]:
    elements, channels = math.prod(shape), shape[1]
    measured = {}
    if run_ours:
        inputs = make_inputs(shape)
        leaves = [inputs["x"].clone().requires_grad_(), inputs["bias"].clone().requires_grad_()]
        with ascend_acts.use_backend("sim"):
            with recorded_launches() as forward_launches:
                output = ours(*leaves, act, clamp)
            with recorded_launches() as backward_launches:
                torch.autograd.grad(output, leaves, inputs["grad"])
        extra = host_steps(act, clamp)
        measured[OURS_TRAFFIC] = {}
        for phase, launches in (("forward", forward_launches), ("backward", backward_launches)):
            kernel_bytes = bias_common.launches_bytes(launches)
            detail = kernel_names(launches) + (f"; {bias_common.describe(extra[phase])}" if extra[phase] else "")
            measured[OURS_TRAFFIC][phase] = (kernel_bytes + bias_common.steps_bytes(extra[phase], elements, channels),
                                             len(launches) + len(extra[phase]), detail)
    measured[COMPOSITE] = bias_common.steps_traffic(composite_steps(act, clamp), elements, channels)
    return bias_common.traffic_rows(BenchRow, tag, elements, channels, measured, OURS_TRAFFIC)


# --- modelled 910B time (perf_model.py's bias_act cases) ---------------------------------------------------
def measure_model(tag: str, shape, act: str, clamp) -> list[BenchRow]:
    import perf_model
    from ascend_acts.backends.sim import emulator, timeline

    with emulator.launch_settings(assumptions=timeline.Assumptions()):
        model_rows = perf_model.measure("bias_act", perf_model.bias_act_cases([(act, shape, clamp)]))
    rows = []
    for row in model_rows:
        phase = "backward" if row.kernel.endswith("_grad") else "forward"
        rows.append(BenchRow("model", tag, math.prod(shape), shape[1], "ours", phase, ratio=row.ratio,
                             modelled_910b_us=row.ours_us, cann_way_us=row.cann_us,
                             detail=f"ours bound by {row.binding}; CANN way: {row.cann_ops}; moves it most: "
                                    f"{row.most_sensitive}; flips past 1.0 under: {row.flips}"))
    if len(rows) == 1:  # no backward kernel (linear, gain 1, no clamp): the composite's ReduceSum, not modelled
        return rows
    forward, backward = rows
    rows.append(BenchRow("model", tag, forward.elements, forward.channels, "ours", "forward+backward",
                         ratio=(forward.cann_way_us + backward.cann_way_us)
                         / (forward.modelled_910b_us + backward.modelled_910b_us),
                         modelled_910b_us=forward.modelled_910b_us + backward.modelled_910b_us,
                         cann_way_us=forward.cann_way_us + backward.cann_way_us, detail="forward + backward"))
    return rows


# --- output -----------------------------------------------------------------------------------------------
CPU_HEADERS = {"shape": "layer, shape", "baseline": "composite", "time": "ours, {} backend, ms (x composite)",
               "saved": "ours, {}, saved MiB (x composite)"}
TRAFFIC_COLUMNS = {OURS_TRAFFIC: "ours: GM bytes, launches, bytes / 1.6 TB/s",
                   COMPOSITE: "composite, ideal: the same (x ours)"}


def model_table(rows: list[BenchRow]) -> str:
    lines = [[r.shape, r.phase, f"{r.modelled_910b_us:.2f}", f"{r.cann_way_us:.2f}", f"{r.ratio:.2f}",
              r.detail] for r in rows]
    return markdown_table(["layer, shape", "phase", "ours us", "composite as aclnn ops us", "composite / ours",
                           "details"], lines)


def plot(cpu: list[BenchRow], traffic: list[BenchRow], model: list[BenchRow], impls: list[str], path: Path) -> None:
    """Per shape, ours as a multiple of the composite (below 1: ours is cheaper): forward+backward CPU time, bytes
    kept for the backward, GM bytes forward+backward, modelled 910B time forward+backward (0: not run)."""
    pick = {(r.part, r.shape, r.impl, r.phase): r for r in cpu + traffic + model}
    ours_impl = next((i for i in impls if i != COMPOSITE), None)
    shapes = list(dict.fromkeys(r.shape for r in cpu))
    panels = {f"CPU fwd+bwd time, {ours_impl} / composite": [], "saved bytes, ours / composite": [],
              "GM bytes fwd+bwd, ours / composite": [], "modelled 910B fwd+bwd, ours / composite": []}
    for shape in shapes:
        time_row = pick.get(("cpu", shape, ours_impl, "forward+backward"))
        saved, base = pick.get(("cpu", shape, ours_impl, "forward")), pick.get(("cpu", shape, COMPOSITE, "forward"))
        gm = pick.get(("traffic", shape, COMPOSITE, "forward+backward"))
        modelled = pick.get(("model", shape, "ours", "forward+backward"))
        kept = saved.saved_bytes / base.saved_bytes if saved and base.saved_bytes else 0
        values = [time_row.ratio if time_row else 0, kept,
                  1 / gm.ratio if gm and gm.ratio else 0, 1 / modelled.ratio if modelled else 0]
        for panel, value in zip(panels.values(), values):
            panel.append(value)
    plot_bars(shapes, panels, "NVlabs bias_act, float32: ascend_acts.bias_act as a multiple of NVlabs' reference "
              "composite (below 1: ours cheaper)", path)


def main(argv=None) -> None:
    parser = comparison_parser(__doc__, "smoke run: tiny shapes, two repeats", out_default=None)
    parser.add_argument("--batch", type=int, default=8, help="N of every shape")
    add_backends_option(parser, default=["reference"])
    parser.add_argument("--traffic-max-size", type=int, default=1 << 21,
                        help="largest shape (elements) run on the emulator (GM traffic, modelled 910B time)")
    args = parse(parser, argv)
    chosen = chosen_backends(parser, args.backends)
    shapes, batch = SHAPES, args.batch
    if args.quick:
        shapes, batch, args.repeats = QUICK_SHAPES, QUICK_BATCH, 2
    out = output_dir(args)
    sim_reason = backends.unavailable_reason("sim")

    usage_before = cpu_usage()
    impls, not_measured = [COMPOSITE, *chosen], []
    cpu, traffic, model = [], [], []
    for name, rest, act, clamp in shapes:
        shape = (batch, *rest)
        tag = label(name, shape, act, clamp)
        cpu += measure_cpu(tag, shape, act, clamp, impls, args.repeats)
        run_emulator = sim_reason is None and math.prod(shape) <= args.traffic_max_size
        if not run_emulator:
            not_measured.append(f"our GM traffic and modelled time at {tag}: "
                                f"{sim_reason or f'above --traffic-max-size {args.traffic_max_size:,} elements'}")
        traffic += measure_traffic(tag, shape, act, clamp, run_emulator)
        if run_emulator:
            model += measure_model(tag, shape, act, clamp)

    ours_details = [f"{r.shape} {r.phase}: {r.detail}" for r in traffic
                    if r.impl == OURS_TRAFFIC and r.phase != "forward+backward"]
    notes = [
        f"float32, bias over dim 1, NVlabs' defaults (lrelu: alpha 0.2, gain sqrt(2); linear: gain 1); x = 100 x "
        f"N(0, 1) so that clamp {CONV_CLAMP:g} bites; CPU: per phase {args.repeats} rounds after 2 warm-up runs, "
        "the implementations taking turns within a round: median ms, and (x composite) the median of the per-round "
        "ratios",
        "composite: x + b.reshape(1, -1, 1, ...), F.leaky_relu(., 0.2), * gain when != 1, .clamp(-c, c) (NVlabs' "
        "reference semantics, each step a torch op); ours: ascend_acts.bias_act(x, b, act=..., clamp=...) under "
        "ascend_acts.use_backend(name): our fused bias + LeakyReLU op, the clamp inside it (linear, gain 1, no clamp: "
        "the backward passes the gradient through and sums it for the bias, as the composite)",
        "backward: torch.autograd.grad of x and b from an output computed once (retain_graph); saved MiB: unique "
        "storages autograd keeps for the backward (saved_tensors_hooks)",
        "max rel. error: max over y, dx and db of max|result - exact| / max|exact|, exact = the composite in float64",
        "traffic, composite (ideal: each op reads its inputs and writes its output once; N = elements, C = "
        "channels, 4 B each): " + " | ".join(f"{r.shape} {r.phase}: {r.detail}" for r in traffic
                                               if r.impl == COMPOSITE and r.phase != "forward+backward"),
        "traffic, ours: GM bytes in and out of every emulator launch made by ascend_acts.bias_act and its backward "
        "on the sim backend (linear, gain 1, no clamp: plus the bias gradient's torch sum, not an emulator launch: "
        "charged its ideal)"
        + ("; " + " | ".join(ours_details) if ours_details else ""),
        f"bytes / {bias_common.HBM_BYTES_PER_S / 1e12:.1f} TB/s: the commonly quoted 910B HBM bandwidth (+-30%), "
        "memory-bound work assumed, launches and compute not modelled: a floor",
        "modelled 910B: benchmarks/perf_model.py's bias_act cases at these shapes and inputs (ours: the fused "
        "kernel's emulator pipe timeline and floors + one launch, the clamp inside; the composite: its aclnn ops "
        "each at its ideal + one launch each; the same assumptions as every CANN-way row of "
        "benchmarks/results/perf_model.md, which lists them; linear, gain 1, no clamp: the forward only, its "
        "backward being the composite's ReduceSum)",
        other_processes_note(usage_before, cpu_usage()),
    ]
    notes += [f"not measured: {what}" for what in not_measured]
    title = "NVlabs bias_act, float32: ascend_acts.bias_act vs NVlabs' reference composite"
    traffic_table = bias_common.traffic_table(traffic, TRAFFIC_COLUMNS, OURS_TRAFFIC,
                                              dict.fromkeys(TRAFFIC_COLUMNS, "not run"), "layer, shape")
    table = (bias_common.cpu_tables(cpu, impls, COMPOSITE, CPU_HEADERS) + "\n\nGM traffic per call (NPU side; ours "
             "counted by the emulator, the composite counted op by op):\n\n" + traffic_table
             + ("\n\nModelled 910B time (benchmarks/perf_model.py's bias_act cases; above 1.0 ours is faster):\n\n"
                + model_table(model) if model else ""))
    report("bias_act", title, cpu + traffic + model, table, notes, out,
           lambda path: plot(cpu, traffic, model, impls, path))


if __name__ == "__main__":
    main()
