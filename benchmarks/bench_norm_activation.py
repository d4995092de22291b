"""The norm + activation family, one GAN pattern at a time: Conv -> BatchNorm2d / BatchNorm1d ((N, F) and (N, C, L)) /
InstanceNorm2d / GroupNorm -> LeakyReLU(0.2) / ReLU, each three ways:

1. CPU: the torch Sequential and `ascend_acts.convert` of a copy, training forward and forward+backward timed side by
   side, the bytes autograd keeps, and whether the run fused (`ascend_acts.explain`: what runs, or why not);
2. emulator GM traffic of our norm + activation kernel alone on the conv output (forward, training backward), against
   the ideal of its two-pass design: forward reads x twice and writes y once, backward reads dy and the kept tensor
   twice and writes dx once (plus the per-channel / per-group vectors);
3. modelled 910B time of those launches (perf_model.py's timeline and floors) against the CANN way: aclnnBatchNorm /
   aclnnInstanceNorm / aclnnGroupNorm and the activation as separate aclnn ops, each at its ideal (perf_model.py's
   cited costs), with the assumption that moves each verdict most and any that flips it.

Nothing here names the patterns ascend_acts fuses: the CPU part asks convert/explain, the kernel part runs the
kernel wherever its Python wrapper takes the argument the pattern needs (`norm_groups` for instance and group norm,
`saved_is_result` for a backward from the conv output after ReLU), so fusion and kernels show up here as they land.

    python benchmarks/bench_norm_activation.py            # batch 8, 64 -> 128 channels at 32x32; a few minutes
    python benchmarks/bench_norm_activation.py --quick    # smoke run: tiny shapes, 2 repeats, 2 variants
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

import ascend_acts
import perf_model
from common import (
    add_backends_option,
    chosen_backends,
    comparison_parser,
    cpu_usage,
    in_backend,
    markdown_table,
    other_processes_note,
    parse,
    plot_bars,
    recorded_launches,
    report,
    saved_bytes,
    side_by_side,
    unavailable_notes,
)

SLOPE, EPS, MOMENTUM = 0.2, 1e-5, 0.1
GROUPS = 32  # GroupNorm's groups (StyleGAN-era and diffusion models' common choice)
CPU_PHASES = ("train forward", "train forward+backward")


@dataclass(frozen=True)
class Sizes:
    batch: int
    cin: int
    channels: int
    size: int  # height = width of the 2-D patterns
    length: int  # L of the (N, C, L) pattern
    features_batch: int  # N of the (N, F) patterns and of the short-L (N, C, L) one
    mlp: tuple[tuple[int, int], ...]  # (in, out) features of the Linear -> BatchNorm1d (N, F) patterns
    short_length: int  # L of the short (N, C, L) pattern: planes of a few values, below 32 bytes

    def groups(self) -> int:
        return min(GROUPS, self.channels)


# PyTorch-GAN's MLP generators (gan.py, cgan.py, ...): batch 64, Linear 128 -> 256 -> 512 -> 1024, each followed by
# BatchNorm1d(out, 0.8) and LeakyReLU(0.2)
FULL = Sizes(batch=8, cin=64, channels=128, size=32, length=1024, features_batch=64,
             mlp=((128, 256), (256, 512), (512, 1024)), short_length=6)
QUICK = Sizes(batch=2, cin=8, channels=16, size=8, length=32, features_batch=8, mlp=((16, 64),), short_length=6)


@dataclass(frozen=True)
class Pattern:
    name: str
    norm: str  # the aclnn norm of the CANN way: BatchNorm, InstanceNorm, GroupNorm
    relu: bool  # ReLU, else LeakyReLU(SLOPE)
    build: Callable[[Sizes, nn.Module], tuple[nn.Module, torch.Tensor]]  # (sizes, activation) -> Sequential, input
    norm_groups: Callable[[Sizes], int]  # the kernel's norm_groups: 0 BatchNorm, C instance, G group norm
    kernel_shape: Callable[[Sizes], tuple[int, ...]]  # the conv output's shape, which the kernel normalises

    def layers(self, sizes: Sizes) -> tuple[nn.Module, torch.Tensor]:
        return self.build(sizes, nn.ReLU(True) if self.relu else nn.LeakyReLU(SLOPE, True))


def image(s: Sizes) -> tuple[int, ...]:
    return s.batch, s.channels, s.size, s.size


def patterns(sizes: Sizes) -> list[Pattern]:
    def act(relu):
        return "ReLU" if relu else f"LeakyReLU({SLOPE})"

    def after_conv2d(norm_of):
        return lambda s, activation: (nn.Sequential(nn.Conv2d(s.cin, s.channels, 3, 1, 1), norm_of(s), activation),
                                      torch.randn(s.batch, s.cin, s.size, s.size))

    found = [Pattern(f"Conv2d -> BatchNorm2d -> {act(relu)}", "BatchNorm", relu,
                     after_conv2d(lambda s: nn.BatchNorm2d(s.channels)), lambda s: 0, image) for relu in (False, True)]
    for index in range(len(sizes.mlp)):
        def linear(s, activation, index=index):
            fan_in, features = s.mlp[index]
            return (nn.Sequential(nn.Linear(fan_in, features), nn.BatchNorm1d(features, 0.8), activation),
                    torch.randn(s.features_batch, fan_in))

        found.append(Pattern(
            f"Linear {sizes.mlp[index][0]} -> BatchNorm1d(eps=0.8) (N, F) -> {act(False)}", "BatchNorm", False, linear,
            lambda s: 0, lambda s, index=index: (s.features_batch, s.mlp[index][1])))
    found.append(Pattern(
        f"Conv1d -> BatchNorm1d (N, C, L) -> {act(False)}", "BatchNorm", False,
        lambda s, activation: (nn.Sequential(nn.Conv1d(s.cin, s.channels, 3, 1, 1), nn.BatchNorm1d(s.channels),
                                             activation), torch.randn(s.batch, s.cin, s.length)),
        lambda s: 0, lambda s: (s.batch, s.channels, s.length)))
    found.append(Pattern(
        f"Conv1d -> BatchNorm1d (N, C, short L) -> {act(False)}", "BatchNorm", False,
        lambda s, activation: (nn.Sequential(nn.Conv1d(s.cin, s.channels, 3, 1, 1), nn.BatchNorm1d(s.channels),
                                             activation), torch.randn(s.features_batch, s.cin, s.short_length)),
        lambda s: 0, lambda s: (s.features_batch, s.channels, s.short_length)))
    # CycleGAN's generator (ReLU), its PatchGAN (LeakyReLU)
    found += [Pattern(f"Conv2d -> InstanceNorm2d -> {act(relu)}", "InstanceNorm", relu,
                      after_conv2d(lambda s: nn.InstanceNorm2d(s.channels)), lambda s: s.channels, image)
              for relu in (True, False)]
    found += [Pattern(f"Conv2d -> GroupNorm({GROUPS}) -> {act(relu)}", "GroupNorm", relu,
                      after_conv2d(lambda s: nn.GroupNorm(s.groups(), s.channels)), lambda s: s.groups(), image)
              for relu in (False, True)]
    return found


@dataclass
class NormRow:
    part: str  # "cpu", "traffic" or "model"
    pattern: str
    shape: str  # the conv output's
    impl: str  # cpu: "torch" or "converted (<backend>)"; traffic / model: "ours" or "CANN way"
    phase: str
    median_ms: float | None = None
    ratio: float | None = None  # cpu: median per-round time / torch's; traffic: bytes / ideal; model: CANN / ours
    saved_bytes: int | None = None
    fused: str = ""  # cpu: explain's verdict
    gm_bytes: int | None = None
    ideal_bytes: int | None = None
    modelled_us: float | None = None
    detail: str = ""  # what ran, why not, what moves the verdict


# --- CPU ----------------------------------------------------------------------------------------------------------
def explain_verdict(model: nn.Module, x: torch.Tensor) -> str:
    runs = list(ascend_acts.explain(model, x))
    if not runs:
        return "not a run convert knows (no Conv2d/ConvTranspose2d/Linear -> norm)"
    return "fused" if runs[0].fused else f"not fused: {runs[0].reason}"


def cpu_rows(pattern: Pattern, sizes: Sizes, impls: list[str], repeats: int) -> list[NormRow]:
    torch.manual_seed(0)
    model, x = pattern.layers(sizes)
    models = {"torch": model}
    models.update({f"converted ({impl})": ascend_acts.convert(copy.deepcopy(model)) for impl in impls})
    backend_of = {name: "torch" if name == "torch" else name[len("converted ("):-1] for name in models}
    leaf = x.clone().requires_grad_()
    calls, kept = {}, {}
    for name, m in models.items():
        params = [*m.parameters(), *m.buffers()]

        def forward(m=m):
            return m(x)

        def forward_backward(m=m):
            m(leaf).sum().backward()

        calls[name] = in_backend(backend_of[name],
                                 {"train forward": forward, "train forward+backward": forward_backward})
        kept[name] = saved_bytes(in_backend(backend_of[name], {"f": lambda m=m: m(leaf)})["f"], exclude=params)
    verdict = explain_verdict(model, x)
    with torch.no_grad():
        shape = "x".join(map(str, model[0](x).shape))
    rows = []
    for phase, impl, milliseconds, ratio in side_by_side(calls, CPU_PHASES, repeats, "torch"):
        rows.append(NormRow("cpu", pattern.name, shape, impl, phase, milliseconds, ratio, kept[impl],
                            "" if impl == "torch" else verdict))
    return rows


# --- the kernel: emulator traffic and modelled time -----------------------------------------------------------------
def kernel_support(pattern: Pattern, groups: int) -> tuple[str | None, str | None]:
    """(why the forward kernel cannot run this pattern, why the backward cannot), None where it can."""
    from ascend_acts.ops.conv_bn_leaky_relu import kernels

    forward_args = inspect.signature(kernels.batch_norm_leaky_relu).parameters
    backward_args = inspect.signature(kernels.batch_norm_leaky_relu_grad).parameters
    forward = None if groups == 0 or "norm_groups" in forward_args else \
        "the kernel wrapper takes no norm_groups yet (no per-sample statistics)"
    backward = forward
    if backward is None and groups and "norm_groups" not in backward_args:
        backward = "the backward kernel wrapper takes no norm_groups yet"
    if backward is None and pattern.relu and "saved_is_result" not in backward_args:
        backward = ("after ReLU the backward needs the conv output, and the backward kernel wrapper takes only the "
                    "output (no saved_is_result): that backward runs NumPy")
    return forward, backward


class KernelCase:
    """The pattern's norm + activation on a conv-output-shaped tensor, run by our kernels on the emulator."""

    def __init__(self, pattern: Pattern, shape: tuple[int, ...], groups: int):
        from ascend_acts.ops.conv_bn_leaky_relu import kernels

        self.kernels, self.pattern, self.groups = kernels, pattern, groups
        gen = torch.Generator().manual_seed(sum(shape))
        self.x = torch.randn(shape, generator=gen)
        self.dy = torch.randn(shape, generator=gen)
        c = shape[1]
        self.weight, self.bias = 1 + 0.1 * torch.rand(c, generator=gen), 0.1 * torch.randn(c, generator=gen)
        self.running = [torch.zeros(c), torch.ones(c)] if groups == 0 else [None, None]  # BatchNorm's only

    def _extra(self) -> dict:
        return {"relu": True} if self.pattern.relu else {}

    def forward(self):
        extra = self._extra() | ({"norm_groups": self.groups} if self.groups else {})
        running = [t.clone() if t is not None else None for t in self.running]
        return self.kernels.batch_norm_leaky_relu(self.x, self.weight, self.bias, *running, SLOPE, EPS, MOMENTUM,
                                                  **extra)

    def backward(self, forward_results):
        y, mean, invstd = forward_results
        extra = self._extra() | ({"norm_groups": self.groups} if self.groups else {})
        if self.pattern.relu:  # the conv output (the pre-norm x) is what is kept
            extra |= {"saved_is_result": False, "save_mean": mean}
            saved = self.x
        else:
            saved = y
        return self.kernels.batch_norm_leaky_relu_grad(self.dy, saved, self.weight, self.bias, invstd, SLOPE, **extra)

    def vector_bytes(self, phase: str) -> int:
        """The per-channel / per-group vectors the phase must read and write."""
        c, n = self.x.shape[1], self.x.shape[0]
        stats = 4 * (c if self.groups == 0 else n * self.groups)
        if phase == "forward":
            running = 4 * 4 * c if self.groups == 0 else 0  # read and written
            return 2 * 4 * c + running + 2 * stats  # weight, bias in; mean, invstd out
        mean = stats if self.pattern.relu else 0
        return 2 * 4 * c + stats + mean + 2 * 4 * c  # weight, bias, invstd (mean) in; grad_weight, grad_bias out

    def ideal_bytes(self, phase: str) -> int:
        n = self.x.nbytes
        data = 3 * n if phase == "forward" else 5 * n  # x twice + y; dy and saved twice + dx
        return data + self.vector_bytes(phase)


