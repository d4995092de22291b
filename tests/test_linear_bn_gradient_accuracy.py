"""A converted Linear -> BatchNorm1d -> activation (a 1x1 convolution over (N, F, 1, 1) inside the op) is as accurate as
torch's Linear in its gradients, for batches beyond 4096 rows: the weight, bias and input gradients' error against a
float64 torch run is at most 2x torch's own float32 error, on every backend, in eval (the BN folded into the Linear)
and in training. aten::convolution_backward's float32 bias gradient sums the rows one after another (about 100x
torch's error at N = 4097 for a gradient with a non-zero mean, as a loss's mean gives)."""

import copy

import pytest
import torch
from torch import nn

import ascend_acts
from markers import fast_only

ACTIVATIONS = {
    "leaky 0.2": lambda: nn.LeakyReLU(0.2),
    "relu": lambda: nn.ReLU(),
}


def _block(activation: str, seed: int) -> nn.Sequential:
    """PyTorch-GAN's Linear -> BatchNorm1d(eps 0.8) -> activation with trained-looking statistics and affine."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128, 0.8), ACTIVATIONS[activation]())
    with torch.no_grad():
        bn = model[1]
        bn.running_mean.uniform_(-1, 1), bn.running_var.uniform_(0.1, 2)
        bn.weight.uniform_(0.5, 2), bn.bias.uniform_(-1, 1)
    return model


def _gradients(model: nn.Sequential, x: torch.Tensor, grad: torch.Tensor) -> list[torch.Tensor]:
    x = x.detach().clone().requires_grad_()
    model(x).backward(grad)
    return [x.grad, model[0].weight.grad, model[0].bias.grad]


# fast: training (sim's eval runs the whole 4097-row product in the emulated cube, seconds)
@pytest.mark.parametrize("training", fast_only([False, True], [True]), ids=["eval", "train"])
@pytest.mark.parametrize("activation", fast_only(["leaky 0.2", "relu"], ["leaky 0.2"]))  # output / z kept
def test_linear_gradients_are_as_accurate_as_torch_beyond_4096_rows(activation, training, backend):
    rows = 4097  # the row-by-row bias sum's error already 10x torch's; it grows with the rows
    model = _block(activation, seed=0).train(training)
    x = torch.randn(rows, 64)
    grad = torch.randn(rows, 128) + 1  # a non-zero mean per column, as the gradient of a loss's mean has
    exact = _gradients(copy.deepcopy(model).double(), x.double(), grad.double())
    torchs = _gradients(copy.deepcopy(model), x, grad)
    ours = _gradients(ascend_acts.convert(copy.deepcopy(model)), x, grad)
    for name, e, t, o in zip(("input", "weight", "bias"), exact, torchs, ours):
        # the error's norm over every element: a max over a few channels makes the ratio of two roundings noisy
        torch_error, our_error = (t.double() - e).norm().item(), (o.double() - e).norm().item()
        assert our_error <= 2 * torch_error, (name, our_error, torch_error)
