"""Converted models on inputs at the edges an adversarial review found, judged against the unconverted torch model
run alongside: an empty batch, NumPy ints and out-of-int64 values in the conv geometry, a conv bias changed in place
between forward and backward, and torch.autograd.graph.allow_mutation_on_saved_tensors. Outputs, gradients, running
statistics, error types and messages."""

import copy

import numpy as np
import pytest
import torch
from torch import nn

import ascend_acts

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def close(ours, theirs):
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5, equal_nan=True)


def ours_and_torch(model):
    return ascend_acts.convert(copy.deepcopy(model)), model


def same_state(ours, theirs):
    for (name, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, equal_nan=True, msg=name)


def same_gradients(ours, theirs):
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters()):
        assert (a.grad is None) == (b.grad is None), name
        if a.grad is not None:
            close(a.grad, b.grad)


# --- 1. an empty batch, train and eval: torch's empty output, zero gradients, running statistics and count ----------
EMPTY_BATCH_MODELS = {
    "linear-bn1d": (lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.LeakyReLU(0.2)), (0, 3)),
    "conv1d-bn1d": (lambda: nn.Sequential(nn.Conv1d(3, 4, 3), nn.BatchNorm1d(4), nn.LeakyReLU(0.2)), (0, 3, 7)),
    "conv2d-bn2d-relu": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()), (0, 3, 5, 5)),
    "conv2d-in": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4, affine=True), nn.LeakyReLU(0.2)),
                  (0, 3, 5, 5)),
    "conv2d-gn": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.GroupNorm(2, 4), nn.LeakyReLU(0.2)), (0, 3, 5, 5)),
}


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("name", EMPTY_BATCH_MODELS)
def test_empty_batch_as_torch(backend, name, training):
    make, shape = EMPTY_BATCH_MODELS[name]
    torch.manual_seed(0)
    ours, theirs = ours_and_torch(make().train(training))
    results = []
    for model in (ours, theirs):
        x = torch.randn(shape, requires_grad=True)
        try:
            y = model(x)
            y.sum().backward()
            results.append((y.shape, x.grad.shape))
        except Exception as error:  # torch's instance_norm on an empty batch: an IndexError
            results.append((type(error), str(error)))
    assert results[0] == results[1]
    same_gradients(ours, theirs)
    same_state(ours, theirs)


# --- 2. the conv geometry as torch takes it: NumPy ints; an element beyond int64 is torch's TypeError ---------------
NUMPY_GEOMETRY_CONVS = {
    "conv": lambda: nn.Conv2d(3, 4, np.int64(3), stride=np.int64(2), padding=(np.int32(1), 2), dilation=np.int16(1)),
    "conv-reflect": lambda: nn.Conv2d(3, 4, 3, padding=np.int64(1), padding_mode="reflect"),
    "transposed": lambda: nn.ConvTranspose2d(3, 4, np.int64(3), stride=np.int64(2), padding=np.int32(1),
                                             output_padding=np.int64(1), dilation=np.uint8(1)),
}


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("name", NUMPY_GEOMETRY_CONVS)
def test_numpy_int_geometry_as_torch(backend, name, training):
    torch.manual_seed(0)
    ours, theirs = ours_and_torch(nn.Sequential(NUMPY_GEOMETRY_CONVS[name](), nn.BatchNorm2d(4),
                                                nn.LeakyReLU(0.2)).train(training))
    x = torch.randn(2, 3, 6, 6)
    close(ours(x), theirs(x))
    same_state(ours, theirs)


@pytest.mark.parametrize("argument, position, make", [
    ("padding", 1, lambda: nn.Conv2d(3, 4, 3, padding=(2**63, 0))),
    ("stride", 2, lambda: nn.Conv2d(3, 4, 3, stride=(1, 2**63))),
    ("output_padding", 1, lambda: nn.ConvTranspose2d(3, 4, 3, output_padding=(2**63, 0))),
])
def test_geometry_beyond_int64_raises_torch_type(backend, argument, position, make):
    ours, theirs = ours_and_torch(nn.Sequential(make(), nn.BatchNorm2d(4), nn.LeakyReLU(0.2)))
    x = torch.randn(2, 3, 6, 6)
    with pytest.raises(TypeError, match=f"'{argument}' failed to unpack the object at pos {position}"):
        theirs(x)
    before = copy.deepcopy(ours.state_dict())
    with pytest.raises(TypeError, match=f"'{argument}' failed to unpack the object at pos {position}: "
                                        f"{2**63} is not an int64"):
        ours(x)
    for key, value in ours.state_dict().items():  # a failed call changes nothing
        assert torch.equal(value, before[key]), key


# --- 3. a conv bias changed in place between forward and backward: torch's conv keeps no bias -----------------------
BIAS_NORMS = {
    "gn": lambda: nn.GroupNorm(2, 4),
    "bn": lambda: nn.BatchNorm2d(4),
    "in": lambda: nn.InstanceNorm2d(4, affine=True),
}


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("norm", BIAS_NORMS)
def test_bias_changed_in_place_before_backward_as_torch(backend, norm, create_graph):
    torch.manual_seed(0)
    ours, theirs = ours_and_torch(nn.Sequential(nn.Conv2d(3, 4, 3), BIAS_NORMS[norm](), nn.LeakyReLU(0.2)))
    x0 = torch.randn(2, 3, 5, 5)
    results = []
    for model in (ours, theirs):
        x = x0.clone().requires_grad_()
        out = (model(x) * torch.linspace(-1, 2, 4).reshape(1, 4, 1, 1)).sum()
        with torch.no_grad():
            model[0].bias.add_(1.0)
        (x_grad,) = torch.autograd.grad(out, x, create_graph=create_graph)
        if create_graph:  # a gradient penalty: the conv parameters' gradients through the backward
            x_grad.square().sum().backward()
        results.append(x_grad.detach())
    close(*results)
    if create_graph:
        same_gradients(ours, theirs)


# --- 4. allow_mutation_on_saved_tensors: runs as torch's (and a mutation after the forward does not matter) ---------
@pytest.mark.parametrize("norm", ["in", "gn", "bn", "in-tracked", "bn-untracked"])
def test_allow_mutation_on_saved_tensors_as_torch(backend, norm):
    make = {**BIAS_NORMS, "in-tracked": lambda: nn.InstanceNorm2d(4, affine=True, track_running_stats=True),
            "bn-untracked": lambda: nn.BatchNorm2d(4, track_running_stats=False)}[norm]
    torch.manual_seed(0)
    ours, theirs = ours_and_torch(nn.Sequential(nn.Conv2d(3, 4, 3), make(), nn.LeakyReLU(0.2)))
    x0 = torch.randn(2, 3, 5, 5)
    results = []
    for model in (ours, theirs):
        x = x0.clone().requires_grad_()
        with torch.autograd.graph.allow_mutation_on_saved_tensors():
            out = model(x)
            with torch.no_grad():
                x.mul_(2)  # the saved input is cloned before the change
            out.sum().backward()
        results.append((out.detach(), x.grad))
    (out, x_grad), (expected, expected_x_grad) = results
    close(out, expected)
    close(x_grad, expected_x_grad)
    same_gradients(ours, theirs)
    same_state(ours, theirs)
