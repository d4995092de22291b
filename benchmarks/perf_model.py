"""Modelled 910B time of every kernel of the op table, next to the CANN way of doing the same job modelled with
the same assumptions.

    python benchmarks/perf_model.py                  # GAN shapes; the DCGAN eval layers at batch 64
    python benchmarks/perf_model.py --quick          # small shapes, well under a minute
    python benchmarks/perf_model.py --section conv   # only the Conv+BN+LeakyReLU eval layers

Ours: the kernel runs on the emulator, which records every operation as an event on its core's pipe and
schedules it as soon as possible (ascend_acts.backends.sim.timeline): the time reported is
max(timeline makespan, HBM bytes / HBM bandwidth, L2 bytes / L2 bandwidth, cube MACs / cube peak x efficiency,
vector work / vector peak) + one launch overhead, every term shown. The CANN way: the aclnn ops it takes,
each at its ideal (its compulsory bytes at HBM bandwidth, its re-reads at L2 bandwidth, its compute at the
same peaks, one copy-in and one copy-out latency) + one launch overhead each. Every assumption is in the
table printed first, with its source. Each verdict (CANN / ours) is then recomputed with one assumption moved
at a time (VARIANTS: HBM 1.3 TB/s, DMA latency 0 / 1000, launch overhead 3 / 6 us, L2 bandwidth +-30%, cube
efficiency, vector issue cost, L2-miss copy rate): the sensitivity columns name the assumption that moves the
ratio most and say whether any of them flips it past 1.0.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import torch

from common import QUICK_OUT, RESULTS_DIR, markdown_table, output_dir, plot_bars, report

PLATFORM = "ascend910b1"


def _default():
    from ascend_acts.backends.sim import timeline

    return timeline.Assumptions()


DEFAULT = _default()
BOUNDS = ("timeline", "HBM", "L2", "cube", "vector")
# One assumption moved at a time, by its uncertainty (label, changes). Per-core fields reschedule the kernel.
VARIANTS = [
    ("HBM 1.3 TB/s", {"hbm_bytes_per_s": 1.3e12}),
    ("DMA latency 0", {"dma_latency_cycles": 0.0}),
    ("DMA latency 1000", {"dma_latency_cycles": 1000.0}),
    ("launch 3 us", {"launch_overhead_s": 3e-6}),
    ("launch 6 us", {"launch_overhead_s": 6e-6}),
    ("L2 -30%", {"l2_bytes_per_s": 0.7 * DEFAULT.l2_bytes_per_s}),
    ("L2 +30%", {"l2_bytes_per_s": 1.3 * DEFAULT.l2_bytes_per_s}),
    ("cube eff 0.7", {"cube_efficiency": 0.7}),
    ("cube eff 0.98", {"cube_efficiency": 0.98}),
    ("vector issue 0", {"vector_issue_cycles": 0.0}),
    ("vector issue 32", {"vector_issue_cycles": 32.0}),
    ("first reads 4.5x slower (msKPP theory)", {"mte2_hbm_bytes_per_cycle": DEFAULT.mte2_l2_bytes_per_cycle / 4.5}),
]


@dataclass
class ModelRow:
    section: str  # "kernels" or "conv"
    kernel: str
    case: str
    ours_us: float
    binding: str  # the bound that sets our time
    timeline_us: float
    hbm_us: float
    l2_us: float
    cube_us: float
    vector_us: float
    launch_us: float
    l2_bytes: int
    hbm_bytes: int
    extra_us: float  # charged besides the launch (the eval kernel's weight packing)
    cann_us: float
    cann_ops: str
    ratio: float  # cann / ours: above 1, ours is faster in the model
    ours_no_latency_us: float = 0.0  # ours again with dma_latency_cycles = 0 (how much the time hinges on it)
    ratios: dict = field(default_factory=dict)  # VARIANTS label -> CANN / ours with that one assumption moved
    ratio_hbm_1_3: float = 0.0
    most_sensitive: str = ""  # the variant that moves the ratio most, and the ratio under it
    flips: str = ""  # the variants whose ratio lies on the other side of 1.0, or "none"


@dataclass(frozen=True)
class AclnnOp:
    """One aclnn kernel at its ideal: compulsory HBM bytes, every byte it moves (L2), its vector instructions
    ((AscendC API, bytes) pairs, charged by their class's measured cycles like our kernels'), cube MACs."""
    name: str
    hbm_bytes: float
    l2_bytes: float | None = None  # None: the same as hbm_bytes
    vector: tuple = ()
    macs: float = 0.0

    def seconds(self, a, clock: float, chip) -> float:
        from ascend_acts.backends.sim import timeline

        cycles = sum(timeline.vector_cycles(api, nbytes) for api, nbytes in self.vector)
        floors = [self.hbm_bytes / a.hbm_bytes_per_s,
                  (self.hbm_bytes if self.l2_bytes is None else self.l2_bytes) / a.l2_bytes_per_s,
                  cycles / (chip.vector_cores * clock),
                  self.macs / (chip.cube_cores * a.cube_macs_per_cycle_16 * a.cube_efficiency * clock)]
        # the same DMA assumptions as our timeline: a GM -> GM op waits for at least one copy-in and one
        # copy-out that overlap nothing (its first tile in, its last tile out)
        fill = 2 * (a.dma_issue_cycles + a.dma_latency_cycles) / clock
        return max(floors) + fill + a.launch_overhead_s


def chip_of(platform: str):
    from ascend_acts import _sim

    return next(p for p in _sim.platforms() if p.name == platform)


def cann_seconds(ops: list[AclnnOp], a=None, platform: str = PLATFORM) -> float:
    from ascend_acts.backends.sim import timeline

    return sum(op.seconds(a or DEFAULT, timeline.PLATFORM_CLOCK_HZ[platform], chip_of(platform)) for op in ops)


# --- the kernels of the op table, at GAN shapes ----------------------------------------------------------
# A case's run() launches our kernel and returns (our launch, the CANN way's aclnn ops, launches of ours that
# stand in for a CANN op, ops charged to ours besides its launch).
RRELU_SOURCE = ("hicann/ops-nn activation/leaky_relu/op_api/aclnn_rrelu_with_noise.cpp (training, DAV_2201): "
                "OnesLike, ZerosLike, Less, DSARandomUniform, Cast, SelectV2, ViewCopy (noise), Mul; CANN's "
                "l0op::Cast returns its input when the dtype already matches (float32 here): no launch")


def kernel_cases(quick: bool):
    """(kernel, case label, run) for every kernel of the op table but the eval convolution (its own section)."""
    from ascend_acts.backends import sim
    from ascend_acts.ops.conv_bn_leaky_relu import kernels as conv_bn_sim
    from ascend_acts.ops.fused_bias_leaky_relu import kernels as fused_bias_sim
    from ascend_acts.ops.leaky_relu import kernels as leaky_relu_sim
    from ascend_acts.ops.rrelu import kernels as rrelu_sim

    dcgan = (2, 16, 8, 8) if quick else (64, 128, 16, 16)     # a DCGAN discriminator activation
    stylegan = (2, 32, 8, 8) if quick else (16, 512, 16, 16)  # a StyleGAN2 block at 16 x 16
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(dcgan, generator=gen)
    dy = torch.randn(dcgan, generator=gen)
    n, s = x.numel(), x.element_size()
    ns = n * s
    c = dcgan[1]
    seed = torch.tensor([1234])
    label = f"{tuple(dcgan)} float32"
    # aclnnLeakyReluBackward: dy * (x > 0 ? 1 : slope), a compare, a scale and a select per element
    leaky_backward = (("CompareScalar", ns), ("Muls", ns), ("Select", ns))

    def ours(run):
        def case():
            ops = run()
            return sim.last_launch(), ops, [], []
        return case

    def batch_norm_forward():
        _bn_forward(conv_bn_sim, x, c)
        params = 4 * c * 4
        # statistics (sum, x * x, sum), then normalise (a per-channel scale and shift)
        return [AclnnOp("aclnnBatchNorm (training: statistics, then normalise)", 2 * ns + params, 3 * ns + params,
                        (("ReduceSum", ns), ("Mul", ns), ("ReduceSum", ns), ("Muls", ns), ("Adds", ns))),
                AclnnOp("aclnnLeakyRelu", 2 * ns, vector=(("LeakyRelu", ns),))]

    def batch_norm_backward():
        y, _, invstd = _bn_forward(conv_bn_sim, x, c)
        conv_bn_sim.batch_norm_leaky_relu_grad(dy, y, torch.ones(c), torch.zeros(c), invstd, 0.2)
        return [AclnnOp("aclnnLeakyReluBackward", 3 * ns, vector=leaky_backward),
                AclnnOp("aclnnBatchNormBackward (reduce, then dx)", 3 * ns, 5 * ns,
                        (("ReduceSum", ns), ("Mul", ns), ("ReduceSum", ns), ("Mul", ns), ("Sub", ns), ("Muls", ns)))]

    xs = torch.randn(stylegan, generator=gen)
    bias = torch.randn(stylegan[1], generator=gen)
    nss = xs.numel() * xs.element_size()
    style_label = f"{tuple(stylegan)} float32"

    def fused_bias_forward():
        fused_bias_sim.fused_bias_leaky_relu(xs, bias, 0.2, 2**0.5)
        return [AclnnOp("aclnnAdd (x + bias)", 2 * nss + bias.nbytes, vector=(("Add", nss),)),
                AclnnOp("aclnnLeakyRelu", 2 * nss, vector=(("LeakyRelu", nss),)),
                AclnnOp("aclnnMuls (x scale)", 2 * nss, vector=(("Muls", nss),))]

    def fused_bias_backward():
        saved = fused_bias_sim.fused_bias_leaky_relu(xs, bias, 0.2, 2**0.5)
        fused_bias_sim.fused_bias_leaky_relu_backward(torch.randn_like(xs), saved, bias, 0.2, 2**0.5, True)
        return [AclnnOp("aclnnLeakyReluBackward", 3 * nss, vector=tuple((api, nss) for api, _ in leaky_backward)),
                AclnnOp("aclnnMuls (x scale)", 2 * nss, vector=(("Muls", nss),)),
                AclnnOp("aclnnReduceSum (grad_bias over N, H, W)", nss + bias.nbytes, vector=(("ReduceSum", nss),))]

    def rrelu_forward():
        rrelu_sim.rrelu(x, seed, 1 / 8, 1 / 3)
        # aclnnRReluWithNoise, training, float32: each launch its own traffic (RRELU_SOURCE)
        return [AclnnOp("OnesLike", ns, vector=(("Duplicate", ns),)),
                AclnnOp("ZerosLike", ns, vector=(("Duplicate", ns),)),
                AclnnOp("Less (x < zeros: a bool mask)", 2 * ns + n, vector=(("Compare", ns),)),
                AclnnOp("DSARandomUniform (the DSA unit: traffic only)", ns),
                AclnnOp("SelectV2 (mask ? uniform : ones)", n + 3 * ns, vector=(("Select", ns),)),
                AclnnOp("ViewCopy (the noise kept for backward)", 2 * ns),
                AclnnOp("Mul (x * noise)", 3 * ns, vector=(("Mul", ns),))]

    return [
        ("leaky_relu", label, ours(lambda: (leaky_relu_sim.leaky_relu(x, 0.2),
                                            [AclnnOp("aclnnLeakyRelu", 2 * ns, vector=(("LeakyRelu", ns),))])[1])),
        ("leaky_relu_grad", label, ours(lambda: (leaky_relu_sim.leaky_relu_backward(dy, x, 0.2, False),
                                                 [AclnnOp("aclnnLeakyReluBackward", 3 * ns,
                                                          vector=leaky_backward)])[1])),
        ("rrelu", label, ours(rrelu_forward)),
        ("rrelu_grad", label, ours(lambda: (rrelu_sim.rrelu_backward(dy, x, seed, 1 / 8, 1 / 3, False),
                                             [AclnnOp("aclnnMul (dy * noise)", 3 * ns,
                                                      vector=(("Mul", ns),))])[1])),
        ("batch_norm_leaky_relu", label, ours(batch_norm_forward)),
        ("batch_norm_leaky_relu_grad", label, ours(batch_norm_backward)),
        ("fused_bias_leaky_relu", style_label, ours(fused_bias_forward)),
        ("fused_bias_leaky_relu_grad", style_label, ours(fused_bias_backward)),
        *bias_act_cases([("lrelu", stylegan, CONV_CLAMP)]),
    ]


# --- NVlabs' bias_act (ascend_acts.bias_act) on our kernels, next to its composite as aclnn ops ----------------
CONV_CLAMP = 256.0  # StyleGAN2-ADA's conv_clamp
BIAS_ACT_KERNEL = {"bias_act": "fused_bias_leaky_relu", "bias_act_grad": "fused_bias_leaky_relu_grad"}


def bias_act_cases(shapes):
    """(kernel, case label, run) of ascend_acts.bias_act for each (act, shape, clamp) with act 'lrelu' (alpha 0.2,
    gain sqrt(2)) or 'linear' (gain 1), bias over dim 1, float32. Ours: our fused kernel, the clamp inside it (the
    backward then reads the kept input and recomputes the unclamped output for the clamp's gradient). The CANN
    way: NVlabs' reference composite as aclnn ops, forward Add, LeakyRelu (lrelu), Muls (gain != 1), Clamp;
    backward the reverse: the clamp's gradient, Muls, LeakyReluBackward, and ReduceSum for the bias gradient
    (linear without gain: the clamp's gradient, then ReduceSum). Each op at its ideal, as the CANN-way rows above.
    linear with gain 1 and no clamp has a forward case only: its backward runs no kernel of ours (the gradient
    passes through and a ReduceSum gives the bias's, as the composite's)."""
    from ascend_acts.backends import sim
    from ascend_acts.ops.fused_bias_leaky_relu import kernels as fused_bias_sim

    cases = []
    for act, shape, clamp in shapes:
        gen = torch.Generator().manual_seed(sum(shape))
        x = 100 * torch.randn(shape, generator=gen)  # about 4% of lrelu * sqrt(2) beyond the clamp of 256
        bias = torch.randn(shape[1], generator=gen)
        dy = torch.randn(shape, generator=gen)
        ns = x.numel() * x.element_size()
        slope, gain = (0.2, 2**0.5) if act == "lrelu" else (1.0, 1.0)
        bound = -1.0 if clamp is None else clamp
        case = f"{act}{f', clamp {clamp:g}' if clamp is not None else ''}, {tuple(shape)} float32"
        clamp_forward = [AclnnOp("aclnnClamp", 2 * ns, vector=(("Maxs", ns), ("Mins", ns)))] if clamp else []
        # the clamp's gradient: two compares of the kept tensor with the bounds, a select of dy or 0
        clamp_backward = ([AclnnOp("clamp backward (aclnnClamp's gradient: dy where inside, else 0)", 3 * ns,
                                   vector=(("CompareScalar", ns), ("CompareScalar", ns), ("And", ns),
                                           ("Select", ns)))] if clamp else [])
        composite_forward = [AclnnOp("aclnnAdd (x + bias)", 2 * ns + bias.nbytes, vector=(("Add", ns),))]
        composite_backward = []
        if act == "lrelu":
            composite_forward.append(AclnnOp("aclnnLeakyRelu", 2 * ns, vector=(("LeakyRelu", ns),)))
            composite_backward.append(AclnnOp("aclnnLeakyReluBackward", 3 * ns, vector=(
                ("CompareScalar", ns), ("Muls", ns), ("Select", ns))))
        if gain != 1:
            composite_forward.append(AclnnOp("aclnnMuls (x gain)", 2 * ns, vector=(("Muls", ns),)))
            composite_backward.insert(0, AclnnOp("aclnnMuls (x gain)", 2 * ns, vector=(("Muls", ns),)))
        composite_backward.append(AclnnOp("aclnnReduceSum (grad_bias)", ns + bias.nbytes,
                                          vector=(("ReduceSum", ns),)))

        def forward(x=x, bias=bias, slope=slope, gain=gain, bound=bound, cann=composite_forward + clamp_forward):
            fused_bias_sim.fused_bias_leaky_relu(x, bias, slope, gain, bound)
            return sim.last_launch(), cann, [], []

        def backward(x=x, bias=bias, dy=dy, slope=slope, gain=gain, bound=bound,
                     cann=clamp_backward + composite_backward):
            keeps_output = bound < 0  # as bias_act's autograd (gain >= 1, slope >= 0): the output, else the input
            saved = fused_bias_sim.fused_bias_leaky_relu(x, bias, slope, gain, bound) if keeps_output else x
            fused_bias_sim.fused_bias_leaky_relu_backward(dy, saved, bias, slope, gain, keeps_output, bound)
            return sim.last_launch(), cann, [], []

        identity = act == "linear" and clamp is None
        cases += [("bias_act", case, forward), *([] if identity else [("bias_act_grad", case, backward)])]
    return cases


def _bn_forward(conv_bn_sim, x, c):
    return conv_bn_sim.batch_norm_leaky_relu(x, torch.ones(c), torch.zeros(c), torch.zeros(c), torch.ones(c), 0.2,
                                             1e-5, 0.1)


# --- the DCGAN discriminator's Conv+BN+LeakyReLU eval layers (k4 s2 p1, float16) ----------------------------
LAYERS = [("D2 64->128 @32", 64, 32, 128), ("D3 128->256 @16", 128, 16, 256), ("D4 256->512 @8", 256, 8, 512)]
QUICK_LAYERS = [("tiny 8->16 @16", 8, 16, 16), ("small 16->32 @8", 16, 8, 32)]


def conv_cases(quick: bool, batch: int):
    from ascend_acts.backends import sim
    from ascend_acts.ops.conv_bn_leaky_relu import kernels as conv_bn_sim
    from ascend_acts.ops.leaky_relu import kernels as leaky_relu_sim

    cases = []
    for name, cin, size, cout in QUICK_LAYERS if quick else LAYERS:
        gen = torch.Generator().manual_seed(cin)
        x = torch.randn(batch, cin, size, size, generator=gen).half()
        weight = (torch.randn(cout, cin, 4, 4, generator=gen) / (cin * 16) ** 0.5).half()
        bias = torch.randn(cout, generator=gen)
        ho = size // 2
        y_bytes = batch * cout * ho * ho * 2
        macs = batch * cout * ho * ho * cin * 16

        def run(x=x, weight=weight, bias=bias, y_bytes=y_bytes, macs=macs):
            y = conv_bn_sim.eval_kernel(x, weight, bias, (2, 2), (1, 1, 1, 1), (1, 1), 0.2)
            ours = sim.last_launch()
            # the LeakyReLU after aclnnConvolution: our own leaky_relu kernel's model is a fair stand-in
            leaky_relu_sim.leaky_relu(y, 0.2)
            leaky = sim.last_launch()
            cann = [AclnnOp("TransData x NCHW->NC1HWC0", 2 * x.nbytes, vector=(("TransDataTo5HD", x.nbytes),)),
                    AclnnOp("TransData W' -> FRACTAL_Z", 2 * weight.nbytes,
                            vector=(("TransDataTo5HD", weight.nbytes),)),
                    AclnnOp("aclnnConvolution (folded W', b')", x.nbytes + weight.nbytes + bias.nbytes + y_bytes,
                            macs=macs),
                    AclnnOp("TransData y NC1HWC0->NCHW", 2 * y_bytes, vector=(("TransDataTo5HD", y_bytes),))]
            # the weight packing W' -> the kernel's layout: a permute, once per call (like aclnn's weight TransData)
            pack = AclnnOp("weight packing (permute of W')", 2 * weight.nbytes)
            return ours, cann, [leaky], [pack]

        cases.append((f"conv_bn_leaky_relu_eval {name}", f"batch {batch}, {2 * macs / 1e9:.2f} GFLOP, float16", run))
    return cases


# --- evaluation under one set of assumptions, and the sensitivity -----------------------------------------
def _per_core(a):
    from ascend_acts.backends.sim import timeline

    return tuple(getattr(a, f) for f in timeline.COST_FIELDS)


def evaluate(run, a, cache: dict):
    """(ours s, CANN way s, our ModelledTime, the CANN way's names) for one case under assumptions `a`: the
    kernel is rescheduled only when a per-core cost differs from a run already made (cache)."""
    from ascend_acts.backends import sim
    from ascend_acts.backends.sim import timeline

    key = _per_core(a)
    if key not in cache:
        with sim.launch_settings(assumptions=a):
            cache[key] = run()
    launch, cann_ops, cann_launches, extra_ops = cache[key]
    clock = timeline.PLATFORM_CLOCK_HZ[PLATFORM]
    model = timeline.model_time(launch, PLATFORM, a)
    extra = sum(op.seconds(a, clock, chip_of(PLATFORM)) for op in extra_ops)
    cann = cann_seconds(cann_ops, a) + sum(timeline.model_time(la, PLATFORM, a).total_s for la in cann_launches)
    names = [op.name for op in cann_ops] + (["LeakyReLU (our kernel's model)"] if cann_launches else [])
    return model.total_s + extra, cann, model, extra, names


def measure(section: str, cases, variants=None) -> list[ModelRow]:
    """A ModelRow per case, its verdict recomputed under each of `variants` (default VARIANTS)."""
    from ascend_acts import op_table

    rows = []
    for kernel, case, run in cases:
        cache = {}
        ours, cann, model, extra, names = evaluate(run, DEFAULT, cache)
        if section == "kernels":
            launch = next(iter(cache.values()))[0]
            kernel_name = BIAS_ACT_KERNEL.get(kernel, kernel)
            assert launch.kernel == op_table.kernel(kernel_name).entry, (launch.kernel, kernel)
        b = model.bounds
        row = ModelRow(section, kernel, case, 1e6 * ours, model.binding, 1e6 * b["timeline"], 1e6 * b["HBM"],
                       1e6 * b["L2"], 1e6 * b["cube"], 1e6 * b["vector"], 1e6 * model.launch_overhead_s,
                       model.l2_bytes, model.hbm_bytes, 1e6 * extra, 1e6 * cann, " + ".join(names), cann / ours)
        for label, changes in VARIANTS if variants is None else variants:
            o, c, *_ = evaluate(run, DEFAULT.with_(**changes), cache)
            row.ratios[label] = c / o
            if label == "DMA latency 0":
                row.ours_no_latency_us = 1e6 * o
        row.ratio_hbm_1_3 = row.ratios["HBM 1.3 TB/s"]
        worst = max(row.ratios, key=lambda k: abs(row.ratios[k] - row.ratio))
        row.most_sensitive = f"{worst}: {row.ratios[worst]:.2f}"
        flipped = [k for k, r in row.ratios.items() if (r > 1.0) != (row.ratio > 1.0)]
        row.flips = ", ".join(f"{k} ({row.ratios[k]:.2f})" for k in flipped) or "none"
        rows.append(row)
    return rows


def measure_kernels(quick: bool) -> list[ModelRow]:
    from ascend_acts import op_table

    cases = kernel_cases(quick)
    covered = {kernel for kernel, _, _ in cases} | {"conv_bn_leaky_relu_eval"}
    missing = [k.base for k in op_table.KERNELS if k.base not in covered]
    if missing:
        raise SystemExit(f"perf_model.py has no case for the op table's kernels {missing}")
    return measure("kernels", cases)


def measure_conv(quick: bool, batch: int) -> list[ModelRow]:
    return measure("conv", conv_cases(quick, batch))


# --- output ---------------------------------------------------------------------------------------------
def assumptions_table() -> str:
    from ascend_acts.backends.sim import emulator, timeline

    return markdown_table(["assumption", "value", "unit", "source"],
                          [list(r) for r in timeline.table(emulator.settings().assumptions, PLATFORM)])


def results_table(rows: list[ModelRow]) -> str:
    return markdown_table(
        ["kernel", "case", "timeline us", "HBM us", "L2 us", "cube us", "vector us", "launch us", "extra us",
         "ours us (bound)", "ours us, DMA latency 0", "CANN way us", "CANN / ours", "CANN way"],
        [[r.kernel, r.case, f"{r.timeline_us:.2f}", f"{r.hbm_us:.2f}", f"{r.l2_us:.2f}", f"{r.cube_us:.2f}",
          f"{r.vector_us:.2f}", f"{r.launch_us:.1f}", f"{r.extra_us:.2f}", f"**{r.ours_us:.2f}** ({r.binding})",
          f"{r.ours_no_latency_us:.2f}", f"{r.cann_us:.2f}", f"{r.ratio:.2f}", r.cann_ops] for r in rows])


def verdicts_table(rows: list[ModelRow]) -> str:
    return markdown_table(
        ["kernel", "ours us", "CANN way us", "CANN / ours, HBM 1.6 TB/s", "CANN / ours, HBM 1.3 TB/s",
         "moves it most (CANN / ours then)", "flips past 1.0 under"],
        [[r.kernel, f"{r.ours_us:.2f}", f"{r.cann_us:.2f}", f"{r.ratio:.2f}", f"{r.ratio_hbm_1_3:.2f}",
          r.most_sensitive, r.flips] for r in rows])


def sensitivity_table(rows: list[ModelRow]) -> str:
    labels = [label for label, _ in VARIANTS]
    return markdown_table(["kernel", "default"] + labels,
                          [[r.kernel, f"{r.ratio:.2f}"] + [f"{r.ratios[k]:.2f}" for k in labels] for r in rows])


NOTES = [
    "ours = max(timeline, HBM, L2, cube, vector) + launch; the bound in brackets is the largest. timeline: the "
    "longest core's as-soon-as-possible pipe schedule of every operation the emulator saw (a perfectly "
    "synchronised kernel: real scheduling can only be slower); HBM: compulsory bytes (first reads and written "
    "bytes, 32-byte blocks, a workspace written then re-read once) while the footprint fits L2, else every byte; "
    "L2: every GM byte moved, re-reads and workspace round trips included; cube: MACs (fractal-padded) / (cube "
    "cores x peak x efficiency); vector: every vector instruction's class cycles (max(min, repeats x cycles per "
    "repeat), msKPP's measured 910B1 figures) and Gather elements / vector cores",
    "CANN way: each aclnn op at its ideal (compulsory bytes at HBM bandwidth, re-reads at L2 bandwidth, compute at "
    "the same peaks, its vector instructions by the same classes) + one copy-in and one copy-out latency (the fill "
    "a streaming kernel cannot hide) + one launch overhead each: a floor for that path, not a prediction. RReLU: "
    + RRELU_SOURCE,
    "sensitivity: each verdict recomputed with one assumption moved (the CANN way under the same change); 'moves it "
    "most' names the change that moves CANN / ours furthest, 'flips' every change that puts it on the other side "
    "of 1.0",
    "extra: charged besides the launch (the eval kernel's weight packing, a permute of W' per call)",
    "bias_act: ascend_acts.bias_act (NVlabs' interface) with clamp 256: our fused bias + LeakyReLU kernel with the "
    "clamp inside (forward; backward: its backward kernel from the kept input, the unclamped output recomputed for "
    "the clamp's gradient), vs NVlabs' reference composite as aclnn ops (Add, LeakyRelu, Muls, Clamp; backward the "
    "clamp's gradient, Muls, LeakyReluBackward, ReduceSum), each op at its ideal as every CANN way here",
    "ours us, DMA latency 0: the same kernel rescheduled without the (assumed, unsourced) 500-cycle DMA latency; "
    "where it differs much from ours, the time hinges on that assumption (the kernel waits for its copies: small "
    "tiles or too few buffers in flight)",
    "not modelled: UB bank conflicts, scalar-unit time (address arithmetic, GetValue/SetValue), L2 misses beyond "
    "the capacity rule, DMA contention beyond the bandwidth floors, bisheng's real instruction scheduling "
    "(docs/benchmarks.md)",
]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small shapes, two small conv layers at batch 2")
    parser.add_argument("--section", choices=("all", "kernels", "conv"), default="all")
    parser.add_argument("--batch", type=int, default=None, help="conv layers' batch (default 64, --quick 2)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"results directory (default {RESULTS_DIR}; --quick: {QUICK_OUT}, untracked)")
    parser.add_argument("--name", default=None,
                        help="file name of the results without suffix (default perf_model[_<section>])")
    args = parser.parse_args(argv)
    # a smoke run or a part must not overwrite the committed full results
    out = output_dir(args)
    name = args.name or ("perf_model" if args.section == "all" else f"perf_model_{args.section}")
    batch = args.batch or (2 if args.quick else 64)
    from ascend_acts.backends.sim import emulator, timeline

    rows = []
    with emulator.launch_settings(assumptions=timeline.Assumptions()):  # every launch scheduled on the timeline
        if args.section in ("all", "kernels"):
            rows += measure_kernels(args.quick)
        if args.section in ("all", "conv"):
            rows += measure_conv(args.quick, batch)
        table = "\n\n".join([f"Platform {PLATFORM}; assumptions:", assumptions_table(), "Modelled times:",
                             results_table(rows), "Verdicts (CANN / ours: above 1.0 ours is faster) and what flips "
                             "them:", verdicts_table(rows), "CANN / ours with one assumption moved:",
                             sensitivity_table(rows)])

    def plot(path):
        plot_bars([f"{r.kernel} ({r.case.split(',')[0]})" for r in rows],
                  {"ours, modelled us": [r.ours_us for r in rows], "CANN way, modelled us": [r.cann_us for r in rows],
                   "CANN / ours": [r.ratio for r in rows]},
                  "Modelled 910B1 time: our kernels vs the CANN way (same assumptions)", path)

    report(name, "Modelled 910B time of every kernel vs the CANN way (emulator pipe timeline + floors)", rows,
           table, NOTES, out, plot)


if __name__ == "__main__":
    main()
