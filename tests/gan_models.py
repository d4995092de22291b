"""The pytorch/examples DCGAN discriminator and its weights_init, written as that example writes them, and a
hand-written discriminator, for tests/test_converted_dcgan_in_gan_training.py. Small width (ndf = 4) so a step
takes milliseconds."""

from __future__ import annotations

import copy

import torch
from torch import nn

import ascend_acts
from op_counter import OpCounter

NC, NDF = 3, 4
IMAGE_SIZE = 64


class Discriminator(nn.Module):
    """pytorch/examples dcgan/main.py's netD: 64x64 image -> one probability per sample."""

    def __init__(self, ngpu: int = 1, nc: int = NC, ndf: int = NDF):
        super().__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            # input is (nc) x 64 x 64
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf) x 32 x 32
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf*2) x 16 x 16
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 4),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf*4) x 8 x 8
            nn.Conv2d(ndf * 4, ndf * 8, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 8),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf*8) x 4 x 4
            nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        output = self.main(input)
        return output.view(-1, 1).squeeze(1)


def weights_init(m):
    """pytorch/examples' custom weights initialization called on netG and netD."""
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


def discriminator(dtype: torch.dtype = torch.float64, seed: int = 0, **kwargs) -> Discriminator:
    """netD as the example builds it (weights_init before anything else), in `dtype`."""
    torch.manual_seed(seed)
    netD = Discriminator(**kwargs)
    netD.apply(weights_init)
    return netD.to(dtype)


