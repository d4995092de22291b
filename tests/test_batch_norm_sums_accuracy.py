"""BatchNorm's sums over the batch are as accurate as torch's: a converted Conv1d -> BatchNorm1d (short planes),
Linear -> BatchNorm1d ((N, F): planes of one value) and Conv2d -> BatchNorm2d (small planes) block, and the two-layer
Conv1d critic of the report that found it, have output, running statistics and gradients whose error against a
float64 torch model is at most 2x torch's own float32 error, on every backend (but the sim gaps below). torch's CPU
norms accumulate in float64; the torch backend's float32 sums over dims (0, 2, 3) added short planes one after another
(BatchNorm1d's weight and bias gradients over (512, C, 7) were 35-58x torch's error, the running mean over
(4096, C, 15) 20x)."""

import copy

import pytest
import torch
from torch import nn

import ascend_acts
from markers import fast_only

SEEDS = 3  # errors summed over seeds: the ratio of two single roundings is noisy
# a pre-activation this near 0 may take either branch of the activation in float32 (torch's or ours, by luck): one
# flip is a whole gradient term, not rounding. Seeds whose exact pre-activations come that near are skipped.
KINK = 1e-6


def _block(kind: str, relu: bool) -> nn.Sequential:
    """A conv (Conv1d k3, Linear, Conv2d k3) -> BatchNorm(eps 0.8, PyTorch-GAN's) -> LeakyReLU(0.2) or ReLU, with an
    affine and running statistics away from their defaults."""
    conv, norm = {"conv1d": (nn.Conv1d(4, 16, 3, padding=1), nn.BatchNorm1d(16, 0.8)),
                  "linear": (nn.Linear(4, 16), nn.BatchNorm1d(16, 0.8)),
                  "conv2d": (nn.Conv2d(4, 16, 3, padding=1), nn.BatchNorm2d(16, 0.8))}[kind]
    with torch.no_grad():
        norm.weight.uniform_(0.5, 2), norm.bias.uniform_(-1, 1)
        norm.running_mean.uniform_(-1, 1), norm.running_var.uniform_(0.5, 2)
    return nn.Sequential(conv, norm, nn.ReLU() if relu else nn.LeakyReLU(0.2))


def _nearest_to_kink(model: nn.Sequential, x: torch.Tensor) -> float:
    """The smallest |pre-activation| of the float64 model (the inputs of its ReLU and LeakyReLU modules)."""
    nearest = []
    hooks = [m.register_forward_pre_hook(lambda m, args: nearest.append(args[0].abs().min().item()))
             for m in model.modules() if isinstance(m, (nn.ReLU, nn.LeakyReLU))]
    with torch.no_grad():
        model(x)
    for hook in hooks:
        hook.remove()
    return min(nearest)


def _results(model: nn.Sequential, x: torch.Tensor, grad: torch.Tensor) -> dict:
    """Output, running statistics and the input's and parameters' gradients, in float64. The conv bias is left out:
    its exact gradient is 0 (the norm's mean cancels it), so both errors are a cancelled sum's rounding noise."""
    x = x.detach().clone().requires_grad_()
    out = model(x)
    out.backward(grad)
    results = {"output": out, "input": x.grad}
    results.update((f"buffer {name}", b) for name, b in model.named_buffers() if b.is_floating_point())
    results.update((name, p.grad) for name, p in model.named_parameters() if not name.endswith(("0.bias", "3.bias")))
    return {name: value.detach().double() for name, value in results.items()}


# The sim backend (the AscendC batch-norm kernels, so the NPU too) is 2.1-3x torch's error in these cases, on the BN
# weight's gradient (the critic: the first BN's running mean, 2.4x): a gap of the kernels' own sums, left to them.
# Strict expected failures, so that closing it shows here.
SIM_GAPS = {("conv1d", 4096, 7, False), ("conv1d", 512, 2, False), ("conv1d", 64, 16, False),
            ("conv1d", 256, 15, False), ("conv1d", 512, 2, True), ("conv1d", 64, 16, True), ("conv2d", 256, 3, False),
            ("critic",)}


def check(request, backend: str, case: tuple, make_model, input_shape, grad_shape):
    if backend == "sim" and case in SIM_GAPS:
        request.applymarker(pytest.mark.xfail(raises=AssertionError, strict=True,
                                              reason="the AscendC kernels' BN weight gradient sums"))
    assert_at_most_twice_torch_error(make_model, input_shape, grad_shape)