def cann_ops(pattern: Pattern, phase: str, x: torch.Tensor, vectors: int) -> list:
    """The CANN way at its ideal (perf_model.AclnnOp): the aclnn norm (statistics, then normalise; its backward a
    reduction, then dx) and the activation (or its backward) as separate ops."""
    ns = x.nbytes
    AclnnOp = perf_model.AclnnOp
    if phase == "forward":
        activation = AclnnOp("aclnnRelu", 2 * ns, vector=(("Maxs", ns),)) if pattern.relu else \
            AclnnOp("aclnnLeakyRelu", 2 * ns, vector=(("LeakyRelu", ns),))
        return [AclnnOp(f"aclnn{pattern.norm} (statistics, then normalise)", 2 * ns + vectors, 3 * ns + vectors,
                        (("ReduceSum", ns), ("Mul", ns), ("ReduceSum", ns), ("Muls", ns), ("Adds", ns))), activation]
    activation = AclnnOp("aclnnThresholdBackward", 3 * ns, vector=(("CompareScalar", ns), ("Select", ns))) \
        if pattern.relu else AclnnOp("aclnnLeakyReluBackward", 3 * ns,
                                     vector=(("CompareScalar", ns), ("Muls", ns), ("Select", ns)))
    return [activation, AclnnOp(f"aclnn{pattern.norm}Backward (reduce, then dx)", 3 * ns + vectors, 5 * ns + vectors,
                                (("ReduceSum", ns), ("Mul", ns), ("ReduceSum", ns), ("Mul", ns), ("Sub", ns),
                                 ("Muls", ns)))]


