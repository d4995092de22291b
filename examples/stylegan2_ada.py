"""A small StyleGAN2-ADA-style GAN whose every bias and activation goes through NVlabs' `bias_act` interface,
on scikit-learn's bundled 8x8 digits (no download), upscaled to 16x16 as in examples/dcgan.py.

Written from the architecture the StyleGAN2 / StyleGAN2-ADA papers (Karras et al. 2020) and the documented
interface of NVlabs' `torch_utils.ops.bias_act` describe (no NVlabs code is used):

- mapping network: z normalised to unit second moment, then --mapping-layers fully connected layers with
  equalised learning rate (weights N(0, 1) / lr_multiplier, scaled by lr_multiplier / sqrt(fan_in) at every
  call; bias times lr_multiplier), lr_multiplier 0.01; the hidden layers end in `bias_act(x, b, act='lrelu')`,
  the last in `bias_act(x, b, act='linear')` (NVlabs' mapping uses lrelu throughout: here w stays unbounded below);
- synthesis network: a learned constant at 8x8, one style-modulated 3x3 conv (weights modulated by an affine
  map of w, then demodulated) and ToRGB; then 2x (bilinear) upsampling, two modulated convs at 16x16 and ToRGB,
  the RGB outputs summed through the resolutions (StyleGAN2's skip generator). Each conv ends in
  `bias_act(x, b, act='lrelu', gain=sqrt(2) * gain, clamp=conv_clamp * gain)` with conv_clamp = 256 (gain 1 in the
  generator), ToRGB in `bias_act(x, b, act='linear', clamp=conv_clamp)`;
- discriminator: FromRGB (1x1 conv + lrelu), two residual blocks (3x3 conv, 3x3 conv then 2x2 average-pool down,
  skip 1x1 conv without bias; the residual branch's last bias_act and the skip scaled by sqrt(0.5) through
  `gain`, its clamp by the same factor), a 3x3 conv at 4x4, a fully connected lrelu layer and a linear output,
  every activation `bias_act` with conv_clamp 256;
- the non-saturating logistic loss (softplus), the lazy R1 penalty gamma/2 * E|grad_x D(x)|^2 on real images
  (`torch.autograd.grad(..., create_graph=True)`: the parameter update differentiates through bias_act's
  gradient) every --r1-every steps, scaled by that interval, and Adam with betas (0, 0.99) (the discriminator's
  lr and beta2 adjusted for the lazy regularisation as in the paper).

Not StyleGAN2-ADA's: no adaptive augmentation (ADA itself), noise inputs, style mixing, path-length penalty,
minibatch-stddev layer, generator EMA or truncation; up/downsampling is bilinear / average pooling instead of
the FIR filters (upfirdn2d); the networks are tiny.

--impl ascend uses `ascend_acts.compat.nvlabs.bias_act` (ascend_acts.bias_act: linear, relu and lrelu on our fused
bias + activation op, the clamp inside its kernels); --impl composite NVlabs' reference semantics written here as a
plain torch composite (x + b.view(...), the activation, * gain, clamp). Both have the same interface (`bias_act`,
`activation_funcs`), so the networks and their parameters are identical: from the same --seed both give the same
losses (within float32 rounding), which tests/test_examples.py checks. Writes stylegan2_ada.png (samples, losses, R1),
losses.csv and checkpoint.pt into --out.

    python examples/stylegan2_ada.py                           # CPU, reference backend, one thread, ~1 min
    python examples/stylegan2_ada.py --impl composite          # the same with NVlabs' reference composite
    python examples/stylegan2_ada.py --backend sim --steps 10  # our AscendC kernels in the emulator (slow)
    python examples/stylegan2_ada.py --device npu              # Ascend NPU (torch_npu + custom op package)
    python examples/stylegan2_ada.py --quick                   # smoke run: a few steps
"""

from __future__ import annotations

import argparse
import math
import time
import types
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ascend_acts.compat.nvlabs import bias_act as ascend_bias_act
from dcgan import load_digits_tensor, pick_device
from stylegan2_r1 import gan_step, record_step, write_outputs

CONV_CLAMP = 256.0  # StyleGAN2-ADA's conv_clamp (it clamps the activations of every conv layer)


# --- NVlabs' bias_act semantics as a plain torch composite (--impl composite) ---------------------------------
def _composite_bias_act(x, b=None, dim=1, act="linear", alpha=None, gain=None, clamp=None, impl="ref"):
    """act(x + b along dim) * gain, clamped to [-clamp, clamp]: NVlabs' documented reference semantics."""
    spec = composite_bias_act.activation_funcs[act]
    alpha = spec.def_alpha if alpha is None else float(alpha)
    gain = spec.def_gain if gain is None else float(gain)
    if b is not None:
        x = x + b.reshape([-1 if i == dim else 1 for i in range(x.ndim)])
    x = spec.func(x, alpha=alpha)
    if gain != 1:
        x = x * gain
    if clamp is not None and clamp >= 0:
        x = x.clamp(-clamp, clamp)
    return x


