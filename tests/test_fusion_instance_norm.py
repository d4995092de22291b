"""Conv2d / ConvTranspose2d -> InstanceNorm2d / GroupNorm (-> ReLU, LeakyReLU or nothing), fused by `convert` through
the op's norm_groups: CycleGAN's ResNet generator and the pix2pix/CycleGAN PatchGAN discriminator (gan_models), with
instance norm as they build it, with affine parameters and running statistics, and with GroupNorm, as the
unconverted torch model on every CPU backend: outputs, every gradient, running statistics (num_batches_tracked never
counted), optimizer steps, train/eval, checkpoints, channels_last, gradient penalties through an instance-norm critic
(double backward), autocast, threads, torch.compile; torch's module rules (a num_features mismatch, unbatched inputs,
a single spatial element) run the modules, and bad input raises torch's error type, changing nothing."""

import copy
import threading
import warnings

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
    patch_discriminator,
    resnet_generator,
)
from markers import fast_only, slow
from op_counter import OpCounter

# (builder, image side, fused runs): the generator's 2 blocks hold 2 runs each (their norms normalise 4x4 positions: on
# 2x2 float32 training steps diverge from float64 within a few steps, torch's as ours); the critic sees 32x32 (its last
# norm then normalises 3x3 positions)
MODELS = {"generator": (resnet_generator, 16, 9), "critic": (patch_discriminator, 32, 3)}
NORMS = ["instance", "instance affine", "instance tracked", "instance momentum=None", "group",
         "group per channel pair no affine"]
# every norm configuration on the critic, CycleGAN's default and GroupNorm on the (slower) generator; one in the fast
# subset
CASES = [("critic", norm) for norm in NORMS] + [("generator", "instance"), ("generator", "group")]
ATEN_NORMS = ("batch_norm", "native_batch_norm", "_native_batch_norm_legit", "instance_norm", "group_norm",
              "native_group_norm")


def dtype_of(backend):
    return torch.float64 if backend == "reference" else torch.float32  # the kernels have no float64


def tolerance(dtype, runs=1):
    """float32: per fused layer the input gradient passes through (each norm's backward amplifies the rounding of
    the layers after it)."""
    return dict(rtol=1e-9, atol=1e-9) if dtype == torch.float64 else dict(rtol=2e-4 * runs, atol=2e-4 * runs)


def models(name, norm, dtype):
    """(torch's, converted): the same weights."""
    original = MODELS[name][0](norm, dtype)
    return original, ascend_acts.convert(copy.deepcopy(original))


def images(name, n=2, dtype=torch.float32, seed=None):
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    side = MODELS[name][1]
    return torch.randn(n, 3, side, side, dtype=dtype, generator=generator)


def assert_state_unchanged(model, before):
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key


# the fast subset: the default backend (the op tests run every backend)
@pytest.mark.parametrize("backend", fast_only(backends.known_backends(), ["reference"]), indirect=True)
@pytest.mark.parametrize("name, norm", fast_only(CASES, [("critic", "instance tracked")], unpack=True))
def test_cyclegan_networks_fuse_every_run_and_train_like_torch(name, norm, backend):
    dtype = dtype_of(backend)
    original, converted = models(name, norm, dtype)
    runs = MODELS[name][2]
    tol = tolerance(dtype, runs)
    # SGD with a small step: steps moving weights by O(1) flip ReLU masks on rounding differences
    optimizers = [torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9) for m in (original, converted)]
    for step, training in enumerate([True, True, False, True, False]):
        original.train(training), converted.train(training)
        x = images(name, dtype=dtype)
        if step in (3, 4):
            x = x.contiguous(memory_format=torch.channels_last)
        xs, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
        with OpCounter() as counter:
            got = converted(xc)
        assert counter.fused == runs  # every Conv -> norm run is one op of ours
        assert not any(name.startswith(ATEN_NORMS) for name in counter.calls), counter.calls
        # no activation of its own: the only LeakyReLU call is the critic's first one (ours, after a plain conv)
        assert counter.calls["relu"] + counter.calls["relu_"] + counter.calls["leaky_relu"] == 0, counter.calls
        assert counter.calls["leaky_relu_"] == (name == "critic"), counter.calls
        expected = original(xs)
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, **tol)
        assert_training_step_as_torch(original, converted, optimizers, expected, got, xs, xc, step, **tol)
    for key, value in converted.state_dict().items():
        if key.endswith("num_batches_tracked"):  # InstanceNorm2d never counts batches
            assert int(value) == 0, key
    # a checkpoint round trip: the converted model's state loads into torch's and back
    again = MODELS[name][0](norm, dtype, seed=1)
    again.load_state_dict(converted.state_dict())
    converted.load_state_dict(again.state_dict())
    x = images(name, dtype=dtype)
    for training in (False, True):
        torch.testing.assert_close(converted.train(training)(x), again.train(training)(x), **tol)


