"""`python -m ascend_acts selftest`: the first-run report. Every hardware-only check, in order, written as one
markdown report and one JSON file with the same content (docs/npu.md, "First run on an NPU"):

1. environment: versions, device, which NPU kernels loaded, the backend of every op;
2. values: every functional op of the op table x float32/float16/bfloat16 x contiguous/channels_last against the
   float64 CPU reference, pass/fail by the test suite's tolerances (and bit for bit against the same-dtype CPU
   reference where the README promises it);
3. RNG: the RReLU noise bit-identical to the reference for the first 2**20 elements (int32 wraparound) and past
   flat index 2**24 and 2**31;
4. timing: each kernel vs the path it replaces at benchmarks/perf_model.py's shapes, next to that model's
   prediction (benchmarks/results/perf_model.csv, read from the source checkout).

On the CPU (`--device cpu`) the same report runs the selected CPU backend (ASCEND_ACTS_BACKEND, default
`reference`) against the reference: section 3 runs the two small checks, section 4 times every available CPU
backend at small shapes. The checks of scripts/npu_selftest.py are the functions `CHECKS` of this module.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import importlib.metadata
import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from . import __version__, backends, op_table
from .backends import npu
from .ops.rrelu import rng

DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # the AscendC kernels' types (no float64)
PASS, FAIL, SKIP, INFO = "pass", "FAIL", "skip", "info"
MARKDOWN, JSON = "selftest.md", "selftest.json"
PREDICTIONS = Path("benchmarks", "results", "perf_model.csv")


# --- the report -------------------------------------------------------------------------------------------
@dataclass
class Section:
    title: str
    meaning: str  # what the section shows, one paragraph
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def results(self) -> list[str]:
        return [row[-1] for row in self.rows] if self.columns[-1] == "result" else []


@dataclass
class Report:
    command: str
    device: str
    quick: bool
    started: str
    sections: list[Section] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        results = [r for s in self.sections for r in s.results()]
        return {k: results.count(k) for k in (PASS, FAIL, SKIP)}

    @property
    def passed(self) -> bool:
        return self.counts()[FAIL] == 0

    def to_json(self) -> dict:
        return {"status": PASS if self.passed else FAIL, "counts": self.counts(), **asdict(self)}

    def markdown(self) -> str:
        counts = self.counts()
        lines = [f"# ascend-acts self-test: {'PASS' if self.passed else 'FAIL'}", "",
                 f"`{self.command}`, {self.started}: {counts[PASS]} pass, {counts[FAIL]} FAIL, {counts[SKIP]} skip."]
        for section in self.sections:
            lines += ["", f"## {section.title}", "", section.meaning, "", _table_row(section.columns),
                      "|" + "---|" * len(section.columns)]
            lines += [_table_row(row) for row in section.rows]
            if section.notes:
                lines += [""] + [f"- {note}" for note in section.notes]
        return "\n".join(lines) + "\n"


def _table_row(cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def write(report: Report, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / MARKDOWN, out / JSON
    md.write_text(report.markdown())
    js.write_text(json.dumps(report.to_json(), indent=1) + "\n")
    return md, js


def _guard(row_prefix: list[str], width: int, fn: Callable[[], list[str]]) -> list[str]:
    """fn's cells, or the row marked FAIL with the exception (a check that raises is a failed check)."""
    try:
        return row_prefix + fn()
    except Exception as error:  # reported, never fatal: the other checks still run
        detail = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        return row_prefix + [detail] + [""] * (width - len(row_prefix) - 2) + [FAIL]


def _raise(error: Exception):
    raise error


def _sync(device: str) -> None:
    if device == "npu":
        torch.npu.synchronize()


def npu_available() -> tuple[bool, str]:
    """(whether torch sees an NPU, why not). Imports torch_npu only when installed (never at `import ascend_acts`)."""
    if not hasattr(torch, "npu"):
        try:
            import torch_npu  # noqa: F401  (the NPU device; autoloaded since torch 2.5 unless disabled)
        except Exception as error:  # absent, or present without CANN's libraries
            return False, f"torch_npu cannot be imported ({type(error).__name__}: {error})"
    try:
        if torch.npu.is_available():
            return True, ""
    except Exception as error:
        return False, f"torch.npu.is_available() raised {type(error).__name__}: {error}"
    return False, "torch_npu sees no NPU device"


# --- 1. environment -------------------------------------------------------------------------------------
def cann_version(env=None) -> str:
    home = npu.cann_home(env)
    if home is None:
        return f"not found ({' and '.join('$' + v for v in npu.CANN_VARIABLES)} unset)"
    root = Path(home[1])
    for candidate in [root / "version.cfg", root / "ascend_toolkit_install.info",
                      *sorted(root.glob("*-linux/ascend_toolkit_install.info"))]:
        try:
            for line in candidate.read_text(errors="replace").splitlines():
                key, _, value = line.partition("=")
                if key.strip() in ("version", "Version"):
                    return f"{value.strip()} at {root} (${home[0]}; {candidate.name})"
        except OSError:
            continue
    return f"at {root} (${home[0]}), version file not found"


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def op_backend(op: op_table.TorchOp, device: str) -> str:
    if device == "cpu":
        return f"cpu: {backends.current_backend_name()}"
    status = npu.status()
    if status.source == "extension" and op.name not in status.fallback_ops:
        kernels = ", ".join(op_table.kernel(k).op_type for k in op.npu_kernels) or "torch_npu's convolution"
        return f"npu: extension ({kernels})"
    return "npu: fallback (torch built-ins)"


