"""Floors, not predictions: the eval Conv+BN+LeakyReLU kernel's GM traffic (counted by the emulator) and the
cube's compute floor, next to the way CANN really runs the layer (aclnnConvolution on the BN-folded weights,
with its TransData passes, then LeakyReLU).

    python benchmarks/fused_traffic.py            # DCGAN discriminator layers, batch 64, float16
    python benchmarks/fused_traffic.py --quick    # smoke run: two small layers

Fused: op_kernel/conv_bn_leaky_relu_eval/ on the emulator, which counts every byte it moves per GM buffer: x
(with the halo rows neighbouring column tiles read again), out, W' once per work item, and the im2col slab
written to and read back from the GM workspace (vector and cube cores exchange data only through GM on 910B).
The emulator runs one image; every count is per image, so the batch's is that times the batch (W' re-reads
included: nothing here assumes that anything stays in L2).
Baseline (modelled, each op at its ideal): TransData x NCHW -> NC1HWC0 (read x, write x), the convolution
(read x and W' once, write y), TransData y back to NCHW (read y, write y), LeakyReLU (read y, write y). BN is
folded into W' and b' in eval, so no BN pass.

A time here is max(traffic floor, compute floor): bytes / HBM bandwidth, and FLOPs / the cube's peak.
Assumptions (not official figures): HBM 1.6 TB/s (commonly quoted, +-30%); a cube core does one 16x16x16
float16 fractal (4096 MAC) per cycle at 1.8 GHz, so 910B1 (24 cube cores) peaks at 354 TFLOPS and 910B3 (20)
at 295. Not modelled, so every time here is below what a real NPU would take: vector work (the fused
kernel's im2col Gathers are latency-bound), per-DMA and per-sync overheads, launch time, and L2 hits, which
could only lower the fused kernel's GM time, never below its compulsory bytes (also shown).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import torch

from common import RESULTS_DIR, markdown_table, report

HBM_BYTES_PER_S = 1.6e12  # 910B, commonly quoted; no official figure (treat as +-30%)
CUBE_FLOPS_PER_CYCLE = 2 * 16 * 16 * 16  # one float16 fractal MAC per cycle per cube core (assumption)
CLOCK_HZ = 1.8e9  # assumption
PLATFORMS = ("ascend910b1", "ascend910b3")
# (name, C_in, H=W, C_out): the DCGAN discriminator's conv layers (k4 s2 p1) that carry BN + LeakyReLU
LAYERS = [("D2 64->128 @32", 64, 32, 128), ("D3 128->256 @16", 128, 16, 256), ("D4 256->512 @8", 256, 8, 512)]
QUICK_LAYERS = [("tiny 8->16 @16", 8, 16, 16), ("small 16->32 @8", 16, 8, 32)]


@dataclass
class TrafficRow:
    layer: str
    batch: int
    gflop: float
    fused_gm_bytes: int          # everything the emulator counted, times the batch
    fused_compulsory_bytes: int  # x and out once per image, W' and b' once
    baseline_bytes: int          # TransData x, conv, TransData y, LeakyReLU, each at its ideal
    compute_us: dict[str, float]  # cube floor per platform
    fused_us: dict[str, float]    # max(GM floor, compute floor) per platform
    baseline_us: dict[str, float]


def cube_peak_flops(platform: str) -> float:
    from ascend_acts import _sim

    cores = next(p.cube_cores for p in _sim.platforms() if p.name == platform)
    return cores * CUBE_FLOPS_PER_CYCLE * CLOCK_HZ


def floor_us(nbytes: int, compute_us: float) -> float:
    return max(1e6 * nbytes / HBM_BYTES_PER_S, compute_us)


def measure_layer(name: str, cin: int, size: int, cout: int, batch: int) -> TrafficRow:
    from ascend_acts.backends import sim

    dtype = torch.float16
    element = torch.finfo(dtype).bits // 8
    x = torch.randn(1, cin, size, size).to(dtype)
    weight = (torch.randn(cout, cin, 4, 4) / (cin * 16) ** 0.5).to(dtype)
    bias = torch.randn(cout)
    out = sim.conv_bn_leaky_relu_eval(x, weight, bias, (2, 2), (1, 1, 1, 1), (1, 1), 0.2)
    launch = sim.last_launch()
    assert launch.buffer_bytes_out["y"] == out.numel() * element, "the fused kernel must write its output once"
    counted = sum(launch.buffer_bytes_in.values()) + sum(launch.buffer_bytes_out.values())
    x_bytes, y_bytes = batch * x.numel() * element, batch * out.numel() * element
    weight_bytes, bias_bytes = weight.numel() * element, bias.numel() * 4
    compulsory = x_bytes + y_bytes + weight_bytes + bias_bytes
    baseline = (2 * x_bytes) + (x_bytes + weight_bytes + bias_bytes + y_bytes) + (2 * y_bytes) + (2 * y_bytes)
    flop = 2 * batch * out.numel() * cin * 16
    compute = {p: 1e6 * flop / cube_peak_flops(p) for p in PLATFORMS}
    fused = batch * counted
    return TrafficRow(name, batch, flop / 1e9, fused, compulsory, baseline, compute,
                      {p: floor_us(fused, c) for p, c in compute.items()},
                      {p: floor_us(baseline, c) for p, c in compute.items()})


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="two small layers")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    rows = [measure_layer(*layer, args.batch) for layer in (QUICK_LAYERS if args.quick else LAYERS)]
    short = {"ascend910b1": "910B1", "ascend910b3": "910B3"}
    table = markdown_table(
        ["layer", "batch", "GFLOP", "fused GM MB (counted)", "fused compulsory MB", "baseline MB",
         *[f"cube floor us {short[p]}" for p in PLATFORMS], *[f"fused floor us {short[p]}" for p in PLATFORMS],
         *[f"baseline floor us {short[p]}" for p in PLATFORMS]],
        [[r.layer, r.batch, f"{r.gflop:.2f}", f"{r.fused_gm_bytes / 1e6:.1f}", f"{r.fused_compulsory_bytes / 1e6:.1f}",
          f"{r.baseline_bytes / 1e6:.1f}", *[f"{r.compute_us[p]:.1f}" for p in PLATFORMS],
          *[f"{r.fused_us[p]:.1f}" for p in PLATFORMS], *[f"{r.baseline_us[p]:.1f}" for p in PLATFORMS]]
         for r in rows])
    notes = [
        "float16 activations and weights, k4 s2 p1; fused bytes counted by the emulator per GM buffer (x with its "
        "halo re-reads, out, W' per work item, the im2col workspace written and read back), times the batch",
        "baseline = aclnnConvolution on the BN-folded W', b' with TransData NCHW <-> NC1HWC0 of x and y, then "
        "LeakyReLU; each op at its ideal traffic (modelled, not counted)",
        f"floor = max(bytes / {HBM_BYTES_PER_S / 1e12:.1f} TB/s, FLOPs / cube peak); cube peak = cube cores x "
        f"{CUBE_FLOPS_PER_CYCLE} FLOP/cycle x {CLOCK_HZ / 1e9:.1f} GHz (assumptions, not official figures)",
        "floors only: vector work (im2col Gathers), DMA and sync overheads, launch time are not modelled; the real "
        "time of either path is above its floor, the fused kernel's likely far above (issue: cube-side img2col)",
    ]
    report("fused_traffic", "Conv+BN+LeakyReLU eval: GM traffic and floors, fused kernel vs aclnn conv + LeakyReLU",
           rows, table, notes, args.out)


if __name__ == "__main__":
    main()