def torch_and_converted(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    """(the unconverted model, ascend_acts.convert of it): the deepcopy is taken before converting."""
    reference = copy.deepcopy(model)
    return reference, ascend_acts.convert(model)


def images(n: int, dtype: torch.dtype = torch.float64, seed: int = 1, size: int = IMAGE_SIZE) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(n, NC, size, size, generator=generator, dtype=torch.float64).mul(2).sub(1).to(dtype)


class MinibatchStdDiscriminator(nn.Module):
    """A hand-written discriminator (no nn.Sequential): a training-only minibatch-stddev signal, a feature
    method and a plain attribute, as StyleGAN-like code has them."""

    def __init__(self, nc: int = NC, ndf: int = NDF):
        super().__init__()
        self.conv1 = nn.Conv2d(nc, ndf, 4, 2, 1, bias=False)
        self.act1 = nn.LeakyReLU(0.2, inplace=True)
        self.conv2 = nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(ndf * 2)
        self.act2 = nn.LeakyReLU(0.2, inplace=True)
        self.conv3 = nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(ndf * 4)
        self.act3 = nn.LeakyReLU(0.2, inplace=True)
        self.head = nn.Conv2d(ndf * 4, 1, 8, 1, 0, bias=False)
        self.real_label = 0.9  # one-sided label smoothing, read by the training loop

    def features(self, input):
        h = self.act1(self.conv1(input))
        if self.training:  # the minibatch-stddev signal only while training
            h = h + h.std(dim=0, keepdim=True).mean()
        h = self.act2(self.bn2(self.conv2(h)))
        return self.act3(self.bn3(self.conv3(h)))

    def forward(self, input):
        return self.head(self.features(input)).view(-1)


def assert_gradient_penalty_as_torch(original: nn.Module, converted: nn.Module, x: torch.Tensor, **tolerance) -> None:
    """A gradient penalty (the squared input gradient of a loss, as R1 / WGAN-GP take it) through both models: the
    penalty and its gradients of every parameter (double backward) equal the torch model's."""
    penalties = []
    # the torch model in float64 as well: an element of a parameter's gradient that is a sum of cancelling terms (a
    # norm's bias, a few channels) can be near 0 beside large ones, where float32's error is that of the terms
    models = (original, converted) + ((copy.deepcopy(original).double(),) if x.dtype == torch.float32 else ())
    for model in models:
        xi = x.clone().to(next(model.parameters()).dtype).requires_grad_()
        (g,) = torch.autograd.grad(model(xi).square().sum(), xi, create_graph=True)
        penalty = g.square().sum()
        penalties.append((penalty, torch.autograd.grad(penalty, list(model.parameters()))))
    torch.testing.assert_close(penalties[1][0], penalties[0][0], **tolerance)
    for index, (ours, theirs) in enumerate(zip(penalties[1][1], penalties[0][1])):
        if len(penalties) < 3:
            torch.testing.assert_close(ours, theirs, **tolerance)
            continue
        # float32: ours as close to float64's as torch's float32, over each gradient (at most 2x its largest error),
        # or within the tolerance of torch's
        exact = penalties[2][1][index]
        ours_error, torch_error = ((t.double() - exact).abs().max().item() for t in (ours, theirs))
        if ours_error > 2 * torch_error:
            torch.testing.assert_close(ours, theirs, **tolerance)


def assert_training_step_as_torch(original: nn.Module, converted: nn.Module, optimizers, expected: torch.Tensor,
                                  got: torch.Tensor, xs: torch.Tensor, xc: torch.Tensor, step: int,
                                  **tolerance) -> None:
    """One optimizer step of each model from the same weighted loss of its output (`expected` the torch model's on
    `xs`, `got` the converted one's on `xc`): the input gradients, every parameter's gradient and, after the step,
    the whole state (num_batches_tracked included) equal the torch model's."""
    for optimizer, out in zip(optimizers, (expected, got)):
        optimizer.zero_grad()
        (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
    torch.testing.assert_close(xc.grad, xs.grad, **tolerance)
    for (name, ours), theirs in zip(converted.named_parameters(), original.parameters()):
        torch.testing.assert_close(ours.grad, theirs.grad, **tolerance, msg=f"step {step}: {name}")
    for optimizer in optimizers:
        optimizer.step()
    for (key, a), b in zip(converted.state_dict().items(), original.state_dict().values()):
        torch.testing.assert_close(a, b, **tolerance, msg=f"step {step}: {key}")  # num_batches_tracked included


def assert_compiled_as_torch(original: nn.Module, converted: nn.Module, x: torch.Tensor, **tolerance) -> None:
    """The converted model under torch.compile(fullgraph=True) (aot_eager): output, input gradient and the state it
    leaves (running statistics) equal the eager torch model's. Resets dynamo first: Sequential.forward is compiled
    anew for each model, so no recompile limit carries across tests."""
    torch._dynamo.reset()
    compiled = torch.compile(converted, backend="aot_eager", fullgraph=True)
    xs, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    yc, ys = compiled(xc), original(xs)
    torch.testing.assert_close(yc, ys, **tolerance)
    (gc,) = torch.autograd.grad(yc.sum(), xc)
    (gs,) = torch.autograd.grad(ys.sum(), xs)
    torch.testing.assert_close(gc, gs, **tolerance)
    for (key, a), b in zip(converted.state_dict().items(), original.state_dict().values()):
        torch.testing.assert_close(a, b, **tolerance, msg=key)


def assert_autocast_as_torch(original: nn.Module, converted: nn.Module, x: torch.Tensor, dtype: torch.dtype,
                             fused_runs: int) -> None:
    """Under CPU autocast to `dtype` (the convs in the half type, the norms' parameters and statistics float32): the
    converted model runs `fused_runs` fused ops, gives torch's output dtype within 2x torch's own error against a
    float64 copy, and leaves its state in torch's dtypes and values."""
    exact = copy.deepcopy(original).double()
    with torch.autocast("cpu", dtype=dtype):
        with OpCounter() as counter:
            ours = converted(x)
        theirs = original(x)
    assert counter.fused == fused_runs and ours.dtype == theirs.dtype
    reference = exact(x.double())
    assert (ours.double() - reference).abs().max() <= 2 * (theirs.double() - reference).abs().max() + 1e-3
    for (key, a), b in zip(converted.state_dict().items(), original.state_dict().values()):
        assert a.dtype == b.dtype, key
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2, msg=key)


SEQUENCE_ACTIVATIONS = {
    "leaky": lambda: nn.LeakyReLU(0.2, inplace=True),
    "relu": lambda: nn.ReLU(inplace=True),
    "none": lambda: None,
}


def sequence_discriminator(activation: str = "leaky", dtype: torch.dtype = torch.float32, seed: int = 5,
                           **bn) -> nn.Sequential:
    """A 1-D (audio or time-series) GAN discriminator, small: (Conv1d -> BatchNorm1d -> activation) x 3 over
    (N, 3, L), with a strided, a dilated and a padding="same" conv, then a Conv1d head. Affine parameters that put
    about half of each norm's outputs below 0."""
    torch.manual_seed(seed)
    convs = [nn.Conv1d(3, 8, 4, 2, 1, bias=False), nn.Conv1d(8, 8, 3, 1, 2, dilation=2),
             nn.Conv1d(8, 6, 3, padding="same", bias=False)]
    layers = []
    for conv in convs:
        act = SEQUENCE_ACTIVATIONS[activation]()
        layers += [conv, nn.BatchNorm1d(conv.out_channels, **bn), *([act] if act is not None else [])]
    model = nn.Sequential(*layers, nn.Conv1d(6, 1, 3)).to(dtype)
    with torch.no_grad():
        for module in model:
            if isinstance(module, nn.BatchNorm1d) and module.affine:
                module.weight.uniform_(0.5, 1.5), module.bias.uniform_(-0.5, 0.5)
    return model


# CycleGAN/pix2pix networks' norm layers (theirs: `instance` by default, `batch` as an option) and the GroupNorm and
# running-statistics variants: a name -> a factory of the norm over c channels
NORMS = {
    "instance": lambda c: nn.InstanceNorm2d(c),  # CycleGAN's default: affine=False, track_running_stats=False
    "instance affine": lambda c: nn.InstanceNorm2d(c, affine=True),
    "instance tracked": lambda c: nn.InstanceNorm2d(c, affine=True, track_running_stats=True),
    "instance momentum=None": lambda c: nn.InstanceNorm2d(c, momentum=None, track_running_stats=True),
    "group": lambda c: nn.GroupNorm(2, c),
    "group per channel pair no affine": lambda c: nn.GroupNorm(c // 2, c, affine=False),
    "batch": nn.BatchNorm2d,
}


class ResnetBlock(nn.Module):
    """CycleGAN's residual block: x + (pad, conv, norm, ReLU, pad, conv, norm)(x), the sum out of place."""

    def __init__(self, dim: int, norm: str):
        super().__init__()
        bias = norm != "batch"  # as CycleGAN: a conv bias only where the norm does not cancel it
        self.conv_block = nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=bias), NORMS[norm](dim), nn.ReLU(True),
            nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=bias), NORMS[norm](dim))

    def forward(self, x):
        return x + self.conv_block(x)


