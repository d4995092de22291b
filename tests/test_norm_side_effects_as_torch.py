"""What a converted model's fused norm runs leave behind besides their results, as the unconverted torch model leaves
it (issue 25's adversarial review; the oracle is that model, run alongside), on every CPU backend:
- a gradient-penalty-only backward (StyleGAN2's lazy R1 step, WGAN-GP: the squared input gradient of the critic's
  output, with no other loss) gives a `.grad` to exactly the parameters torch gives one, with torch's values (a zero
  tensor is not None: Adam and SGD's weight decay update a parameter with a zero gradient, and skip one without);
- so the optimizer steps that follow move the parameters as torch's;
- a training forward bumps the version counters of the running statistics as torch's norms do (BatchNorm: none, its
  kernel writes them; InstanceNorm: one each, its copy_), leaving torch's values."""

import copy
import itertools

import pytest
import torch
from torch import nn

import ascend_acts
from markers import slow

CONVS = ("conv2d", "conv_transpose2d", "linear")
NORMS = ("batch_norm", "instance_norm", "instance_norm_tracked", "group_norm")
ACTIVATIONS = ("leaky_relu", "relu", "none")
# (conv, norm, activation, conv bias, training): every fused pattern; Linear is fused with BatchNorm1d only
CASES = [case for case in itertools.product(CONVS, NORMS, ACTIVATIONS, (True, False), (True, False))
         if case[0] != "linear" or case[1] == "batch_norm"]
# the fast subset: a norm that cancels the conv bias in training, one that uses running statistics in eval, no
# activation (whose norm bias torch leaves without a gradient), GroupNorm (whose statistics the conv bias shifts)
FAST = [("conv2d", "batch_norm", "leaky_relu", True, True),
        ("conv_transpose2d", "instance_norm_tracked", "relu", True, False),
        ("linear", "batch_norm", "none", True, True),
        ("conv2d", "group_norm", "relu", True, True)]
PARAMS = [pytest.param(*case, marks=() if case in FAST else slow) for case in CASES]
ARGNAMES = "conv, norm, activation, bias, training"
GRADIENT_TOLERANCE = 1e-5  # float32 gradients, relative to the model's largest one (measured: up to 6e-7)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def block(conv: str, norm: str, activation: str, bias: bool, seed: int = 0) -> tuple[nn.Sequential, torch.Tensor]:
    """A Conv -> Norm (-> activation) run as convert fuses it, with non-trivial affine parameters, and its input."""
    torch.manual_seed(seed)
    layers = {"conv2d": (nn.Conv2d(3, 6, 3, bias=bias), (2, 3, 6, 6)),
              "conv_transpose2d": (nn.ConvTranspose2d(3, 6, 3, stride=2, bias=bias), (2, 3, 3, 3)),
              "linear": (nn.Linear(4, 6, bias=bias), (5, 4))}
    layer, shape = layers[conv]
    norms = {"batch_norm": lambda: nn.BatchNorm1d(6) if conv == "linear" else nn.BatchNorm2d(6),
             "instance_norm": lambda: nn.InstanceNorm2d(6, affine=True),
             "instance_norm_tracked": lambda: nn.InstanceNorm2d(6, affine=True, track_running_stats=True),
             "group_norm": lambda: nn.GroupNorm(2, 6)}
    normalisation = norms[norm]()
    with torch.no_grad():
        normalisation.weight.uniform_(0.5, 1.5)
        normalisation.bias.uniform_(-0.5, 0.5)
    if getattr(normalisation, "running_mean", None) is not None:
        with torch.no_grad():  # running statistics unlike the batch's, so that eval differs from training
            normalisation.running_mean.uniform_(-0.2, 0.2)
            normalisation.running_var.uniform_(0.5, 2.0)
    tail = {"leaky_relu": [nn.LeakyReLU(0.2)], "relu": [nn.ReLU()], "none": []}[activation]
    return nn.Sequential(layer, normalisation, *tail), torch.randn(shape)


def torch_and_converted(model: nn.Module, training: bool) -> tuple[nn.Module, nn.Module]:
    return model.train(training), ascend_acts.convert(copy.deepcopy(model)).train(training)


def critic_output(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A critic's score: the run's output under a fixed linear read-out (a plain sum would make the penalty of a run
    without activation rounding noise: a norm's output sums to a constant)."""
    out = model(x)
    return (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(1))).sum()


def r1_only_backward(model: nn.Module, x: torch.Tensor) -> None:
    x = x.clone().requires_grad_()
    (grad,) = torch.autograd.grad(critic_output(model, x), x, create_graph=True)
    grad.square().sum().backward()


def assert_gradients_as_torch(original: nn.Module, converted: nn.Module) -> None:
    """The same parameters have a .grad, with torch's values (a zero gradient exactly zero)."""
    scale = max(p.grad.abs().max() for p in original.parameters() if p.grad is not None)
    for (name, theirs), ours in zip(original.named_parameters(), converted.parameters()):
        assert (ours.grad is None) == (theirs.grad is None), f"{name}: torch's grad {theirs.grad}, ours {ours.grad}"
        if theirs.grad is None:
            continue
        if not theirs.grad.any():
            assert not ours.grad.any(), name
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=0, atol=GRADIENT_TOLERANCE * scale, msg=name)