@pytest.mark.parametrize("norm", fast_only(["instance", "instance tracked", "group"], ["instance"]))
def test_gradient_penalty_through_an_instance_norm_critic_as_torch(norm, backend):
    """WGAN-GP / R1 through the PatchGAN: the penalty and its gradient of every parameter (double backward)."""
    dtype = dtype_of(backend)
    original, converted = models("critic", norm, dtype)
    assert_gradient_penalty_as_torch(original, converted, images("critic", dtype=dtype), **tolerance(dtype, 3))


@slow
def test_gradient_penalty_through_the_generator_as_torch(backend):
    """Path-length-style: through ConvTranspose2d -> InstanceNorm2d -> ReLU runs and the residual blocks."""
    dtype = dtype_of(backend)
    original, converted = models("generator", "instance affine", dtype)
    assert_gradient_penalty_as_torch(original, converted, images("generator", dtype=dtype), **tolerance(dtype, 9))


@pytest.mark.parametrize("training", fast_only([True, False], [True]))
@pytest.mark.parametrize("name", fast_only(MODELS, ["critic"]))
def test_explain_shows_every_run_fused(name, training):
    for norm in ("instance tracked", "group"):
        model = MODELS[name][0](norm).train(training)
        table = ascend_acts.explain(model, images(name))
        assert len(table) == MODELS[name][2] and all(r.fused for r in table), str(table)
        norm_class = "InstanceNorm2d" if norm.startswith("instance") else "GroupNorm"
        assert {r.pattern.split(" -> ")[-2] for r in table} == {norm_class}  # a pad may open the run
        folded = not training and norm == "instance tracked"
        if name == "generator" and not folded:
            # the ReLU runs, where the op normalises with the batch's statistics, recompute their cheap convs where
            # the weight copy that keeps is smaller than the conv output (at this size: the first and the last)
            recompute = "recomputes the conv output in backward"
            assert all(r.reason in ("", recompute) for r in table), str(table)
            assert {"<model>[0:4]", "<model>[15:18]"} <= {r.path for r in table if r.reason == recompute}, str(table)
        else:
            notes = ["eval: running statistics folded into the conv"] * folded
            assert all(r.reason == "; ".join(notes) for r in table), str(table)
        if training and name == "critic":  # InPlace-ABN: the LeakyReLU runs keep their output, not the conv output
            assert all(r.saved_bytes_converted < r.saved_bytes_torch for r in table), str(table)


def test_a_num_features_mismatch_runs_the_modules_as_torch():
    """InstanceNorm2d(affine=False) over other channels than the conv's: torch warns and normalises what it gets;
    affine=True is torch's ValueError. Neither fuses."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(6), nn.ReLU())
    converted = ascend_acts.convert(copy.deepcopy(model))
    x = torch.randn(2, 3, 8, 8)
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        expected = model(x)
    with warnings.catch_warnings(record=True) as ours, OpCounter() as counter:
        warnings.simplefilter("always")
        got = converted(x)
    assert counter.fused == 0 and torch.equal(got, expected)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs] and theirs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (run,) = ascend_acts.explain(model, x)
    assert not run.fused
    assert run.reason == ("the InstanceNorm2d's num_features differs from the conv's out_channels "
                          "(torch warns or raises)")
    affine = ascend_acts.convert(nn.Sequential(nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(6, affine=True), nn.ReLU()))
    with pytest.raises(ValueError, match="to match num_features"):
        affine(x)


@pytest.mark.parametrize("case", fast_only(["instance eps=0", "group eps<0", "instance statistics of another dtype"],
                                           ["instance statistics of another dtype"]))
def test_what_only_torchs_per_sample_norms_take_runs_the_modules(case):
    """instance_norm and group_norm take an eps <= 0 (batch_norm refuses it in training), and an untracked-affine
    InstanceNorm running statistics of another dtype than its input: the modules run, as torch's, in train and eval."""
    torch.manual_seed(0)
    norm = {"instance eps=0": nn.InstanceNorm2d(4, eps=0.0), "group eps<0": nn.GroupNorm(2, 4, eps=-1e-4),
            "instance statistics of another dtype": nn.InstanceNorm2d(4, track_running_stats=True).double()}[case]
    model = nn.Sequential(nn.Conv2d(3, 4, 3), norm, nn.LeakyReLU(0.2))
    converted = ascend_acts.convert(copy.deepcopy(model))
    x = torch.randn(2, 3, 8, 8)
    for training in (True, False):
        model.train(training), converted.train(training)
        with OpCounter() as counter:
            got = converted(x)
        assert counter.fused == 0 and torch.equal(got, model(x))
        for key, value in model.state_dict().items():
            assert torch.equal(converted.state_dict()[key], value), key
    (run,) = ascend_acts.explain(model, x)
    assert not run.fused and ("eps" in run.reason or "dtype" in run.reason)