def _randomise_norms(model: nn.Module) -> nn.Module:
    """Affine parameters that put about half of each norm's outputs below 0, and running statistics that differ
    from the batch's (so that eval with them is told apart from input statistics)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.modules.batchnorm._NormBase, nn.GroupNorm)) and module.affine:
                module.weight.uniform_(0.5, 1.5), module.bias.uniform_(-0.5, 0.5)
            if getattr(module, "running_mean", None) is not None:
                module.running_mean.uniform_(-0.2, 0.2), module.running_var.uniform_(0.5, 2.0)
    return model


def resnet_generator(norm: str = "instance", dtype: torch.dtype = torch.float32, seed: int = 0, ngf: int = 4,
                     blocks: int = 2) -> nn.Sequential:
    """CycleGAN's ResNet generator, narrow: ReflectionPad2d -> Conv2d(7) -> norm -> ReLU, two strided
    Conv2d -> norm -> ReLU, `blocks` ResnetBlocks, two ConvTranspose2d(output_padding=1) -> norm -> ReLU,
    ReflectionPad2d -> Conv2d(7) -> Tanh: 5 + 2 * blocks Conv -> norm runs. Image side a multiple of 4."""
    torch.manual_seed(seed)
    bias = norm != "batch"
    layers = [nn.ReflectionPad2d(3), nn.Conv2d(NC, ngf, 7, bias=bias), NORMS[norm](ngf), nn.ReLU(True)]
    for width in (ngf, 2 * ngf):
        layers += [nn.Conv2d(width, 2 * width, 3, 2, 1, bias=bias), NORMS[norm](2 * width), nn.ReLU(True)]
    layers += [ResnetBlock(4 * ngf, norm) for _ in range(blocks)]
    for width in (4 * ngf, 2 * ngf):
        layers += [nn.ConvTranspose2d(width, width // 2, 3, 2, 1, output_padding=1, bias=bias),
                   NORMS[norm](width // 2), nn.ReLU(True)]
    layers += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, NC, 7), nn.Tanh()]
    return _randomise_norms(nn.Sequential(*layers)).to(dtype)


def patch_discriminator(norm: str = "instance", dtype: torch.dtype = torch.float32, seed: int = 0, ndf: int = 4,
                        n_layers: int = 3) -> nn.Sequential:
    """pix2pix/CycleGAN's PatchGAN (NLayerDiscriminator), narrow: Conv2d(4, 2, 1) -> LeakyReLU(0.2, True), then
    n_layers Conv2d(4) -> norm -> LeakyReLU(0.2, True) (the last with stride 1), a Conv2d(4, 1, 1) head: one
    logit per patch. Image side at least 16 for n_layers = 3."""
    torch.manual_seed(seed)
    bias = norm != "batch"
    layers, width = [nn.Conv2d(NC, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True)], ndf
    for n in range(1, n_layers + 1):
        out = ndf * min(2 ** n, 8)
        layers += [nn.Conv2d(width, out, 4, 2 if n < n_layers else 1, 1, bias=bias), NORMS[norm](out),
                   nn.LeakyReLU(0.2, True)]
        width = out
    layers += [nn.Conv2d(width, 1, 4, 1, 1)]
    return _randomise_norms(nn.Sequential(*layers)).to(dtype)
