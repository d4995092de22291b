"""Linear -> BatchNorm1d (-> LeakyReLU, ReLU or nothing) on (N, F) inputs, fused by `convert` as a 1x1 convolution
through the Conv2d op (PyTorch-GAN's MLP generators: `nn.Linear(in, out), nn.BatchNorm1d(out, 0.8),
nn.LeakyReLU(0.2, inplace=True)`): as the unconverted torch model on every CPU backend (values, gradients of the
input and every parameter, running statistics, steps, checkpoints, train/eval, double backward); a batch of 1 in
training is torch's error and changes nothing; a 3-D input runs the modules."""

import copy

import pytest
import torch
from torch import nn

import ascend_acts
from gan_models import assert_compiled_as_torch, assert_gradient_penalty_as_torch, assert_training_step_as_torch
from markers import slow
from op_counter import OpCounter

ACTIVATIONS = {
    "leaky": lambda: nn.LeakyReLU(0.2, inplace=True),
    "relu": lambda: nn.ReLU(inplace=True),
    "none": lambda: None,
}
LATENT, SIZES = 6, (8, 12, 16)


def generator(activation: str, dtype=torch.float32, **bn) -> nn.Sequential:
    """PyTorch-GAN's MLP generator, small: (Linear -> BatchNorm1d(eps 0.8) -> activation) x 3, Linear, Tanh."""
    torch.manual_seed(5)
    layers, width = [], LATENT
    for size in SIZES:
        act = ACTIVATIONS[activation]()
        layers += [nn.Linear(width, size), nn.BatchNorm1d(size, 0.8, **bn), *([act] if act is not None else [])]
        width = size
    model = nn.Sequential(*layers, nn.Linear(width, 10), nn.Tanh()).to(dtype)
    with torch.no_grad():  # about half the BN outputs negative, and affine parameters that matter
        for module in model:
            if isinstance(module, nn.BatchNorm1d) and module.affine:
                module.weight.uniform_(0.5, 1.5), module.bias.uniform_(-0.5, 0.5)
    return model


def dtype_of(backend):
    return torch.float64 if backend == "reference" else torch.float32  # the kernels have no float64


def tolerance(dtype):
    return dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=3e-4, atol=3e-4)


