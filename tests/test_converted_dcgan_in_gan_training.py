"""GAN practice on a converted model: the pytorch/examples DCGAN discriminator trained and evaluated
the way GAN code does (checkpoints, weights_init, hooks, spectral norm, weight clipping, EMA,
gradient penalties, autocast, threads, DataLoader workers ...), every case against the unconverted
torch model (a deepcopy taken before `ascend_acts.convert`). Issue 11."""

import copy
import os
import re
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ascend_acts
from gan_models import (
    NC,
    NDF,
    Discriminator,
    MinibatchStdDiscriminator,
    discriminator,
    images,
    torch_and_converted,
    weights_init,
)

NOT_REGISTERED = ".*autograd kernel was not registered.*"
F64 = torch.float64


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """torch's intra-op threads spin against the other processes on a shared 2-core machine (a DCGAN step
    takes 1 s instead of 20 ms); one thread keeps this module fast. Results are compared with tolerances."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def dtype_for(backend: str) -> torch.dtype:
    """float64 where the backend has it (reference); the AscendC kernels (sim) have no float64."""
    return torch.float32 if backend == "sim" else F64


def assert_same(actual, expected, dtype=F64):
    """Equal up to rounding. float64: 1e-9 relative. float32: 2e-4 relative, 40x the fused op's measured
    spread against torch's float32 result (4.6e-6, README), room for a few optimizer steps."""
    if dtype == F64:
        torch.testing.assert_close(actual, expected, rtol=1e-9, atol=1e-12)
    else:
        torch.testing.assert_close(actual, expected, rtol=2e-4, atol=2e-5)


def assert_models_equal(converted, reference, dtype=F64):
    """Every parameter and buffer, in module order (names may differ on a broken convert: compared by position)."""
    ours, theirs = list(converted.parameters()), list(reference.parameters())
    assert [p.shape for p in ours] == [p.shape for p in theirs]
    for a, b in zip(ours, theirs):
        assert_same(a.detach(), b.detach(), dtype)
    ours, theirs = list(converted.buffers()), list(reference.buffers())
    assert [b.shape for b in ours] == [b.shape for b in theirs]
    for a, b in zip(ours, theirs):
        if b.is_floating_point():
            assert_same(a, b, dtype)
        else:
            assert torch.equal(a, b)


def models_for(backend, make):
    """[converted, unconverted] in the backend's dtype; on sim (float32) also the unconverted model in float64
    with the same float32 weights, the exact answer both float32 results are judged against."""
    dtype = dtype_for(backend)
    netD, converted = torch_and_converted(make(dtype))
    models = [converted, netD]
    if dtype != F64:
        models.append(copy.deepcopy(netD).double())
    return models


def dtype_of(model):
    return next(model.parameters()).dtype


def assert_as_torch(values):
    """values = [ours, torch's] (float64: equal to rounding) or [ours, torch's float32, exact float64]: then
    our float32 error may be at most 4x torch's own float32 error (plus a few float32 ulps of the values)."""
    ours, theirs, *exact = values
    if not exact:
        assert_same(ours, theirs)
        return
    exact = exact[0]
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape == exact.shape
    torch_error = (theirs.double() - exact).abs().max().item()
    our_error = (ours.double() - exact).abs().max().item()
    floor = 8 * torch.finfo(torch.float32).eps * exact.abs().max().item()
    assert our_error <= 4 * torch_error + floor, f"error {our_error:.3g} vs torch's float32 error {torch_error:.3g}"


def assert_grads_as_torch(models):
    for params in zip(*(m.parameters() for m in models), strict=True):
        assert all((p.grad is None) == (params[1].grad is None) for p in params)
        if params[1].grad is not None:
            assert_as_torch([p.grad for p in params])


def dcgan_d_step(netD, optimizer, real, fake):
    """One discriminator step of pytorch/examples dcgan/main.py (BCE on real then fake)."""
    criterion = nn.BCELoss()
    netD.zero_grad()
    output = netD(real)
    errD_real = criterion(output, torch.full_like(output, 1.0))
    errD_real.backward()
    output = netD(fake.detach())
    errD_fake = criterion(output, torch.full_like(output, 0.0))
    errD_fake.backward()
    optimizer.step()
    return (errD_real + errD_fake).detach()


def adam(model):
    """The example's Adam betas; a larger lr than its 2e-4 so that a few steps visibly move the weights."""
    return torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.5, 0.999))


