"""`convert` on the models and idioms of real GAN code: the converted model is the user's model, and it
computes what the unconverted torch model computes (the oracle, in float64), through training tricks,
checkpoints, hooks, spectral norm, TorchScript tracing, torch.compile and pickling."""

import copy
import io
import pickle
import warnings

import pytest
import torch
from torch import nn

import ascend_acts
from gan_models import NC, Discriminator, weights_init
from markers import fast_only
from op_counter import OpCounter

NDF = 8


def discriminators(seed=0):
    """(torch's, converted): the same weights, float64."""
    torch.manual_seed(seed)
    theirs = Discriminator(ndf=NDF).double()
    theirs.apply(weights_init)
    return theirs, ascend_acts.convert(copy.deepcopy(theirs))


def images(n=4, size=64, seed=1):
    return torch.randn(n, NC, size, size, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def assert_same_state(ours, theirs, **tol):
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (key, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        torch.testing.assert_close(a, b, msg=key, **tol)


def test_converted_model_is_the_users_model():
    theirs, _ = discriminators()
    model = copy.deepcopy(theirs)
    modules_before = list(model.modules())
    converted = ascend_acts.convert(model)
    assert converted is model and type(converted) is Discriminator
    assert list(converted.modules()) == modules_before  # the same objects, in the same places
    assert list(converted.state_dict()) == list(theirs.state_dict())
    assert "main.3.running_mean" in converted.state_dict()
    assert len(converted.main) == len(theirs.main) == 13
    assert isinstance(converted.main, nn.Sequential) and type(converted.main[3]) is nn.BatchNorm2d
    assert repr(converted) == repr(theirs)
    with OpCounter() as counter:
        converted(images())
    assert counter.fused == 3  # the three Conv2d -> BatchNorm2d -> LeakyReLU runs


def test_weights_init_sees_the_same_classes_and_initializes_the_same():
    theirs, ours = discriminators()
    names = [m.__class__.__name__ for m in ours.modules()]
    assert names == [m.__class__.__name__ for m in theirs.modules()]
    torch.manual_seed(5)
    theirs.apply(weights_init)
    torch.manual_seed(5)
    ours.apply(weights_init)
    assert_same_state(ours, theirs, rtol=0, atol=0)


def test_checkpoints_load_both_ways_strict():
    theirs, ours = discriminators(seed=3)
    torch.manual_seed(9)
    theirs.apply(weights_init)
    ours.train()(images()).sum().backward()  # ours has moved on: running statistics, num_batches_tracked
    buffer = io.BytesIO()
    torch.save(ours.state_dict(), buffer)
    buffer.seek(0)
    plain = Discriminator(ndf=NDF).double()
    plain.load_state_dict(torch.load(buffer), strict=True)
    assert_same_state(plain, ours, rtol=0, atol=0)
    ours.load_state_dict(theirs.state_dict(), strict=True)
    assert_same_state(ours, theirs, rtol=0, atol=0)
    ours.eval(), theirs.eval()
    torch.testing.assert_close(ours(images()), theirs(images()))


@pytest.mark.parametrize("training", fast_only([True, False], [True]))
def test_forward_hooks_on_conv_bn_and_act_fire_with_torchs_values(training):
    """Feature matching: hooks on the modules of a block see torch's intermediate values."""
    theirs, ours = discriminators(seed=4)
    features = {"theirs": {}, "ours": {}}
    for name, model in (("theirs", theirs), ("ours", ours)):
        model.train(training)
        for index in (5, 6, 7):  # the second block's conv, BN and in-place LeakyReLU
            model.main[index].register_forward_hook(
                lambda m, i, o, name=name, index=index: features[name].__setitem__(index, o.detach().clone()))
    out_theirs, out_ours = theirs(images()), ours(images())
    torch.testing.assert_close(out_ours, out_theirs)
    assert features["ours"].keys() == {5, 6, 7}
    for index in (5, 6, 7):
        torch.testing.assert_close(features["ours"][index], features["theirs"][index])
    assert_same_state(ours, theirs)


def adam_steps(model, steps=3, seed=7):
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.5, 0.999))
    outputs = []
    for step in range(steps):
        x = images(seed=seed + step)
        loss = nn.functional.binary_cross_entropy(model(x), torch.ones(x.shape[0], dtype=torch.float64))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        outputs.append(loss.detach())
    return outputs


