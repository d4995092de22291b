"""Conv1d -> BatchNorm1d (-> LeakyReLU, ReLU or nothing) on (N, C, L) inputs, fused by `convert` as a (1, K)
convolution over (N, C, 1, L) through the Conv2d op: as the unconverted torch model on every CPU backend (values,
gradients of the input and every parameter, running statistics, steps, checkpoints, train/eval, double backward,
autocast, compile); padding strings fuse, other padding modes and inputs the Conv1d refuses run the modules (torch's
errors, nothing changed); a single value per channel in training is torch's error and changes nothing."""

import copy

import pytest
import torch
from torch import nn

import ascend_acts
from ascend_acts import backends
from gan_models import (
    assert_autocast_as_torch,
    assert_compiled_as_torch,
    assert_gradient_penalty_as_torch,
    assert_training_step_as_torch,
)
from gan_models import sequence_discriminator as discriminator
from markers import fast_only, slow
from op_counter import OpCounter

RUNS, LENGTH = 3, 24


def dtype_of(backend):
    return torch.float64 if backend == "reference" else torch.float32  # the kernels have no float64


def tolerance(dtype):
    return dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=5e-4, atol=5e-4)


def assert_state_unchanged(model, before):
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key


@pytest.mark.parametrize("bn", [{}, pytest.param({"momentum": None}, marks=slow),
                                pytest.param({"affine": False}, marks=slow),
                                pytest.param({"track_running_stats": False}, marks=slow)],
                         ids=["default", "momentum=None", "affine=False", "no running stats"])
@pytest.mark.parametrize("activation", ["leaky", pytest.param("relu", marks=slow), pytest.param("none", marks=slow)])
# the fast subset: the default backend (the op tests run every backend)
@pytest.mark.parametrize("backend", fast_only(backends.known_backends(), ["reference"]), indirect=True)
def test_sequence_discriminators_fuse_and_train_like_torch(activation, bn, backend):
    dtype = dtype_of(backend)
    original = discriminator(activation, dtype, **bn)
    converted = ascend_acts.convert(copy.deepcopy(original))
    tol = tolerance(dtype)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for m in (original, converted)]
    for step, training in enumerate([True, True, False, True, False]):
        original.train(training), converted.train(training)
        x = torch.randn(4, 3, LENGTH, dtype=dtype)
        if step == 3:  # channels innermost: torch's conv1d still returns a contiguous output, and so does ours
            x = x.transpose(1, 2).contiguous().transpose(1, 2)
        xs, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
        with OpCounter() as counter:
            got = converted(xc)
        assert counter.fused == RUNS  # one op per run
        aten = ("batch_norm", "native_batch_norm", "_native_batch_norm_legit", "relu", "leaky_relu")
        assert not any(name.startswith(aten) for name in counter.calls), counter.calls  # nothing aten of its own
        assert counter.calls["convolution"] == 1  # the head's, outside the runs
        expected = original(xs)
        assert got.stride() == expected.stride()
        torch.testing.assert_close(got, expected, **tol)
        assert_training_step_as_torch(original, converted, optimizers, expected, got, xs, xc, step, **tol)
    # a checkpoint round trip: the converted model's state loads into torch's and back
    again = discriminator(activation, dtype, **bn)
    again.load_state_dict(converted.state_dict())
    converted.load_state_dict(again.state_dict())
    x = torch.randn(2, 3, LENGTH, dtype=dtype)
    torch.testing.assert_close(converted.eval()(x), again.eval()(x), **tol)


@pytest.mark.parametrize("activation", ["leaky", pytest.param("relu", marks=slow), pytest.param("none", marks=slow)])
def test_double_backward_as_torch(activation, backend):
    dtype = dtype_of(backend)
    original = discriminator(activation, dtype)
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert_gradient_penalty_as_torch(original, converted, torch.randn(3, 3, LENGTH, dtype=dtype), **tolerance(dtype))


