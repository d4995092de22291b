"""A StyleGAN2-style discriminator with the R1 penalty, on scikit-learn's bundled 8x8 digits (no download),
upscaled to 16x16 as in examples/dcgan.py, against a simple generator.

What is StyleGAN2's here (the paper, Karras et al. 2020, and rosinality/stylegan2-pytorch): equalised
learning rate (weights drawn from N(0, 1) and scaled by 1/sqrt(fan_in) at every call) in every convolution
and linear layer, which carry no bias of their own: the bias is in the activation that follows,
FusedLeakyReLU (leaky_relu(x + bias, 0.2) * sqrt(2)); residual discriminator blocks ((main + skip) / sqrt(2),
2x downsampling); the non-saturating logistic loss (softplus); the R1 penalty gamma/2 * E|grad_x D(x)|^2 on
real images, computed with `torch.autograd.grad(..., create_graph=True)`, so the parameter update
differentiates through the gradient of every FusedLeakyReLU (the double backward of our op), with lazy
regularisation (every --r1-every steps, scaled by that interval, Adam's lr and betas adjusted as in the
paper); Adam with betas (0, 0.99). Not StyleGAN2's: the generator is a plain upsampling conv net (no
mapping network, style modulation, noise inputs or path-length penalty), the discriminator has no
minibatch-standard-deviation layer, downsampling is a 2x2 average pool instead of a blur + strided conv,
and there is no EMA of the generator.

--impl ascend uses ascend_acts.nn.FusedLeakyReLU, --impl torch a plain torch composite module with the
same parameter (`bias`) and state_dict: from the same --seed both give the same losses (within float32
rounding), which tests/test_examples.py checks. Writes stylegan2_r1.png (samples, losses, R1), losses.csv
and checkpoint.pt into --out.

    python examples/stylegan2_r1.py                        # CPU, reference backend, one thread, ~1-2 minutes
    python examples/stylegan2_r1.py --impl torch           # the same with the torch composite activation
    python examples/stylegan2_r1.py --backend sim --steps 20   # our AscendC kernels in the emulator (slow)
    python examples/stylegan2_r1.py --device npu           # Ascend NPU (torch_npu + custom op package)
    python examples/stylegan2_r1.py --quick                # smoke run: a few steps
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import ascend_acts
from dcgan import load_digits_tensor, pick_device

LATENT_SIZE = 32
SLOPE, SCALE = 0.2, 2**0.5


class TorchFusedLeakyReLU(nn.Module):
    """torch's composite of FusedLeakyReLU (rosinality's CPU path): the same parameter and state_dict."""

    def __init__(self, channel: int, bias: bool = True, negative_slope: float = SLOPE, scale: float = SCALE):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channel)) if bias else None
        self.negative_slope, self.scale = negative_slope, scale

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if self.bias is not None:
            input = input + self.bias.view(1, -1, *[1] * (input.ndim - 2))
        return F.leaky_relu(input, self.negative_slope) * self.scale


ACTIVATIONS = {"ascend": lambda: ascend_acts.nn.FusedLeakyReLU, "torch": lambda: TorchFusedLeakyReLU}


class EqualConv2d(nn.Module):
    """Equalised-lr convolution without bias (the bias lives in the FusedLeakyReLU after it)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, kernel_size, kernel_size))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.scale = 1 / math.sqrt(in_channels * kernel_size**2)
        self.padding = kernel_size // 2

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.conv2d(input, self.weight * self.scale, self.bias, padding=self.padding)


class EqualLinear(nn.Module):
    """Equalised-lr linear layer; bias only where no activation follows (the last layer)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None
        self.scale = 1 / math.sqrt(in_features)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.linear(input, self.weight * self.scale, self.bias)


def conv_act(activation, in_channels: int, out_channels: int, kernel_size: int = 3) -> nn.Sequential:
    return nn.Sequential(EqualConv2d(in_channels, out_channels, kernel_size), activation(out_channels))


class ResBlock(nn.Module):
    """StyleGAN2's residual discriminator block: two conv + FusedLeakyReLU, 2x down; skip: 1x1 conv, 2x down."""

    def __init__(self, activation, in_channels: int, out_channels: int):
        super().__init__()
        self.conv1 = conv_act(activation, in_channels, in_channels)
        self.conv2 = conv_act(activation, in_channels, out_channels)
        self.skip = EqualConv2d(in_channels, out_channels, 1)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        out = self.conv2(F.avg_pool2d(self.conv1(input), 2))
        skip = self.skip(F.avg_pool2d(input, 2))
        return (out + skip) / math.sqrt(2)