def environment(device: str, command: str) -> Section:
    from .info import npu_report

    section = Section("1. Environment", "Versions, the device, which NPU kernels this process loaded and the backend "
                      "every op runs on here (npu: extension = our AscendC kernels; fallback = torch built-ins).",
                      ["item", "value"])
    rows = [["command", command], ["ascend_acts", __version__], ["python", platform.python_version()],
            ["torch", torch.__version__], ["numpy", np.__version__], ["torch_npu", _version("torch_npu")],
            ["CANN", cann_version()], ["platform", f"{platform.machine()} {platform.system()} {platform.release()}, "
                                                  f"{os.cpu_count()} CPUs"]]
    if device == "npu":
        status = npu.status()
        rows += [["device", f"npu:0 {torch.npu.get_device_name(0)} ({torch.npu.device_count()} visible)"],
                 ["NPU kernels", f"{status.source}: {status.detail}"]]
        if status.fallback_ops:
            rows.append(["ops on the fallback", ", ".join(status.fallback_ops)])
        rows.append([npu.STRICT_ENV, os.environ.get(npu.STRICT_ENV, "unset")])
        rows.append(["ASCEND_ACTS_EVAL_KERNEL", os.environ.get("ASCEND_ACTS_EVAL_KERNEL", "unset (aclnn)")])
    else:
        rows.append(["device", f"cpu ({platform.processor() or platform.machine()}), torch threads "
                               f"{torch.get_num_threads()}"])
        rows.append(["CPU backends", ", ".join(
            f"{name} ({'available' if backends.unavailable_reason(name) is None else 'unavailable'})"
            for name in backends.known_backends())])
        rows += [[f"NPU: {line.split(None, 1)[0]}", line.split(None, 1)[1]] for line in npu_report()]
    rows += [[f"backend of {op.name}", op_backend(op, device)] for op in op_table.TORCH_OPS]
    section.rows = rows
    return section


# --- 2. values ---------------------------------------------------------------------------------------------
# What each output must meet, from the test suite: "roundings" = at most k roundings of the dtype at the output's
# largest value (k * eps / 2 * max|float64 reference|: README's accuracy measure), "tolerance" = the fused
# Conv+BN+LeakyReLU tests' rtol = atol by input dtype (tests/test_conv_bn_leaky_relu.py TOL,
# tests/test_npu_ops.py) times max(1, max|reference|).
CONV_TOL = {torch.float32: 2e-4, torch.float16: 3e-2, torch.bfloat16: 1.5e-1}
SLOPE, LOWER, UPPER, SCALE = 0.2, 1 / 8, 1 / 3, 2**0.5
GEOMETRY = ([1, 1], [1, 1, 1, 1], [1, 1], 1)


@dataclass(frozen=True)
class Rule:
    outputs: tuple[str, ...]
    roundings: dict | None  # {"half": k, "float32": k} or None for the conv tolerance
    bit_exact: tuple[str, ...] = ()  # outputs equal bit for bit to the same-dtype CPU reference (README)

    def text(self, dtype: torch.dtype) -> str:
        if self.roundings is None:
            bound = f"{CONV_TOL[dtype]:g} * max(1, max|ref|) (tests' TOL)"
        else:
            k = self.roundings["float32" if dtype == torch.float32 else "half"]
            bound = f"{k:g} rounding{'s' if k != 1 else ''} at max|ref|"
        return bound + (f"; bit-exact: {', '.join(self.bit_exact)}" if self.bit_exact else "")


# Elementwise: one rounding in float32 of the float32-rounded attributes (half types: one rounding of that), bit
# for bit the reference on every backend and the NPU (README "Backends", tests/test_npu_ops.py). Fused bias:
# float32 is torch's composite (three roundings + the attributes'), half types round once; y and the input
# gradient bit-identical to the reference (README "StyleGAN2"). Conv ops: the tests' tolerance.
ELEMENTWISE = {"half": 1, "float32": 2}
RULES = {
    "leaky_relu": Rule(("output",), ELEMENTWISE, ("output",)),
    "leaky_relu_backward": Rule(("grad_input",), ELEMENTWISE, ("grad_input",)),
    "rrelu": Rule(("output",), ELEMENTWISE, ("output",)),
    "rrelu_backward": Rule(("grad_input",), ELEMENTWISE, ("grad_input",)),
    "fused_bias_leaky_relu": Rule(("output",), {"half": 1, "float32": 4}, ("output",)),
    "fused_bias_leaky_relu_backward": Rule(("grad_input", "grad_bias"), {"half": 1, "float32": 4}, ("grad_input",)),
    "conv_bn_leaky_relu_train": Rule(("out", "conv_out", "mean", "invstd"), None),
    "conv_bn_leaky_relu_train_backward": Rule(("grad_input", "grad_weight", "grad_bias", "grad_bn_weight",
                                               "grad_bn_bias"), None),
    "conv_bn_leaky_relu_eval": Rule(("output",), None),
    "conv_bn_leaky_relu_eval_backward": Rule(("grad_input", "grad_weight", "grad_bias", "grad_bn_weight"), None),
}