def conv_bn_discriminator(momentum=0.1, dtype=F64, seed=0):
    """A DCGAN-style discriminator whose first layer is Conv-BN-LeakyReLU, so a bad input reaches the block."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(NC, NDF, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF, momentum=momentum), nn.LeakyReLU(0.2, True),
        nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2, momentum=momentum),
        nn.LeakyReLU(0.2, True),
        nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False), nn.Flatten(),
    )
    model.apply(weights_init)
    return model.to(dtype)


def feature_extractor(trunk):
    """The usual GAN idiom for a discriminator's features: its nn.Sequential trunk without the last two layers
    (the final conv and the sigmoid or flatten)."""
    return nn.Sequential(*list(trunk.children())[:-2])


# --- checkpoints, weights_init, hooks ---------------------------------------------------------

@pytest.mark.slow
def test_checkpoint_round_trip_both_ways(tmp_path):
    netD, converted = torch_and_converted(discriminator())
    real, fake = images(4), images(4, seed=2)
    dcgan_d_step(converted, adam(converted), real, fake)
    # the pytorch/examples checkpoint layout (torch.save(netD.state_dict(), 'netD_epoch_%d.pth'))
    assert list(converted.state_dict()) == list(netD.state_dict())
    assert "main.3.running_mean" in converted.state_dict() and "main.2.weight" in converted.state_dict()
    torch.save(converted.state_dict(), tmp_path / "netD_epoch_0.pth")
    fresh = discriminator(seed=7)
    fresh.load_state_dict(torch.load(tmp_path / "netD_epoch_0.pth"), strict=True)
    assert_models_equal(fresh, converted)
    # and back: an unconverted checkpoint into a converted model
    dcgan_d_step(netD, adam(netD), real, fake)
    converted.load_state_dict(netD.state_dict(), strict=True)
    assert_models_equal(converted, netD)
    converted.eval(), netD.eval()
    with torch.no_grad():
        assert_same(converted(real), netD(real))


def test_weights_init_after_convert_initialises_like_torch():
    netD, converted = torch_and_converted(Discriminator().double())
    torch.manual_seed(3)
    netD.apply(weights_init)
    torch.manual_seed(3)
    converted.apply(weights_init)
    assert_models_equal(converted, netD)
    assert dict(converted.named_parameters()).keys() == dict(netD.named_parameters()).keys()
    for name, param in netD.named_parameters():
        assert torch.equal(dict(converted.named_parameters())[name], param), name


def test_indexing_and_len_of_main_unchanged():
    netD, converted = torch_and_converted(discriminator())
    assert len(converted.main) == len(netD.main)
    assert [type(m).__name__ for m in converted.main] == [type(m).__name__ for m in netD.main]
    assert converted.main[3].running_mean is converted.state_dict(keep_vars=True)["main.3.running_mean"]


@pytest.mark.parametrize("when", ["before_convert", "after_convert"])
def test_forward_hooks_inside_main_fire_with_torch_values(when):
    """Feature matching: hooks on the conv, BN and LeakyReLU of blocks (registered before or after convert)."""
    watched = [2, 3, 4, 8, 9, 10]

    def hook(model, store):
        for i in watched:
            model.main[i].register_forward_hook(lambda m, inp, out, i=i: store.__setitem__(i, out.detach().clone()))

    theirs, ours = {}, {}
    model = discriminator()
    if when == "before_convert":
        netD = copy.deepcopy(model)
        hook(netD, theirs), hook(model, ours)
        converted = ascend_acts.convert(model)
    else:
        netD, converted = torch_and_converted(model)
        hook(netD, theirs), hook(converted, ours)
    x = images(4)
    for training in (True, False):
        netD.train(training), converted.train(training)
        theirs.clear(), ours.clear()
        assert_same(converted(x), netD(x))
        assert sorted(ours) == sorted(theirs) == watched
        for i in watched:
            assert_same(ours[i], theirs[i])


def test_hooks_and_attributes_on_a_swapped_activation_survive_convert():
    """netD.main[1] (the first LeakyReLU, nothing to fuse) is swapped for ascend_acts' LeakyReLU: forward
    hooks, pre-hooks and attributes registered on it before convert must still be there."""
    model = discriminator()
    netD = copy.deepcopy(model)
    seen = {"ours": [], "theirs": []}
    for key, m in (("ours", model), ("theirs", netD)):
        m.main[1].register_forward_pre_hook(lambda mod, inp, key=key: seen[key].append(("pre", inp[0].clone())))
        m.main[1].register_forward_hook(lambda mod, inp, out, key=key: seen[key].append(("post", out.clone())))
        m.main[1].feature_name = "d_layer1"
    converted = ascend_acts.convert(model)
    x = images(2)
    assert_same(converted(x), netD(x))
    assert converted.main[1].feature_name == "d_layer1"
    assert [kind for kind, _ in seen["ours"]] == [kind for kind, _ in seen["theirs"]] == ["pre", "post"]
    for (_, a), (_, b) in zip(seen["ours"], seen["theirs"]):
        assert_same(a, b)


# --- spectral norm, weight clipping, EMA ------------------------------------------------------

SPECTRAL_NORMS = {
    "hook": torch.nn.utils.spectral_norm,
    "parametrization": torch.nn.utils.parametrizations.spectral_norm,
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", SPECTRAL_NORMS)
def test_spectral_norm_on_the_convs_trains_like_torch(kind):
    model = discriminator()
    for i in (0, 2, 5, 8, 11):
        SPECTRAL_NORMS[kind](model.main[i])
    netD, converted = torch_and_converted(model)
    ours, theirs = adam(converted), adam(netD)
    for step in range(3):
        real, fake = images(4, seed=10 + step), images(4, seed=20 + step)
        assert_same(dcgan_d_step(converted, ours, real, fake), dcgan_d_step(netD, theirs, real, fake))
    assert_models_equal(converted, netD)
    converted.eval(), netD.eval()
    with torch.no_grad():
        assert_same(converted(real), netD(real))


@pytest.mark.slow
def test_wgan_weight_clipping_through_data_then_eval(backend):
    """WGAN: the critic is clamped through `.data` after its step; the critic is monitored in eval (no_grad)
    after the step and again after the clip, which must see the clipped weights."""
    models = models_for(backend, discriminator)
    optimizers = [torch.optim.RMSprop(m.parameters(), lr=5e-3) for m in models]
    x = images(4, dtype_for(backend))

    def monitor():
        for model in models:
            model.eval()
        with torch.no_grad():
            assert_as_torch([model(x.to(dtype_of(model))) for model in models])
        for model in models:
            model.train()

    for step in range(2):
        real = images(4, dtype_for(backend), seed=30 + step)
        for model, optimizer in zip(models, optimizers):
            optimizer.zero_grad()
            model(real.to(dtype_of(model))).mean().backward()
            optimizer.step()
        monitor()
        for model in models:
            for p in model.parameters():
                p.data.clamp_(-0.01, 0.01)
        monitor()


@pytest.mark.slow
def test_ema_through_data_then_eval(backend):
    """An EMA copy updated as `p_ema.data.mul_(0.999).add_(p.data, alpha=0.001)`, evaluated after each update,
    then loaded by rebinding `.data`."""
    models = models_for(backend, discriminator)
    emas = [copy.deepcopy(m).eval() for m in models]
    optimizers = [adam(m) for m in models]
    x = images(4, dtype_for(backend))
    for step in range(3):
        real = images(4, dtype_for(backend), seed=40 + step)
        for model, ema, optimizer in zip(models, emas, optimizers):
            optimizer.zero_grad()
            model(real.to(dtype_of(model))).mean().backward()
            optimizer.step()
            with torch.no_grad():
                for p_ema, p in zip(ema.parameters(), model.parameters()):
                    p_ema.data.mul_(0.999).add_(p.data, alpha=0.001)
                for b_ema, b in zip(ema.buffers(), model.buffers()):
                    b_ema.data.copy_(b.data)
        with torch.no_grad():
            assert_as_torch([ema(x.to(dtype_of(ema))) for ema in emas])
    for ema, model in zip(emas, models):
        for p_ema, p in zip(ema.parameters(), model.parameters()):
            p_ema.data = p.data.clone()
    with torch.no_grad():
        assert_as_torch([ema(x.to(dtype_of(ema))) for ema in emas])


# --- gradient penalties -----------------------------------------------------------------------

def wgan_gp(netD, real, fake, alpha, lambda_gp=10.0):
    """Gulrajani et al.'s gradient penalty as the reference implementations write it."""
    interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    disc_interpolates = netD(interpolates)
    gradients = torch.autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                                    grad_outputs=torch.ones_like(disc_interpolates),
                                    create_graph=True, retain_graph=True, only_inputs=True)[0]
    gradients = gradients.view(gradients.size(0), -1)
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * lambda_gp