def kernel_rows(pattern: Pattern, sizes: Sizes, variants: list) -> list[NormRow]:
    from ascend_acts.backends import sim
    from ascend_acts.backends.sim import emulator, timeline

    shape = pattern.kernel_shape(sizes)
    groups = pattern.norm_groups(sizes)
    case = KernelCase(pattern, shape, groups)
    label = "x".join(map(str, shape))
    unsupported = dict(zip(("forward", "backward"), kernel_support(pattern, groups)))
    rows = []
    for phase in ("forward", "backward"):
        cann = cann_ops(pattern, phase, case.x, case.vector_bytes(phase))
        cann_us = 1e6 * perf_model.cann_seconds(cann)
        cann_names = " + ".join(op.name for op in cann)
        ideal = case.ideal_bytes(phase)
        if unsupported[phase]:
            rows += [NormRow("traffic", pattern.name, label, "ours", phase, ideal_bytes=ideal,
                             detail=f"not run: {unsupported[phase]}"),
                     NormRow("model", pattern.name, label, "CANN way", phase, modelled_us=cann_us, detail=cann_names)]
            continue
        if phase == "forward":
            run = case.forward
        else:
            forward_results = case.forward()  # outside the counted launches

            def run(forward_results=forward_results):
                return case.backward(forward_results)
        with recorded_launches() as launches:
            run()
        moved = sum(launch.gm_bytes_in + launch.gm_bytes_out for launch in launches)
        kernels_ran = ", ".join(launch.kernel for launch in launches)
        rows.append(NormRow("traffic", pattern.name, label, "ours", phase, ratio=moved / ideal, gm_bytes=moved,
                            ideal_bytes=ideal, detail=kernels_ran))

        def modelled(run=run, cann=cann):
            run()
            return sim.last_launch(), cann, [], []

        with emulator.launch_settings(assumptions=timeline.Assumptions()):
            model_row = perf_model.measure("norm", [(pattern.name, phase, modelled)], variants)[0]
        rows += [NormRow("model", pattern.name, label, "ours", phase, modelled_us=model_row.ours_us,
                         detail=f"bound: {model_row.binding}"),
                 NormRow("model", pattern.name, label, "CANN way", phase, ratio=model_row.ratio,
                         modelled_us=model_row.cann_us,
                         detail=f"{cann_names}; moves it most: {model_row.most_sensitive}; flips past 1.0 under: "
                                f"{model_row.flips}")]
    return rows