def op_arguments(name: str, dtype: torch.dtype, quick: bool) -> tuple:
    """The arguments of op `name` at `dtype`: values drawn in float64 and rounded to dtype (so the float64 oracle
    sees exactly the same inputs); a backward op's saved tensors come from its forward on the CPU reference."""
    ops = torch.ops.ascend_acts
    gen = torch.Generator().manual_seed(sorted(RULES).index(name))

    def draw(*shape, scale=1.0, shift=0.0):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale + shift).to(dtype)

    shape = (2, 8, 6, 6) if quick else (4, 48, 33, 17)  # full: several cores' tiles and ragged tails
    n, cin, size, cout = (2, 4, 8, 6) if quick else (8, 32, 20, 48)
    stats = dtype if dtype == torch.float32 else torch.float32
    seed = torch.tensor(0x5EED1234, dtype=torch.int64)
    if name.startswith("conv"):
        x, w = draw(n, cin, size, size), draw(cout, cin, 3, 3, scale=(cin * 9) ** -0.5)
        bias, grad = draw(cout, scale=0.1), draw(n, cout, size, size)
        bn_w, bn_b = draw(cout, scale=0.2, shift=1.0).to(stats), draw(cout, scale=0.1).to(stats)
        forward = (x, w, bias, bn_w, bn_b, None, None, *GEOMETRY, 0.1, 1e-5, SLOPE, True)
        if name == "conv_bn_leaky_relu_train":
            return forward
        if name == "conv_bn_leaky_relu_train_backward":
            with backends.use_backend("reference"):
                out, _, mean, invstd = ops.conv_bn_leaky_relu_train(*forward)
            return (grad, out, True, x, w, bn_w, bn_b, mean, invstd, *GEOMETRY, SLOPE)
        # relu, transposed, output_padding, padding_mode; then the affine: bn_weight only, as a shift puts 16-bit
        # pre-activations near 0, where their rounding flips the mask (torch's own float16 error at this size is
        # above the tolerance then)
        options = (False, False, (0, 0), "zeros")
        if name == "conv_bn_leaky_relu_eval":
            return (x, w, bias, *GEOMETRY, SLOPE, *options, bn_w)
        return (grad, x, w, bias, *GEOMETRY, SLOPE, *options, [True] * 3, bn_w)
    x, dy, bias = draw(*shape), draw(*shape), draw(shape[1])
    if name == "leaky_relu":
        return (x, SLOPE)
    if name == "leaky_relu_backward":
        return (dy, x, SLOPE, False)
    if name == "rrelu":
        return (x, seed, LOWER, UPPER)
    if name == "rrelu_backward":
        return (dy, x, seed, LOWER, UPPER, False)
    if name == "fused_bias_leaky_relu":
        return (x, bias, SLOPE, SCALE)
    if name == "fused_bias_leaky_relu_backward":
        with backends.use_backend("reference"):
            saved = ops.fused_bias_leaky_relu(x, bias, SLOPE, SCALE)
        return (dy, saved, bias, SLOPE, SCALE, True)
    raise KeyError(f"selftest: no arguments for op {name!r} (add it to RULES and op_arguments)")


def _in_layout(args: tuple, layout: str, device: str) -> tuple:
    def convert(a):
        if not isinstance(a, torch.Tensor):
            return a
        if layout == "channels_last" and a.dim() == 4:
            a = a.contiguous(memory_format=torch.channels_last)
        return a.to(device)  # keeps the memory format
    return tuple(convert(a) for a in args)


def _results(result) -> tuple[torch.Tensor, ...]:
    return tuple(t.detach().cpu() for t in (result if isinstance(result, tuple) else (result,)))


