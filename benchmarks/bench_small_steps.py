"""Whole GAN training steps at small sizes on the default CPU backend: ascend_acts.convert vs the same torch models,
side by side in one run, against issue 25's target (step time <= 1.0x torch's).

At 32-64 px and small batches the per-call cost of the fused ops (the op layer's Python and the NumPy passes of the
reference backend) weighs most against torch's C++ kernels. The cases: pytorch/examples' DCGAN (generator
ConvTranspose2d -> BatchNorm2d -> ReLU blocks, discriminator Conv2d -> BatchNorm2d -> LeakyReLU(0.2) blocks, as
tests/gan_models.py's Discriminator) at 32 and 64 px, batch 4 and 16; CycleGAN's ResNet generator and PatchGAN
(instance norm, tests/gan_models.py's resnet_generator and patch_discriminator) at 64 px.

One step is one generator and one discriminator Adam update (lr 2e-4, betas (0.5, 0.999)): fake = G(source); the G
step with D frozen: loss(D(fake), real), backward, Adam; the D step: (loss(D(real), real) + loss(D(fake.detach()),
fake)) / 2, backward, Adam. The torch and converted trainers take turns within each round (common.interleaved_ms);
the ratio is the median over rounds of converted / torch in the same round. glibc's malloc is left as a user's
program has it, as in the 256 px step scripts, which measure their peak memory in a child process.

    python benchmarks/bench_small_steps.py            # every case, 15 rounds (~3 min on an idle machine)
    python benchmarks/bench_small_steps.py --quick    # smoke run: narrow networks, 2 rounds
"""

from __future__ import annotations

import copy
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import nn

import ascend_acts
from common import (
    comparison_parser,
    cpu_usage,
    interleaved_ms,
    markdown_table,
    median_ratio,
    other_processes_note,
    output_dir,
    parse,
    plot_bars,
    report,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import gan_models  # noqa: E402  (the project's GAN models, shared with the tests)

TIME_TARGET = 1.0  # issue 25: CPU step time at most 1.0x torch's on the default backend
NZ = 100


def dcgan_generator(size: int, ngf: int) -> nn.Sequential:
    """pytorch/examples' netG for `size` x `size` images (32: three ConvTranspose2d -> BatchNorm2d -> ReLU blocks, 64:
    four), then ConvTranspose2d to 3 channels and Tanh."""
    blocks = {32: 3, 64: 4}[size]
    width = ngf * 2 ** (blocks - 1)
    layers = [nn.ConvTranspose2d(NZ, width, 4, 1, 0, bias=False), nn.BatchNorm2d(width), nn.ReLU(True)]
    for _ in range(blocks - 1):
        layers += [nn.ConvTranspose2d(width, width // 2, 4, 2, 1, bias=False), nn.BatchNorm2d(width // 2),
                   nn.ReLU(True)]
        width //= 2
    layers += [nn.ConvTranspose2d(width, 3, 4, 2, 1, bias=False), nn.Tanh()]
    return nn.Sequential(*layers)


def dcgan_discriminator(size: int, ndf: int) -> nn.Module:
    """netD: tests/gan_models.py's Discriminator at 64 px; at 32 px the same with one Conv -> BatchNorm -> LeakyReLU
    block fewer."""
    if size == 64:
        return gan_models.Discriminator(ndf=ndf)
    return nn.Sequential(
        nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 4), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 4, 1, 4, 1, 0, bias=False), nn.Flatten(0))


def bce_logits(prediction: torch.Tensor, real: bool) -> torch.Tensor:
    return nn.functional.binary_cross_entropy_with_logits(prediction, torch.full_like(prediction, float(real)))


def lsgan(prediction: torch.Tensor, real: bool) -> torch.Tensor:
    return nn.functional.mse_loss(prediction, torch.full_like(prediction, float(real)))


@dataclass
class Case:
    name: str
    generator: nn.Module
    discriminator: nn.Module
    source: torch.Tensor
    real: torch.Tensor
    loss: Callable[[torch.Tensor, bool], torch.Tensor]


def cases(args) -> list[Case]:
    torch.manual_seed(0)
    found = []
    for size in (32, 64):
        for batch in args.batches:
            generator, discriminator = dcgan_generator(size, args.width), dcgan_discriminator(size, args.width)
            for model in (generator, discriminator):
                model.apply(gan_models.weights_init)
            found.append(Case(f"DCGAN {size} px, batch {batch}", generator, discriminator,
                              torch.randn(batch, NZ, 1, 1), torch.rand(batch, 3, size, size) * 2 - 1, bce_logits))
    batch = args.batches[0]
    found.append(Case(f"CycleGAN 64 px (ResNet G, {args.blocks} blocks; PatchGAN D), batch {batch}",
                      gan_models.resnet_generator("instance", ngf=args.cycle_width, blocks=args.blocks),
                      gan_models.patch_discriminator("instance", ndf=args.cycle_width),
                      torch.rand(batch, 3, 64, 64) * 2 - 1, torch.rand(batch, 3, 64, 64) * 2 - 1, lsgan))
    return found


