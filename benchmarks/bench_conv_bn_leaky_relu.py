"""Fused Conv2d -> BatchNorm2d -> LeakyReLU(0.2), float32: ascend_acts.conv_bn_leaky_relu on every CPU
backend vs torch's composite F.leaky_relu(F.batch_norm(F.conv2d(...))) vs a memory-copy ceiling.

DCGAN-discriminator blocks (4x4 kernel, stride 2, padding 1, no conv bias). Measured per shape and
implementation: training forward, backward and forward+backward (batch statistics, running stats
updated), eval forward (running statistics: ascend_acts folds BN into the conv); the bytes autograd
keeps for the backward in both modes; and the largest error against the composite in float64.

    python benchmarks/bench_conv_bn_leaky_relu.py            # three N=64 shapes; about 1.5 min on 2 cores
    python benchmarks/bench_conv_bn_leaky_relu.py --quick    # smoke run: one tiny shape, 2 repeats
    python benchmarks/bench_conv_bn_leaky_relu.py --backends reference   # only some backends
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

import ascend_acts
from ascend_acts import backends
from common import (
    CEILINGS,
    add_backends_option,
    backend_context,
    chosen_backends,
    comparison_parser,
    copy_ceiling_gb_per_s,
    cpu_usage,
    in_backend,
    markdown_table,
    max_rel_error,
    other_processes_note,
    parse,
    pyplot,
    ratio_cell,
    report,
    save_figure,
    saved_bytes,
    saved_mib_cell,
    side_by_side,
    unavailable_notes,
)

SLOPE, MOMENTUM, EPS = 0.2, 0.1, 1e-5
KERNEL, STRIDE, PADDING = 4, 2, 1
# (batch, in channels, out channels, input height = width)
SHAPES = [(64, 64, 128, 16),   # a DCGAN discriminator block for 32x32 images (the first Conv-BN-LeakyReLU)
          (64, 64, 128, 32),   # the same block for 64x64 images: 4x the activations
          (64, 128, 256, 16)]  # the next block for 64x64 images: 2x the channels, 4x the weights
QUICK_SHAPES = [(4, 8, 16, 8)]
TRAIN_PHASES = ("train forward", "train backward", "train forward+backward")
PHASES = TRAIN_PHASES + ("eval forward",)


@dataclass
class ConvRow:
    shape: str
    batch: int
    in_channels: int
    out_channels: int
    in_size: int  # input height = width
    out_size: int  # output height = width
    impl: str  # "torch", an ascend_acts backend name, or one of common.CEILINGS
    phase: str  # one of PHASES
    median_ms: float
    gb_per_s: float  # minimal bytes of the phase (see traffic()) / median time
    ratio: float | None = None  # median over rounds of time / torch's time in the same round
    saved_bytes: int | None = None  # saved-for-backward of the phase's mode, unique storages
    max_rel_error: float | None = None  # max over output and gradients of max|impl - exact| / max|exact|
    ran: str = ""  # backends: whether the emulator launched kernels during the fused op


def out_size(size: int) -> int:
    return (size + 2 * PADDING - KERNEL) // STRIDE + 1


def label(shape) -> str:
    n, cin, cout, size = shape
    return f"{n}x{cin}x{size}x{size} -> {cout}x{out_size(size)}x{out_size(size)}"


def traffic(shape) -> dict[str, int]:
    """Minimal float32 bytes per phase: forward reads x and w and writes y; backward reads dy, the saved
    output, x and w and writes dx and dw (the O(C) vectors -- gamma, beta, statistics -- are left out)."""
    n, cin, cout, size = shape
    x, w, y = n * cin * size * size, cout * cin * KERNEL * KERNEL, n * cout * out_size(size) ** 2
    forward, backward = 4 * (x + w + y), 4 * 2 * (x + w + y)
    return {"train forward": forward, "train backward": backward, "train forward+backward": forward + backward,
            "eval forward": forward}


def make_inputs(shape) -> dict[str, torch.Tensor]:
    n, cin, cout, size = shape
    gen = torch.Generator().manual_seed(sum(shape))
    fan_in = cin * KERNEL * KERNEL
    return {
        "x": torch.randn(n, cin, size, size, generator=gen),
        "weight": torch.randn(cout, cin, KERNEL, KERNEL, generator=gen) / fan_in ** 0.5,
        "gamma": 1 + 0.1 * torch.randn(cout, generator=gen),
        "beta": 0.1 * torch.randn(cout, generator=gen),
        # eval statistics (training calls update their own copies)
        "running_mean": 0.1 * torch.randn(cout, generator=gen),
        "running_var": 0.5 + torch.rand(cout, generator=gen),
        "grad": torch.randn(n, cout, out_size(size), out_size(size), generator=gen),
    }


def torch_composite(x, weight, gamma, beta, running_mean, running_var, training):
    conv = F.conv2d(x, weight, None, STRIDE, PADDING)
    return F.leaky_relu(F.batch_norm(conv, running_mean, running_var, gamma, beta, training, MOMENTUM, EPS), SLOPE)


def fused(x, weight, gamma, beta, running_mean, running_var, training):
    return ascend_acts.conv_bn_leaky_relu(x, weight, None, running_mean, running_var, gamma, beta, training=training,
                                          momentum=MOMENTUM, eps=EPS, negative_slope=SLOPE, stride=STRIDE,
                                          padding=PADDING)


class Case:
    """One implementation on one shape: leaves that require grad, detached copies, its own running stats."""

    def __init__(self, function, inputs):
        self.function, self.inputs = function, inputs
        self.leaves = [inputs[k].clone().requires_grad_() for k in ("x", "weight", "gamma", "beta")]
        self.plain = [inputs[k] for k in ("x", "weight", "gamma", "beta")]
        self.train_stats = [inputs["running_mean"].clone(), inputs["running_var"].clone()]
        self.eval_stats = [inputs["running_mean"], inputs["running_var"]]

    def train(self, tensors):
        return self.function(*tensors, *self.train_stats, True)

    def eval(self, tensors):
        return self.function(*tensors, *self.eval_stats, False)

    def results(self, mode: str) -> list[torch.Tensor]:
        """The output and the gradients of x, weight, gamma and beta."""
        out = self.train(self.leaves) if mode == "train" else self.eval(self.leaves)
        return [out.detach(), *torch.autograd.grad(out, self.leaves, self.inputs["grad"])]


def exact_results(shape) -> dict[str, list[torch.Tensor]]:
    """torch's composite in float64 on the same (float32-valued) inputs: what both float32 results approximate."""
    case = Case(torch_composite, {name: t.double() for name, t in make_inputs(shape).items()})
    return {mode: case.results(mode) for mode in ("train", "eval")}