class Discriminator(nn.Module):
    """16x16 image -> fromRGB -> 8x8 -> 4x4 -> conv -> linear + FusedLeakyReLU -> linear -> one logit."""

    def __init__(self, activation, channels: int):
        super().__init__()
        wide = 2 * channels
        self.body = nn.Sequential(
            conv_act(activation, 1, channels, 1),  # fromRGB
            ResBlock(activation, channels, wide),  # 16 -> 8
            ResBlock(activation, wide, wide),  # 8 -> 4
            conv_act(activation, wide, wide),
            nn.Flatten(),
            EqualLinear(wide * 4 * 4, wide), activation(wide),
            EqualLinear(wide, 1, bias=True),
        )

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.body(image)


class Generator(nn.Module):
    """latent -> linear + FusedLeakyReLU -> 4x4 -> (2x nearest up, conv + FusedLeakyReLU) x 2 -> toRGB 1x1."""

    def __init__(self, activation, channels: int):
        super().__init__()
        self.wide = 2 * channels
        self.input = nn.Sequential(EqualLinear(LATENT_SIZE, self.wide * 4 * 4), activation(self.wide * 4 * 4))
        self.body = nn.Sequential(
            nn.Upsample(scale_factor=2), conv_act(activation, self.wide, channels),  # 8x8
            nn.Upsample(scale_factor=2), conv_act(activation, channels, channels),  # 16x16
            EqualConv2d(channels, 1, 1, bias=True),  # toRGB: linear output, no tanh (as StyleGAN2)
        )

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return self.body(self.input(latent).view(-1, self.wide, 4, 4))


def r1_penalty(discriminator: nn.Module, real: torch.Tensor) -> torch.Tensor:
    """E|grad_x D(x)|^2 over the real batch, kept differentiable for the discriminator's update."""
    real = real.detach().requires_grad_()
    (grad,) = torch.autograd.grad(discriminator(real).sum(), real, create_graph=True)
    return grad.pow(2).flatten(1).sum(1).mean()


def sample_image(images: torch.Tensor, columns: int = 8, gap: int = 2) -> torch.Tensor:
    """(N, 1, H, W) -> one mosaic, the images `gap` NaN pixels apart (drawn in the colormap's "bad" colour)."""
    rows = -(-len(images) // columns)
    size = images.shape[-1]
    step = size + gap
    canvas = torch.full((rows * step - gap, columns * step - gap), math.nan)
    for index, image in enumerate(images.detach().cpu()):
        row, column = divmod(index, columns)
        canvas[row * step:row * step + size, column * step:column * step + size] = image[0]
    return canvas


def save_figure(samples: torch.Tensor, history: dict[str, list[float]], r1_every: int, title: str,
                path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_samples, ax_loss, ax_r1) = plt.subplots(1, 3, figsize=(13, 4.2),
                                                     gridspec_kw={"width_ratios": [1, 1.3, 1.3]})
    colormap = matplotlib.colormaps["gray_r"].with_extremes(bad="white")
    ax_samples.imshow(sample_image(samples), cmap=colormap, vmin=-1, vmax=1)
    ax_samples.set(title="samples (fixed latents)")
    ax_samples.axis("off")
    ax_loss.plot(history["d_loss"], lw=0.7, label="discriminator")
    ax_loss.plot(history["g_loss"], lw=0.7, label="generator")
    ax_loss.set(title="logistic losses (softplus)", xlabel="step")
    ax_loss.legend()
    steps = [s for s, value in enumerate(history["r1"]) if not math.isnan(value)]
    ax_r1.plot(steps, [history["r1"][s] for s in steps], "-", lw=0.8)
    ax_r1.set(title=f"R1: E|grad D(real)|^2 (every {r1_every} steps)", xlabel="step", yscale="log")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def train(args) -> dict[str, list[float]]:
    from tqdm.auto import tqdm

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = pick_device(args.device, args.backend)
    activation = ACTIVATIONS[args.impl]()
    data = load_digits_tensor().to(device)
    generator = Generator(activation, args.channels).to(device)
    discriminator = Discriminator(activation, args.channels).to(device)
    # lazy regularisation: the R1 step's share of the updates is folded into Adam's lr and betas (paper, App. B)
    ratio = args.r1_every / (args.r1_every + 1)
    opt_g = torch.optim.Adam(generator.parameters(), lr=args.lr, betas=(0.0, 0.99))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=args.lr * ratio, betas=(0.0, 0.99**ratio))
    order_generator = torch.Generator().manual_seed(args.seed)
    fixed_latents = torch.randn(64, LATENT_SIZE, device=device)
    steps_per_epoch = len(data) // args.batch
    args.out.mkdir(parents=True, exist_ok=True)
    history = {"d_loss": [], "g_loss": [], "r1": []}
    start = time.perf_counter()
    progress = tqdm(range(args.steps), desc=f"StyleGAN2 R1 ({args.impl}, {args.device}/{args.backend})",
                    disable=args.quiet)
    for step in progress:
        if step % steps_per_epoch == 0:
            order = torch.randperm(len(data), generator=order_generator).to(device)
        real = data[order[(step % steps_per_epoch) * args.batch:][: args.batch]]

        d_loss, g_loss, r1 = gan_step(step, args, real, generator, discriminator, opt_g, opt_d, LATENT_SIZE,
                                      lambda d, x: (r1_penalty(d, x),) * 2)
        record_step(history, progress, d_loss, g_loss, r1)

    title = (f"StyleGAN2-style D + R1 (gamma {args.r1_gamma:g}), {args.steps} steps, FusedLeakyReLU: {args.impl}"
             f" ({args.device}/{args.backend})")
    write_outputs(args, title, "stylegan2_r1.png", history, generator, discriminator, opt_g, opt_d, fixed_latents,
                  start)
    return history


