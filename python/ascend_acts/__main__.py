"""Command line: `python -m ascend_acts demo` (sine GAN on the CPU), `python -m ascend_acts info` and
`python -m ascend_acts selftest` (the first-run report: ascend_acts.selftest, docs/npu.md).

Options are checked before any work, like argparse checks its own: a bad one prints the usage and an
error naming it, and exits with status 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path

# torch.manual_seed takes [-2^63, 2^64); the demo seeds with seed and seed + 1
_SEED_RANGE = (-(1 << 63), (1 << 64) - 1)


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


_MAX_STEPS = 10**9  # far beyond any demo run; larger counts overflow the progress bar's C-sized length


def _steps(text: str) -> int:
    value = _integer(text)
    if not 0 < value <= _MAX_STEPS:
        raise argparse.ArgumentTypeError(f"must be a positive integer of at most {_MAX_STEPS}, got {value}")
    return value


def _out_path(text: str) -> Path:
    path = Path(text)
    if not path.name:  # "", "." and "/" name no file ("" parses to Path("."))
        raise argparse.ArgumentTypeError(f"expected a file name, got {text!r}")
    return path


def _seed(text: str) -> int:
    value = _integer(text)
    if not _SEED_RANGE[0] <= value < _SEED_RANGE[1]:
        raise argparse.ArgumentTypeError(
            f"must be in -2**63 .. 2**64 - 2 (torch.manual_seed takes it and it + 1), got {value}")
    return value


def _figure_path(parser: argparse.ArgumentParser, out: Path) -> Path:
    """The file the figure will be written to, checked before training: matplotlib appends ".png" to a
    name without an extension, so the path is completed here and the completed one is written and printed."""
    from matplotlib.backend_bases import FigureCanvasBase

    completed = out if out.suffix.lstrip(".") else out.with_name(out.name.rstrip(".") + ".png")
    for path in (out, completed):
        if path.is_dir():
            parser.error(f"argument --out: {path} is a directory")
    formats = FigureCanvasBase.get_supported_filetypes()
    if completed.suffix[1:].lower() not in formats:
        parser.error(f"argument --out: matplotlib cannot write {completed.suffix!r} files "
                     f"(supported: {', '.join('.' + f for f in sorted(formats))})")
    out = completed
    if out.exists():
        try:  # a real attempt, not os.access: root passes access() where the file system still refuses
            with open(out, "ab"):
                pass
        except OSError as error:
            parser.error(f"argument --out: {out} is not writable: {error.strerror}")
        return out
    existing = out.parent  # the directories up to the first existing one are created before writing
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        parser.error(f"argument --out: cannot create {out}: {existing} is not a directory")
    try:  # probe with a temporary file that is removed at once: nothing is left behind before training
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        parser.error(f"argument --out: cannot create {out}: {existing} is not writable ({error.strerror})")
    return out


def _demo(parser: argparse.ArgumentParser, args) -> None:
    from . import backends, sine_gan

    missing = [name for name in ("matplotlib", "tqdm") if importlib.util.find_spec(name) is None]
    if missing:  # an extra, not a dependency of the library
        raise SystemExit(f"the demo needs {' and '.join(missing)}: pip install 'ascend-acts[demo]'")

    reason = backends.unavailable_reason(args.backend)
    if reason is not None:
        parser.error(f"argument --backend: {args.backend!r} is not available here: {reason}")
    out = _figure_path(parser, args.out)

    backends.use_backend(args.backend)
    start = time.perf_counter()
    distance = sine_gan.run_demo(out, steps=args.steps, seed=args.seed)
    print(f"trained {args.steps} steps on backend '{args.backend}' in {time.perf_counter() - start:.1f} s")
    print(f"sliced Wasserstein distance, generated vs real signals: {distance:.4f}")
    print(f"figure: {out.resolve()}")


def _out_directory(text: str) -> Path:
    path = Path(text)
    if not str(text).strip():
        raise argparse.ArgumentTypeError(f"expected a directory, got {text!r}")
    return path


def _report_directory(parser: argparse.ArgumentParser, out: Path) -> None:
    """Refuses, before any check runs, a --out the report cannot be written into: a file, a directory (or its
    first existing ancestor) that is not writable, or a report file name taken by a directory."""
    from .selftest import JSON, MARKDOWN

    if out.exists() and not out.is_dir():
        parser.error(f"argument --out: {out} is not a directory")
    for name in (MARKDOWN, JSON):
        if (out / name).is_dir():
            parser.error(f"argument --out: cannot write {out / name}: it is a directory")
    existing = out  # the directories up to the first existing one are created before writing
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        parser.error(f"argument --out: cannot create {out}: {existing} is not a directory")
    try:  # a real attempt (root passes os.access where the file system still refuses), removed at once
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        parser.error(f"argument --out: cannot write into {existing} ({error.strerror})")
    for name in (MARKDOWN, JSON):
        if (out / name).exists():
            try:
                with open(out / name, "ab"):
                    pass
            except OSError as error:
                parser.error(f"argument --out: {out / name} is not writable: {error.strerror}")


def _selftest(parser: argparse.ArgumentParser, args) -> None:
    import sys

    from . import selftest

    available, why_not = selftest.npu_available()
    device = args.device or ("npu" if available else "cpu")
    if device == "npu" and not available:
        parser.error(f"argument --device: no NPU here: {why_not} (--device cpu checks the CPU backends)")
    _report_directory(parser, args.out)
    command = "python -m ascend_acts selftest " + " ".join(
        [f"--device {device}", f"--out {args.out}"] + (["--quick"] if args.quick else []))
    report = selftest.run(device, args.quick, command, progress=lambda line: print(line, file=sys.stderr))
    markdown, data = selftest.write(report, args.out)
    counts = report.counts()
    print(f"selftest on {device}: {'PASS' if report.passed else 'FAIL'} ({counts['pass']} pass, {counts['FAIL']} "
          f"FAIL, {counts['skip']} skip)")
    for section in report.sections:
        for row in section.rows:
            if row[-1] == "FAIL":
                print(f"  FAIL  {section.title}: {' | '.join(row[:-1])}")
    print(f"report: {markdown.resolve()}\ndata:   {data.resolve()}\nattach both to the issue")
    raise SystemExit(0 if report.passed else 1)


def _info(parser: argparse.ArgumentParser, args) -> None:
    from .info import report

    print(report())


def main(argv=None) -> None:
    from .backends import known_backends

    parser = argparse.ArgumentParser(prog="python -m ascend_acts")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="train a small GAN on sine signals on the CPU and plot it")
    demo.add_argument("--steps", type=_steps, default=3000, help="training steps (default 3000)")
    demo.add_argument("--seed", type=_seed, default=0)
    demo.add_argument("--backend", choices=known_backends(), default="reference", help="CPU backend")
    demo.add_argument("--out", type=_out_path, default=Path("outputs/sine_gan.png"),
                      help="figure file; its extension picks the format (none: .png is appended)")
    demo.set_defaults(run=_demo, parser=demo)
    info = sub.add_parser("info", help="versions and available backends")
    info.set_defaults(run=_info, parser=info)
    test = sub.add_parser("selftest", help="first-run report: every hardware check, one markdown + one JSON file",
                          description="Runs, in order: environment, values of every op vs the CPU reference, the "
                          "RNG past 2**24 and 2**31, timings vs the model (docs/npu.md, 'First run on an NPU'). "
                          "Exit status 0 all pass, 1 a check failed, 2 usage error.")
    test.add_argument("--device", choices=["npu", "cpu"], default=None,
                      help="npu (default when torch_npu sees one) or cpu (the CPU backends against the reference)")
    test.add_argument("--out", type=_out_directory, default=Path("outputs/selftest"),
                      help="directory for selftest.md and selftest.json (default outputs/selftest)")
    test.add_argument("--quick", action="store_true",
                      help="small shapes, no 16 GiB check, fewer timed calls")
    test.set_defaults(run=_selftest, parser=test)
    args = parser.parse_args(argv)
    args.run(args.parser, args)


if __name__ == "__main__":
    main()
