"""A whole CycleGAN-style training step, instance norm on both sides: ascend_acts.convert vs the same torch model.

The networks are built as junyanz/pytorch-CycleGAN-and-pix2pix builds its defaults (netG resnet_9blocks, netD
basic, norm instance: InstanceNorm2d(affine=False, track_running_stats=False), convolution biases on, LSGAN):
- the ResNet generator: ReflectionPad2d(3), Conv2d 7x7 -> InstanceNorm2d -> ReLU; two Conv2d 3x3 stride 2 ->
  InstanceNorm2d -> ReLU downsamplings; residual blocks x + [ReflectionPad2d(1), Conv2d 3x3 -> InstanceNorm2d ->
  ReLU, ReflectionPad2d(1), Conv2d 3x3 -> InstanceNorm2d]; two ConvTranspose2d 3x3 stride 2 (output_padding 1) ->
  InstanceNorm2d -> ReLU upsamplings; ReflectionPad2d(3), Conv2d 7x7, Tanh;
- the PatchGAN discriminator: Conv2d 4x4 stride 2 -> LeakyReLU(0.2, True), two Conv2d 4x4 stride 2 ->
  InstanceNorm2d -> LeakyReLU(0.2, True), Conv2d 4x4 stride 1 -> InstanceNorm2d -> LeakyReLU(0.2, True), Conv2d
  4x4 to one channel.
One step is one generator and one discriminator update (gan_step.py: junyanz's order, LSGAN loss, Adam), the torch
model and `ascend_acts.convert` of a copy side by side in one run: step time, bytes kept for each backward, the
peak memory of a step, and issue 25's targets (memory <= 0.7x torch's, time <= 1.0x) as verdicts.

    python benchmarks/bench_cyclegan_step.py            # batch 1, 256x256, ngf = ndf = 64, 9 blocks
    python benchmarks/bench_cyclegan_step.py --quick    # smoke run: 32x32, width 8, 2 blocks
    python benchmarks/bench_cyclegan_step.py --backends reference sim --image-size 32 --ngf 8 --ndf 8 --blocks 2
"""

from __future__ import annotations

import torch
from torch import nn

import gan_step
from ascend_acts.nn import fusion
from ascend_acts.nn.fusion import recompute_is_cheaper

SLOPE = 0.2
CUBE_FLOPS_FP32 = 84.5e12  # the 910B2's fp32 matmul peak (/work/shared/design/ARCHITECTURE.md, measured figures)


def instance_norm(channels: int) -> nn.Module:
    return nn.InstanceNorm2d(channels, affine=False, track_running_stats=False)  # junyanz's 'instance'