def assert_at_most_twice_torch_error(make_model, input_shape, grad_shape):
    squared = {}  # name -> [torch's, ours]
    used = 0
    for seed in range(4 * SEEDS):
        if used == SEEDS:
            break
        torch.manual_seed(seed)
        model = make_model()
        x, grad = torch.randn(input_shape), torch.randn(grad_shape) + 1  # a loss's mean gives the gradient a mean
        if _nearest_to_kink(copy.deepcopy(model).double(), x.double()) < KINK:
            continue
        used += 1
        exact = _results(copy.deepcopy(model).double(), x.double(), grad.double())
        theirs = _results(copy.deepcopy(model), x, grad)
        ours = _results(ascend_acts.convert(copy.deepcopy(model)), x, grad)
        assert ours.keys() == exact.keys()
        for name, want in exact.items():
            errors = squared.setdefault(name, [0.0, 0.0])
            errors[0] += (theirs[name] - want).norm().item() ** 2
            errors[1] += (ours[name] - want).norm().item() ** 2
    assert used == SEEDS, "too few seeds without pre-activations near the activation's kink"
    for name, (torch_error, our_error) in squared.items():
        assert our_error <= 4 * torch_error, (name, our_error ** 0.5, torch_error ** 0.5)  # squared: 2x


# (N, L): BatchNorm1d over short sequences, batches from 2 to 4096
CONV1D_CASES = [(512, 7), (4096, 7), (2, 7), (16, 33), (512, 2), (64, 16), (4096, 1), (256, 15)]


@pytest.mark.parametrize("batch, length", fast_only(CONV1D_CASES, CONV1D_CASES[:2], unpack=True), ids=str)
@pytest.mark.parametrize("relu", [False, True], ids=["leaky", "relu"])
def test_conv1d_batch_norm_over_short_planes_at_most_twice_torch_error(batch, length, relu, backend, request):
    check(request, backend, ("conv1d", batch, length, relu), lambda: _block("conv1d", relu), (batch, 4, length),
          (batch, 16, length))


@pytest.mark.parametrize("batch", fast_only([4096, 512, 64], [4096]))
@pytest.mark.parametrize("relu", [False, True], ids=["leaky", "relu"])
def test_linear_batch_norm_rows_at_most_twice_torch_error(batch, relu, backend, request):
    check(request, backend, ("linear", batch, relu), lambda: _block("linear", relu), (batch, 4), (batch, 16))


@pytest.mark.parametrize("batch, size", fast_only([(256, 3), (64, 8), (2, 5)], [(256, 3)], unpack=True), ids=str)
@pytest.mark.parametrize("relu", [False, True], ids=["leaky", "relu"])
def test_conv2d_batch_norm_over_small_planes_at_most_twice_torch_error(batch, size, relu, backend, request):
    check(request, backend, ("conv2d", batch, size, relu), lambda: _block("conv2d", relu), (batch, 4, size, size),
          (batch, 16, size, size))


def _critic() -> nn.Sequential:
    """The report's model: a Conv1d critic over planes of 7 values, a BatchNorm1d(eps 0.8) -> LeakyReLU run (the
    output kept) and a BatchNorm1d -> ReLU one (the conv output kept)."""
    return nn.Sequential(nn.Conv1d(4, 16, 3, padding=1), nn.BatchNorm1d(16, 0.8), nn.LeakyReLU(0.2, True),
                         nn.Conv1d(16, 8, 3, padding=1), nn.BatchNorm1d(8), nn.ReLU())


def test_two_layer_conv1d_critic_at_most_twice_torch_error(backend, request):
    check(request, backend, ("critic",), _critic, (512, 4, 7), (512, 8, 7))


@pytest.mark.parametrize("dtype, scale", [(torch.float32, 1e30), (torch.float64, 1e300)], ids=["float32", "float64"])
def test_values_whose_squares_overflow_give_torchs_infinite_variance(backend, dtype, scale, request):
    """The centred sums' variance of values near the dtype's range: torch's is inf (so the output is the activation of
    beta), not the NaN of two overflowed terms' difference."""
    if dtype == torch.float64 and backend == "sim":
        pytest.skip("the AscendC kernels compute in float32")
    if backend == "sim":
        request.applymarker(pytest.mark.xfail(raises=AssertionError, strict=True,
                                              reason="the AscendC kernels' variance of overflowing squares is NaN"))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 3, 1, groups=3, bias=False), nn.BatchNorm2d(3), nn.LeakyReLU(0.2)).to(dtype)
    nn.init.ones_(model[0].weight), nn.init.constant_(model[1].bias, -0.3)
    ours = ascend_acts.convert(copy.deepcopy(model))
    x = torch.randn(4, 3, 5, 5, dtype=dtype) * scale
    torch.testing.assert_close(ours(x), model(x))
    torch.testing.assert_close(ours[1].running_var, model[1].running_var)
    assert model[1].running_var.isinf().all()
