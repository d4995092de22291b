"""A whole DCGAN training step, generator and discriminator: ascend_acts.convert vs the same torch model.

The networks are pytorch/examples' DCGAN for 64x64 RGB images: the generator ConvTranspose2d -> BatchNorm2d -> ReLU
x4 (latent 1x1 -> 4 -> 8 -> 16 -> 32), then ConvTranspose2d to 3x64x64 and Tanh; the discriminator Conv-LeakyReLU(0.2),
three Conv-BatchNorm-LeakyReLU blocks and a 4x4 Conv to one logit (BCE on logits). One step is one generator and one
discriminator update (gan_step.py: junyanz's order, Adam), the torch model and `ascend_acts.convert` of a copy side by
side in one run: step time, bytes kept for each backward, the peak memory of a step, and issue 25's targets (memory
<= 0.7x torch's, time <= 1.0x) as verdicts.

    python benchmarks/bench_dcgan_step.py            # batch 32, nz 100, ngf = ndf = 64, 15 rounds
    python benchmarks/bench_dcgan_step.py --quick    # smoke run
"""

from __future__ import annotations

import torch
from torch import nn

import gan_step

SLOPE = 0.2
IMAGE_SIZE = 64


def torch_generator(nz: int, ngf: int) -> nn.Module:
    def block(cin: int, cout: int, stride: int, padding: int) -> list[nn.Module]:
        return [nn.ConvTranspose2d(cin, cout, 4, stride, padding, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True)]

    return nn.Sequential(
        *block(nz, 8 * ngf, 1, 0), *block(8 * ngf, 4 * ngf, 2, 1), *block(4 * ngf, 2 * ngf, 2, 1),
        *block(2 * ngf, ngf, 2, 1), nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh(),
    )


def torch_discriminator(ndf: int) -> nn.Module:
    def block(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(SLOPE)]

    return nn.Sequential(
        nn.Conv2d(3, ndf, 4, 2, 1), nn.LeakyReLU(SLOPE),
        *block(ndf, 2 * ndf), *block(2 * ndf, 4 * ndf), *block(4 * ndf, 8 * ndf),
        nn.Conv2d(8 * ndf, 1, 4, 1, 0), nn.Flatten(),
    )


def add_options(parser) -> None:
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--nz", type=int, default=100, help="latent size (DCGAN: 100)")
    parser.add_argument("--ngf", type=int, default=64, help="generator width (DCGAN: 64)")
    parser.add_argument("--ndf", type=int, default=64, help="discriminator width (DCGAN: 64)")


def build_case(args):
    if args.quick:
        args.batch, args.nz, args.ngf, args.ndf = 4, 16, 8, 8
    torch.manual_seed(0)
    case = gan_step.GanCase(torch_generator(args.nz, args.ngf), torch_discriminator(args.ndf),
                            torch.randn(args.batch, args.nz, 1, 1),
                            torch.randn(args.batch, 3, IMAGE_SIZE, IMAGE_SIZE).tanh(), gan_step.bce_logits_loss)
    config = f"batch {args.batch}, {IMAGE_SIZE}x{IMAGE_SIZE}, nz {args.nz}, ngf {args.ngf}, ndf {args.ndf}"
    notes = [f"{config}, float32; latents N(0, 1), real images tanh(N(0, 1)); BatchNorm2d with torch's defaults "
             "(training: batch statistics, running statistics updated)"]
    return config, case, notes


def main(argv=None) -> None:
    gan_step.run(argv, __doc__, "smoke run: batch 4, nz 16, ngf = ndf = 8, 2 repeats", "dcgan_step",
                 "DCGAN step (generator + discriminator, batch norm): converted vs torch", add_options, build_case,
                 repeats=15)


if __name__ == "__main__":
    main()
