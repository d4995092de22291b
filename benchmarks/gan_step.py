"""What the whole-GAN-step scripts (bench_dcgan_step.py, bench_cyclegan_step.py) share: one generator + discriminator
training step of a torch model and of `ascend_acts.convert` of a copy, side by side in one run: step time, the
bytes autograd keeps for each backward, the peak memory of a step, `explain`'s per-run table, where the step time
goes, and the verdicts against issue 25's targets.

Times are taken in this process with glibc's malloc as a user's program has it; the peak memory of a step in a
child process of the same script (`--peaks-only`), which fixes glibc's mmap threshold first (_fix_malloc_threshold):
that makes every large allocation fresh pages, which would slow both sides' steps by a third and more.

The step follows junyanz/pytorch-CycleGAN-and-pix2pix's order for both models: fake = G(source); the G step with D
frozen (requires_grad off, as its set_requires_grad does): loss(D(fake), real), backward, G's Adam step; then the D
step: (loss(D(real), real) + loss(D(fake.detach()), fake)) / 2, backward, D's Adam step.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import ctypes
import gc
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import nn

import ascend_acts
from ascend_acts.nn import fusion
from common import (
    add_backends_option,
    backend_context,
    chosen_backends,
    comparison_parser,
    cpu_usage,
    in_backend,
    interleaved_ms,
    markdown_table,
    median_ratio,
    other_processes_note,
    parse,
    plot_bars,
    report,
    saved_bytes,
)

# issue 25's "Done when" targets for a whole step on the default CPU backend, converted / torch
MEMORY_TARGET, TIME_TARGET = 0.7, 1.0


def _fix_malloc_threshold() -> bool:
    """glibc raises its mmap threshold as large blocks are freed, after which freed activations stay in the heap and
    out of the RSS figures; a fixed 64 KiB threshold returns every large block to the system when it is freed, so
    the RSS high-water mark of a step is its peak of live tensors (plus the small-block heap). False off glibc."""
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 16))  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        return False


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def peak_growth_bytes(step: Callable[[], object], repeats: int = 3) -> int | None:
    """Median over `repeats` steps of how far the resident set rose above where it stood before the step (VmHWM
    reset through /proc/self/clear_refs): every allocation, torch's and NumPy's alike, once _fix_malloc_threshold
    has run in this process. None where Linux's /proc is missing."""
    growths = []
    for _ in range(repeats):
        gc.collect()
        try:
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")  # resets the high-water mark to the current RSS
            before = _status_kib("VmRSS")
        except OSError:
            return None
        step()
        growths.append(1024 * (_status_kib("VmHWM") - before))
    return int(statistics.median(growths))


def lsgan_loss(prediction: torch.Tensor, real: bool) -> torch.Tensor:
    """junyanz's GANLoss('lsgan'): MSE against a target of 1 (real) or 0 (fake) of the prediction's shape."""
    return nn.functional.mse_loss(prediction, torch.full_like(prediction, 1.0 if real else 0.0))


def bce_logits_loss(prediction: torch.Tensor, real: bool) -> torch.Tensor:
    """DCGAN's BCE, on logits."""
    target = torch.ones_like(prediction) if real else torch.zeros_like(prediction)
    return nn.functional.binary_cross_entropy_with_logits(prediction, target)


@dataclass
class GanCase:
    """A GAN as the step needs it: the two torch models, the generator's input, a real batch and the loss."""
    generator: nn.Module
    discriminator: nn.Module
    source: torch.Tensor  # the generator's input (a latent batch, or images of the other domain)
    real: torch.Tensor
    loss: Callable[[torch.Tensor, bool], torch.Tensor]