@pytest.mark.slow
@pytest.mark.parametrize("spectral_norm", [nn.utils.spectral_norm, nn.utils.parametrizations.spectral_norm],
                         ids=["hook", "parametrization"])
@pytest.mark.parametrize("when", ["before convert", "after convert"])
def test_spectral_norm_discriminators_train_like_torch(spectral_norm, when):
    theirs, _ = discriminators(seed=6)
    ours = copy.deepcopy(theirs)
    for model in (theirs, ours):
        if model is ours and when == "before convert":
            ours = ascend_acts.convert(ours)
        torch.manual_seed(8)  # spectral_norm draws its u vectors
        for index in (0, 2, 5, 8, 11):
            spectral_norm(model.main[index])
    ours = ascend_acts.convert(ours)
    torch.testing.assert_close(adam_steps(ours), adam_steps(theirs))
    assert_same_state(ours, theirs)
    ours.eval(), theirs.eval()
    torch.testing.assert_close(ours(images()), theirs(images()))


class CustomDiscriminator(nn.Module):
    """Not a Sequential: blocks as attributes, a training-only branch, a method of its own."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(NC, NDF, 4, 2, 1)
        self.act1 = nn.LeakyReLU(0.2)
        self.block = nn.Sequential(nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2),
                                   nn.LeakyReLU(0.2, inplace=True))
        self.conv2, self.bn2, self.act2 = nn.Conv2d(NDF * 2, NDF * 4, 3, 1, 1), nn.BatchNorm2d(NDF * 4), nn.RReLU()
        self.head = nn.Linear(NDF * 4, 1)
        self.noise_scale = 0.1

    def features(self, x):
        h = self.block(self.act1(self.conv1(x)))
        if self.training:  # instance noise, training only
            h = h + self.noise_scale * torch.ones_like(h)
        return self.act2(self.bn2(self.conv2(h))).mean((2, 3))

    def forward(self, x):
        return self.head(self.features(x))


@pytest.mark.slow
def test_custom_discriminator_keeps_its_class_and_training_branch():
    torch.manual_seed(10)
    theirs = CustomDiscriminator().double()
    theirs.act2 = nn.LeakyReLU(0.1)  # RReLU's noise differs from torch's (README); LeakyReLU compares exactly
    ours = ascend_acts.convert(copy.deepcopy(theirs))
    assert type(ours) is CustomDiscriminator and ours.noise_scale == 0.1 and callable(ours.features)
    assert type(ours.act2) is ascend_acts.nn.LeakyReLU and type(ours.block) is ascend_acts.nn.Sequential
    for training in (True, False, True, False):
        ours.train(training), theirs.train(training)
        torch.testing.assert_close(ours(images(seed=int(training))), theirs(images(seed=int(training))))
        torch.testing.assert_close(ours.features(images()), theirs.features(images()))
    assert_same_state(ours, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("trick", ["WGAN clipping", "EMA", "rebinding .data"])
def test_eval_after_weight_tricks_through_data_matches_torch(trick):
    """WGAN's `p.data.clamp_(-c, c)` and an EMA's `p.data.mul_(d).add_(q.data, alpha=1 - d)` bump no version
    counter; the eval output must still follow them."""
    theirs, ours = discriminators(seed=12)
    source, _ = discriminators(seed=13)
    for model in (ours, theirs):
        model.eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(images()), theirs(images()))
        for model in (ours, theirs):
            for p, q in zip(model.parameters(), source.parameters()):
                if trick == "WGAN clipping":
                    p.data.clamp_(-0.01, 0.01)
                elif trick == "EMA":
                    p.data.mul_(0.5).add_(q.data, alpha=0.5)
                else:
                    p.data = q.data.clone()
        torch.testing.assert_close(ours(images()), theirs(images()))


@pytest.mark.slow
def test_failed_calls_leave_the_state_bit_identical_with_momentum_none():
    theirs, ours = discriminators(seed=14)
    for model in (theirs, ours):
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.momentum = None
    before = {key: value.clone() for key, value in ours.state_dict().items()}
    for bad in (images().float(), images()[:, :2], images(size=2), images(n=1, size=16)):
        with pytest.raises((RuntimeError, ValueError)):
            ours(bad)
    # the 16x16 single image fails at the third block (one value per channel); the two before it ran,
    # as in torch; the failing block itself changed nothing (torch would have counted the batch)
    after = ours.state_dict()
    changed = {key for key in before if not torch.equal(before[key], after[key])}
    assert changed == {f"main.{i}.{name}" for i in (3, 6)
                       for name in ("running_mean", "running_var", "num_batches_tracked")}
    ours.load_state_dict(before)
    for _ in range(3):
        torch.testing.assert_close(ours(images()), theirs(images()))
    assert_same_state(ours, theirs)


@pytest.mark.parametrize("training", fast_only([True, False], [False]))
def test_empty_and_single_image_batches_behave_like_torch(training):
    theirs, ours = discriminators(seed=15)
    ours.train(training), theirs.train(training)
    for batch in (images(n=0), images(n=1), images(n=0)):
        out_ours, out_theirs = ours(batch), theirs(batch)
        assert out_ours.shape == out_theirs.shape
        torch.testing.assert_close(out_ours, out_theirs)
        assert_same_state(ours, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("training", [True, False])
def test_jit_trace_passes_its_own_check(training):
    theirs, ours = discriminators(seed=16)
    ours.train(training), theirs.train(training)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced = torch.jit.trace(ours, images(), check_trace=True)
    assert not [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    theirs.load_state_dict(ours.state_dict())  # tracing and its check ran the model: statistics moved
    for n, seed in ((2, 2), (6, 3)):  # other batch sizes: the running variance's n / (n - 1) is traced
        torch.testing.assert_close(traced(images(n, seed=seed)), theirs(images(n, seed=seed)))
        assert_same_state(traced, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("training", [True, False])
def test_compile_fullgraph_of_a_converted_model(training):
    theirs, ours = discriminators(seed=17)
    ours, theirs = ours.float().train(training), theirs.float().train(training)
    compiled = torch.compile(ours, backend="aot_eager", fullgraph=True)
    x = images().float().requires_grad_()
    y, y_torch = compiled(x), theirs(x)
    torch.testing.assert_close(y, y_torch, rtol=1e-4, atol=1e-4)
    (g,) = torch.autograd.grad(y.sum(), x)
    (g_torch,) = torch.autograd.grad(y_torch.sum(), x)
    torch.testing.assert_close(g, g_torch, rtol=1e-4, atol=1e-4)
    assert_same_state(ours, theirs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("copier", fast_only(["deepcopy", "pickle", "torch.save"], ["torch.save"]))
def test_copies_of_a_converted_model_stay_converted_and_correct(copier):
    theirs, ours = discriminators(seed=18)
    if copier == "deepcopy":
        clone = copy.deepcopy(ours)
    elif copier == "pickle":
        clone = pickle.loads(pickle.dumps(ours))
    else:
        buffer = io.BytesIO()
        torch.save(ours, buffer)
        buffer.seek(0)
        clone = torch.load(buffer, weights_only=False)
    assert type(clone.main) is ascend_acts.nn.Sequential and type(clone.main[1]) is ascend_acts.nn.LeakyReLU
    with OpCounter() as counter:
        out = clone(images())
    assert counter.fused == 3
    torch.testing.assert_close(out, theirs(images()))


def test_activation_swap_keeps_the_object_and_its_hooks():
    model = nn.Sequential(nn.Linear(4, 4), nn.LeakyReLU(0.2), nn.Linear(4, 4), nn.RReLU())
    act = model[1]
    seen = []
    handle = act.register_forward_hook(lambda m, i, o: seen.append(o.detach().clone()))
    pre = model[3].register_forward_pre_hook(lambda m, i: seen.append("pre"))
    x = torch.randn(3, 4)
    ascend_acts.convert(model)
    assert model[1] is act and type(act) is ascend_acts.nn.LeakyReLU
    assert type(model[3]) is ascend_acts.nn.RReLU
    y = model[1](model[0](x))
    assert len(seen) == 1 and torch.equal(seen[0], y)
    model(x)
    assert seen[-1] == "pre"
    handle.remove(), pre.remove()
    seen.clear()
    model(x)
    assert seen == []