def reference_results(name: str, args: tuple, float64: bool) -> tuple[torch.Tensor, ...]:
    """The CPU reference's results for `args` (CPU tensors), at their dtype or upcast to float64 (the oracle)."""
    if float64:
        args = tuple(a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
    with backends.use_backend("reference"):
        return _results(getattr(torch.ops.ascend_acts, name)(*args))


def compare(name: str, dtype: torch.dtype, got, same, want) -> list[str]:
    """The cells [max error (output), allowed, rule, same-dtype reference, result] of one op call."""
    rule = RULES[name]
    worst, failures, identical = None, [], []
    for output, g, s, w in zip(rule.outputs, got, same, want):
        if w.numel() == 0:
            continue
        g64, w64 = g.double(), w.double()
        scale = w64.abs().max().item()
        if rule.roundings is None:
            allowed = CONV_TOL[dtype] * max(1.0, scale)
        else:
            k = rule.roundings["float32" if dtype == torch.float32 else "half"]
            allowed = k * torch.finfo(g.dtype).eps / 2 * scale
        error = (g64 - w64).abs().max().item() if g.shape == w.shape else float("inf")
        error = float("inf") if error != error else error  # NaN
        if error > allowed:
            failures.append(f"{output} error {error:.3g} > {allowed:.3g}")
        ratio = error / allowed if allowed else (0.0 if error == 0 else float("inf"))
        if worst is None or ratio > worst[0]:
            worst = (ratio, output, error, allowed)
        if output in rule.bit_exact:
            same_bits = g.shape == s.shape and g.dtype == s.dtype and torch.equal(g, s)
            if not same_bits:
                differing = int((g != s).sum()) if g.shape == s.shape else g.numel()
                failures.append(f"{output} differs from the same-dtype reference")
                identical.append(f"{output}: {differing} of {g.numel()} differ")
            else:
                identical.append(f"{output}: bit-exact")
    same_text = "; ".join(identical) if identical else "not required"
    _, output, error, allowed = worst
    return [f"{error:.3g} ({output})", f"{allowed:.3g}", rule.text(dtype), same_text, FAIL if failures else PASS]


def value_variants(name: str, device: str) -> list[tuple[str, dict]]:
    """(label, environment) of every path of op `name` to check on `device`: on the NPU the eval convolution also
    through the one-launch kernel ActsConvBnLeakyReluEval (ASCEND_ACTS_EVAL_KERNEL=fused)."""
    if device == "npu" and name == "conv_bn_leaky_relu_eval" and npu.status().source == "extension":
        return [("", {}), (" + ASCEND_ACTS_EVAL_KERNEL=fused", {"ASCEND_ACTS_EVAL_KERNEL": "fused"})]
    return [("", {})]


@contextlib.contextmanager
def _environment(changes: dict):
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def values(device: str, quick: bool) -> Section:
    section = Section(
        "2. Values vs the CPU reference",
        "Every functional op of the op table, each dtype and layout, on this device against the float64 CPU reference "
        "of the same (rounded) inputs: the largest error over the op's outputs (the output named), what the test "
        "suite allows there, and, where the README promises it, whether the result is bit for bit the CPU "
        "reference's at the same dtype.",
        ["op", "dtype", "layout", "ran on", "max error vs float64 (output)", "allowed", "rule",
         "same-dtype CPU reference", "result"])
    for op in op_table.functional_ops():
        for dtype in DTYPES:
            try:
                args = op_arguments(op.name, dtype, quick)
                same = reference_results(op.name, args, float64=False)
                want = reference_results(op.name, args, float64=True)
            except Exception as error:  # the inputs or the CPU reference: every row of this op and dtype fails
                section.rows.append(_guard([op.name, str(dtype).removeprefix("torch."), "-", "cpu: reference"],
                                           len(section.columns), lambda error=error: _raise(error)))
                continue
            layouts = ["contiguous"] + (["channels_last"] if any(
                isinstance(a, torch.Tensor) and a.dim() == 4 for a in args) else [])
            for layout in layouts:
                for label, env in value_variants(op.name, device):
                    prefix = [op.name, str(dtype).removeprefix("torch."), layout, op_backend(op, device) + label]

                    def check(name=op.name, dtype=dtype, args=args, same=same, want=want, layout=layout, env=env):
                        with _environment(env):
                            got = _results(getattr(torch.ops.ascend_acts, name)(*_in_layout(args, layout, device)))
                        return compare(name, dtype, got, same, want)
                    section.rows.append(_guard(prefix, len(section.columns), check))
    section.notes = [
        "roundings: k * eps(dtype) / 2 * max|float64 reference| of that output (README's accuracy measure); "
        "elementwise ops round once (float32: plus the attributes' rounding to float32), the fused bias op as "
        "torch's composite in float32 and once in half types",
        "conv ops: the tolerance of tests/test_conv_bn_leaky_relu.py and tests/test_npu_ops.py, times max(1, max|ref|)",
        "inputs: " + ("small shapes (--quick)" if quick else "elementwise (4, 48, 33, 17), conv (8, 32, 20, 20) -> 48 "
                      "channels 3x3 s1 p1: several cores' tiles and ragged tails"),
    ]
    return section


# --- 3. RNG -----------------------------------------------------------------------------------------------
SEED = 0x5EED1234


def noise_on_device(numel: int, device: str) -> torch.Tensor:
    """-rrelu(-1) = the slope of every flat element (exact in float32: -1 * slope); the input is freed before the
    negation, in place, so the peak is two tensors of numel floats."""
    x = torch.full((numel,), -1.0, dtype=torch.float32, device=device)
    seed = torch.tensor(SEED, dtype=torch.int64, device=device)
    slopes = torch.ops.ascend_acts.rrelu(x, seed, LOWER, UPPER)
    del x
    return slopes.neg_()


def compare_noise(numel: int, windows: list[tuple[int, int]], device: str) -> tuple[bool, str]:
    slopes = noise_on_device(numel, device)
    for start, stop in windows:
        got = slopes[start:stop].cpu().numpy()
        want = rng.noise(SEED, np.arange(start, stop, dtype=np.uint64), LOWER, UPPER)
        wrong = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
        if wrong.size:
            i = start + int(wrong[0])
            return False, (f"noise differs from the reference at flat index {i} ({wrong.size} of {stop - start} in "
                           f"[{start}, {stop})): {got[wrong[0]]!r} vs {want[wrong[0]]!r}")
    return True, "noise bit-identical to the reference in " + ", ".join(f"[{a}, {b})" for a, b in windows)


def check_wraparound(device):
    """The RNG's int32 multiply-low/add must wrap on overflow (D12): every hash round overflows for most
    indices, so any other overflow behaviour changes the noise of the first million elements."""
    return compare_noise(1 << 20, [(0, 1 << 20)], device)


def check_noise_past_2_24(device):
    """Flat indices past 2**24, where a float32 index (CreateVecIndex's 8.x first block, D4) is no longer exact."""
    edge = 1 << 24
    return compare_noise(edge + (1 << 16), [(edge - (1 << 16), edge + (1 << 16))], device)


NOISE_2_31_BYTES = 2 * ((1 << 31) + (1 << 16)) * 4  # float32 input and output


def check_noise_past_2_31(device):
    """Flat indices past 2**31, beyond int32 (8 GiB of float32 in, 8 GiB out)."""
    edge = 1 << 31
    return compare_noise(edge + (1 << 16), [(0, 1 << 12), (edge - (1 << 16), edge + (1 << 16))], device)


def check_eval_kernel(device):
    """Both eval paths (D3) finish and match the CPU: the default (torch_npu's convolution + our LeakyReLU
    kernel) and the one-launch kernel asked for by ASCEND_ACTS_EVAL_KERNEL=fused (cube-side img2col); the
    shell's timeout turns a hang into a failure. Also prints each path's median time at batch 64: the
    measurement that decides whether the fused kernel should become the default (it is only modelled faster,
    or level on D4)."""
    from .nn import ConvBNLeakyReLU2d

    torch.manual_seed(0)
    block = ConvBNLeakyReLU2d(64, 128, 4, 2, 1, negative_slope=0.2).eval()
    x = torch.randn(16, 64, 32, 32)
    want = block(x)
    block = block.to(device)
    batch = torch.randn(64, 64, 32, 32).to(device)
    errors, times = {}, {}
    for path in ("aclnn", "fused"):
        with _environment({"ASCEND_ACTS_EVAL_KERNEL": path}):  # read by the launch sequence at each call
            got = block(x.to(device))
            _sync(device)
            times[path] = median_ms(lambda: block(batch), device)
        errors[path] = (got.cpu().double() - want.double()).abs().max().item()
    tolerance = 2e-4 * max(1.0, want.abs().max().item())
    return max(errors.values()) <= tolerance, "eval paths finished; max |error| " + ", ".join(
        f"{path} {error:.3g}" for path, error in errors.items()) + "; median ms at batch 64 " + ", ".join(
        f"{path} {ms:.3f}" for path, ms in times.items())


def median_ms(fn, device, warmups: int = 3, repeats: int = 20):
    """Milliseconds per call: the median of `repeats` after `warmups` warm-ups."""
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def check_timings(device):
    """Milliseconds per call (median of 20 after 3 warm-ups), ours vs torch's built-in, for the report."""
    from . import functional

    x = torch.randn(1 << 24, device=device)
    rows = [("leaky_relu 16M", lambda: functional.leaky_relu(x, 0.2),
             lambda: torch.nn.functional.leaky_relu(x, 0.2)),
            ("rrelu training 16M", lambda: functional.rrelu(x, training=True),
             lambda: torch.nn.functional.rrelu(x, training=True))]
    return True, "; ".join(f"{name}: {median_ms(ours, device):.3f} ms (torch {median_ms(theirs, device):.3f} ms)"
                           for name, ours, theirs in rows)


CHECKS = {"wraparound": check_wraparound, "noise-past-2**24": check_noise_past_2_24,
          "noise-past-2**31": check_noise_past_2_31, "eval-kernel": check_eval_kernel, "timings": check_timings}
RNG_CHECKS = [
    ("wraparound", "the RNG's int32 multiply/add wrap on overflow: noise of the first 2**20 elements"),
    ("noise-past-2**24", "noise around flat index 2**24, where a float32 index stops being exact"),
    ("noise-past-2**31", "noise past flat index 2**31, beyond int32 (16 GiB)"),
]


def free_bytes(device: str) -> int:
    if device == "npu":
        return int(torch.npu.mem_get_info()[0])
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def rng_checks(device: str, quick: bool) -> Section:
    section = Section(
        "3. RNG past 2**24 and 2**31",
        "RReLU's noise on this device bit for bit against the reference hash of docs/rng.md at the flat indices where "
        "the hardware could differ (integer overflow, float32 indices, 32-bit indices).",
        ["check", "what it shows", "result detail", "result"])
    for name, what in RNG_CHECKS:
        if name == "noise-past-2**31":
            reason = None
            if quick:
                reason = "skipped on --quick (needs 16 GiB of device memory)"
            elif device == "cpu":
                reason = "a hardware check: the CPU run makes the two small ones (the same comparison)"
            else:
                free = free_bytes(device)
                if free < NOISE_2_31_BYTES * 1.05:
                    reason = (f"needs {NOISE_2_31_BYTES * 1.05 / 2**30:.1f} GiB of device memory, "
                              f"{free / 2**30:.1f} GiB free")
            if reason is not None:
                section.rows.append([name, what, reason, SKIP])
                continue

        def run(name=name):
            ok, detail = CHECKS[name](device)
            return [detail, PASS if ok else FAIL]
        section.rows.append(_guard([name, what], len(section.columns), run))
    return section


# --- 4. timing ---------------------------------------------------------------------------------------------
def find_predictions() -> tuple[Path | None, list[Path]]:
    """benchmarks/results/perf_model.csv of the source checkout: next to the package (an editable install, as
    docs/npu.md builds it: the extension and the op package are built from the checkout), else in the current
    directory. Not shipped in the package: one file, regenerated by benchmarks/perf_model.py, stays the only copy."""
    looked = [Path(__file__).resolve().parents[2] / PREDICTIONS, Path.cwd() / PREDICTIONS]
    return next((p for p in looked if p.is_file()), None), looked


def load_predictions(path: Path | None) -> dict[str, dict]:
    if path is None:
        return {}
    with open(path, newline="") as f:
        return {row["kernel"]: row for row in csv.DictReader(f)}


@dataclass
class TimingCase:
    kernel: str  # perf_model.py's name
    case: str  # perf_model.py's case label: a prediction is used only for exactly this case
    ours: Callable
    replaced: str
    theirs: Callable
    minus: Callable | None = None  # timed and subtracted from ours (the platform convolution inside our op)
    env: dict = field(default_factory=dict)  # set while timing ours
    note: str = ""


DCGAN_SHAPE, STYLEGAN_SHAPE = (64, 128, 16, 16), (16, 512, 16, 16)  # perf_model.py kernel_cases
QUICK_DCGAN_SHAPE, QUICK_STYLEGAN_SHAPE = (2, 16, 8, 8), (2, 32, 8, 8)
ELEMENTWISE_KERNELS = ("leaky_relu", "leaky_relu_grad", "rrelu", "rrelu_grad", "batch_norm_leaky_relu",
                       "batch_norm_leaky_relu_grad")
FUSED_BIAS_KERNELS = ("fused_bias_leaky_relu", "fused_bias_leaky_relu_grad")
# the DCGAN discriminator's eval layers (k4 s2 p1, float16): perf_model.py LAYERS at batch 64 / QUICK_LAYERS at 2
CONV_LAYERS = [("D2 64->128 @32", 64, 32, 128), ("D3 128->256 @16", 128, 16, 256), ("D4 256->512 @8", 256, 8, 512)]
QUICK_CONV_LAYERS = [("tiny 8->16 @16", 8, 16, 16), ("small 16->32 @8", 16, 8, 32)]


def model_cases(quick: bool) -> list[tuple[str, str]]:
    """(kernel, case) of benchmarks/perf_model.py for the shapes timed, spelled as its CSV spells them."""
    dcgan, stylegan = (QUICK_DCGAN_SHAPE, QUICK_STYLEGAN_SHAPE) if quick else (DCGAN_SHAPE, STYLEGAN_SHAPE)
    batch = 2 if quick else 64
    cases = [(k, f"{dcgan} float32") for k in ELEMENTWISE_KERNELS]
    cases += [(k, f"{stylegan} float32") for k in FUSED_BIAS_KERNELS]
    for name, cin, size, cout in QUICK_CONV_LAYERS if quick else CONV_LAYERS:
        macs = batch * cout * (size // 2) ** 2 * cin * 16
        cases.append((f"conv_bn_leaky_relu_eval {name}", f"batch {batch}, {2 * macs / 1e9:.2f} GFLOP, float16"))
    return cases


def timing_cases(device: str, quick: bool) -> list[TimingCase]:
    """benchmarks/perf_model.py's cases (kernel_cases, conv_cases at batch 64), or its --quick ones."""
    ops, F, aten = torch.ops.ascend_acts, torch.nn.functional, torch.ops.aten
    gen = torch.Generator().manual_seed(0)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen).to(dtype).to(device)

    on_npu = device == "npu"
    dcgan, stylegan = (QUICK_DCGAN_SHAPE, QUICK_STYLEGAN_SHAPE) if quick else (DCGAN_SHAPE, STYLEGAN_SHAPE)
    labels = dict(model_cases(quick))
    label, style_label = labels["leaky_relu"], labels["fused_bias_leaky_relu"]
    x, dy = randn(*dcgan), randn(*dcgan)
    seed = torch.tensor(1234, dtype=torch.int64, device=device)
    noise = torch.empty_like(x)
    c = dcgan[1]
    ones, zeros = torch.ones(c, device=device), torch.zeros(c, device=device)
    identity = torch.eye(c, device=device).view(c, c, 1, 1)  # a 1x1 conv: our op's BN part sees x
    unit = ([1, 1], [0, 0, 0, 0], [1, 1], 1)
    train = (x, identity, None, ones, zeros, None, None, *unit, 0.1, 1e-5, SLOPE, True)
    out, _, mean, invstd = ops.conv_bn_leaky_relu_train(*train)

    def conv():
        return F.conv2d(x, identity)

    def conv_backward():
        return aten.convolution_backward(dy, x, identity, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                         [True, True, False])

    def bn_leaky():
        return F.leaky_relu(F.batch_norm(x, None, None, ones, zeros, True, 0.1, 1e-5), SLOPE)

    def bn_leaky_backward():
        g = aten.leaky_relu_backward(dy, out, SLOPE, True)
        return aten.native_batch_norm_backward(g, x, ones, None, None, mean, invstd, True, 1e-5, [True, True, True])

    xs, dys, bias = randn(*stylegan), randn(*stylegan), randn(stylegan[1])
    saved = ops.fused_bias_leaky_relu(xs, bias, SLOPE, SCALE)
    minus_note = "ours = our op - torch's 1x1 conv2d{} (the op includes it; the model times the kernel alone)"
    cases = [
        TimingCase("leaky_relu", label, lambda: ops.leaky_relu(x, SLOPE), "F.leaky_relu",
                   lambda: F.leaky_relu(x, SLOPE)),
        TimingCase("leaky_relu_grad", label, lambda: ops.leaky_relu_backward(dy, x, SLOPE, False),
                   "aten.leaky_relu_backward", lambda: aten.leaky_relu_backward(dy, x, SLOPE, False)),
        TimingCase("rrelu", label, lambda: ops.rrelu(x, seed, LOWER, UPPER),
                   "aten.rrelu_with_noise (training)", lambda: aten.rrelu_with_noise(x, noise, LOWER, UPPER, True)),
        TimingCase("rrelu_grad", label, lambda: ops.rrelu_backward(dy, x, seed, LOWER, UPPER, False),
                   "dy * noise (torch's RReLU backward)", lambda: torch.mul(dy, noise)),
        TimingCase("batch_norm_leaky_relu", label, lambda: ops.conv_bn_leaky_relu_train(*train),
                   "F.batch_norm (training) + F.leaky_relu", bn_leaky, minus=conv, note=minus_note.format("")),
        TimingCase("batch_norm_leaky_relu_grad", label,
                   lambda: ops.conv_bn_leaky_relu_train_backward(dy, out, True, x, identity, ones, zeros, mean,
                                                                 invstd, *unit, SLOPE),
                   "aten.leaky_relu_backward + aten.native_batch_norm_backward", bn_leaky_backward,
                   minus=conv_backward, note=minus_note.format(" backward")),
        TimingCase("fused_bias_leaky_relu", style_label, lambda: ops.fused_bias_leaky_relu(xs, bias, SLOPE, SCALE),
                   "F.leaky_relu(x + bias) * scale",
                   lambda: F.leaky_relu(xs + bias.view(1, -1, 1, 1), SLOPE) * SCALE),
        TimingCase("fused_bias_leaky_relu_grad", style_label,
                   lambda: ops.fused_bias_leaky_relu_backward(dys, saved, bias, SLOPE, SCALE, True),
                   "aten.leaky_relu_backward(dy * scale) + sum over N, H, W",
                   lambda: aten.leaky_relu_backward(dys * SCALE, saved, SLOPE, True).sum((0, 2, 3))),
    ]
    batch = 2 if quick else 64
    geometry = ([2, 2], [1, 1, 1, 1], [1, 1], 1)
    for name, cin, size, cout in QUICK_CONV_LAYERS if quick else CONV_LAYERS:
        xc = randn(batch, cin, size, size, dtype=torch.float16)
        w = (randn(cout, cin, 4, 4) / (cin * 16) ** 0.5).half()
        b = randn(cout, dtype=torch.float16)
        kernel = f"conv_bn_leaky_relu_eval {name}"

        def ours(xc=xc, w=w, b=b):
            return ops.conv_bn_leaky_relu_eval(xc, w, b, *geometry, SLOPE)

        def theirs(xc=xc, w=w, b=b):
            return F.leaky_relu(F.conv2d(xc, w, b, 2, 1), SLOPE)

        case = labels[kernel]
        if on_npu:  # ours: the one-launch kernel; replaced: the default path, the model's "CANN way"
            cases.append(TimingCase(kernel, case, ours,
                                    "our op's default path: aclnnConvolution + ActsLeakyRelu", ours,
                                    env={"ASCEND_ACTS_EVAL_KERNEL": "fused"},
                                    note="ours with ASCEND_ACTS_EVAL_KERNEL=fused"))
        else:
            cases.append(TimingCase(kernel, case, ours, "F.conv2d + F.leaky_relu", theirs))
    assert [(c.kernel, c.case) for c in cases] == model_cases(quick)
    return cases


def _us(x: float) -> str:
    return f"{x:.1f}" if x >= 100 else f"{x:.2f}"


def timings(device: str, quick: bool) -> Section:
    path, looked = find_predictions()
    predictions = load_predictions(path)
    cpu = device == "cpu"
    section = Section(
        "4. Timing vs the path each kernel replaces, and the model's prediction",
        ("CPU run: our op on each available CPU backend (--quick: the selected one) against torch's CPU built-ins, at "
         "perf_model.py's --quick shapes; CPU times "
         "say nothing about the NPU and the model predicts 910B times at its full shapes, so no prediction applies. "
         if cpu else "Each kernel through our op on the NPU against the torch_npu path it replaces, at the shapes of "
         "benchmarks/perf_model.py, next to that model's 910B prediction for the same shapes (ours and the CANN way). ")
        + "Measured: median of the timed calls after warm-ups, device synchronised; reported, never failed.",
        ["kernel", "case", "ran on", "ours us", "replaced path", "replaced us", "replaced / ours",
         "model: ours us", "model: CANN way us", "model: CANN / ours", "note", "result"])
    # the NPU always at the model's shapes (its predictions are for them); the CPU at the --quick ones, every
    # available backend (--quick: the selected one, one call)
    warmups, repeats = {(False, False): (3, 20), (False, True): (1, 5), (True, False): (1, 3), (True, True): (1, 1)}[
        (cpu, quick)]
    if not cpu:
        runs = [None]
    elif quick:
        runs = [backends.current_backend_name()]
    else:
        runs = [b for b in backends.known_backends() if backends.unavailable_reason(b) is None]
    try:
        cases = timing_cases(device, quick=cpu)
    except Exception as error:  # building the inputs failed: one FAIL row saying why, the report goes on
        cases = []
        section.rows.append(_guard(["timing inputs", "", ""], len(section.columns), lambda error=error: _raise(error)))
    for case in cases:
        prediction = predictions.get(case.kernel)
        if path is None:
            model = ["no prediction"] * 3
            model_note = f"no {PREDICTIONS} (looked in {', '.join(str(p.parent.parent.parent) for p in looked)})"
        elif prediction is None or prediction["case"] != case.case:
            model = ["no prediction"] * 3
            model_note = f"the model's case: {prediction['case'] if prediction else 'none'}"
        else:
            ours_us, cann_us = float(prediction["ours_us"]), float(prediction["cann_us"])
            model, model_note = [_us(ours_us), _us(cann_us), f"{cann_us / ours_us:.2f}"], ""
        for backend in runs:
            ran_on = f"cpu: {backend}" if cpu else op_backend(op_table.torch_op(
                "conv_bn_leaky_relu_eval" if case.kernel.startswith("conv") else _op_of_kernel(case.kernel)), device)

            def measure(case=case, backend=backend, model=model, model_note=model_note):
                selection = backends.use_backend(backend) if backend else contextlib.nullcontext()
                parts = ""
                with selection, _environment(case.env):
                    ours = 1e3 * median_ms(case.ours, device, warmups, repeats)
                    if case.minus is not None:
                        conv_us = 1e3 * median_ms(case.minus, device, warmups, repeats)
                        parts = f"{_us(ours)} - {_us(conv_us)} us"
                        ours -= conv_us
                theirs = 1e3 * median_ms(case.theirs, device, warmups, repeats)
                note = "; ".join(n for n in (case.note + (f": {parts}" if parts else ""), model_note) if n)
                return [_us(ours), case.replaced, _us(theirs), f"{theirs / ours:.2f}" if ours > 0 else "-", *model,
                        note, INFO]
            section.rows.append(_guard([case.kernel, case.case, ran_on], len(section.columns), measure))
    section.notes = [f"predictions: {path}" if path else f"predictions: none found (looked for {looked[0]} and "
                     f"{looked[1]}; a wheel install has no benchmarks/)",
                     f"{warmups} warm-ups, median of {repeats} calls",
                     "model: benchmarks/perf_model.py (emulator timeline + bandwidth floors, 910B1 assumptions); "
                     "replaced / ours and model CANN / ours above 1 mean ours is faster"]
    return section


def _op_of_kernel(kernel: str) -> str:
    return next(op.name for op in op_table.functional_ops() if kernel in op.npu_kernels)


# --- all of it --------------------------------------------------------------------------------------------
def run(device: str, quick: bool, command: str, progress: Callable[[str], None] = lambda message: None) -> Report:
    from . import ops  # noqa: F401  (defines torch.ops.ascend_acts and loads the NPU kernels)

    report = Report(command, device, quick, datetime.datetime.now().isoformat(timespec="seconds"))
    steps = [("environment", lambda: environment(device, command)), ("values", lambda: values(device, quick)),
             ("RNG", lambda: rng_checks(device, quick)), ("timing", lambda: timings(device, quick))]
    for number, (name, step) in enumerate(steps, 1):
        progress(f"selftest: {name} ...")
        start = time.perf_counter()
        try:
            report.sections.append(step())
        except Exception as error:  # a section that could not run at all is one failed row
            section = Section(f"{number}. {name}", "The section could not run.", ["step", "error", "result"])
            section.rows.append(_guard([name], 3, lambda error=error: _raise(error)))
            report.sections.append(section)
        progress(f"selftest: {name} done in {time.perf_counter() - start:.1f} s")
    return report