composite_bias_act = types.SimpleNamespace(
    bias_act=_composite_bias_act,
    activation_funcs={
        "linear": types.SimpleNamespace(func=lambda x, **_: x, def_alpha=0.0, def_gain=1.0),
        "lrelu": types.SimpleNamespace(func=lambda x, alpha, **_: F.leaky_relu(x, alpha), def_alpha=0.2,
                                       def_gain=math.sqrt(2)),
    },
)
IMPLS = {"ascend": ascend_bias_act, "composite": composite_bias_act}


# --- layers ------------------------------------------------------------------------------------------------
class FullyConnectedLayer(nn.Module):
    """Equalised-lr linear layer followed by bias_act (the bias lives in bias_act)."""

    def __init__(self, ba, in_features: int, out_features: int, act: str = "linear", lr_multiplier: float = 1.0,
                 bias_init: float = 0.0):
        super().__init__()
        self.ba, self.act = ba, act
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / lr_multiplier)
        self.bias = nn.Parameter(torch.full((out_features,), float(bias_init)))
        self.weight_gain = lr_multiplier / math.sqrt(in_features)
        self.bias_gain = lr_multiplier

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.matmul((self.weight * self.weight_gain).t())
        return self.ba.bias_act(x, self.bias * self.bias_gain, act=self.act)


class Conv2dLayer(nn.Module):
    """Equalised-lr conv (optionally followed by 2x2 average-pool downsampling) + bias_act with gain and clamp."""

    def __init__(self, ba, in_channels: int, out_channels: int, kernel_size: int, act: str = "lrelu",
                 bias: bool = True, down: bool = False, conv_clamp: float | None = CONV_CLAMP):
        super().__init__()
        self.ba, self.act, self.down, self.conv_clamp = ba, act, down, conv_clamp
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, kernel_size, kernel_size))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.weight_gain = 1 / math.sqrt(in_channels * kernel_size**2)
        self.padding = kernel_size // 2

    def forward(self, x: torch.Tensor, gain: float = 1.0) -> torch.Tensor:
        x = F.conv2d(x, self.weight * self.weight_gain, padding=self.padding)
        if self.down:
            x = F.avg_pool2d(x, 2)
        act_gain = self.ba.activation_funcs[self.act].def_gain * gain
        act_clamp = self.conv_clamp * gain if self.conv_clamp is not None else None
        return self.ba.bias_act(x, self.bias, act=self.act, gain=act_gain, clamp=act_clamp)


def modulated_conv2d(x: torch.Tensor, weight: torch.Tensor, styles: torch.Tensor, demodulate: bool) -> torch.Tensor:
    """Each sample's conv weights scaled by its styles over the input channels, then (demodulate) normalised to
    unit norm per output channel; one grouped conv for the batch."""
    batch, in_channels, height, width = x.shape
    out_channels, _, kernel, _ = weight.shape
    w = weight.unsqueeze(0) * styles.reshape(batch, 1, in_channels, 1, 1)
    if demodulate:
        w = w * (w.square().sum(dim=[2, 3, 4], keepdim=True) + 1e-8).rsqrt()
    x = F.conv2d(x.reshape(1, batch * in_channels, height, width),
                 w.reshape(batch * out_channels, in_channels, kernel, kernel), padding=kernel // 2, groups=batch)
    return x.reshape(batch, out_channels, *x.shape[2:])


class SynthesisLayer(nn.Module):
    """Modulated 3x3 conv (after an optional 2x bilinear upsampling) + bias_act lrelu with gain and clamp."""

    def __init__(self, ba, in_channels: int, out_channels: int, w_dim: int, up: bool = False,
                 conv_clamp: float = CONV_CLAMP):
        super().__init__()
        self.ba, self.up, self.conv_clamp = ba, up, conv_clamp
        self.affine = FullyConnectedLayer(ba, w_dim, in_channels, bias_init=1)
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, 3, 3))
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def forward(self, x: torch.Tensor, w: torch.Tensor, gain: float = 1.0) -> torch.Tensor:
        if self.up:
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        x = modulated_conv2d(x, self.weight, self.affine(w), demodulate=True)
        act_gain = self.ba.activation_funcs["lrelu"].def_gain * gain
        return self.ba.bias_act(x, self.bias, act="lrelu", gain=act_gain, clamp=self.conv_clamp * gain)