class Trainer:
    """One side of the comparison: its own copies of G and D (converted or not), Adam for each, the step."""

    def __init__(self, case: GanCase, converted: bool):
        self.case = case
        self.generator, self.discriminator = (copy.deepcopy(m) for m in (case.generator, case.discriminator))
        if converted:
            self.generator, self.discriminator = map(ascend_acts.convert, (self.generator, self.discriminator))
        self.optimizers = [torch.optim.Adam(m.parameters(), lr=2e-4, betas=(0.5, 0.999))
                           for m in (self.generator, self.discriminator)]
        self.model_tensors = [t for m in (self.generator, self.discriminator)
                              for t in (*m.parameters(), *m.buffers())]

    def _freeze_discriminator(self, frozen: bool) -> None:
        for parameter in self.discriminator.parameters():
            parameter.requires_grad_(not frozen)

    def generator_forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(G step loss, fake) with D frozen: the graph the G step's backward runs through."""
        fake = self.generator(self.case.source)
        self._freeze_discriminator(True)
        try:
            return self.case.loss(self.discriminator(fake), True), fake
        finally:
            self._freeze_discriminator(False)

    def discriminator_forward(self, fake: torch.Tensor) -> torch.Tensor:
        loss = self.case.loss
        return (loss(self.discriminator(self.case.real), True) + loss(self.discriminator(fake.detach()), False)) / 2

    def step(self) -> None:
        g_optimizer, d_optimizer = self.optimizers
        g_optimizer.zero_grad(set_to_none=True)
        loss, fake = self.generator_forward()
        loss.backward()  # D's parameters, frozen while the graph was built, get no gradient
        g_optimizer.step()
        d_optimizer.zero_grad(set_to_none=True)
        self.discriminator_forward(fake).backward()
        d_optimizer.step()

    def kept_bytes(self) -> tuple[int, int]:
        """Bytes autograd keeps for the G step's and for the D step's backward (unique storages; parameters and
        buffers left out: both sides keep the same ones)."""
        g_step = saved_bytes(lambda: self.generator_forward()[0], exclude=self.model_tensors)
        with torch.no_grad():
            fake = self.generator(self.case.source)
        d_step = saved_bytes(lambda: self.discriminator_forward(fake), exclude=self.model_tensors)
        return g_step, d_step


@dataclass
class StepRow:
    gan: str
    config: str
    model: str  # "torch" or "converted (<backend>)"
    median_ms: float
    ratio: float  # median over rounds of this step's time / torch's in the same round
    ratio_low: float  # the smallest and largest per-round ratio
    ratio_high: float
    g_step_saved: int  # kept for the G step's backward (G's and D's activations on the fake), bytes
    d_step_saved: int
    peak_bytes: int | None  # RSS growth during a step (None: not measurable here)
    fused: str  # explain: runs fused / runs found, G and D


def kept_by_module(trainer: Trainer) -> dict[str, int]:
    """Bytes kept for the G step's backward of the torch model, by the class of the module that saves each storage
    first (its leaf modules hooked; a converted model is not: hooks stop fusion), with every saved tensor held until
    the end so that no address is reused and counted twice or for the wrong module."""
    current: list[str] = []
    kept: dict[str, int] = {}
    seen = {t.untyped_storage().data_ptr() for t in trainer.model_tensors}
    held = []

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            owner = current[-1] if current else "loss"
            kept[owner] = kept.get(owner, 0) + storage.nbytes()
            held.append(tensor)
        return tensor

    def enter(label):
        def hook(module, args) -> None:  # None: the input is left as it is
            current.append(label)
        return hook

    def leave(module, args, output) -> None:  # None: the output is left as it is
        current.pop()

    handles = []
    for network, model in (("G", trainer.generator), ("D", trainer.discriminator)):
        for module in model.modules():
            if next(module.children(), None) is None:
                handles.append(module.register_forward_pre_hook(enter(f"{network} {type(module).__name__}")))
                handles.append(module.register_forward_hook(leave))
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            trainer.generator_forward()
    finally:
        for handle in handles:
            handle.remove()
    return dict(sorted(kept.items(), key=lambda item: -item[1]))


def kept_by_module_table(kept: dict[str, int]) -> str:
    total = sum(kept.values())
    return markdown_table(["module that saves it (torch model, G step)", "MiB", "share"],
                          [[name, f"{count / 2**20:.1f}", f"{count / total:.0%}"] for name, count in kept.items()])