@pytest.mark.parametrize("bn", [{}, pytest.param({"momentum": None}, marks=slow),
                                pytest.param({"affine": False}, marks=slow),
                                pytest.param({"track_running_stats": False}, marks=slow)],
                         ids=["default", "momentum=None", "affine=False", "no running stats"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_mlp_generators_fuse_and_train_like_torch(activation, bn, backend):
    dtype = dtype_of(backend)
    original = generator(activation, dtype, **bn)
    converted = ascend_acts.convert(copy.deepcopy(original))
    tol = tolerance(dtype)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for m in (original, converted)]
    for step, training in enumerate([True, True, False, True, False]):
        original.train(training), converted.train(training)
        x = torch.randn(5, LATENT, dtype=dtype)
        xs, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
        with OpCounter() as counter:
            got = converted(xc)
        assert counter.fused == len(SIZES)  # one op per run
        aten = ("batch_norm", "native_batch_norm", "_native_batch_norm_legit", "relu", "leaky_relu")
        assert not any(name.startswith(aten) for name in counter.calls), counter.calls  # nothing aten of its own
        assert counter.calls["addmm"] == 1  # the last Linear's, outside the runs
        expected = original(xs)
        torch.testing.assert_close(got, expected, **tol)
        assert_training_step_as_torch(original, converted, optimizers, expected, got, xs, xc, step, **tol)
    # a checkpoint round trip: the converted model's state loads into torch's and back
    again = generator(activation, dtype, **bn)
    again.load_state_dict(converted.state_dict())
    converted.load_state_dict(again.state_dict())
    x = torch.randn(4, LATENT, dtype=dtype)
    torch.testing.assert_close(converted.eval()(x), again.eval()(x), **tol)


@pytest.mark.parametrize("activation", ["leaky", pytest.param("relu", marks=slow), "none"])
def test_double_backward_as_torch(activation, backend):
    dtype = dtype_of(backend)
    original = generator(activation, dtype)
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert_gradient_penalty_as_torch(original, converted, torch.randn(5, LATENT, dtype=dtype), **tolerance(dtype))


def test_explain_shows_the_runs_fused():
    model = nn.Sequential(nn.Linear(LATENT, 8), nn.BatchNorm1d(8, 0.8), nn.LeakyReLU(0.2, True),
                          nn.Linear(8, 8), nn.BatchNorm1d(8, 0.8), nn.LeakyReLU(0.2, True),
                          nn.Linear(8, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU())
    table = ascend_acts.explain(model, torch.randn(64, LATENT))
    assert [r.pattern for r in table] == ["Linear -> BatchNorm1d -> LeakyReLU"] * 2 + [
        "Linear -> BatchNorm1d -> none", "Linear -> BatchNorm1d -> ReLU"]
    assert all(r.fused for r in table)
    # LeakyReLU runs keep their output; the others their conv output, here cheap to recompute (K = in_features <= 8;
    # the weight copies recomputing keeps are smaller than the (64, 4) outputs)
    assert [r.reason for r in table] == ["", ""] + ["recomputes the conv output in backward"] * 2


def test_a_batch_of_one_in_training_is_torchs_error_and_changes_nothing(backend):
    model = generator("leaky")
    converted = ascend_acts.convert(copy.deepcopy(model))
    before = copy.deepcopy(converted.state_dict())
    x = torch.randn(1, LATENT)
    with pytest.raises(ValueError) as torchs:
        model(x)
    with pytest.raises(ValueError) as ours:
        converted(x)
    assert str(ours.value) == str(torchs.value)
    assert "Expected more than 1 value per channel when training" in str(ours.value)
    for key, value in converted.state_dict().items():
        assert torch.equal(value, before[key]), key
    # in eval a single sample uses the running statistics: fused, as torch
    model.eval(), converted.eval()
    with OpCounter() as counter:
        got = converted(x)
    assert counter.fused == len(SIZES)
    torch.testing.assert_close(got, model(x), **tolerance(torch.float32))


@pytest.mark.parametrize("x", [torch.randn(4, LATENT + 1), torch.randn(4, LATENT, dtype=torch.float64),
                               torch.randint(0, 3, (4, LATENT))], ids=["features", "float64", "int64"])
def test_an_input_the_linear_refuses_is_torchs_error_and_changes_nothing(x):
    model = generator("leaky")
    converted = ascend_acts.convert(copy.deepcopy(model))
    before = copy.deepcopy(converted.state_dict())
    with pytest.raises(RuntimeError) as torchs:
        model(x)
    with pytest.raises(RuntimeError) as ours:
        converted(x)
    assert str(ours.value) == str(torchs.value) and "mat1 and mat2" in str(ours.value)
    for key, value in converted.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_a_3d_input_runs_the_modules_as_torch(backend):
    """Linear on (N, L, F) then BatchNorm1d over (N, C, L) (C = L here): other planes share statistics; unfused."""
    dtype = dtype_of(backend)
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8, 0.8), nn.LeakyReLU(0.2, True)).to(dtype)
    converted = ascend_acts.convert(copy.deepcopy(model))
    x = torch.randn(3, 8, 5, dtype=dtype)
    xs, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    with OpCounter() as counter:
        got = converted(xc)
    assert counter.fused == 0
    expected = model(xs)
    torch.testing.assert_close(got, expected, **tolerance(dtype))
    got.square().sum().backward(), expected.square().sum().backward()
    torch.testing.assert_close(xc.grad, xs.grad, **tolerance(dtype))
    for (key, a), b in zip(converted.state_dict().items(), model.state_dict().values()):
        torch.testing.assert_close(a, b, **tolerance(dtype), msg=key)
    (run,) = ascend_acts.explain(model, x)
    assert not run.fused and run.reason == "a 3-D input to the Linear (only (N, F) fuses)"


def test_unfused_linear_runs_say_why():
    class MyLinear(nn.Linear):
        pass

    hooked = nn.Linear(4, 4)
    hooked.register_forward_hook(lambda *args: None)
    model = nn.Sequential(MyLinear(4, 4), nn.BatchNorm1d(4), nn.ReLU(),
                          nn.Linear(4, 4), ascend_acts.nn.SyncBatchNorm(4), nn.ReLU(),
                          hooked, nn.BatchNorm1d(4), nn.ReLU())
    table = ascend_acts.explain(model, torch.randn(3, 4))
    assert [r.fused for r in table] == [False, False, False]
    assert table[0].reason == "the conv is a MyLinear, not exactly nn.Linear (its forward may differ)"
    assert table[1].reason == "the norm after a Linear is a SyncBatchNorm, not exactly nn.BatchNorm1d"
    assert table[2].reason == "a hook on the Linear"


@slow
@pytest.mark.parametrize("training", [True, False])
def test_compile_fullgraph(training, backend):
    original = generator("leaky").train(training)
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert_compiled_as_torch(original, converted, torch.randn(5, LATENT), **tolerance(torch.float32))