# --- output ---------------------------------------------------------------------------------------------------------
def cpu_table(rows: list[NormRow]) -> str:
    by_key = {(r.pattern, r.impl, r.phase): r for r in rows if r.part == "cpu"}
    impls = list(dict.fromkeys(r.impl for r in rows if r.part == "cpu"))
    lines = []
    for pattern in dict.fromkeys(r.pattern for r in rows if r.part == "cpu"):
        base = by_key[(pattern, "torch", CPU_PHASES[0])]
        for impl in impls:
            cells = [pattern, base.shape, impl]
            for phase in CPU_PHASES:
                row = by_key[(pattern, impl, phase)]
                cells.append(f"{row.median_ms:.3g}" + ("" if impl == "torch" else f" ({row.ratio:.2f}x)"))
            saved = by_key[(pattern, impl, CPU_PHASES[0])].saved_bytes
            cells.append(f"{saved / 2**20:.2f} ({saved / base.saved_bytes:.2f}x)")
            cells.append(by_key[(pattern, impl, CPU_PHASES[0])].fused or "-")
            lines.append(cells)
    return markdown_table(["pattern", "conv output", "impl", "train forward ms (x torch)",
                           "train fwd+bwd ms (x torch)", "kept for backward MiB (x torch)", "convert / explain"], lines)


