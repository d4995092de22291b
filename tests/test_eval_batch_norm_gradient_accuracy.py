"""A converted Conv2d/ConvTranspose2d -> BatchNorm2d -> activation in eval (BatchNorm folded into the convolution) is as
accurate as torch in every gradient: input, conv weight and bias, BN weight and bias, each within 2x torch's own
float32 error against a float64 torch run, on every backend. The BN affine folds in inside the eval op, whose backward
takes bn_weight's gradient as sum(dz * x-hat) from the recomputed normalised conv and bn_bias's as sum(dz), as torch's
batch_norm does: through the folded weight instead, they were 3-19x torch's error (the conv weight gradient, a float32
sum over N*H*W, dotted with the weight; the platform's row-by-row bias sum). Random-normal affines put small BN weights
under large BN biases, where x-hat rebuilt from the folded pre-activation, (pre - beta) / gamma, was up to 19x."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ascend_acts
from markers import fast_only
from op_counter import OpCounter

ops = torch.ops.ascend_acts

ACTIVATIONS = {"leaky 0.2": lambda: nn.LeakyReLU(0.2), "relu": lambda: nn.ReLU()}
BLOCKS = {
    # a discriminator block with a conv bias (the reviewers' repro: Conv2d(16, 32, 3, p1) -> BN, (8, 16, 64, 64))
    "conv": (lambda: nn.Conv2d(16, 32, 3, padding=1), (8, 16, 32, 32)),
    # a generator's upsampling, grouped, without bias
    "transposed": (lambda: nn.ConvTranspose2d(16, 32, 4, 2, 1, groups=2, bias=False), (8, 16, 16, 16)),
}


def _block(kind: str, activation: str, seed: int) -> nn.Sequential:
    """The block in eval with trained-looking running statistics and a random-normal affine (some BN weights near 0;
    a zero one is left to torch's composite on the CPU, for its signed zeros: function.py)."""
    torch.manual_seed(seed)
    make_conv, _ = BLOCKS[kind]
    model = nn.Sequential(make_conv(), nn.BatchNorm2d(32), ACTIVATIONS[activation]())
    with torch.no_grad():
        bn = model[1]
        bn.running_mean.normal_(), bn.running_var.uniform_(0.5, 2)
        bn.weight.normal_(), bn.bias.normal_()
    return model.eval()


def _gradients(model: nn.Sequential, x: torch.Tensor, grad: torch.Tensor) -> dict[str, torch.Tensor]:
    x = x.detach().clone().requires_grad_()
    model(x).backward(grad)
    named = {"input": x.grad, **{name: p.grad for name, p in model.named_parameters()}}
    return {name: g for name, g in named.items() if g is not None}


@pytest.mark.parametrize("activation", fast_only(ACTIVATIONS, ["leaky 0.2"]))
@pytest.mark.parametrize("kind", fast_only(BLOCKS, ["conv"]))
@pytest.mark.parametrize("seed", fast_only(range(3), [1]))
def test_eval_gradients_are_as_accurate_as_torch(kind, activation, seed, backend):
    model = _block(kind, activation, seed)
    x = torch.randn(BLOCKS[kind][1])
    grad = torch.randn_like(model(x)) + 0.5  # a non-zero mean per channel, as a loss's mean gives
    exact = _gradients(copy.deepcopy(model).double(), x.double(), grad.double())
    torchs = _gradients(copy.deepcopy(model), x, grad)
    converted = ascend_acts.convert(copy.deepcopy(model))
    with OpCounter() as counter:
        converted(x)
    assert counter.calls["conv_bn_leaky_relu_eval"] == 1
    ours = _gradients(converted, x, grad)
    assert ours.keys() == exact.keys()
    for name, e in exact.items():
        # the error's norm over every element: a max over a few channels makes the ratio of two roundings noisy.
        # torch's BN weight and bias gradients are float32 roundings of float64 sums (about half a unit in the last
        # place): ours may differ from them by one more rounding of the result (x-hat rounds otherwise than torch's)
        torch_error, our_error = (torchs[name].double() - e).norm().item(), (ours[name].double() - e).norm().item()
        one_rounding = torch.finfo(torch.float32).eps / 2 * e.norm().item()
        assert our_error <= 2 * torch_error + one_rounding, (name, our_error, torch_error)


def test_a_frozen_conv_under_a_trained_affine_computes_no_conv_weight_gradient():
    """Only the BN affine needs gradients (a frozen conv under a trained norm): the eval op's conv weight is the conv's
    own, normalised, so its backward asks aten::convolution_backward for no weight gradient (before the affine folded
    in inside, the folded weight needed one), and the affine's gradients are torch's."""
    model = _block("conv", "leaky 0.2", 0)
    model[0].requires_grad_(False)
    converted = ascend_acts.convert(copy.deepcopy(model))
    x, grad = torch.randn(2, 16, 8, 8), torch.randn(2, 32, 8, 8)
    with torch.profiler.profile(record_shapes=True) as prof:
        converted(x).backward(grad)
    events = prof.events()
    assert any(e.name == "ascend_acts::conv_bn_leaky_relu_eval_backward" for e in events)  # the fused backward ran
    masks = [[bool(m) for m in e.concrete_inputs[-1]] for e in events if e.name == "aten::convolution_backward"]
    assert masks == []  # nor the input's (a leaf that needs none) or the bias's (a sum of ours)
    model(x).backward(grad)
    for ours, torchs in zip(converted[1].parameters(), model[1].parameters()):
        torch.testing.assert_close(ours.grad, torchs.grad, rtol=1e-4, atol=1e-4)


def _chain(seed: int) -> nn.Sequential:
    """DCGAN-like blocks in eval (a strided Conv2d -> BN -> LeakyReLU, a ConvTranspose2d -> BN -> ReLU, a Conv2d with
    bias -> BN -> LeakyReLU), then Flatten -> Linear, with trained-looking running statistics and affines. (A Linear ->
    BatchNorm1d head over a batch of 4 sums 4 values per gradient: one activation mask flip near 0 decides the
    comparison there, for torch as for us.)"""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.LeakyReLU(0.2),
                          nn.ConvTranspose2d(8, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.LeakyReLU(0.2), nn.Flatten(),
                          nn.Linear(8 * 32 * 32, 2))
    with torch.no_grad():
        for bn in (m for m in model if isinstance(m, nn.modules.batchnorm._BatchNorm)):
            bn.running_mean.normal_(0, 0.5), bn.running_var.uniform_(0.1, 2.1)
            bn.weight.normal_(1, 0.5), bn.bias.normal_(0, 0.5)
    return model.eval()


def _model_gradients(model, x, autocast_dtype=None):
    x = x.detach().clone().requires_grad_()
    with torch.autocast("cpu", dtype=autocast_dtype, enabled=autocast_dtype is not None):
        out = model(x)
    (out.float() * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
    return {"output": out.detach(), "input": x.grad, **{name: p.grad for name, p in model.named_parameters()}}


@pytest.mark.parametrize("mode", fast_only(["float16 model", "bfloat16 model", "bfloat16 autocast", "float16 autocast"],
                                           ["float16 model"]))
def test_16_bit_eval_is_as_accurate_as_torchs_16_bit(mode, backend):
    """A 16-bit model (`.half()`, `.bfloat16()`; the oracle is its float64 copy), or a float32 one under autocast
    (the float32 model's): output and every gradient within 2x torch's own same-dtype error, as the median over seeds
    of the ratio. In 16 bits a pre-activation near 0 lands on either side of it now and then, for torch as for us, and
    one such element can decide a seed; the median leaves those out. Nothing folds into the 16-bit weight and bias:
    the op applies the BN's float32 scale and shift after the convolution, as torch's batch_norm (with the
    normalisation folded into 16-bit weights, the first BN's bias gradient was over 3x torch's error)."""
    dtype = torch.bfloat16 if mode.startswith("bfloat16") else torch.float16
    autocast = dtype if "autocast" in mode else None
    ratios: dict[str, list[float]] = {}
    for seed in range(8):
        model = _chain(seed)
        x = torch.randn(4, 3, 32, 32)
        low, low_x = (model, x) if autocast else (model.to(dtype), x.to(dtype))
        exact = _model_gradients(copy.deepcopy(low).double(), low_x.double())
        torchs = _model_gradients(copy.deepcopy(low), low_x, autocast)
        ours = _model_gradients(ascend_acts.convert(copy.deepcopy(low)), low_x, autocast)
        for name, e in exact.items():
            torch_error, our_error = (torchs[name].double() - e).norm().item(), (ours[name].double() - e).norm().item()
            ratios.setdefault(name, []).append(our_error / torch_error if torch_error else float(our_error > 0))
    medians = {name: sorted(r)[len(r) // 2] for name, r in ratios.items()}
    assert all(m <= 2 for m in medians.values()), medians


def _eval_composite(x, w, b, gamma, beta, grad):
    """torch's 16-bit conv, then batch_norm's affine in float32 on its output (the op's weight and bias are already
    normalised: running statistics 0 and 1, eps 0), LeakyReLU; the output and the gradients of x, w, b, gamma, beta."""
    leaves = [t.detach().clone().requires_grad_() for t in (x, w, b, gamma, beta)]
    conv = F.conv2d(leaves[0], leaves[1], leaves[2], padding=1)
    ones = torch.ones(gamma.shape, dtype=gamma.dtype)
    out = F.leaky_relu(F.batch_norm(conv, ones * 0, ones, leaves[3], leaves[4], False, 0.0, 0.0), 0.2)
    out.backward(grad)
    return [out.detach(), *(t.grad for t in leaves)]


@pytest.mark.parametrize("dtype", fast_only([torch.float16, torch.bfloat16], [torch.float16]), ids=str)
def test_16_bit_eval_op_applies_the_affine_as_torchs_batch_norm(dtype, backend):
    """The eval op on a 16-bit convolution with a BN affine (the selftest's layer, with a bn_bias): its output and
    gradients within 2x the error of torch's same-dtype conv + batch_norm. Folded into the 16-bit weight instead, the
    weight's rounding moved the pre-activations near 0 across it: 2.6x torch's input gradient error (float16)."""
    g = torch.Generator().manual_seed(0)

    def draw(*shape, scale=1.0, shift=0.0):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * scale + shift

    x, w = draw(8, 32, 20, 20), draw(48, 32, 3, 3, scale=(32 * 9) ** -0.5)
    b, grad = draw(48, scale=0.1), draw(8, 48, 20, 20)
    gamma, beta = draw(48, scale=0.2, shift=1.0), draw(48, scale=0.1)
    low = [t.to(dtype) for t in (x, w, b)]
    exact = _eval_composite(*(t.to(dtype).double() for t in (x, w, b)), gamma, beta, grad.to(dtype).double())
    torchs = _eval_composite(*low, gamma.float(), beta.float(), grad.to(dtype))
    geometry = ([1, 1], [1, 1, 1, 1], [1, 1], 1)
    ours = [ops.conv_bn_leaky_relu_eval(*low, *geometry, 0.2, False, False, [0, 0], "zeros", gamma.float(),
                                        beta.float()),
            *ops.conv_bn_leaky_relu_eval_backward(grad.to(dtype), *low, *geometry, 0.2, False, False, [0, 0], "zeros",
                                                  [True] * 3, gamma.float(), beta.float())]
    for name, e, t, o in zip(("output", "input", "weight", "bias", "bn weight", "bn bias"), exact, torchs, ours):
        torch_error, our_error = (t.double() - e).abs().max().item(), (o.double() - e).abs().max().item()
        assert our_error <= 2 * torch_error, (name, our_error, torch_error)
