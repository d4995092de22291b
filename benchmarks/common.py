"""Shared benchmark machinery: command line, timing, saved-for-backward bytes, errors, emulator launches,
memory-copy ceiling, tables, plots.

Every script builds a list of rows (dataclasses) and hands it to `report()`, which prints the environment,
writes `<name>.csv`, `<name>.md` and `<name>.png` into the output directory and prints the Markdown.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch

import ascend_acts
from ascend_acts import backends

RESULTS_DIR = Path(__file__).resolve().parent / "results"
QUICK_OUT = Path("outputs/benchmarks")  # where a smoke run writes when it must not overwrite RESULTS_DIR (untracked)
DEFAULT_SIZES = (1 << 16, 1 << 20, 1 << 24)  # 64 Ki, 1 Mi, 16 Mi elements; the headline is 16 Mi
QUICK_SIZES = (1 << 12, 1 << 14)
SIM_MAX_SIZE = 1 << 20  # the emulator interprets every vector instruction: too slow beyond ~1 Mi
PHASES = ("forward", "backward", "forward+backward")
_DEFAULT_THREADS = torch.get_num_threads()  # before a script's --threads


@dataclass
class Row:
    op: str
    impl: str  # "torch", "reference", "sim" or one of CEILINGS
    size: int  # elements
    phase: str
    median_ms: float
    gb_per_s: float  # minimal bytes the phase must move / median time
    saved_bytes: int | None = None  # saved-for-backward, unique storages


def comparison_parser(description: str, quick_help: str, repeats: int = 9,
                      out_default: Path | None = RESULTS_DIR) -> argparse.ArgumentParser:
    """The options of every script: --quick, --repeats, --threads, --out. `out_default` None: `output_dir()` picks
    RESULTS_DIR, or QUICK_OUT for --quick."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--repeats", type=int, default=repeats,
                        help="timed runs per phase, median (side by side: rounds, every implementation once each)")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's default)")
    out_help = ("where CSV/Markdown/PNG go" if out_default is not None
                else f"results directory (default {RESULTS_DIR}; --quick: {QUICK_OUT}, untracked)")
    parser.add_argument("--out", type=Path, default=out_default, help=out_help)
    return parser


def add_backends_option(parser: argparse.ArgumentParser, default: list[str] | None = None) -> None:
    shown = " ".join(default) if default else "every available one"
    parser.add_argument("--backends", nargs="+", metavar="NAME", default=default,
                        help=f"ascend_acts CPU backends to measure (default: {shown})")


