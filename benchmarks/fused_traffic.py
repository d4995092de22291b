"""GM traffic of the fused Conv2d + BatchNorm2d + LeakyReLU eval kernel vs the unfused CANN sequence.

    python benchmarks/fused_traffic.py            # DCGAN discriminator layers, batch 64, float16
    python benchmarks/fused_traffic.py --quick    # smoke run: two small layers

Fused: the AscendC kernel op_kernel/conv_bn_leaky_relu_eval.cpp run on the emulator, which counts the
bytes it moves per GM buffer. The emulator runs one image; traffic is per image (every work item is
one image's column tile), so the batch's is that times the batch.
Unfused (modelled, the ideal of each op): Conv2D reads x and W once and writes y; BatchNorm (eval)
reads y and writes z; LeakyRelu reads z and writes out.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import torch

from common import RESULTS_DIR, markdown_table, report

HBM_BYTES_PER_S = 1.6e12  # 910B, commonly quoted; no official figure (treat as +-30%)
# (name, C_in, H=W, C_out): the DCGAN discriminator's conv layers (k4 s2 p1) that carry BN + LeakyReLU
LAYERS = [("D2 64->128 @32", 64, 32, 128), ("D3 128->256 @16", 128, 16, 256), ("D4 256->512 @8", 256, 8, 512)]
QUICK_LAYERS = [("tiny 8->16 @16", 8, 16, 16), ("small 16->32 @8", 16, 8, 32)]


@dataclass
class TrafficRow:
    layer: str
    batch: int
    fused_hbm_bytes: int    # x + out + first read of W', b'
    fused_l2_bytes: int     # W' re-reads per work item + im2col workspace, modelled L2-resident
    unfused_bytes: int
    ratio: float            # unfused / fused HBM
    fused_us: float         # modelled 910B time of the HBM traffic
    unfused_us: float


def measure_layer(name: str, cin: int, size: int, cout: int, batch: int) -> TrafficRow:
    from ascend_acts.backends import sim

    dtype = torch.float16
    element = torch.finfo(dtype).bits // 8
    x = torch.randn(1, cin, size, size).to(dtype)
    weight = (torch.randn(cout, cin, 4, 4) / (cin * 16) ** 0.5).to(dtype)
    bias = torch.randn(cout)
    out = sim.conv_bn_leaky_relu_eval(x, weight, bias, (2, 2), (1, 1, 1, 1), (1, 1), 0.2)
    launch = sim.last_launch()
    gm_in, gm_out = launch.buffer_bytes_in, launch.buffer_bytes_out
    assert gm_out["y"] == out.numel() * element, "the fused kernel must write its output once"
    weight_bytes, bias_bytes = weight.numel() * element, bias.numel() * 4
    per_image_hbm = gm_in["x"] + gm_out["y"]
    per_image_l2 = (gm_in["weight"] - weight_bytes + gm_in["bias"] - bias_bytes + gm_in["workspace"]
                    + gm_out["workspace"])
    fused_hbm = batch * per_image_hbm + weight_bytes + bias_bytes
    fused_l2 = batch * per_image_l2
    y = batch * out.numel() * element
    unfused = batch * x.numel() * element + weight_bytes + y + (y + y) + (y + y) + 4 * cout * 4
    return TrafficRow(name, batch, fused_hbm, fused_l2, unfused, unfused / fused_hbm,
                      1e6 * fused_hbm / HBM_BYTES_PER_S, 1e6 * unfused / HBM_BYTES_PER_S)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="two small layers")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    rows = [measure_layer(*layer, args.batch) for layer in (QUICK_LAYERS if args.quick else LAYERS)]
    table = markdown_table(
        ["layer", "batch", "fused HBM MB", "fused L2 MB (modelled)", "unfused MB", "unfused / fused",
         "fused us @1.6 TB/s", "unfused us @1.6 TB/s"],
        [[r.layer, r.batch, f"{r.fused_hbm_bytes / 1e6:.2f}", f"{r.fused_l2_bytes / 1e6:.2f}",
          f"{r.unfused_bytes / 1e6:.2f}", f"{r.ratio:.2f}x", f"{r.fused_us:.1f}", f"{r.unfused_us:.1f}"]
         for r in rows])
    notes = [
        "float16 activations and weights, k4 s2 p1; bytes counted by the emulator per GM buffer (fused) or "
        "modelled (unfused: every op reads its inputs once and writes its output once, no format changes)",
        "fused HBM = x (incl. the re-read halo rows of neighbouring column tiles) + out, once per batch: "
        "W' and b'",
        "fused L2 = W' and b' re-read per work item plus the im2col slab written and read per work item: "
        "assumed L2-resident (a slab is K x columnTile, at most a few hundred KiB per vector core)",
        "modelled time = HBM bytes / 1.6 TB/s (910B, commonly quoted, +-30%); compute, launch and L2 "
        "time ignored: a lower bound for a memory-bound layer",
    ]
    report("fused_traffic", "Conv+BN+LeakyReLU eval: fused kernel vs unfused CANN sequence, GM traffic", rows,
           table, notes, args.out)


if __name__ == "__main__":
    main()