@dataclass
class Prepared:
    """One implementation ready to time on one shape: a call per phase and what was checked once."""
    calls: dict[str, Callable[[], object]]
    saved: dict[str, int]  # mode -> saved-for-backward bytes
    errors: dict[str, float]  # mode -> max rel. error against the float64 composite
    ran: str


def emulator_launches(case: Case) -> str:
    """Which kernel the emulator launched last in each forward and backward of the active backend (a
    backend with `last_launch()`, i.e. sim), or that none ran: what this backend really runs for the op."""
    from ascend_acts.backends import sim

    last = sim.last_launch if backends.current_backend_name() == "sim" else lambda: None
    parts = []
    for mode in ("train", "eval"):
        before = last()
        out = case.train(case.leaves) if mode == "train" else case.eval(case.leaves)
        after_forward = last()
        torch.autograd.grad(out, case.leaves, case.inputs["grad"])
        after_backward = last()
        forward = after_forward.kernel if after_forward is not before else "none"
        backward = after_backward.kernel if after_backward is not after_forward else "none"
        parts.append(f"{mode} forward {forward}, backward {backward}")
    if all(part.endswith("forward none, backward none") for part in parts):
        return "no emulator launch"
    return "last emulator kernel launched: " + "; ".join(parts) + " (none: NumPy)"


def prepare(shape, impl: str, exact: dict) -> Prepared:
    inputs = make_inputs(shape)
    case = Case(torch_composite if impl == "torch" else fused, inputs)
    grad = inputs["grad"]
    with backend_context(impl):
        results = {mode: case.results(mode) for mode in ("train", "eval")}
        ran = "" if impl == "torch" else emulator_launches(case)
        saved = {"train": saved_bytes(lambda: case.train(case.leaves)),
                 "eval": saved_bytes(lambda: case.eval(case.leaves))}
        output = case.train(case.leaves)  # kept for the backward-only phase
    phases = {
        "train forward": lambda: case.train(case.plain),
        "train backward": lambda: torch.autograd.grad(output, case.leaves, grad, retain_graph=True),
        "train forward+backward": lambda: torch.autograd.grad(case.train(case.leaves), case.leaves, grad),
        "eval forward": lambda: case.eval(case.plain),
    }
    return Prepared(in_backend(impl, phases), saved,
                    {mode: max_rel_error(results[mode], exact[mode]) for mode in results}, ran)