@pytest.mark.parametrize(ARGNAMES, PARAMS)
def test_a_gradient_penalty_only_backward_gives_torchs_gradients(conv, norm, activation, bias, training, backend):
    model, x = block(conv, norm, activation, bias)
    original, converted = torch_and_converted(model, training)
    for model in (original, converted):
        r1_only_backward(model, x)
    assert_gradients_as_torch(original, converted)


@pytest.mark.parametrize(ARGNAMES, PARAMS)
def test_a_gradient_penalty_through_a_next_layer_gives_torchs_gradients(conv, norm, activation, bias, training,
                                                                       backend):
    """The run followed by a layer, as in a critic (a ResNet block's second half): torch's convolution backward,
    differentiated again, gives its input no gradient (it needs only the weight's path), so the run's output gets
    none, and torch leaves the norm bias (in eval the conv bias too) of a run without activation with none."""
    model, x = block(conv, norm, activation, bias)
    model.append(nn.Linear(6, 2) if conv == "linear" else nn.Conv2d(6, 2, 3))
    original, converted = torch_and_converted(model, training)
    for model in (original, converted):
        r1_only_backward(model, x)
    assert_gradients_as_torch(original, converted)


def conv_bias_gradient_is_noise(norm: str, training: bool) -> bool:
    """Whether the penalty's gradient of the conv bias is zero up to rounding: the norm's statistics then cancel the
    bias (BatchNorm in training, InstanceNorm whenever it normalises with the batch's statistics)."""
    batch_statistics = training or norm == "instance_norm"
    return batch_statistics and norm != "group_norm"


OPTIMIZERS = {"adam": lambda p: torch.optim.Adam(p, lr=1e-2),
              "sgd": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9, dampening=0.1, weight_decay=1e-2)}


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize(ARGNAMES, PARAMS)
def test_an_r1_step_then_a_loss_step_moves_the_parameters_as_torch(conv, norm, activation, bias, training, optimizer,
                                                                  backend):
    """StyleGAN2's lazy regularisation: an R1-only backward and step, then an ordinary loss's. A zero gradient (not
    None) starts Adam's state (its step count, hence the next step's bias correction), and SGD's weight decay and
    dampened momentum. A gradient that is rounding noise of a zero (the conv bias the norm cancels) moves a
    parameter by about Adam's lr in torch too, the sign the noise's: there only Adam's state is compared."""
    model, x = block(conv, norm, activation, bias)
    models = torch_and_converted(model, training)
    optimizers = [OPTIMIZERS[optimizer](m.parameters()) for m in models]
    for step in (r1_only_backward, lambda m, x: critic_output(m, x).backward()):
        for model, opt in zip(models, optimizers):
            opt.zero_grad()
            step(model, x)
            opt.step()
    noise = bias and conv_bias_gradient_is_noise(norm, training) and optimizer == "adam"
    for (name, theirs), ours in zip(models[0].named_parameters(), models[1].parameters()):
        # which state it has (Adam's step count and averages, SGD's momentum buffer): none after a None gradient
        states = [opt.state.get(p, {}) for opt, p in zip(optimizers, (theirs, ours))]
        assert sorted(states[1]) == sorted(states[0]) and states[1].get("step") == states[0].get("step"), name
        if not (noise and name == "0.bias"):
            torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5, msg=name)


# (conv, norm, momentum): the norms with running statistics; momentum None is BatchNorm's cumulative average, and
# InstanceNorm's momentum 0 (torch copies the unchanged statistics in: a bump all the same)
STATISTICS_CASES = [("conv2d", "batch_norm", 0.1), ("linear", "batch_norm", None),
                    ("conv_transpose2d", "batch_norm", 0.1), ("conv2d", "instance_norm_tracked", 0.1),
                    ("conv_transpose2d", "instance_norm_tracked", None)]
FAST_STATISTICS = [("conv2d", "batch_norm", 0.1), ("conv2d", "instance_norm_tracked", 0.1)]


@pytest.mark.parametrize("conv, norm, momentum", [
    pytest.param(*case, marks=() if case in FAST_STATISTICS else slow) for case in STATISTICS_CASES])
def test_a_training_forward_bumps_the_running_statistics_versions_as_torch(conv, norm, momentum, backend):
    model, x = block(conv, norm, "leaky_relu", True)
    model[1].momentum = momentum
    models = torch_and_converted(model, True)
    for training in (True, False):  # eval reads them, and writes nothing
        versions = []
        for model in models:
            model.train(training)
            before = {name: b._version for name, b in model.named_buffers()}
            model(x)
            versions.append({name: b._version - before[name] for name, b in model.named_buffers()})
        assert versions[1] == versions[0]
        for (name, theirs), ours in zip(models[0].named_buffers(), models[1].buffers()):
            torch.testing.assert_close(ours, theirs, msg=name)