def test_explain_shows_the_runs_fused_and_the_padding_modes_that_are_not():
    model = nn.Sequential(*discriminator("leaky")[:6], nn.Conv1d(8, 4, 3, padding=1, padding_mode="reflect"),
                          nn.BatchNorm1d(4), nn.ReLU(), nn.Conv1d(4, 4, 3, padding="valid"), nn.BatchNorm1d(4),
                          nn.Conv1d(4, 4, 1), ascend_acts.nn.SyncBatchNorm(4))
    table = ascend_acts.explain(model, torch.randn(4, 3, LENGTH))
    assert [r.pattern for r in table] == ["Conv1d -> BatchNorm1d -> LeakyReLU"] * 2 + [
        "Conv1d -> BatchNorm1d -> ReLU", "Conv1d -> BatchNorm1d -> none", "Conv1d -> SyncBatchNorm -> none"]
    assert [r.fused for r in table] == [True, True, False, True, False]
    assert table[2].reason == "padding_mode='reflect' (only 'zeros' fuses)"
    assert table[4].reason == "the norm after a Conv1d is a SyncBatchNorm, not exactly nn.BatchNorm1d"
    assert table[0].saved_bytes_converted < table[0].saved_bytes_torch  # InPlace-ABN: the output, not the conv's


def test_a_single_value_per_channel_in_training_is_torchs_error_and_changes_nothing(backend):
    """A batch of 1 whose conv output has length 1: BatchNorm1d's error names its (1, C, 1) input, not the op's view."""
    model = nn.Sequential(nn.Conv1d(3, 4, 5), nn.BatchNorm1d(4), nn.LeakyReLU(0.2))
    converted = ascend_acts.convert(copy.deepcopy(model))
    before = copy.deepcopy(converted.state_dict())
    x = torch.randn(1, 3, 5)
    with pytest.raises(ValueError) as torchs:
        model(x)
    with pytest.raises(ValueError) as ours:
        converted(x)
    assert str(ours.value) == str(torchs.value) == ("Expected more than 1 value per channel when training, got input "
                                                    "size torch.Size([1, 4, 1])")
    assert_state_unchanged(converted, before)
    # in eval the running statistics normalise it: fused, as torch
    model.eval(), converted.eval()
    with OpCounter() as counter:
        got = converted(x)
    assert counter.fused == 1
    torch.testing.assert_close(got, model(x), **tolerance(torch.float32))


@pytest.mark.parametrize("x", [torch.randn(2, 4, LENGTH), torch.randn(2, 3, 1), torch.randn(2, 3, LENGTH).double()],
                         ids=["channels", "too short", "float64"])
def test_an_input_the_conv1d_refuses_is_torchs_error_and_changes_nothing(x):
    model = discriminator("leaky")
    converted = ascend_acts.convert(copy.deepcopy(model))
    before = copy.deepcopy(converted.state_dict())
    with pytest.raises(RuntimeError) as torchs:
        model(x)
    with OpCounter() as counter, pytest.raises(RuntimeError) as ours:
        converted(x)
    assert str(ours.value) == str(torchs.value)
    assert counter.fused == 0
    assert_state_unchanged(converted, before)
    assert ascend_acts.explain(converted, torch.randn(2, 3, LENGTH))[0].fused  # the same model fuses a good input


def test_an_unbatched_input_runs_the_modules_as_torch():
    """Conv1d on (C, L) gives (C_out, L), which BatchNorm1d(L) normalises as a batch of C_out rows: not fused."""
    dtype = torch.float32
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv1d(3, 6, 1), nn.BatchNorm1d(6), nn.LeakyReLU(0.2, True)).to(dtype)
    converted = ascend_acts.convert(copy.deepcopy(model))
    x = torch.randn(3, 6, dtype=dtype)
    with OpCounter() as counter:
        got = converted(x)
    assert counter.fused == 0
    torch.testing.assert_close(got, model(x), **tolerance(dtype))
    for (key, a), b in zip(converted.state_dict().items(), model.state_dict().values()):
        torch.testing.assert_close(a, b, **tolerance(dtype), msg=key)
    (run,) = ascend_acts.explain(model, x)
    assert not run.fused and run.reason == "a 2-D input to the Conv1d (only (N, C, L) fuses)"


@slow
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_autocast_as_torch(dtype, backend):
    """Under autocast the conv runs in the half type, BN's parameters and statistics stay float32: within 2x torch's
    own error against float64."""
    original = discriminator("leaky")
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert_autocast_as_torch(original, converted, torch.randn(4, 3, LENGTH), dtype, RUNS)


@slow
@pytest.mark.parametrize("training", [True, False])
def test_compile_fullgraph(training, backend):
    original = discriminator("leaky").train(training)
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert_compiled_as_torch(original, converted, torch.randn(4, 3, LENGTH), **tolerance(torch.float32))