def measure(shape, impls: list[str], repeats: int) -> list[ConvRow]:
    exact = exact_results(shape)
    prepared = {impl: prepare(shape, impl, exact) for impl in impls}
    bytes_moved = traffic(shape)
    rows = []
    for phase, impl, milliseconds, ratio in side_by_side({i: p.calls for i, p in prepared.items()}, PHASES, repeats,
                                                         "torch"):
        mode, p = "eval" if phase.startswith("eval") else "train", prepared[impl]
        rows.append(ConvRow(label(shape), *shape, out_size(shape[3]), impl, phase, milliseconds,
                            bytes_moved[phase] / milliseconds / 1e6, ratio, p.saved[mode], p.errors[mode], p.ran))
    return rows


def ceiling_rows(shape, repeats: int) -> list[ConvRow]:
    """Each phase's minimal bytes at the bandwidth of a plain copy moving the forward's bytes."""
    bytes_moved = traffic(shape)
    elements = bytes_moved["train forward"] // 8  # a copy of this many floats reads + writes the forward's bytes
    rows = []
    for name, allocate in CEILINGS.items():
        bandwidth = copy_ceiling_gb_per_s(elements, torch.float32, repeats, allocate)
        rows += [ConvRow(label(shape), *shape, out_size(shape[3]), name, phase, bytes_moved[phase] / bandwidth / 1e6,
                         bandwidth) for phase in PHASES]
    return rows


def tables(rows: list[ConvRow], impls: list[str]) -> str:
    by_key = {(r.shape, r.impl, r.phase): r for r in rows}
    shapes = list(dict.fromkeys(r.shape for r in rows))
    ours = [i for i in impls if i != "torch"]
    time_lines = []
    for shape in shapes:
        for phase in PHASES:
            base = by_key[(shape, "torch", phase)].median_ms
            cells = [shape, phase, f"{base:.3g}"]
            cells += [ratio_cell(by_key[(shape, i, phase)].median_ms, by_key[(shape, i, phase)].ratio) for i in ours]
            cells += [f"{by_key[(shape, c, phase)].median_ms:.3g} ({by_key[(shape, c, phase)].gb_per_s:.1f} GB/s)"
                      for c in CEILINGS]
            time_lines.append(cells)
    time_table = markdown_table(["shape (N x C x H x W -> C x H x W)", "phase", "torch ms",
                                 *[f"{i} ms (x torch)" for i in ours], *[f"{c} ms" for c in CEILINGS]], time_lines)
    memory_lines = []
    for shape in shapes:
        for mode, phase in (("train", "train forward"), ("eval", "eval forward")):
            base = by_key[(shape, "torch", phase)].saved_bytes
            cells = [shape, mode, f"{base / 2**20:.3g}"]
            cells += [saved_mib_cell(by_key[(shape, i, phase)].saved_bytes, base) for i in ours]
            cells += [f"{by_key[(shape, i, phase)].max_rel_error:.1e}" for i in impls]
            memory_lines.append(cells)
    memory_table = markdown_table(["shape", "mode", "torch saved MiB", *[f"{i} saved MiB (x torch)" for i in ours],
                                   *[f"{i} max rel. error" for i in impls]], memory_lines)
    return time_table + "\n\n" + memory_table