def r1_penalty(netD, real, gamma=10.0):
    """Mescheder et al.'s R1 on real data (StyleGAN2's d_r1_loss)."""
    real = real.detach().requires_grad_(True)
    real_pred = netD(real)
    grad_real, = torch.autograd.grad(outputs=real_pred.sum(), inputs=real, create_graph=True)
    return gamma / 2 * grad_real.pow(2).reshape(grad_real.shape[0], -1).sum(1).mean()


@pytest.mark.slow
@pytest.mark.parametrize("penalty", ["wgan_gp", "r1"])
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_gradient_penalty_parameter_gradients_as_torch(penalty, training, backend):
    """The penalty's gradients w.r.t. every parameter (double backward through the blocks), and no
    "autograd kernel was not registered" warning (turned into an error)."""
    models = models_for(backend, discriminator)
    dtype = dtype_for(backend)
    # a few steps first so BN's scale/shift and running statistics are not at their initial values
    for model in models:
        optimizer = adam(model)
        for step in range(2):
            real, fake = images(4, dtype, seed=50 + step), images(4, dtype, seed=60 + step)
            dcgan_d_step(model, optimizer, real.to(dtype_of(model)), fake.to(dtype_of(model)))
        model.train(training)
        model.zero_grad()
    real, fake = images(4, dtype, seed=70), images(4, dtype, seed=71)
    alpha = torch.rand(4, 1, 1, 1, generator=torch.Generator().manual_seed(72), dtype=F64).to(dtype)
    losses = []
    for model in models:
        to = dtype_of(model)
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=NOT_REGISTERED)
            if penalty == "wgan_gp":
                loss = wgan_gp(model, real.to(to), fake.to(to), alpha.to(to))
            else:
                loss = r1_penalty(model, real.to(to))
            loss.backward()
        losses.append(loss.detach())
    assert_as_torch(losses)
    assert_grads_as_torch(models)