@pytest.mark.parametrize("norm", ["instance tracked", "group"])
def test_an_unbatched_input_runs_the_modules_as_torch(norm):
    """torch's Conv2d and InstanceNorm2d take a 3-D (C, H, W) input (GroupNorm raises for it); the run is not
    fused."""
    dtype = torch.float32
    original, converted = models("critic", norm, dtype)
    x = images("critic", dtype=dtype)[0]
    if norm == "group":  # GroupNorm takes dimension 1 for the channels
        with pytest.raises(RuntimeError) as torchs:
            original(x)
        with pytest.raises(RuntimeError) as ours:
            converted(x)
        assert str(ours.value) == str(torchs.value)
        return
    with OpCounter() as counter:
        got = converted(x)
    assert counter.fused == 0
    torch.testing.assert_close(got, original(x), **tolerance(dtype))
    for (key, a), b in zip(converted.state_dict().items(), original.state_dict().values()):
        torch.testing.assert_close(a, b, **tolerance(dtype), msg=key)
    assert {r.reason for r in ascend_acts.explain(original, x)} == {"an unbatched (3-D) input"}


@pytest.mark.parametrize("case", ["instance norm of 1x1", "group norm of one value"])
def test_a_single_value_per_statistic_is_torchs_error_and_changes_nothing(case, backend):
    if case == "instance norm of 1x1":
        norm, x = nn.InstanceNorm2d(4, affine=True, track_running_stats=True), torch.randn(2, 3, 3, 3)
        message = "Expected more than 1 spatial element when training"
    else:
        norm, x = nn.GroupNorm(4, 4), torch.randn(1, 3, 3, 3)
        message = "Expected more than 1 value per channel when training"
    model = nn.Sequential(nn.Conv2d(3, 4, 3), norm, nn.LeakyReLU(0.2))
    converted = ascend_acts.convert(copy.deepcopy(model))
    before = copy.deepcopy(converted.state_dict())
    with pytest.raises(ValueError) as torchs:
        model(x)
    with pytest.raises(ValueError) as ours:
        converted(x)
    assert str(ours.value) == str(torchs.value) and message in str(ours.value)
    assert_state_unchanged(converted, before)
    if case == "instance norm of 1x1":  # in eval the running statistics normalise it: fused, as torch
        model.eval(), converted.eval()
        with OpCounter() as counter:
            got = converted(x)
        assert counter.fused == 1
        torch.testing.assert_close(got, model(x), **tolerance(torch.float32))


@pytest.mark.parametrize("x", [torch.randn(2, 4, 16, 16), torch.randn(2, 3, 16, 16).double()],
                         ids=["channels", "float64"])
def test_bad_input_is_torchs_error_type_and_changes_nothing(x):
    """The generator's first run (after a ReflectionPad2d) gets the bad input: the op refuses it before it writes."""
    original, converted = models("generator", "instance tracked", torch.float32)
    before = copy.deepcopy(converted.state_dict())
    with pytest.raises(RuntimeError):
        original(x)
    with pytest.raises(RuntimeError):
        converted(x)
    assert_state_unchanged(converted, before)


@slow
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("norm", ["instance tracked", "group"])
def test_autocast_as_torch(norm, dtype, backend):
    """Under autocast the conv runs in the half type and so does the norm (CPU autocast keeps instance_norm and
    group_norm in the input's type); the parameters and running statistics stay float32. Within 2x torch's own error
    against float64."""
    original, converted = models("critic", norm, torch.float32)
    assert_autocast_as_torch(original, converted, images("critic"), dtype, 3)


@slow
def test_threads_give_the_single_thread_results(backend):
    """Two threads train their own converted critics at once, each in its `with use_backend` block."""
    dtype = dtype_of(backend)
    results, errors = {}, []
    converted = {seed: models("critic", "instance tracked", dtype)[1] for seed in (1, 2)}  # seeds the global RNG

    def run(seed):
        try:
            with ascend_acts.use_backend(backend):
                x = images("critic", dtype=dtype, seed=seed)
                out = converted[seed](x)
                out.square().sum().backward()
                results[seed] = (out.detach(), converted[seed][2].weight.grad, converted[seed][3].running_mean.clone())
        except Exception as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for seed, (out, grad, running_mean) in results.items():
        original = patch_discriminator("instance tracked", dtype)
        expected = original(images("critic", dtype=dtype, seed=seed))
        expected.square().sum().backward()
        tol = tolerance(dtype, 3)
        torch.testing.assert_close(out, expected, **tol)
        torch.testing.assert_close(grad, original[2].weight.grad, **tol)
        torch.testing.assert_close(running_mean, original[3].running_mean, **tol)


@slow
@pytest.mark.parametrize("training", [True, False])
def test_compile_fullgraph(training, backend):
    original, converted = models("critic", "instance tracked", torch.float32)
    original.train(training), converted.train(training)
    assert_compiled_as_torch(original, converted, images("critic"), **tolerance(torch.float32, 3))