def parse(parser: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """Parsed arguments, --threads applied."""
    args = parser.parse_args(argv)
    if args.repeats < 1 or getattr(args, "batch", 1) < 1:
        parser.error(f"{'--batch and ' if hasattr(args, 'batch') else ''}--repeats must be at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    return args


def output_dir(args) -> Path:
    return args.out or (QUICK_OUT if args.quick else RESULTS_DIR)


def chosen_backends(parser: argparse.ArgumentParser, requested: list[str] | None) -> list[str]:
    """The requested ascend_acts backends (default: every available one); a parser error names any unavailable."""
    available = [name for name in MEASURED_BACKENDS if backends.unavailable_reason(name) is None]
    chosen = requested or available
    unknown = [name for name in chosen if name not in available]
    if unknown:
        parser.error(f"backends not available here: {unknown} (available: {available})")
    return chosen


def unavailable_notes() -> list[str]:
    return [f"not measured: {name}: {backends.unavailable_reason(name)}"
            for name in MEASURED_BACKENDS if backends.unavailable_reason(name) is not None]


def base_parser(description: str) -> argparse.ArgumentParser:
    """An elementwise script's options: comparison_parser's, --sizes and --sim-max-size."""
    parser = comparison_parser(description, "smoke run: tiny sizes, two repeats")
    parser.add_argument("--sizes", type=int, nargs="+", help=f"elements (default {DEFAULT_SIZES})")
    parser.add_argument("--sim-max-size", type=int, default=SIM_MAX_SIZE,
                        help="largest size run on the (slow) emulator backend")
    return parser


def resolve_sizes(args) -> list[int]:
    if args.sizes:
        return sorted(args.sizes)
    if args.quick:
        args.repeats = 2
        return list(QUICK_SIZES)
    return list(DEFAULT_SIZES)


def environment() -> str:
    return (f"torch {torch.__version__}, numpy {np.__version__}, ascend_acts {ascend_acts.__version__}; "
            f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
            f"torch.get_num_threads() = {torch.get_num_threads()}"
            f"{' (the default)' if torch.get_num_threads() == _DEFAULT_THREADS else ''}")


def cpu_usage() -> tuple[float, float, float] | None:
    """(wall s, CPU s busy on the whole machine, CPU s of this process and its waited-for children) from /proc/stat;
    None off Linux. The children count as ours: the step benchmarks measure peak memory in a child process of their
    own, run while the parent waits (it times nothing then)."""
    try:
        import resource

        with open("/proc/stat") as handle:
            ticks = [int(v) for v in handle.readline().split()[1:]]
    except (ImportError, OSError):
        return None
    busy = sum(ticks[:3]) + sum(ticks[5:8])  # user, nice, system, irq, softirq, steal (not idle, iowait)
    own = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return time.time(), busy / os.sysconf("SC_CLK_TCK"), sum(usage.ru_utime + usage.ru_stime for usage in own)


def other_processes_note(before, after) -> str:
    """How much CPU other processes took during the run: they slow torch's multi-threaded regions most."""
    if before is None or after is None:
        return "CPU use of other processes during the run: unknown (no /proc/stat)"
    wall, busy, own = (b - a for a, b in zip(before, after))
    available = wall * (os.cpu_count() or 1)
    other = max(busy - own, 0.0)
    return (f"other processes used {other:.1f} of the {available:.0f} CPU-seconds of the run "
            f"({other / available:.0%}); anything but ~0% inflates the times, torch's 2-thread OpenMP regions most")


def median_ms(fn: Callable[[], object], repeats: int, warmup: int = 2) -> float:
    """Median wall time of fn() in milliseconds after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def interleaved_ms(calls: dict[str, Callable[[], object]], repeats: int, warmup: int = 2) -> dict[str, list[float]]:
    """Wall times in ms of each call, the calls taking turns (round robin, the order rotated every round):
    on a shared machine a change of load then hits every side alike, and per-round ratios compare calls
    that ran seconds apart. Each call runs `warmup` untimed times first."""
    names = list(calls)
    for name in names:
        for _ in range(warmup):
            calls[name]()
    times = {name: [] for name in names}
    for round_index in range(repeats):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            calls[name]()
            times[name].append(1e3 * (time.perf_counter() - start))
    return times


def median_ratio(times: list[float], baseline: list[float]) -> float:
    """Median over rounds of time / baseline time (from interleaved_ms)."""
    return statistics.median(t / b for t, b in zip(times, baseline))


def side_by_side(calls: dict[str, dict[str, Callable[[], object]]], phases: Iterable[str], repeats: int,
                 baseline: str) -> list[tuple[str, str, float, float]]:
    """(phase, impl, median ms, median per-round ratio to `baseline`) of calls[impl][phase], the implementations
    taking turns per phase (interleaved_ms)."""
    results = []
    for phase in phases:
        times = interleaved_ms({impl: by_phase[phase] for impl, by_phase in calls.items()}, repeats)
        results += [(phase, impl, statistics.median(times[impl]), median_ratio(times[impl], times[baseline]))
                    for impl in calls]
    return results


def saved_bytes(forward: Callable[[], torch.Tensor], exclude: Iterable[torch.Tensor] = ()) -> int:
    """Bytes autograd keeps for the backward of forward(): unique storages of the saved tensors
    (a tensor saved twice, or the output that is also saved, counts once), those of `exclude` (e.g. the
    parameters) left out."""
    storages = {}
    excluded = {t.untyped_storage().data_ptr() for t in exclude}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in excluded:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        forward()
    return sum(storages.values())


def copy_ceiling_gb_per_s(size: int, dtype: torch.dtype, repeats: int, allocate: bool) -> float:
    """What a plain read-one-write-one pass achieves here: `src.clone()` (allocates its output, as an
    out-of-place op does, so it pays the same first-touch page faults) or `dst.copy_(src)` into a
    preallocated buffer (the bandwidth ceiling proper)."""
    src = torch.randn(size).to(dtype)
    dst = torch.empty_like(src)
    copy = src.clone if allocate else (lambda: dst.copy_(src))
    milliseconds = median_ms(copy, repeats)
    return 2 * src.nbytes / milliseconds / 1e6


# the ascend_acts backends measured; impl "torch" is torch's own ops, the baseline (the "torch" backend, the NPU
# fallback in torch ops, is not measured: it would share the baseline's name)
MEASURED_BACKENDS = [name for name in backends.known_backends() if name != "torch"]


def backend_context(impl: str):
    """A `with` context selecting the ascend_acts backend for impl (torch needs none)."""
    return ascend_acts.use_backend(impl) if impl in MEASURED_BACKENDS else contextlib.nullcontext()


def in_backend(impl: str, calls: dict[str, Callable[[], object]]) -> dict[str, Callable[[], object]]:
    """The calls, each run under impl's backend (backend_context)."""
    def wrapped(fn):
        def call():
            with backend_context(impl):
                return fn()
        return call

    return {name: wrapped(fn) for name, fn in calls.items()}


def max_rel_error(results: list[torch.Tensor], exact: list[torch.Tensor]) -> float:
    """Max over the tensors of max|result - exact| / max|exact| (exact in float64)."""
    return max(((a.double() - b).abs().max() / b.abs().max().clamp_min(1e-300)).item() for a, b in zip(results, exact))


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


def available_impls(size: int, sim_max_size: int) -> tuple[list[str], dict[str, str]]:
    """(impls to measure at this size, {impl: why it is left out})."""
    impls, left_out = ["torch"], {}
    for name in MEASURED_BACKENDS:
        reason = backends.unavailable_reason(name)
        if reason is not None:
            left_out[name] = reason
        elif name == "sim" and size > sim_max_size:
            left_out[name] = f"emulator measured only up to {sim_max_size:,} elements (slow)"
        else:
            impls.append(name)
    return impls, left_out


def measure_elementwise(op_name: str, impl: str, size: int, forward: Callable[[torch.Tensor], torch.Tensor],
                        bytes_per_element: int, repeats: int) -> list[Row]:
    """Forward, backward and forward+backward of an elementwise op of one input.

    Minimal traffic: forward reads x and writes y; backward reads dy and the saved tensor, writes dx.
    """
    x = torch.randn(size, generator=torch.Generator().manual_seed(size))
    grad = torch.randn(size, generator=torch.Generator().manual_seed(size + 1))
    leaf = x.clone().requires_grad_()
    traffic = {"forward": 2 * size * bytes_per_element, "backward": 3 * size * bytes_per_element}
    traffic["forward+backward"] = traffic["forward"] + traffic["backward"]
    with backend_context(impl):
        output = forward(leaf)

        def backward():
            torch.autograd.grad(output, leaf, grad, retain_graph=True)

        def forward_backward():
            torch.autograd.grad(forward(leaf), leaf, grad)

        timed = {"forward": lambda: forward(x), "backward": backward, "forward+backward": forward_backward}
        kept = saved_bytes(lambda: forward(leaf))
        rows = []
        for phase in PHASES:
            milliseconds = median_ms(timed[phase], repeats)
            rows.append(Row(op_name, impl, size, phase, milliseconds, traffic[phase] / milliseconds / 1e6, kept))
    return rows


CEILINGS = {"clone ceiling": True, "copy_ ceiling": False}  # name -> allocates its output


def copy_rows(op_name: str, size: int, bytes_per_element: int, repeats: int) -> list[Row]:
    """The memory-copy ceilings expressed as the time each phase would take at copy bandwidth."""
    passes = {"forward": 2, "backward": 3, "forward+backward": 5}
    rows = []
    for name, allocate in CEILINGS.items():
        bandwidth = copy_ceiling_gb_per_s(size, torch.float32, repeats, allocate)
        rows += [Row(op_name, name, size, phase, passes[phase] * size * bytes_per_element / bandwidth / 1e6,
                     bandwidth) for phase in PHASES]
    return rows


def ratio_cell(milliseconds: float, ratio: float) -> str:
    return f"{milliseconds:.3g} ({ratio:.2f}x)"


def saved_mib_cell(saved: int, baseline: int) -> str:
    return f"{saved / 2**20:.3g} ({saved / baseline:.2f}x)"


CEILINGS_NOTE = ("ceilings: the time each phase would take at the bandwidth of Tensor.clone() (allocates, as the ops "
                 "do) or Tensor.copy_ into a preallocated buffer, measured on the same bytes")


def run_elementwise(argv, description: str, op_name: str, ops: dict[str, Callable[[torch.Tensor], torch.Tensor]],
                    titles: tuple[str, str], notes: list[str]) -> None:
    """The whole script of an elementwise float32 op of one input: every size, every available impl of `ops`
    (impl -> the op on x) and the copy ceilings; titles: (the report's, the plot's)."""
    args = parse(base_parser(description), argv)
    rows, left_out = [], {}
    for size in resolve_sizes(args):
        impls, skipped = available_impls(size, args.sim_max_size)
        left_out.update({f"{impl} at {size:,}": why for impl, why in skipped.items()})
        for impl in impls:
            rows += measure_elementwise(op_name, impl, size, ops[impl], 4, args.repeats)
        rows += copy_rows(op_name, size, 4, args.repeats)
    notes = notes + [f"not measured: {what}: {why}" for what, why in left_out.items()]
    report(op_name, titles[0], rows, comparison_table(rows), notes, args.out,
           lambda path: plot_phases(rows, titles[1], path))


def markdown_table(headers: list[str], rows: Iterable[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def comparison_table(rows: list[Row]) -> str:
    """One line per (size, impl): the three phases side by side, each as ms and x torch."""
    by_key = {(r.size, r.impl, r.phase): r for r in rows}
    impl_order = ["torch", "reference", "sim", *CEILINGS]
    lines = []
    for size in sorted({r.size for r in rows}):
        for impl in [i for i in impl_order if (size, i, "forward") in by_key]:
            cells = [f"{size:,}", impl]
            for phase in PHASES:
                row, torch_row = by_key[(size, impl, phase)], by_key[(size, "torch", phase)]
                cells.append(f"{row.median_ms:.3g} ({row.median_ms / torch_row.median_ms:.2f}x)")
            cells.append(f"{by_key[(size, impl, 'forward')].gb_per_s:.1f}")
            saved = by_key[(size, impl, "forward")].saved_bytes
            torch_saved = by_key[(size, "torch", "forward")].saved_bytes
            cells.append("-" if saved is None else f"{saved:,} ({saved / torch_saved:.2f}x)")
            lines.append(cells)
    headers = ["elements", "impl", "forward ms (x torch)", "backward ms (x torch)",
               "fwd+bwd ms (x torch)", "forward GB/s", "saved bytes (x torch)"]
    return markdown_table(headers, lines)


def pyplot():
    """matplotlib.pyplot without a display (imported late: only the plots need it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, title: str, path: Path) -> None:
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    pyplot().close(fig)


def plot_phases(rows: list[Row], title: str, path: Path) -> None:
    """Time vs size, one panel per phase, one line per impl (log-log)."""
    fig, axes = pyplot().subplots(1, len(PHASES), figsize=(4.2 * len(PHASES), 3.6), sharey=True)
    for ax, phase in zip(axes, PHASES):
        for impl in dict.fromkeys(r.impl for r in rows):
            points = sorted((r.size, r.median_ms) for r in rows if r.impl == impl and r.phase == phase)
            style = "--" if impl in CEILINGS else "-o"
            ax.plot(*zip(*points), style, label=impl, ms=4)
        ax.set(xscale="log", yscale="log", title=phase, xlabel="elements")
    axes[0].set_ylabel("median ms")
    axes[0].legend()
    save_figure(fig, title, path)


def plot_bars(labels: list[str], panels: dict[str, list[float]], title: str, path: Path) -> None:
    """One bar panel per quantity (e.g. time, saved bytes), one bar per label."""
    fig, axes = pyplot().subplots(1, len(panels), figsize=(4.5 * len(panels), 3.2 + 0.25 * len(labels)))
    for ax, (quantity, values) in zip(axes, panels.items()):
        ax.barh(labels, values, color=[f"C{i}" for i in range(len(labels))])
        ax.invert_yaxis()
        ax.set(xlabel=quantity)
    for ax in axes[1:]:
        ax.set_yticklabels([])
    save_figure(fig, title, path)


def write_csv(rows: list, path: Path) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[f.name for f in fields(rows[0])])
        writer.writeheader()
        writer.writerows(asdict(row) for row in rows)


def report(name: str, title: str, rows: list, table: str, notes: list[str], out: Path,
           plot: Callable[[Path], None] | None = None) -> None:
    """Print and write <name>.md (title, environment, table, notes), <name>.csv and <name>.png."""
    out.mkdir(parents=True, exist_ok=True)
    markdown = "\n\n".join([f"### {title}", environment(), table] + (["\n".join(f"- {n}" for n in notes)]
                                                                    if notes else []))
    print(markdown)
    (out / f"{name}.md").write_text(markdown + "\n")
    write_csv(rows, out / f"{name}.csv")
    if plot is not None:
        plot(out / f"{name}.png")
    print(f"\nwritten: {out / name}.{{md,csv{',png' if plot else ''}}}")