def gan_step(step: int, args, real: torch.Tensor, generator: nn.Module, discriminator: nn.Module, opt_g, opt_d,
             latent_size: int, r1_terms) -> tuple[torch.Tensor, torch.Tensor, float]:
    """One step of the non-saturating logistic GAN with lazy R1 (every args.r1_every steps, scaled by it):
    `r1_terms(discriminator, real)` gives (what to back-propagate, the penalty to record)."""
    fake = generator(torch.randn(len(real), latent_size, device=real.device))
    d_loss = F.softplus(discriminator(fake.detach())).mean() + F.softplus(-discriminator(real)).mean()
    opt_d.zero_grad(set_to_none=True)
    d_loss.backward()
    opt_d.step()

    r1 = math.nan
    if step % args.r1_every == 0:
        loss, penalty = r1_terms(discriminator, real)
        opt_d.zero_grad(set_to_none=True)
        (args.r1_gamma / 2 * loss * args.r1_every).backward()
        opt_d.step()
        r1 = penalty.item()

    g_loss = F.softplus(-discriminator(generator(torch.randn(len(real), latent_size, device=real.device)))).mean()
    opt_g.zero_grad(set_to_none=True)
    g_loss.backward()
    opt_g.step()
    return d_loss, g_loss, r1


def record_step(history: dict[str, list[float]], progress, d_loss: torch.Tensor, g_loss: torch.Tensor,
                r1: float) -> None:
    history["d_loss"].append(d_loss.item())
    history["g_loss"].append(g_loss.item())
    history["r1"].append(r1)
    progress.set_postfix(d=f"{d_loss.item():.3f}", g=f"{g_loss.item():.3f}",
                         r1=f"{r1:.3g}" if not math.isnan(r1) else "-")


def write_outputs(args, title: str, figure: str, history: dict[str, list[float]], generator: nn.Module,
                  discriminator: nn.Module, opt_g, opt_d, fixed_latents: torch.Tensor, start: float) -> None:
    """The figure (samples of `fixed_latents`, the losses), losses.csv and checkpoint.pt into args.out."""
    with torch.no_grad():
        samples = generator(fixed_latents)
    save_figure(samples, history, args.r1_every, title, args.out / figure)
    with open(args.out / "losses.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["step", *history])
        writer.writerows([step, *values] for step, values in enumerate(zip(*history.values())))
    torch.save({"generator": generator.state_dict(), "discriminator": discriminator.state_dict(),
                "opt_g": opt_g.state_dict(), "opt_d": opt_d.state_dict(), "steps": args.steps,
                "args": vars(args)}, args.out / "checkpoint.pt")
    print(f"{args.steps} steps in {time.perf_counter() - start:.1f} s; outputs in {args.out.resolve()}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impl", choices=sorted(ACTIVATIONS), default="ascend",
                        help="FusedLeakyReLU: ascend_acts.nn.FusedLeakyReLU or torch's composite")
    parser.add_argument("--device", choices=["cpu", "npu"], default="cpu")
    parser.add_argument("--backend", choices=["reference", "sim", "torch"], default="reference",
                        help="CPU kernels of --impl ascend: NumPy reference or the AscendC kernels in the emulator")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--channels", type=int, default=16, help="discriminator width at 16x16 (2x below)")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--r1-gamma", type=float, default=1.0,
                        help="R1 weight gamma (StyleGAN2: 10 at 1024x1024; 1 trained steadier than 0.1 here)")
    parser.add_argument("--r1-every", type=int, default=4, help="lazy regularisation interval (steps)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch.set_num_threads; 1 by default: these small layers gain little from more, and "
                             "on a busy machine a second OpenMP thread slowed this run several times over")
    parser.add_argument("--out", type=Path, default=Path("outputs/stylegan2_r1"))
    parser.add_argument("--quick", action="store_true", help="smoke run: 5 steps")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps = 5
    for name in ("steps", "batch", "channels", "r1_every", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.r1_gamma < 0:
        parser.error(f"--r1-gamma must be >= 0, got {args.r1_gamma}")
    train(args)


if __name__ == "__main__":
    main()