def kernel_table(rows: list[NormRow]) -> str:
    traffic = {(r.pattern, r.phase): r for r in rows if r.part == "traffic"}
    model = {(r.pattern, r.impl, r.phase): r for r in rows if r.part == "model"}
    lines = []
    for (pattern, phase), t in traffic.items():
        ours, cann = model.get((pattern, "ours", phase)), model[(pattern, "CANN way", phase)]
        measured = "-" if t.gm_bytes is None else f"{t.gm_bytes / 1e6:.3f} MB ({t.ratio:.3f}x)"
        lines.append([pattern, t.shape, phase, measured, f"{t.ideal_bytes / 1e6:.3f} MB",
                      "-" if ours is None else f"{ours.modelled_us:.2f} ({ours.detail})", f"{cann.modelled_us:.2f}",
                      "-" if cann.ratio is None else f"{cann.ratio:.2f}",
                      t.detail if t.gm_bytes is None else cann.detail])
    return markdown_table(["pattern", "kernel shape", "phase", "our GM bytes (x ideal)", "ideal GM bytes",
                           "ours modelled 910B us", "CANN way us", "CANN / ours", "CANN way; what moves the verdict "
                           "(or why ours did not run)"], lines)


def main(argv=None) -> None:
    parser = comparison_parser(__doc__, "smoke run: tiny shapes, two repeats, two sensitivity variants")
    add_backends_option(parser, default=[ascend_acts.backends.current_backend_name()])
    parser.add_argument("--skip-kernels", action="store_true", help="only the CPU part (no emulator, no model)")
    args = parse(parser, argv)
    sizes, variants = FULL, perf_model.VARIANTS
    if args.quick:
        sizes, args.repeats, variants = QUICK, 2, perf_model.VARIANTS[:2]
    impls = chosen_backends(parser, args.backends)

    usage_before = cpu_usage()
    rows = []
    for pattern in patterns(sizes):
        rows += cpu_rows(pattern, sizes, impls, args.repeats)
        if not args.skip_kernels:
            rows += kernel_rows(pattern, sizes, variants)
    load = other_processes_note(usage_before, cpu_usage())
    tables = ["CPU, training, float32 (the conv included):", cpu_table(rows)]
    if not args.skip_kernels:
        tables += ["Our norm + activation kernel on the emulator (GM traffic) and its modelled 910B1 time against the "
                   "CANN way (CANN / ours above 1.0: ours is faster in the model):", kernel_table(rows)]
    notes = [
        f"CPU: each pattern as an nn.Sequential (3x3 convs, padding 1; Linear "
        f"{', '.join(f'{a} -> {b}' for a, b in sizes.mlp)} at batch {sizes.features_batch} (PyTorch-GAN's MLP "
        f"generators); the short Conv1d at L = {sizes.short_length}; GroupNorm({sizes.groups()}); torch's default "
        "norm arguments but BatchNorm1d's "
        f"positional eps=0.8 of PyTorch-GAN's MLPs; LeakyReLU({SLOPE}, inplace) / ReLU(inplace)) against "
        f"ascend_acts.convert of a copy; per phase {args.repeats} rounds after 2 warm-up runs, the models taking "
        "turns: median ms and (x torch) the median of the per-round ratios; train forward+backward: sum() of the "
        "output, backward to the input and the parameters",
        "kept for backward: unique storages autograd packs during the forward (saved_tensors_hooks), parameters "
        "and buffers left out, the input included; the output counts where the pattern keeps it, though the next "
        "layer usually keeps it anyway (docs/benchmarks.md: what each pattern keeps)",
        "convert / explain: ascend_acts.explain's verdict for the run (fused, or why not)",
        "kernel: batch_norm_leaky_relu(_grad) on a tensor of the conv output's shape (BatchNorm: running statistics "
        "updated; instance and group norm: per-sample statistics, norm_groups = C or G, affine as the kernel "
        "takes it); backward after LeakyReLU from the output (InPlace-ABN), after ReLU from the conv output; "
        "ideal GM bytes: forward x read twice and y written once, backward dy and the kept tensor read twice and "
        "dx written once, plus every per-channel / per-group vector read or written once",
        "modelled: perf_model.py (the emulator's pipe timeline, HBM / L2 / vector floors, launch overhead; "
        "docs/benchmarks.md#modelled-npu-time); the CANN way: the aclnn norm (statistics then normalise, "
        "perf_model's aclnnBatchNorm costs for every norm: the same passes over per-channel or per-(n, group) "
        "planes) and the activation (aclnnRelu charged as a Maxs-class instruction, its backward "
        "aclnnThresholdBackward as compare + select) as separate ops, each at its ideal: a floor for that path",
        load, *unavailable_notes()]
    if args.quick:
        notes.append("--quick: only the first two sensitivity variants")

    def plot(path):
        cpu = [r for r in rows if r.part == "cpu" and r.phase == CPU_PHASES[1] and r.impl != "torch"]
        panels = {"CPU fwd+bwd, x torch": [r.ratio for r in cpu],
                  "kept for backward, x torch": [r.saved_bytes / next(
                      t.saved_bytes for t in rows if t.part == "cpu" and t.pattern == r.pattern and t.impl == "torch")
                      for r in cpu]}
        plot_bars([f"{r.pattern} [{r.impl}]" for r in cpu], panels, "Norm + activation patterns: converted vs torch",
                  path)

    report("norm_activation", "Norm + activation patterns: CPU vs torch, emulator GM traffic, modelled 910B vs CANN",
           rows, "\n\n".join(tables), notes, args.out, plot)


if __name__ == "__main__":
    main()
