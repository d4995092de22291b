"""A whole DCGAN discriminator training step: ascend_acts vs the same model in plain torch.

The discriminator is DCGAN's for 64x64 RGB images (Conv-LeakyReLU(0.2), then three
Conv-BatchNorm-LeakyReLU blocks, then a 4x4 Conv to one logit). One step = forward on a real and a fake
batch, BCE loss, backward, Adam step. Measured: median step time and the bytes autograd keeps between
forward and backward (unique storages, parameters included, as in tests/test_memory.py).

    python benchmarks/bench_dcgan_step.py            # batch 32, ndf 64, a minute or two
    python benchmarks/bench_dcgan_step.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

import ascend_acts
from common import RESULTS_DIR, markdown_table, median_ms, plot_bars, report, saved_bytes

SLOPE = 0.2


@dataclass
class StepRow:
    model: str
    batch: int
    ndf: int
    image_size: int
    median_ms: float
    saved_bytes: int


def torch_discriminator(ndf: int) -> nn.Module:
    def block(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(SLOPE)]

    return nn.Sequential(
        nn.Conv2d(3, ndf, 4, 2, 1), nn.LeakyReLU(SLOPE),
        *block(ndf, 2 * ndf), *block(2 * ndf, 4 * ndf), *block(4 * ndf, 8 * ndf),
        nn.Conv2d(8 * ndf, 1, 4, 1, 0), nn.Flatten(),
    )


MODELS = {
    "torch": torch_discriminator,
    "ascend_acts (convert: fused Conv+BN+LeakyReLU, LeakyReLU)": lambda ndf: ascend_acts.convert(torch_discriminator(ndf)),
}


def discriminator_step(model: nn.Module, optimizer, real: torch.Tensor, fake: torch.Tensor):
    bce = nn.functional.binary_cross_entropy_with_logits

    def forward() -> torch.Tensor:
        real_logits, fake_logits = model(real), model(fake)
        return bce(real_logits, torch.ones_like(real_logits)) + bce(fake_logits, torch.zeros_like(fake_logits))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        forward().backward()
        optimizer.step()

    return forward, step


def measure(name: str, batch: int, ndf: int, image_size: int, repeats: int) -> StepRow:
    torch.manual_seed(0)
    model = MODELS[name](ndf)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.randn(batch, 3, image_size, image_size).tanh()
    fake = torch.randn(batch, 3, image_size, image_size).tanh()
    forward, step = discriminator_step(model, optimizer, real, fake)
    return StepRow(name, batch, ndf, image_size, median_ms(step, repeats), saved_bytes(forward))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--ndf", type=int, default=64, help="discriminator width (DCGAN: 64)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="smoke run: batch 4, ndf 8, 2 repeats")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.ndf, args.repeats = 4, 8, 2
    image_size = 64

    rows = [measure(name, args.batch, args.ndf, image_size, args.repeats) for name in MODELS]
    baseline = rows[0]
    table = markdown_table(
        ["model", "step ms (x torch)", "saved for backward MiB (x torch)"],
        [[row.model, f"{row.median_ms:.1f} ({row.median_ms / baseline.median_ms:.2f}x)",
          f"{row.saved_bytes / 2**20:.1f} ({row.saved_bytes / baseline.saved_bytes:.2f}x)"] for row in rows])
    notes = [f"batch {args.batch} real + {args.batch} fake images, 3x{image_size}x{image_size}, ndf {args.ndf}, "
             f"float32, CPU reference backend; median of {args.repeats} steps after 2 warm-up steps",
             "saved bytes: unique storages packed by saved_tensors_hooks during the forward of both batches"]
    panels = {"step ms": [row.median_ms for row in rows],
              "saved for backward MiB": [row.saved_bytes / 2**20 for row in rows]}
    report("dcgan_step", "DCGAN discriminator training step", rows, table, notes, args.out,
           lambda path: plot_bars([row.model for row in rows], panels, "DCGAN discriminator step", path))


if __name__ == "__main__":
    main()