def plot(rows: list[ConvRow], impls: list[str], path: Path) -> None:
    """One row of panels per shape: a bar per implementation for each phase (log time) and saved MiB."""
    shapes = list(dict.fromkeys(r.shape for r in rows))
    names = impls + list(CEILINGS)
    panels = list(PHASES) + ["saved MiB (train / eval)"]
    fig, axes = pyplot().subplots(len(shapes), len(panels), figsize=(3.3 * len(panels), 0.9 + 2.0 * len(shapes)),
                             squeeze=False)
    by_key = {(r.shape, r.impl, r.phase): r for r in rows}
    for axes_row, shape in zip(axes, shapes):
        for ax, phase in zip(axes_row, PHASES):
            values = [by_key[(shape, name, phase)].median_ms for name in names]
            ax.barh(names, values, color=[f"C{i}" for i in range(len(names))])
            ax.set(xscale="log", xlabel="median ms" if shape == shapes[-1] else None)
            ax.set_title(phase if shape == shapes[0] else "", fontsize=9)
        ax = axes_row[-1]
        for offset, (mode, phase) in enumerate((("train", "train forward"), ("eval", "eval forward"))):
            values = [by_key[(shape, name, phase)].saved_bytes / 2**20 for name in impls]
            positions = [i + 0.4 * offset for i in range(len(impls))]
            ax.barh(positions, values, height=0.4, label=mode, color=f"C{offset}", alpha=0.8)
        ax.set_yticks([i + 0.2 for i in range(len(impls))], impls)
        ax.set_title(panels[-1] if shape == shapes[0] else "", fontsize=9)
        if shape == shapes[0]:
            ax.legend(fontsize=7)
        axes_row[0].set_ylabel(shape, fontsize=8)
        for ax in axes_row:
            ax.invert_yaxis()
            ax.tick_params(labelsize=7)
        for ax in axes_row[1:len(PHASES)]:
            ax.set_yticklabels([])
    save_figure(fig, "Conv2d + BatchNorm2d + LeakyReLU(0.2), float32, CPU: ascend_acts vs torch", path)


def main(argv=None) -> None:
    parser = comparison_parser(__doc__, "smoke run: one tiny shape, two repeats")
    add_backends_option(parser)
    args = parse(parser, argv)
    shapes = SHAPES
    if args.quick:
        shapes, args.repeats = QUICK_SHAPES, 2
    impls = ["torch", *chosen_backends(parser, args.backends)]

    usage_before = cpu_usage()
    rows = []
    for shape in shapes:
        rows += measure(shape, impls, args.repeats)
        rows += ceiling_rows(shape, args.repeats)

    ran = {r.impl: r.ran for r in rows if r.ran}
    notes = [f"kernel {KERNEL}x{KERNEL}, stride {STRIDE}, padding {PADDING}, no conv bias, LeakyReLU({SLOPE}), "
             f"momentum {MOMENTUM}, eps {EPS}; per phase {args.repeats} rounds after 2 warm-up runs, the "
             "implementations taking turns within a round: median ms, and (x torch) the median of the per-round "
             "ratios",
             "torch: F.leaky_relu(F.batch_norm(F.conv2d(...))) on the CPU (oneDNN convolution); "
             "backends: ascend_acts.conv_bn_leaky_relu under ascend_acts.use_backend(name) (reference: torch's "
             "convolution, NumPy BatchNorm+LeakyReLU passes); "
             + "; ".join(f"{impl} ran: {how}" for impl, how in ran.items()),
             "train: batch statistics, running stats updated; backward = autograd.grad of x, weight, gamma, beta "
             "from an output computed once (retain_graph); eval: running statistics (ascend_acts folds BN into "
             "the conv weight and bias)",
             "ceilings: each phase's minimal traffic (forward: read x and w, write y; backward: read dy, y, x, w, "
             "write dx, dw) at the bandwidth Tensor.clone() (allocates) or Tensor.copy_ (preallocated) reaches "
             "on a copy of the forward's bytes; convolution FLOPs are not in it",
             "saved MiB: unique storages autograd keeps for the backward (saved_tensors_hooks), parameters and "
             "the input included",
             "max rel. error: max over the output and the gradients of x, w, gamma, beta of max|result - exact| / "
             "max|exact|, exact = torch's composite in float64 on the same inputs; an output whose pre-activation "
             "rounds to the other side of 0 in float32 takes the other slope in the backward, which shows as an "
             "error of about 1e-2 in dx/dw/dgamma/dbeta (for whichever implementation it happens to)"]
    notes.append(other_processes_note(usage_before, cpu_usage()))
    notes += unavailable_notes()
    title = "Conv2d + BatchNorm2d + LeakyReLU(0.2), float32: fused vs torch composite"
    report("conv_bn_leaky_relu", title, rows, tables(rows, impls), notes, args.out,
           lambda path: plot(rows, impls, path))


if __name__ == "__main__":
    main()