# --- a hand-written discriminator ---------------------------------------------------------------

def test_custom_discriminator_keeps_class_method_attribute_and_training_branch():
    torch.manual_seed(0)
    model = MinibatchStdDiscriminator()
    model.apply(weights_init)
    netD, converted = torch_and_converted(model.double())
    assert type(converted) is MinibatchStdDiscriminator
    assert converted.real_label == 0.9
    assert list(converted.state_dict()) == list(netD.state_dict())
    x = images(4)
    for training in (True, False, True, False):  # converted in train mode; switch both ways
        netD.train(training), converted.train(training)
        assert_same(converted.features(x), netD.features(x))
        assert_same(converted(x), netD(x))
    assert_models_equal(converted, netD)


# --- autocast, memory format ----------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_autocast_bfloat16_dtype_and_error_as_torch(training, backend):
    """Under torch.autocast("cpu", bfloat16): a discriminator whose first layer is Conv-BN-LeakyReLU (so a
    block gets the float32 input, as nn.Conv2d does under autocast) and its feature encoder (a Sequential
    ending in a block, converted on its own): torch's output dtypes, and errors against a float64 run at
    most 2x torch's."""
    model = conv_bn_discriminator(dtype=torch.float32)
    encoder = feature_extractor(copy.deepcopy(model))
    x = images(8, torch.float32)
    for unconverted, converted in (torch_and_converted(encoder), torch_and_converted(model)):
        exact = copy.deepcopy(unconverted).double()
        for m in (unconverted, converted, exact):
            m.train(training)
        with torch.no_grad():
            expected = exact(x.double())
            with torch.autocast("cpu", torch.bfloat16):
                ours, theirs = converted(x), unconverted(x)
        assert theirs.dtype == torch.bfloat16
        assert ours.dtype == theirs.dtype
        our_error = (ours.double() - expected).abs().max()
        torch_error = (theirs.double() - expected).abs().max()
        assert our_error <= 2 * torch_error


@pytest.mark.parametrize("training", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["train", "eval"])
def test_channels_last_features_keep_memory_format(training, backend):
    """netD's feature encoder (its trunk up to the last block, converted on its own) in channels_last."""
    dtype = dtype_for(backend)
    encoder, converted = torch_and_converted(feature_extractor(discriminator(dtype).main))
    x = images(4, dtype).to(memory_format=torch.channels_last)
    results = []
    for model in (converted, encoder):
        model.train(training)
        model.to(memory_format=torch.channels_last)
        results.append(model(x))
    ours, theirs = results
    assert theirs.is_contiguous(memory_format=torch.channels_last)
    assert ours.is_contiguous(memory_format=torch.channels_last)
    assert_same(ours, theirs, dtype)