def explained(case: GanCase) -> tuple[str, str]:
    """(fused/found per network, explain's printed tables) of the torch models on the case's inputs."""
    tables, counts = [], []
    with torch.no_grad():
        fake = case.generator(case.source)
    for name, model, inputs in (("G", case.generator, case.source), ("D", case.discriminator, fake)):
        explanation = ascend_acts.explain(model, inputs)
        counts.append(f"{name} {sum(r.fused for r in explanation)}/{len(explanation)}")
        tables.append(f"{name} ({type(model).__name__}):\n\n```\n{explanation}\n```")
    return ", ".join(counts), "\n\n".join(tables)


def trainers_for(case: GanCase, impls: list[str]) -> dict[str, Trainer]:
    """The torch trainer and one converted trainer per backend in `impls`, by row name."""
    trainers = {"torch": Trainer(case, converted=False)}
    trainers.update({f"converted ({impl})": Trainer(case, converted=True) for impl in impls})
    return trainers


def backend_of(name: str) -> str:
    return name[len("converted ("):-1] if name != "torch" else "torch"


def step_call(name: str, trainer: Trainer) -> Callable[[], None]:
    return in_backend(backend_of(name), {"step": trainer.step})["step"]


def peaks(case: GanCase, impls: list[str]) -> dict[str, int | None]:
    """Each row's peak RSS growth of a step (peak_growth_bytes), after a step that creates Adam's state. Run in the
    `--peaks-only` child, whose malloc threshold is fixed."""
    found = {}
    for name, trainer in trainers_for(case, impls).items():
        step = step_call(name, trainer)
        step()
        found[name] = peak_growth_bytes(step)
    return found