class ToRGBLayer(nn.Module):
    """Modulated 1x1 conv without demodulation + bias_act linear with clamp."""

    def __init__(self, ba, in_channels: int, out_channels: int, w_dim: int, conv_clamp: float = CONV_CLAMP):
        super().__init__()
        self.ba, self.conv_clamp = ba, conv_clamp
        self.affine = FullyConnectedLayer(ba, w_dim, in_channels, bias_init=1)
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, 1, 1))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        self.weight_gain = 1 / math.sqrt(in_channels)

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        x = modulated_conv2d(x, self.weight, self.affine(w) * self.weight_gain, demodulate=False)
        return self.ba.bias_act(x, self.bias, act="linear", clamp=self.conv_clamp)


# --- networks ----------------------------------------------------------------------------------------------
def normalize_2nd_moment(x: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    return x * (x.square().mean(dim=1, keepdim=True) + eps).rsqrt()


class MappingNetwork(nn.Module):
    """z -> normalised -> (layers - 1) x FC lrelu -> FC linear -> w, every layer at lr_multiplier 0.01."""

    def __init__(self, ba, z_dim: int, w_dim: int, layers: int, lr_multiplier: float = 0.01):
        super().__init__()
        features = [z_dim] + [w_dim] * layers
        self.layers = nn.ModuleList(
            FullyConnectedLayer(ba, features[i], features[i + 1], act="lrelu" if i < layers - 1 else "linear",
                                lr_multiplier=lr_multiplier) for i in range(layers))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = normalize_2nd_moment(z)
        for layer in self.layers:
            x = layer(x)
        return x


class SynthesisNetwork(nn.Module):
    """const 8x8 -> modulated conv -> ToRGB; 2x up -> 2 modulated convs at 16x16 -> ToRGB; RGB skips summed."""

    def __init__(self, ba, w_dim: int, channels: int, image_channels: int = 1):
        super().__init__()
        wide = 2 * channels
        self.const = nn.Parameter(torch.randn(wide, 8, 8))
        self.conv8 = SynthesisLayer(ba, wide, wide, w_dim)
        self.torgb8 = ToRGBLayer(ba, wide, image_channels, w_dim)
        self.conv16a = SynthesisLayer(ba, wide, channels, w_dim, up=True)
        self.conv16b = SynthesisLayer(ba, channels, channels, w_dim)
        self.torgb16 = ToRGBLayer(ba, channels, image_channels, w_dim)

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        x = self.conv8(self.const.unsqueeze(0).expand(len(w), -1, -1, -1), w)
        image = self.torgb8(x, w)
        x = self.conv16b(self.conv16a(x, w), w)
        image = F.interpolate(image, scale_factor=2, mode="bilinear", align_corners=False)
        return image + self.torgb16(x, w)


class Generator(nn.Module):
    def __init__(self, ba, z_dim: int, w_dim: int, mapping_layers: int, channels: int):
        super().__init__()
        self.z_dim = z_dim
        self.mapping = MappingNetwork(ba, z_dim, w_dim, mapping_layers)
        self.synthesis = SynthesisNetwork(ba, w_dim, channels)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.synthesis(self.mapping(z))


class DiscriminatorBlock(nn.Module):
    """Residual: conv 3x3, conv 3x3 + 2x down (gain sqrt(0.5)); skip: 1x1 conv, no bias, 2x down (sqrt(0.5))."""

    def __init__(self, ba, in_channels: int, out_channels: int):
        super().__init__()
        self.conv0 = Conv2dLayer(ba, in_channels, in_channels, 3)
        self.conv1 = Conv2dLayer(ba, in_channels, out_channels, 3, down=True)
        self.skip = Conv2dLayer(ba, in_channels, out_channels, 1, act="linear", bias=False, down=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.skip(x, gain=math.sqrt(0.5))
        return y + self.conv1(self.conv0(x), gain=math.sqrt(0.5))


class Discriminator(nn.Module):
    """16x16 -> FromRGB -> block 16->8 -> block 8->4 -> conv 3x3 -> FC lrelu -> FC linear -> one logit."""

    def __init__(self, ba, channels: int, image_channels: int = 1):
        super().__init__()
        wide = 2 * channels
        self.fromrgb = Conv2dLayer(ba, image_channels, channels, 1)
        self.b16 = DiscriminatorBlock(ba, channels, wide)
        self.b8 = DiscriminatorBlock(ba, wide, wide)
        self.conv = Conv2dLayer(ba, wide, wide, 3)
        self.fc = FullyConnectedLayer(ba, wide * 4 * 4, wide, act="lrelu")
        self.out = FullyConnectedLayer(ba, wide, 1)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        x = self.conv(self.b8(self.b16(self.fromrgb(image))))
        return self.out(self.fc(x.flatten(1)))


# --- training ----------------------------------------------------------------------------------------------
def r1_loss(discriminator: nn.Module, real: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss to backpropagate, E|grad_x D(x)|^2 over the real batch). The loss adds the logits times 0, as the
    StyleGAN2-ADA training loop does, so that every parameter gets a gradient (zero where R1 does not reach it):
    otherwise a parameter whose gradient is None in this step (here D's output bias with the composite, whose
    linear bias_act leaves it out of the gradient's graph, while our op's double backward gives it a zero) would be
    skipped by Adam, and Adam's per-parameter step count, hence its bias correction, would differ."""
    real = real.detach().requires_grad_()
    logits = discriminator(real)
    (grad,) = torch.autograd.grad(logits.sum(), real, create_graph=True)
    penalty = grad.square().flatten(1).sum(1).mean()
    return logits.mean() * 0 + penalty, penalty


def train(args) -> dict[str, list[float]]:
    from tqdm.auto import tqdm

    torch.set_num_threads(args.threads)
    device = pick_device(args.device, args.backend)
    torch.manual_seed(args.seed)
    ba = IMPLS[args.impl]
    data = load_digits_tensor().to(device)
    generator = Generator(ba, args.z_dim, args.w_dim, args.mapping_layers, args.channels).to(device)
    discriminator = Discriminator(ba, args.channels).to(device)
    # lazy regularisation: the R1 step's share of the updates is folded into Adam's lr and betas (paper, App. B)
    ratio = args.r1_every / (args.r1_every + 1)
    opt_g = torch.optim.Adam(generator.parameters(), lr=args.lr, betas=(0.0, 0.99))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=args.lr * ratio, betas=(0.0, 0.99**ratio))
    order_generator = torch.Generator().manual_seed(args.seed)
    fixed_latents = torch.randn(64, args.z_dim, device=device)
    steps_per_epoch = len(data) // args.batch
    args.out.mkdir(parents=True, exist_ok=True)
    history = {"d_loss": [], "g_loss": [], "r1": []}
    start = time.perf_counter()
    progress = tqdm(range(args.steps), desc=f"StyleGAN2-ADA bias_act ({args.impl}, {args.device}/{args.backend})",
                    disable=args.quiet)
    for step in progress:
        if step % steps_per_epoch == 0:
            order = torch.randperm(len(data), generator=order_generator).to(device)
        real = data[order[(step % steps_per_epoch) * args.batch:][: args.batch]]

        d_loss, g_loss, r1 = gan_step(step, args, real, generator, discriminator, opt_g, opt_d, args.z_dim, r1_loss)
        record_step(history, progress, d_loss, g_loss, r1)

    title = (f"StyleGAN2-ADA-style G and D + R1 (gamma {args.r1_gamma:g}), {args.steps} steps, bias_act: {args.impl}"
             f" ({args.device}/{args.backend})")
    write_outputs(args, title, "stylegan2_ada.png", history, generator, discriminator, opt_g, opt_d, fixed_latents,
                  start)
    return history


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--impl", choices=sorted(IMPLS), default="ascend",
                        help="bias_act: ascend_acts.compat.nvlabs.bias_act or NVlabs' reference as a torch composite")
    parser.add_argument("--device", choices=["cpu", "npu"], default="cpu")
    parser.add_argument("--backend", choices=["reference", "sim", "torch"], default="reference",
                        help="ascend_acts CPU backend of --impl ascend: NumPy reference, the AscendC kernels in the "
                             "emulator, or torch ops")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--channels", type=int, default=16, help="width at 16x16 (2x at 8x8 and below)")
    parser.add_argument("--z-dim", type=int, default=32)
    parser.add_argument("--w-dim", type=int, default=32)
    parser.add_argument("--mapping-layers", type=int, default=4)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--r1-gamma", type=float, default=1.0, help="R1 weight gamma")
    parser.add_argument("--r1-every", type=int, default=4, help="lazy regularisation interval (steps)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch.set_num_threads; 1 by default: these small layers gain little from more")
    parser.add_argument("--out", type=Path, default=Path("outputs/stylegan2_ada"))
    parser.add_argument("--quick", action="store_true", help="smoke run: 5 steps")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps = 5
    for name in ("steps", "batch", "channels", "z_dim", "w_dim", "mapping_layers", "r1_every", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.r1_gamma < 0:
        parser.error(f"--r1-gamma must be >= 0, got {args.r1_gamma}")
    train(args)


if __name__ == "__main__":
    main()