# --- batch sizes, failed calls ------------------------------------------------------------------

def state_snapshot(model):
    return [t.clone() for t in model.state_dict().values()]


def assert_state_unchanged(model, snapshot):
    """Bit-identical to the snapshot: parameters and buffers (running statistics, num_batches_tracked)."""
    for a, b in zip(model.state_dict().values(), snapshot, strict=True):
        assert a.dtype == b.dtype and torch.equal(a, b)


@pytest.mark.slow
def test_empty_batch_behaves_as_torch(backend):
    """N=0 (an empty last batch, a filtered batch): torch returns an empty output; statistics as torch's."""
    dtype = dtype_for(backend)
    netD, converted = torch_and_converted(discriminator(dtype))
    # plain SGD: Adam turns a float32 rounding of a near-zero gradient into a full +-lr step
    optimizers = [torch.optim.SGD(m.parameters(), lr=1e-2) for m in (converted, netD)]
    for step in range(3):
        empty = images(0, dtype)
        for model in (converted, netD):
            model.train(step != 1)
        outputs = [model(empty) for model in (converted, netD)]
        assert outputs[0].shape == outputs[1].shape == (0,)
        assert outputs[0].dtype == outputs[1].dtype
        for model in (converted, netD):
            model.train()
        losses = [dcgan_d_step(m, o, images(4, dtype, seed=80 + step), images(4, dtype, seed=90 + step))
                  for m, o in zip((converted, netD), optimizers)]
        assert_same(losses[0], losses[1], dtype)
        assert_models_equal(converted, netD, dtype)
        assert torch.isfinite(torch.cat([b.flatten().double() for b in converted.buffers()])).all()


