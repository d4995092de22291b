"""A whole DCGAN discriminator training step: ascend_acts vs the same model in plain torch.

The discriminator is DCGAN's for 64x64 RGB images (Conv-LeakyReLU(0.2), then three
Conv-BatchNorm-LeakyReLU blocks, then a 4x4 Conv to one logit). One step = forward on a real and a fake
batch, BCE loss, backward, Adam step. Measured: the step time (the models take turns, round robin, so a
change of load on a shared machine hits both alike; median ms of each, and the median of the per-round
ratios) and the bytes autograd keeps between forward and backward (unique storages, parameters included,
as in tests/test_memory.py).

    python benchmarks/bench_dcgan_step.py            # batch 32, ndf 64, 15 rounds: a minute or two
    python benchmarks/bench_dcgan_step.py --quick    # smoke run
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

import ascend_acts
from common import (
    comparison_parser,
    cpu_usage,
    markdown_table,
    other_processes_note,
    parse,
    plot_bars,
    report,
    saved_bytes,
    side_by_side,
)

SLOPE = 0.2


@dataclass
class StepRow:
    model: str
    batch: int
    ndf: int
    image_size: int
    median_ms: float
    ratio: float  # median over rounds of this step's time / torch's step time in the same round
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
    "ascend_acts (convert: fused Conv+BN+LeakyReLU, LeakyReLU)":
        lambda ndf: ascend_acts.convert(torch_discriminator(ndf)),
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


def prepare(name: str, batch: int, ndf: int, image_size: int):
    """(forward, step) of one model on its own copy of the same batches."""
    torch.manual_seed(0)
    model = MODELS[name](ndf)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-4, betas=(0.5, 0.999))
    real = torch.randn(batch, 3, image_size, image_size).tanh()
    fake = torch.randn(batch, 3, image_size, image_size).tanh()
    return discriminator_step(model, optimizer, real, fake)


def measure(batch: int, ndf: int, image_size: int, repeats: int) -> list[StepRow]:
    prepared = {name: prepare(name, batch, ndf, image_size) for name in MODELS}
    kept = {name: saved_bytes(forward) for name, (forward, _) in prepared.items()}
    timed = side_by_side({name: {"step": step} for name, (_, step) in prepared.items()}, ["step"], repeats, "torch")
    return [StepRow(name, batch, ndf, image_size, milliseconds, ratio, kept[name])
            for _, name, milliseconds, ratio in timed]


def main(argv=None) -> None:
    parser = comparison_parser(__doc__, "smoke run: batch 4, ndf 8, 2 repeats", repeats=15)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--ndf", type=int, default=64, help="discriminator width (DCGAN: 64)")
    args = parse(parser, argv)
    if args.quick:
        args.batch, args.ndf, args.repeats = 4, 8, 2
    image_size = 64

    usage_before = cpu_usage()
    rows = measure(args.batch, args.ndf, image_size, args.repeats)
    load = other_processes_note(usage_before, cpu_usage())
    baseline = rows[0]
    table = markdown_table(
        ["model", "step ms, median", "x torch (median of per-round ratios)", "saved for backward MiB (x torch)"],
        [[row.model, f"{row.median_ms:.1f}", f"{row.ratio:.2f}x",
          f"{row.saved_bytes / 2**20:.1f} ({row.saved_bytes / baseline.saved_bytes:.2f}x)"] for row in rows])
    notes = [f"batch {args.batch} real + {args.batch} fake images, 3x{image_size}x{image_size}, ndf {args.ndf}, "
             f"float32, default CPU backend (reference: torch's convolution, NumPy BatchNorm+LeakyReLU); "
             f"{args.repeats} rounds after 2 warm-up steps each, the models taking turns within a round",
             "saved bytes: unique storages packed by saved_tensors_hooks during the forward of both batches", load]
    panels = {"step ms": [row.median_ms for row in rows],
              "saved for backward MiB": [row.saved_bytes / 2**20 for row in rows]}
    report("dcgan_step", "DCGAN discriminator training step", rows, table, notes, args.out,
           lambda path: plot_bars([row.model for row in rows], panels, "DCGAN discriminator step", path))


if __name__ == "__main__":
    main()