class Trainer:
    """Copies of a case's G and D (converted or not), Adam for each, and the step."""

    def __init__(self, case: Case, converted: bool):
        self.case = case
        self.networks = [copy.deepcopy(m) for m in (case.generator, case.discriminator)]
        if converted:
            self.networks = [ascend_acts.convert(m) for m in self.networks]
        self.optimizers = [torch.optim.Adam(m.parameters(), lr=2e-4, betas=(0.5, 0.999)) for m in self.networks]

    def step(self) -> None:
        (generator, discriminator), (g_optimizer, d_optimizer), loss = self.networks, self.optimizers, self.case.loss
        g_optimizer.zero_grad(set_to_none=True)
        fake = generator(self.case.source)
        discriminator.requires_grad_(False)
        loss(discriminator(fake), True).backward()
        discriminator.requires_grad_(True)
        g_optimizer.step()
        d_optimizer.zero_grad(set_to_none=True)
        ((loss(discriminator(self.case.real), True) + loss(discriminator(fake.detach()), False)) / 2).backward()
        d_optimizer.step()


@dataclass
class StepRow:
    case: str
    torch_ms: float
    converted_ms: float
    ratio: float  # median over rounds of converted / torch in the same round
    ratio_low: float
    ratio_high: float


def measure(case: Case, repeats: int) -> StepRow:
    trainers = {"torch": Trainer(case, converted=False), "converted": Trainer(case, converted=True)}
    times = interleaved_ms({name: trainer.step for name, trainer in trainers.items()}, repeats)
    ratios = [c / t for c, t in zip(times["converted"], times["torch"])]
    return StepRow(case.name, statistics.median(times["torch"]), statistics.median(times["converted"]),
                   median_ratio(times["converted"], times["torch"]), min(ratios), max(ratios))


def verdict(row: StepRow) -> str:
    met = row.ratio <= TIME_TARGET
    steady = (row.ratio_high <= TIME_TARGET) if met else (row.ratio_low > TIME_TARGET)
    return (f"{row.case}: {row.ratio:.2f}x torch's step time: target <= {TIME_TARGET}x "
            f"{'met' if met else 'NOT met'} (per-round ratios {row.ratio_low:.2f}-{row.ratio_high:.2f}: "
            + ("the same verdict in every round)" if steady else "rounds on both sides of the target)"))


def main(argv=None) -> None:
    parser = comparison_parser(__doc__, "smoke run: narrow networks (width 8), batch 2, 2 rounds", repeats=15,
                               out_default=None)
    parser.add_argument("--batches", type=int, nargs="+", default=[4, 16], help="DCGAN batch sizes (default 4 16)")
    parser.add_argument("--width", type=int, default=64, help="DCGAN ngf = ndf (default 64, the example's)")
    parser.add_argument("--cycle-width", type=int, default=32, help="CycleGAN ngf = ndf (default 32)")
    parser.add_argument("--blocks", type=int, default=6, help="residual blocks of the ResNet generator (default 6)")
    args = parse(parser, argv)
    if args.quick:
        args.repeats, args.batches, args.width, args.cycle_width, args.blocks = 2, [2], 8, 8, 2
    backend = ascend_acts.backends.current_backend_name()
    usage_before = cpu_usage()
    rows = [measure(case, args.repeats) for case in cases(args)]
    load = other_processes_note(usage_before, cpu_usage())
    table = markdown_table(
        ["case", "torch step ms", "converted step ms", "x torch (median of per-round ratios)", "per-round range"],
        [[r.case, f"{r.torch_ms:.1f}", f"{r.converted_ms:.1f}", f"{r.ratio:.2f}x",
          f"{r.ratio_low:.2f}-{r.ratio_high:.2f}"] for r in rows])
    met = sum(r.ratio <= TIME_TARGET for r in rows)
    notes = [
        f"converted: ascend_acts.convert of deep copies (same initial weights), on the `{backend}` backend (the "
        "default unless ASCEND_ACTS_BACKEND says otherwise); float32",
        f"DCGAN ngf = ndf = {args.width}, nz {NZ}; CycleGAN ngf = ndf = {args.cycle_width}, {args.blocks} residual "
        f"blocks, instance norm; {args.repeats} rounds after 2 warm-up steps each",
        *[verdict(r) for r in rows],
        f"verdict: {met} of {len(rows)} cases at or under {TIME_TARGET}x torch's step time",
        load if load else "CPU usage of other processes: not measurable here",
    ]
    report("small_steps", f"GAN steps at 32-64 px: converted ({backend}) vs torch", rows, table, notes,
           output_dir(args), plot=lambda path: plot_bars(
               [r.case for r in rows], {"torch step ms": [r.torch_ms for r in rows],
                                        "converted step ms": [r.converted_ms for r in rows],
                                        "converted / torch": [r.ratio for r in rows]},
               "GAN steps at 32-64 px: converted vs torch", path))


if __name__ == "__main__":
    main()