def peaks_in_child(script: Path, argv: list[str]) -> dict[str, int | None]:
    """peaks() of the same case, measured by `script argv --peaks-only` in a fresh interpreter; None for every row
    where that cannot be measured (no /proc, no glibc)."""
    result = subprocess.run([sys.executable, str(script), *argv, "--peaks-only"], capture_output=True, text=True,
                            timeout=3600)
    if result.returncode != 0:
        raise RuntimeError(f"{script.name} --peaks-only failed:\n{result.stdout}\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def recompute_off():
    """convert's recompute rule answering no for every run while the block runs (nn/fusion.py reads it at every
    call): the converted model keeps its ReLU runs' conv outputs, as without the rule."""
    rule = fusion.recompute_is_cheaper
    fusion.recompute_is_cheaper = lambda macs_per_output: False
    try:
        yield
    finally:
        fusion.recompute_is_cheaper = rule


# aten's convolution ops (forward, transposed, backward; the recomputations inside ours included), by self time
_CONVOLUTION_EVENTS = ("convolution", "conv2d", "conv_transpose", "conv1d")


def convolution_ms(step: Callable[[], None]) -> tuple[float, float]:
    """(step ms, of which aten's convolutions' self time ms) of one profiled call of step."""
    from torch.profiler import ProfilerActivity, profile

    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as profiled:
        step()
    total = 1e3 * (time.perf_counter() - start)
    events = profiled.key_averages()
    return total, sum(e.self_cpu_time_total for e in events if any(k in e.key for k in _CONVOLUTION_EVENTS)) / 1e3


def time_split(trainers: dict[str, Trainer], repeats: int) -> str:
    """Where each row's step time goes: aten's convolutions (profiled, median of `repeats` steps) and the rest; and
    each converted row with the recompute rule off, timed side by side with the torch row."""
    split = {name: [convolution_ms(step_call(name, trainer)) for _ in range(repeats)]
             for name, trainer in trainers.items()}
    table = markdown_table(
        ["model", "profiled step ms", "aten convolutions ms", "the rest ms"],
        [[name, f"{statistics.median(t for t, _ in runs):.1f}", f"{statistics.median(c for _, c in runs):.1f}",
          f"{statistics.median(t - c for t, c in runs):.1f}"] for name, runs in split.items()])
    calls = {"torch": step_call("torch", trainers["torch"])}
    for name, trainer in trainers.items():
        if name != "torch":
            step = step_call(name, trainer)

            def without_recompute(step=step):
                with recompute_off():
                    step()
            calls[f"{name}, recompute off"] = without_recompute
            calls[name] = step
    times = interleaved_ms(calls, repeats)
    lines = [f"{name}: {statistics.median(ms):.1f} ms, {median_ratio(ms, times['torch']):.2f}x torch's"
             for name, ms in times.items() if name != "torch"]
    return "\n\n".join([
        "Where the step time goes (one profiled step per round; aten's convolutions by self time, the recomputations "
        "inside the fused ops included; the rest is everything else: the norms and activations, pads, losses, Adam, "
        "the op layer):", table,
        "The recompute rule's price on this CPU (it is decided for the 910B, where those convolutions are "
        "memory-bound; the CPU computes them again), the same steps timed side by side again:",
        "\n".join(f"- {line}" for line in lines)])


def measure(gan: str, config: str, case: GanCase, impls: list[str], repeats: int,
            peaks: dict[str, int | None]) -> tuple[list[StepRow], str, str]:
    """The torch trainer and one converted trainer per backend in `impls`, timed side by side (interleaved_ms);
    `peaks` from the child. Returns the rows, time_split's section and explain's tables."""
    trainers = trainers_for(case, impls)
    fused, tables = explained(case)
    tables = "Kept for the G step's backward by the module that saves it:\n\n" + \
        kept_by_module_table(kept_by_module(trainers["torch"])) + "\n\n" + tables
    kept = {}
    for name, trainer in trainers.items():
        with backend_context(backend_of(name)):
            kept[name] = trainer.kept_bytes()
    calls = {name: step_call(name, trainer) for name, trainer in trainers.items()}
    times = interleaved_ms(calls, repeats)
    rows = []
    for name in trainers:
        ratios = [t / b for t, b in zip(times[name], times["torch"])]
        rows.append(StepRow(gan, config, name, statistics.median(times[name]), median_ratio(times[name],
                            times["torch"]), min(ratios), max(ratios), *kept[name], peaks[name],
                            "" if name == "torch" else fused))
    return rows, time_split(trainers, repeats), tables


def _mib(count: int | None) -> str:
    return "-" if count is None else f"{count / 2**20:.1f}"


def _times(count: int | None, baseline: int | None) -> str:
    return "" if count is None or not baseline else f" ({count / baseline:.2f}x)"


def results_table(rows: list[StepRow]) -> str:
    base = rows[0]
    return markdown_table(
        ["model", "step ms, median", "x torch (per-round ratios: median, range)", "kept for G step's backward MiB",
         "kept for D step's backward MiB", "peak RSS growth of a step MiB", "fused runs (explain)"],
        [[r.model, f"{r.median_ms:.1f}", f"{r.ratio:.2f}x ({r.ratio_low:.2f}-{r.ratio_high:.2f})",
          _mib(r.g_step_saved) + _times(r.g_step_saved, base.g_step_saved),
          _mib(r.d_step_saved) + _times(r.d_step_saved, base.d_step_saved),
          _mib(r.peak_bytes) + _times(r.peak_bytes, base.peak_bytes), r.fused or "-"] for r in rows])


def verdicts(rows: list[StepRow]) -> list[str]:
    """Issue 25's targets for each converted row, each with what would flip it."""
    base, lines = rows[0], []
    torch_kept = max(base.g_step_saved, base.d_step_saved)
    for row in rows[1:]:
        kept = max(row.g_step_saved, row.d_step_saved)
        memory, need = kept / torch_kept, kept - MEMORY_TARGET * torch_kept
        lines.append(
            f"{row.model}: memory kept for backward (the larger of the G and D steps' graphs, what a step must hold) "
            f"{memory:.2f}x torch's (G step {row.g_step_saved / base.g_step_saved:.2f}x, D step "
            f"{row.d_step_saved / base.d_step_saved:.2f}x): "
            f"target <= {MEMORY_TARGET}x {'met' if memory <= MEMORY_TARGET else 'NOT met'} "
            + (f"(it would take {need / 2**20:.2f} MiB less kept to meet it; the count is exact, not a timing)"
               if need > 0 else f"(by {-need / 2**20:.2f} MiB; the count is exact, not a timing)"))
        if row.peak_bytes is not None and base.peak_bytes:
            peak = row.peak_bytes / base.peak_bytes
            lines.append(f"{row.model}: peak RSS growth of a step {peak:.2f}x torch's: target <= {MEMORY_TARGET}x "
                         f"{'met' if peak <= MEMORY_TARGET else 'NOT met'} (includes gradients, Adam's update "
                         "temporaries and the allocator's rounding, alike on both sides)")
        slower = sum(1 for r in [row.ratio_low, row.ratio_high] if r > TIME_TARGET)
        lines.append(
            f"{row.model}: step time {row.ratio:.2f}x torch's (median of per-round ratios): target <= "
            f"{TIME_TARGET}x {'met' if row.ratio <= TIME_TARGET else 'NOT met'}; per-round ratios spanned "
            f"{row.ratio_low:.2f}-{row.ratio_high:.2f}, so "
            + ("the verdict holds in every round" if slower in (0, 2) else
               "a run with other load on the machine could land it on the other side (only a run near 0% other "
               "load counts)"))
    return lines


def run(argv, description: str, quick_help: str, name: str, title: str, add_options, build_case,
        repeats: int, extra=None) -> None:
    """A whole step script: options (add_options(parser); build_case(args) -> (config label, GanCase, notes)),
    the measurement, the report (with extra(args, rows), a Markdown section, after the verdicts)."""
    parser = comparison_parser(description, quick_help, repeats=repeats)
    add_backends_option(parser, default=[ascend_acts.backends.current_backend_name()])
    add_options(parser)
    parser.add_argument("--peaks-only", action="store_true", help=argparse.SUPPRESS)  # the child's part
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(parser, argv)
    if args.quick:
        args.repeats = 2
    impls = chosen_backends(parser, args.backends)
    config, case, case_notes = build_case(args)
    if args.peaks_only:
        measurable = _fix_malloc_threshold()
        print(json.dumps({row: peak if measurable else None for row, peak in peaks(case, impls).items()}))
        return

    usage_before = cpu_usage()
    rows, split, tables = measure(name, config, case, impls, args.repeats,
                           peaks_in_child(Path(__file__).with_name(f"bench_{name}.py"), argv))
    load = other_processes_note(usage_before, cpu_usage())
    notes = case_notes + [
        f"one step = fake = G(source); G step (D frozen): loss(D(fake), real), backward, Adam; D step: "
        f"(loss(D(real), real) + loss(D(fake.detach()), fake)) / 2, backward, Adam (junyanz's order); "
        f"{args.repeats} rounds after 2 warm-up steps each, the models taking turns within a round",
        "converted: ascend_acts.convert of a deep copy of both networks (same initial weights), under "
        "ascend_acts.use_backend(<backend>); fused runs: explain's count of Conv/Linear -> Norm -> activation runs "
        "that ran as one fused op (its tables below)",
        "kept for backward: unique storages packed by saved_tensors_hooks during the forward of that step's graph, "
        "parameters and buffers left out (both sides keep the same ones); the source and real batches included",
        "peak RSS growth: the resident set's high-water mark during one step (after warm-up, Adam's state "
        "allocated) minus the resident set before it, median of 3 steps, measured in a child process of the same "
        "script with glibc's mmap threshold fixed at 64 KiB so that freed tensors leave the resident set: every "
        "allocation, torch's and NumPy's; step times are measured here, with glibc's malloc as a user's program "
        "has it",
        load]
    body = "\n\n".join([results_table(rows), "Verdicts against issue 25's targets:",
                        "\n".join(f"- {line}" for line in verdicts(rows)), split,
                        *([extra(args, rows)] if extra else []),
                        "Where the bytes are, and the runs (`ascend_acts.explain`):", tables])
    panels = {"step ms": [r.median_ms for r in rows],
              "kept for G step's backward MiB": [r.g_step_saved / 2**20 for r in rows],
              "kept for D step's backward MiB": [r.d_step_saved / 2**20 for r in rows]}
    if all(r.peak_bytes is not None for r in rows):
        panels["peak RSS growth MiB"] = [r.peak_bytes / 2**20 for r in rows]
    report(name, title, rows, body, notes, args.out,
           lambda path: plot_bars([r.model for r in rows], panels, title, path))