class ResnetBlock(nn.Module):
    """x + conv_block(x): reflection padding, conv 3x3, instance norm, ReLU, then again without the ReLU."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv_block = nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(channels, channels, 3), instance_norm(channels), nn.ReLU(True),
            nn.ReflectionPad2d(1), nn.Conv2d(channels, channels, 3), instance_norm(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv_block(x)


class ResnetGenerator(nn.Module):
    def __init__(self, channels: int = 3, ngf: int = 64, blocks: int = 9):
        super().__init__()
        layers = [nn.ReflectionPad2d(3), nn.Conv2d(channels, ngf, 7), instance_norm(ngf), nn.ReLU(True)]
        width = ngf
        for _ in range(2):
            layers += [nn.Conv2d(width, 2 * width, 3, 2, 1), instance_norm(2 * width), nn.ReLU(True)]
            width *= 2
        layers += [ResnetBlock(width) for _ in range(blocks)]
        for _ in range(2):
            layers += [nn.ConvTranspose2d(width, width // 2, 3, 2, 1, output_padding=1), instance_norm(width // 2),
                       nn.ReLU(True)]
            width //= 2
        layers += [nn.ReflectionPad2d(3), nn.Conv2d(width, channels, 7), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class NLayerDiscriminator(nn.Module):
    """The 70x70 PatchGAN (three layers): one prediction per overlapping patch."""

    def __init__(self, channels: int = 3, ndf: int = 64, layers: int = 3):
        super().__init__()
        sequence = [nn.Conv2d(channels, ndf, 4, 2, 1), nn.LeakyReLU(SLOPE, True)]
        width = ndf
        for n in range(1, layers + 1):
            out = ndf * min(2 ** n, 8)
            stride = 2 if n < layers else 1
            sequence += [nn.Conv2d(width, out, 4, stride, 1), instance_norm(out), nn.LeakyReLU(SLOPE, True)]
            width = out
        sequence.append(nn.Conv2d(width, 1, 4, 1, 1))
        self.model = nn.Sequential(*sequence)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


def add_options(parser) -> None:
    parser.add_argument("--batch", type=int, default=1, help="images per step (CycleGAN: 1)")
    parser.add_argument("--image-size", type=int, default=256, help="height = width (CycleGAN: 256)")
    parser.add_argument("--ngf", type=int, default=64, help="generator width (CycleGAN: 64)")
    parser.add_argument("--ndf", type=int, default=64, help="discriminator width (CycleGAN: 64)")
    parser.add_argument("--blocks", type=int, default=9, help="residual blocks (CycleGAN: 9 at 256x256, 6 at 128)")


def build_case(args):
    if args.quick:
        args.batch, args.image_size, args.ngf, args.ndf, args.blocks = 1, 32, 8, 8, 2
    if args.image_size % 4 or args.image_size < 32:
        raise SystemExit("--image-size must be a multiple of 4 and at least 32 (the PatchGAN's 4x4 convolutions)")
    torch.manual_seed(0)
    case = gan_step.GanCase(ResnetGenerator(3, args.ngf, args.blocks), NLayerDiscriminator(3, args.ndf),
                            torch.rand(args.batch, 3, args.image_size, args.image_size) * 2 - 1,
                            torch.rand(args.batch, 3, args.image_size, args.image_size) * 2 - 1, gan_step.lsgan_loss)
    config = f"batch {args.batch}, {args.image_size}x{args.image_size}, ngf {args.ngf}, ndf {args.ndf}, " \
             f"{args.blocks} blocks"
    notes = [f"{config}, float32; the source and real batches uniform in [-1, 1]; convolutions with biases, "
             "InstanceNorm2d(affine=False, track_running_stats=False), as junyanz's instance-norm networks"]
    return config, case, notes


def layer_budget(args, recompute=recompute_is_cheaper) -> list[tuple[str, int, int, str]]:
    """Per layer group of the G step's graph (G on the source, D on the fake): (layers, bytes torch keeps, bytes the
    converted model keeps, why they differ), from the shapes and these rules: the next layer keeps a run's output y
    anyway (a conv, a transposed conv and a ReflectionPad2d keep their input; an addition keeps nothing); torch keeps
    the conv output z and y of every run (z alone where the output only feeds an addition), and each conv after a
    ReflectionPad2d its padded copy. Converted (nn/fusion.py): a ReflectionPad2d before a Conv2d -> IN run folds into
    the fused op, which keeps the unpadded input (y of the layer before, kept anyway; the source itself for the first
    one) instead of the padded copy; the last pad, before the norm-less 7x7 conv, stays torch's. A LeakyReLU run keeps
    y alone (InPlace-ABN); a ReLU or no-activation run keeps z, unless the recompute rule (recompute_is_cheaper: K
    MACs per output below the 910B's compute / bandwidth balance; `recompute` another bound) recomputes it in the
    backward, which keeps a copy of the conv weight and bias instead (only where that copy is smaller than z)."""
    b, s, g, d, k = args.batch, args.image_size, args.ngf, args.ndf, args.blocks

    def size(channels, side):
        return 4 * b * channels * side * side

    def recomputed(macs_per_output, channels, side, weights):
        return recompute(macs_per_output) and weights < size(channels, side) // 4

    def kept_z(macs_per_output, channels, side, weights):
        """What a ReLU / no-activation run keeps of z: the weight and bias copy where the rule recomputes it."""
        return 4 * weights if recomputed(macs_per_output, channels, side, weights) else size(channels, side)

    def z_row(name, layers, count=1):
        """A group's z: torch's, what the converted runs keep, and which of its layers the rule recomputes."""
        torch_bytes = count * sum(size(c, w) for _, c, w, _ in layers)
        converted = count * sum(kept_z(*layer) for layer in layers)
        again = [f"{layer[0]:g}" for layer in layers if recomputed(*layer)]
        kept = [f"{layer[0]:g}" for layer in layers if not recomputed(*layer)]
        return (name, torch_bytes, converted, "; ".join(
            ([f"recomputed: K = {', '.join(again)}"] if again else [])
            + ([f"kept: K = {', '.join(kept)}"] if kept else [])))

    q = s // 4
    block_padded, block_out = size(4 * g, q + 2), size(4 * g, q)
    # (K, channels, side) of z and the conv's weight and bias elements (junyanz's convs before an InstanceNorm have a
    # bias)
    down = [(3 * 49, g, s, 3 * 49 * g + g), (g * 9, 2 * g, s // 2, g * 9 * 2 * g + 2 * g),
            (2 * g * 9, 4 * g, q, 2 * g * 9 * 4 * g + 4 * g)]
    # stride 2: each output gets a quarter of the taps
    up = [(4 * g * 9 / 4, 2 * g, s // 2, 4 * g * 9 * 2 * g + 2 * g), (2 * g * 9 / 4, g, s, 2 * g * 9 * g + g)]
    block = (4 * g * 9, 4 * g, q, 4 * g * 9 * 4 * g + 4 * g)
    patch = [size(2 * d, s // 4), size(4 * d, s // 8), size(8 * d, s // 8 - 1)]
    return [
        ("G: the source's ReflectionPad2d(3) copy (the source needs no gradient)", size(3, s + 6), size(3, s),
         "pads: the op keeps the source"),
        z_row("G: c7s1, two stride-2 Conv -> IN -> ReLU: z", down),
        ("G: c7s1, two stride-2 Conv -> IN -> ReLU: y", sum(size(c, w) for _, c, w, _ in down),
         sum(size(c, w) for _, c, w, _ in down), "-"),
        ("G: residual blocks, the two ReflectionPad2d(1) copies", 2 * k * block_padded, 0, "pads"),
        z_row("G: residual blocks, Conv -> IN -> ReLU: z", [block], k),
        ("G: residual blocks, Conv -> IN -> ReLU: y", k * block_out, k * block_out, "-"),
        z_row("G: residual blocks, Conv -> IN -> none: z", [block], k),
        ("G: residual blocks, the sums x + y", k * block_out, k * block_out, "-"),
        z_row("G: two ConvTranspose2d -> IN -> ReLU: z", up),
        ("G: two ConvTranspose2d -> IN -> ReLU: y", sum(size(c, w) for _, c, w, _ in up),
         sum(size(c, w) for _, c, w, _ in up), "-"),
        ("G: the last ReflectionPad2d(3) copy (its conv has no norm: not a fused run)", size(g, s + 6),
         size(g, s + 6), "-"),
        ("G: Tanh's output (D's input)", size(3, s), size(3, s), "-"),
        ("D: Conv -> LeakyReLU: y", size(d, s // 2), size(d, s // 2), "-"),
        ("D: three Conv -> IN -> LeakyReLU: z", sum(patch), 0, "InPlace-ABN"),
        ("D: three Conv -> IN -> LeakyReLU: y", sum(patch), sum(patch), "-"),
    ]


def budget_section(args, rows) -> str:
    """The per-layer budget as a table, its totals against the measured figures of the torch and converted rows."""
    budget = layer_budget(args)
    torch_total, converted_total = sum(r[1] for r in budget), sum(r[2] for r in budget)
    table = gan_step.markdown_table(
        ["layers (G step's graph)", "torch keeps MiB", "converted keeps MiB", "share of torch's", "dropped by"],
        [[name, f"{t / 2**20:.1f}", f"{c / 2**20:.1f}", f"{t / torch_total:.1%}", change]
         for name, t, c, change in budget]
        + [["total", f"{torch_total / 2**20:.1f}",
            f"{converted_total / 2**20:.1f} ({converted_total / torch_total:.2f}x)", "", ""]])
    lines = [f"computed / measured, torch row: {torch_total / rows[0].g_step_saved:.3f}; converted rows: "
             + ", ".join(f"{converted_total / row.g_step_saved:.3f} ({row.model})" for row in rows[1:])
             + " (the rest: the norms' statistics vectors, the loss's tensors)"]
    # the recompute bound K < Z_BYTES * FLOPS / BANDWIDTH as its inputs move (fusion.py: the 910B figures)
    fp16 = fusion.Z_ELEMENT_BYTES * fusion.CUBE_FLOPS
    bounds = {"no recompute (pads folded only)": 0,
              "HBM bandwidth 30% lower": fp16 / (0.7 * fusion.HBM_BYTES_PER_SECOND),
              "HBM bandwidth 30% higher": fp16 / (1.3 * fusion.HBM_BYTES_PER_SECOND),
              "float32 (84.5 TFLOPS, 4-byte z)": 4 * CUBE_FLOPS_FP32 / fusion.HBM_BYTES_PER_SECOND}
    for label, bound in bounds.items():
        total = sum(r[2] for r in layer_budget(args, lambda k, bound=bound: k < bound))
        lines.append(f"computed with the recompute bound at K < {bound:.0f} ({label}): {total / torch_total:.2f}x "
                     f"torch's, target <= {gan_step.MEMORY_TARGET}x "
                     f"{'met' if total / torch_total <= gan_step.MEMORY_TARGET else 'NOT met'}")
    for row in rows[1:]:
        ratio = row.g_step_saved / rows[0].g_step_saved
        lines.append(f"{row.model}, measured: the G step's graph keeps {ratio:.2f}x torch's, target <= "
                     f"{gan_step.MEMORY_TARGET}x {'met' if ratio <= gan_step.MEMORY_TARGET else 'NOT met'}")
    return "\n\n".join(["Per layer, what each side keeps (computed from the shapes; rules in layer_budget's "
                         "docstring):", table, "\n".join(f"- {line}" for line in lines)])


def main(argv=None) -> None:
    gan_step.run(argv, __doc__, "smoke run: batch 1, 32x32, ngf = ndf = 8, 2 blocks, 2 repeats", "cyclegan_step",
                 "CycleGAN-style step (ResNet generator + PatchGAN, instance norm): converted vs torch",
                 add_options, build_case, repeats=5, extra=budget_section)


if __name__ == "__main__":
    main()