def test_single_sample_batch_behaves_as_torch(backend):
    """N=1: netD's last BN sees 4x4 values per channel, fine in torch; a block whose output is 1x1 has one
    value per channel, which torch refuses in training (ValueError) without touching the statistics."""
    dtype = dtype_for(backend)
    netD, converted = torch_and_converted(discriminator(dtype))
    one = images(1, dtype)
    assert_same(converted(one), netD(one), dtype)
    assert_models_equal(converted, netD, dtype)

    torch.manual_seed(0)
    head = nn.Sequential(nn.Conv2d(NDF * 8, NDF * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(NDF * 8),
                         nn.LeakyReLU(0.2, True), nn.Flatten(), nn.Linear(NDF * 8, 1)).to(dtype)
    head_ref, head_converted = torch_and_converted(head)
    features = torch.randn(1, NDF * 8, 4, 4, dtype=F64).to(dtype)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        head_ref(features)
    before = state_snapshot(head_converted)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        head_converted(features)
    # torch counts the refused batch in num_batches_tracked before it raises; the project's rule is that a
    # failed call changes nothing at all
    assert_state_unchanged(head_converted, before)
    (count,) = [b for b in head_converted.buffers() if not b.is_floating_point()]
    (torch_count,) = [b for b in head_ref.buffers() if not b.is_floating_point()]
    assert int(count) == int(torch_count) - 1
    count.copy_(torch_count)
    assert_models_equal(head_converted, head_ref, dtype)
    pair = torch.randn(2, NDF * 8, 4, 4, dtype=F64).to(dtype)
    assert_same(head_converted(pair), head_ref(pair), dtype)
    assert_models_equal(head_converted, head_ref, dtype)


@pytest.mark.slow
def test_failed_calls_change_nothing_with_cumulative_momentum(backend):
    """BN momentum=None (cumulative average: the factor is 1/num_batches_tracked): bad inputs that torch
    refuses must leave every buffer bit-identical, so the later steps stay equal to torch's."""
    dtype = dtype_for(backend)
    other = torch.float32 if dtype == F64 else F64
    netD, converted = torch_and_converted(conv_bn_discriminator(momentum=None, dtype=dtype))
    optimizers = [adam(m) for m in (converted, netD)]

    def step(seed):
        losses = []
        for model, optimizer in zip((converted, netD), optimizers):
            optimizer.zero_grad()
            loss = model(images(4, dtype, seed=seed)).square().mean()
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        assert_same(losses[0], losses[1], dtype)

    step(100)
    bad_inputs = {
        "wrong channels": images(4, dtype)[:, :2],
        "unbatched 3-D": images(1, dtype)[0],
        "5-D": images(4, dtype).unsqueeze(2),
        "other float dtype": images(4, other),
        "bfloat16": images(4, torch.bfloat16),
        "int64": images(4, dtype).mul(100).long(),
    }
    for name, bad in bad_inputs.items():
        with pytest.raises((RuntimeError, ValueError)):
            netD(bad)
        before = state_snapshot(converted)
        with pytest.raises((RuntimeError, ValueError, TypeError)):
            converted(bad)
        assert_state_unchanged(converted, before)
        assert_models_equal(converted, netD, dtype)
        for a, b in zip(converted.buffers(), netD.buffers()):
            if not b.is_floating_point():
                assert torch.equal(a, b), name
    for seed in (101, 102):
        step(seed)
    assert_models_equal(converted, netD, dtype)


# --- threads, backends per thread, fork-started DataLoader workers ---------------------------------

TESTS_DIR = Path(__file__).resolve().parent
PACKAGE_PARENT = Path(ascend_acts.__file__).resolve().parents[1]


def run_script(script: str, timeout: float = 60, env: dict | None = None) -> str:
    """Runs `script` in a fresh Python in its own session (a hang or crash cannot take pytest down); kills
    the whole group on timeout. Returns stdout; fails with the exit status (a signal: a crash) and stderr."""
    environment = {**os.environ, **(env or {})}
    search_path = [str(PACKAGE_PARENT), str(TESTS_DIR), environment.get("PYTHONPATH", "")]
    environment["PYTHONPATH"] = os.pathsep.join(search_path)
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environment, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        stdout, stderr = process.communicate()
        pytest.fail(f"timed out after {timeout} s (hang)\nstdout:\n{stdout[-2000:]}\nstderr:\n{stderr[-2000:]}")
    assert process.returncode == 0, \
        f"exit status {process.returncode}\nstdout:\n{stdout[-2000:]}\nstderr:\n{stderr[-3000:]}"
    return stdout


THREADS_SCRIPT = """
    import copy, threading, torch
    import ascend_acts
    from gan_models import discriminator, images, torch_and_converted

    torch.set_num_threads(1)  # torch's own threads would only spin against ours on 2 shared cores

    dtype = torch.float64 if "{backend}" == "reference" else torch.float32
    rtol = 1e-12 if dtype == torch.float64 else 1e-6
    netD, converted = torch_and_converted(discriminator(dtype))
    shared = copy.deepcopy(converted).eval()          # one model served to every thread (no_grad inference)
    replicas = [copy.deepcopy(converted) for _ in range(4)]  # and one training replica per thread

    def work(index, model):
        x = images(2, dtype, seed=index)
        with torch.no_grad():
            served = shared(x)
        out = model(x)
        out.sum().backward()
        return [served, out.detach()] + [p.grad.clone() for p in model.parameters()]

    def zero(model):
        for p in model.parameters():
            p.grad = None

    expected = []
    for index, model in enumerate(replicas):
        snapshot = copy.deepcopy(model)
        expected.append(work(index, snapshot))
    results, errors = {{}}, []

    def thread_main(index):
        try:
            for _ in range(2):
                model = copy.deepcopy(replicas[index])
                results.setdefault(index, []).append(work(index, model))
        except BaseException as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=thread_main, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for index in range(4):
        for run in results[index]:
            for got, want in zip(run, expected[index], strict=True):
                torch.testing.assert_close(got, want, rtol=rtol, atol=0)
    # and the single-thread results are torch's
    torch.testing.assert_close(expected[0][1], netD(images(2, dtype, seed=0)), rtol=2e-5, atol=1e-6)
    print("ok")
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend_name", ["reference", "sim"])
def test_threads_running_the_converted_model_give_single_thread_results(backend_name):
    from ascend_acts import backends

    reason = backends.unavailable_reason(backend_name)
    if reason is not None:
        pytest.skip(reason)
    out = run_script(THREADS_SCRIPT.format(backend=backend_name), env={"ASCEND_ACTS_BACKEND": backend_name})
    assert out.strip().endswith("ok")


def test_use_backend_block_in_one_thread_does_not_change_another():
    from ascend_acts import backends

    if backends.unavailable_reason("sim") is not None:
        pytest.skip("needs the sim backend")
    entered, release = threading.Event(), threading.Event()
    seen_in_other = []

    def other():
        with ascend_acts.use_backend("sim"):
            entered.set()
            release.wait(30)
            seen_in_other.append(backends.current_backend_name())

    x = torch.randn(64, dtype=F64)
    with ascend_acts.use_backend("reference"):
        thread = threading.Thread(target=other)
        thread.start()
        try:
            assert entered.wait(30)
            # float64 runs here (sim has none): this thread's backend is still the reference
            assert_same(ascend_acts.leaky_relu(x, 0.2), F.leaky_relu(x, 0.2))
            assert backends.current_backend_name() == "reference"
        finally:
            release.set()
            thread.join()
        assert seen_in_other == ["sim"]
        assert backends.current_backend_name() == "reference"


FORK_SCRIPT = """
    import torch
    import torch.nn.functional as F
    import ascend_acts

    big = torch.randn(2**22, generator=torch.Generator().manual_seed(0))
    assert torch.equal(ascend_acts.leaky_relu(big, 0.2), F.leaky_relu(big, 0.2))  # the parent uses the backend

    class Augmented(torch.utils.data.Dataset):
        '''A dataset whose __getitem__ runs an ascend_acts op on more than one chunk.'''
        def __len__(self):
            return 4

        def __getitem__(self, index):
            x = torch.randn(2**18, generator=torch.Generator().manual_seed(index))
            return ascend_acts.leaky_relu(x, 0.2), F.leaky_relu(x, 0.2)

    loader = torch.utils.data.DataLoader(Augmented(), batch_size=2, num_workers=2, multiprocessing_context="fork")
    batches = 0
    for ours, theirs in loader:
        assert torch.equal(ours, theirs)
        batches += 1
    assert batches == 2
    print("ok")
"""


@pytest.mark.slow
def test_dataloader_fork_workers_after_parent_used_the_reference_backend():
    out = run_script(FORK_SCRIPT, env={"ASCEND_ACTS_BACKEND": "reference"})
    assert out.strip().endswith("ok")


# --- torch.func, TorchScript --------------------------------------------------------------------

def tangent_or_clear_error(compute, expected):
    """Forward-mode AD: the right tangent, or a RuntimeError that says forward mode is not supported;
    never a silently zero or missing tangent."""
    try:
        tangent = compute()
    except RuntimeError as exc:  # NotImplementedError included
        assert re.search(r"(?i)forward|jvp|dual|tangent", str(exc)), f"unclear error: {exc}"
        return
    assert tangent is not None, "the tangent was dropped"
    assert_same(tangent, expected, tangent.dtype)


def forward_ad_tangent(function, x, t):
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        return fwAD.unpack_dual(function(fwAD.make_dual(x, t))).tangent


def test_jvp_through_leaky_relu_and_rrelu(backend):
    dtype = dtype_for(backend)
    x = torch.randn(2, 3, 8, 8, dtype=F64).to(dtype)
    t = torch.randn(2, 3, 8, 8, dtype=F64).to(dtype)
    torch_tangent = torch.func.jvp(lambda v: F.leaky_relu(v, 0.2), (x,), (t,))[1]
    tangent_or_clear_error(lambda: torch.func.jvp(lambda v: ascend_acts.leaky_relu(v, 0.2), (x,), (t,))[1],
                           torch_tangent)
    tangent_or_clear_error(lambda: forward_ad_tangent(lambda v: ascend_acts.leaky_relu(v, 0.2), x, t), torch_tangent)

    # RReLU training: the tangent is t times our own slope (y / x where x <= 0)
    y = ascend_acts.rrelu(x, 0.1, 0.3, training=True, generator=torch.Generator().manual_seed(4))
    expected = torch.where(x > 0, t, t * (y / x))
    tangent_or_clear_error(
        lambda: torch.func.jvp(
            lambda v: ascend_acts.rrelu(v, 0.1, 0.3, training=True, generator=torch.Generator().manual_seed(4)),
            (x,), (t,))[1],
        expected)


def test_jvp_through_the_fused_block(backend):
    dtype = dtype_for(backend)
    torch.manual_seed(0)
    block = nn.Sequential(nn.Conv2d(NC, NDF, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF), nn.LeakyReLU(0.2)).to(dtype)
    block.apply(weights_init)
    reference, converted = torch_and_converted(block)
    x = images(2, dtype, size=16)
    t = torch.randn(x.shape, dtype=F64).to(dtype)
    reference.eval(), converted.eval()
    tangent_or_clear_error(lambda: torch.func.jvp(converted, (x,), (t,))[1], torch.func.jvp(reference, (x,), (t,))[1])
    # training: torch.func.jvp refuses BN's running-stat update in torch too; torch.autograd.forward_ad works
    reference.train(), converted.train()
    tangent_or_clear_error(lambda: forward_ad_tangent(converted, x, t), forward_ad_tangent(reference, x, t))


@pytest.mark.slow
def test_jit_trace_of_converted_model_passes_its_check():
    netD, converted = torch_and_converted(discriminator())
    netD.eval(), converted.eval()
    x = images(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(converted, x)  # check_trace=True: re-runs and compares graphs and outputs
    other = images(3, seed=5)
    assert_same(traced(other), netD(other))


# --- in-place RReLU with lower < 0 ----------------------------------------------------------------

def test_inplace_rrelu_training_with_negative_lower_backward_as_torch(backend):
    """torch allows it (it keeps its noise); ours must give the out-of-place result and gradient for the
    same seed: gradient = grad_output where x > 0, else the slope (y / x) used in the forward."""
    dtype = dtype_for(backend)
    x0 = torch.randn(4, 3, 16, 16, dtype=F64).to(dtype)
    grad_output = torch.randn(x0.shape, dtype=F64).to(dtype)
    leaf = x0.clone().requires_grad_()  # torch's own in-place RReLU with lower < 0 trains
    F.rrelu_(leaf * 1, -0.3, 0.2, training=True).backward(grad_output)

    def run(inplace):
        leaf = x0.clone().requires_grad_()
        hidden = leaf * 1  # a non-leaf, as after a conv
        out = ascend_acts.rrelu(hidden, -0.3, 0.2, training=True, inplace=inplace,
                                generator=torch.Generator().manual_seed(11))
        out.backward(grad_output)
        return out.detach(), leaf.grad

    out_of_place, grad_out_of_place = run(False)
    in_place, grad_in_place = run(True)
    assert torch.equal(in_place, out_of_place)
    slope = torch.where(x0 > 0, torch.ones_like(x0), out_of_place / x0)
    assert_same(grad_out_of_place, grad_output * slope, dtype)
    assert torch.equal(grad_in_place, grad_out_of_place)


# --- further findings (beyond the list), each against torch ---------------------------------

@pytest.mark.slow
def test_half_precision_training_gradients_within_2x_torch_error(backend):
    """`netD.half()` in training: at every fused Conv-BN-LeakyReLU run of the discriminator, fed torch's own
    float16 activations there and one float16 output gradient, the input and parameter gradients' error
    against float64 (same float16 weights and input) is at most 2x torch's own float16 error (+ one float16
    ulp of the largest gradient). Judged per run: through the whole model an upstream rounding difference
    can move a pre-activation across 0, after which torch's and our gradients both differ from float64 by
    the other slope, whichever of the two happens to round the same way as float64."""
    netD, converted = torch_and_converted(discriminator(torch.float32))
    exact = copy.deepcopy(netD).double()
    netD.half(), converted.half()
    x = images(4, torch.float16)
    generator = torch.Generator().manual_seed(7)
    runs = [i for i in range(len(netD.main) - 2)
            if [type(m) for m in netD.main[i:i + 3]] == [nn.Conv2d, nn.BatchNorm2d, nn.LeakyReLU]]
    assert len(runs) == 3
    for i in runs:
        with torch.no_grad():
            features = netD.main[:i](x)
        grad_out = torch.randn(netD.main[i:i + 3](features).shape, generator=generator).half()
        results = []
        for model, cast in ((converted, torch.float16), (netD, torch.float16), (exact, F64)):
            block = model.main[i:i + 3]
            block.zero_grad()
            input = features.to(cast).clone().requires_grad_()
            block(input).backward(grad_out.to(cast))
            results.append([input.grad] + [p.grad for p in block.parameters()])
        for name, ours, theirs, want in zip(["input", "conv.weight", "bn.weight", "bn.bias"], *results):
            scale = want.abs().max().item()
            our_error = (ours.double() - want).abs().max().item()
            torch_error = (theirs.double() - want).abs().max().item()
            assert our_error <= 2 * torch_error + 2**-11 * scale, \
                f"main.{i} {name}: error {our_error / scale:.2g} (relative) vs torch's {torch_error / scale:.2g}"


def test_eval_after_changing_batch_norm_eps():
    """Ported weights often come with another eps (`m.eps = 1e-3`): eval must use the current eps even
    after an earlier eval call."""
    netD, converted = torch_and_converted(discriminator())
    netD.eval(), converted.eval()
    x = images(4)
    with torch.no_grad():
        assert_same(converted(x), netD(x))
        for model in (netD, converted):
            for module in model.modules():
                if isinstance(module, nn.BatchNorm2d):
                    module.eps = 1e-1
        assert_same(converted(x), netD(x))
