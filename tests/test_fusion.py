"""When a converted nn.Sequential runs Conv2d -> BatchNorm2d -> LeakyReLU as the fused op, and that it is then
exactly torch's computation; anything not provably equivalent runs the children, bit for bit torch's."""

import copy

import pytest
import torch
from torch import nn

import ascend_acts
from ascend_acts.nn import ConvBNLeakyReLU2d
from markers import fast_only
from op_counter import OpCounter


def dcgan_discriminator():
    return nn.Sequential(
        nn.Conv2d(3, 8, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(8, 16, 4, 2, 1, bias=False), nn.BatchNorm2d(16), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(16, 32, 4, 2, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(32, 1, 4, 1, 0, bias=False), nn.Flatten(),
    ).double()


def fused_calls(model, x):
    with OpCounter() as counter:
        out = model(x)
    return out, counter.fused


def train_step(model, x):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(x).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


def test_dcgan_discriminator_keeps_its_children_fuses_both_blocks_and_trains_like_torch():
    torch.manual_seed(0)
    original = dcgan_discriminator()
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert [type(m).__name__ for m in converted] == [type(m).__name__ for m in original]
    assert type(converted[1]) is ascend_acts.nn.LeakyReLU and type(converted[2]) is nn.Conv2d
    assert isinstance(converted, nn.Sequential) and len(converted) == len(original) == 10
    x = torch.randn(4, 3, 32, 32, dtype=torch.float64)
    out, fused = fused_calls(converted, x)
    assert fused == 2
    torch.testing.assert_close(out, original(x))
    torch.testing.assert_close(train_step(converted, x), train_step(original, x))
    for a, b in zip(converted.state_dict().values(), original.state_dict().values()):
        torch.testing.assert_close(a, b)
    converted.eval(), original.eval()
    out, fused = fused_calls(converted, x)
    assert fused == 2
    torch.testing.assert_close(out, original(x))


def test_optimizer_made_before_conversion_keeps_working():
    model = dcgan_discriminator()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    weight = model[2].weight
    ascend_acts.convert(model)
    assert model[2].weight is weight
    model(torch.randn(2, 3, 32, 32, dtype=torch.float64)).sum().backward()
    before = weight.detach().clone()
    optimizer.step()
    assert not torch.equal(weight, before)


def block(**bn):
    torch.manual_seed(2)
    seq = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4, **bn), nn.LeakyReLU(0.2)).double()
    if seq[1].affine:
        with torch.no_grad():
            seq[1].weight.uniform_(0.5, 1.5), seq[1].bias.uniform_(-0.5, 0.5)
    return seq


def _forward_hook(m):
    return m.register_forward_hook(lambda *a: None)


def _pre_hook(m):
    return m.register_forward_pre_hook(lambda *a: None)


def _backward_hook(m):
    return m.register_full_backward_hook(lambda *a: None)


def _instance_forward(m):
    m.forward = type(m).forward.__get__(m)


# (what is done to the converted block, on which child): the children must run one by one
UNFUSABLE = {
    "forward hook on conv": (_forward_hook, 0), "forward hook on bn": (_forward_hook, 1),
    "pre-hook on conv": (_pre_hook, 0),
    "backward hook on bn": (_backward_hook, 1), "instance forward on bn": (_instance_forward, 1),
    "hook-based spectral_norm on conv": (nn.utils.spectral_norm, 0),
    "parametrized spectral_norm on conv": (nn.utils.parametrizations.spectral_norm, 0),
    "weight_norm on conv": (nn.utils.parametrizations.weight_norm, 0),
}


@pytest.mark.parametrize("training", fast_only([True, False], [True]))
@pytest.mark.parametrize("change", fast_only(UNFUSABLE, ["forward hook on bn", "backward hook on bn",
                                                         "parametrized spectral_norm on conv"]))
def test_children_run_one_by_one_when_fusing_could_differ(change, training):
    """Applied after convert: the decision is made at each call."""
    apply, index = UNFUSABLE[change]
    original = block().train(training)
    converted = ascend_acts.convert(copy.deepcopy(original))
    for model in (original, converted):
        torch.manual_seed(5)  # spectral_norm draws its u vector
        apply(model[index])
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    out, fused = fused_calls(converted, x)
    assert fused == 0
    assert torch.equal(out, original(x))
    assert all(torch.equal(a, b) for a, b in zip(converted.state_dict().values(), original.state_dict().values()))


@pytest.mark.parametrize("hook", [_forward_hook, _pre_hook])
def test_a_hooked_activation_runs_itself_after_the_fused_conv_bn(hook):
    """Conv2d -> BatchNorm2d followed by anything else fuses with no activation; the hooked module then runs."""
    original = block()
    converted = ascend_acts.convert(copy.deepcopy(original))
    calls = []
    converted[2].register_forward_hook(lambda *a: calls.append(1))
    hook(original[2]), hook(converted[2])
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    out, fused = fused_calls(converted, x)
    assert fused == 1 and calls == [1]
    torch.testing.assert_close(out, original(x))


@pytest.mark.parametrize("hook", ["forward", "forward_pre", "full_backward"])
def test_global_module_hooks_are_honoured(hook):
    converted = ascend_acts.convert(block())
    seen = []
    register = getattr(nn.modules.module, f"register_module_{hook}_hook")
    handle = register(lambda module, *args: seen.append(type(module).__name__))
    try:
        x = torch.randn(2, 3, 6, 6, dtype=torch.float64, requires_grad=True)
        out, fused = fused_calls(converted, x)
        out.sum().backward()
    finally:
        handle.remove()
    assert fused == 0 and {"Conv2d", "BatchNorm2d", "LeakyReLU"} <= set(seen)
    assert fused_calls(converted, x)[1] == 1  # and fused again once the hook is gone


def test_subclasses_and_mismatches_are_not_fused():
    class MyConv(nn.Conv2d):
        pass

    class MyLeaky(nn.LeakyReLU):
        def forward(self, x):
            return super().forward(x) * 2

    class MyReLU(nn.ReLU):
        pass

    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    model = nn.Sequential(MyConv(3, 4, 3), nn.BatchNorm2d(4), nn.LeakyReLU()).double()
    expected = model(x)
    out, fused = fused_calls(ascend_acts.convert(model), x)
    assert fused == 0 and torch.equal(out, expected)
    # a subclassed activation runs itself, after Conv2d -> BatchNorm2d fused with no activation
    for model in (nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), MyLeaky()),
                  nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), MyReLU())):
        model = model.double()
        expected = model(x)
        out, fused = fused_calls(ascend_acts.convert(model), x)
        assert fused == 1
        torch.testing.assert_close(out, expected)
    mismatch = ascend_acts.convert(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(5), nn.LeakyReLU()).double())
    with pytest.raises(RuntimeError, match="running_mean should contain 4 elements not 5"):
        mismatch(x)  # torch's own error, from the children


# BatchNorm2d configurations the fused op must reproduce, train and eval, over several steps
BN_CONFIGS = {
    "default": dict(), "momentum=None": dict(momentum=None), "no running stats": dict(track_running_stats=False),
    "affine=False": dict(affine=False), "eps": dict(eps=1e-3, momentum=0.3),
}


@pytest.mark.parametrize("config", fast_only(BN_CONFIGS, ["affine=False"]))
def test_fused_block_matches_torch_for_every_batch_norm_configuration(config, backend):
    dtype = torch.float64 if backend == "reference" else torch.float32
    original = block(**BN_CONFIGS[config]).to(dtype)
    converted = ascend_acts.convert(copy.deepcopy(original))
    tol = dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=2e-4, atol=2e-4)
    for step, training in enumerate([True, True, False, True, False]):
        original.train(training), converted.train(training)
        x = torch.randn(3, 3, 6, 6, dtype=dtype)
        out, fused = fused_calls(converted, x)
        assert fused == 1
        torch.testing.assert_close(out, original(x), **tol)
        for (key, a), b in zip(converted.state_dict().items(), original.state_dict().values()):
            torch.testing.assert_close(a, b, **tol, msg=f"step {step}: {key}")


def test_batch_norm_mode_is_read_from_the_batch_norm():
    """A GAN trick: BN in eval (frozen statistics) while the rest trains."""
    original = block()
    converted = ascend_acts.convert(copy.deepcopy(original))
    original[1].eval(), converted[1].eval()
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    out, fused = fused_calls(converted, x)
    assert fused == 1
    torch.testing.assert_close(out, original(x))
    assert torch.equal(converted[1].running_mean, original[1].running_mean)
    assert int(converted[1].num_batches_tracked) == 0


def test_unbatched_input_runs_the_children_and_raises_torchs_error():
    converted = ascend_acts.convert(block())
    with pytest.raises(ValueError, match="expected 4D input \\(got 3D input\\)"):
        converted(torch.randn(3, 6, 6, dtype=torch.float64))


def test_state_dict_round_trip_with_sequential():
    seq = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.LeakyReLU(0.2))
    fused = ConvBNLeakyReLU2d(3, 4, 3, negative_slope=0.2)
    fused.load_state_dict(seq.state_dict())
    again = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.LeakyReLU(0.2))
    again.load_state_dict(fused.state_dict())
    for key, value in seq.state_dict().items():
        assert torch.equal(again.state_dict()[key], value)


def test_standalone_block_runs_its_children_when_hooked():
    torch.manual_seed(4)
    fused = ConvBNLeakyReLU2d(3, 4, 3, padding=1, negative_slope=0.2).double()
    seq = nn.Sequential(copy.deepcopy(fused.conv), copy.deepcopy(fused.bn), nn.LeakyReLU(0.2))
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    outputs = []
    fused.conv.register_forward_hook(lambda m, i, o: outputs.append(o))
    out, count = fused_calls(fused, x)
    assert count == 0 and len(outputs) == 1
    assert torch.equal(out, seq(x))


def test_sim_eval_runs_a_layer_the_kernel_cannot_tile_on_the_reference():
    """The eval kernel needs an output row of 16 channels in L0C: a 1x1 layer over rows 2100 positions wide has no
    tiling, so "sim" runs the reference for it (as for groups > 1) instead of raising; the result is torch's."""
    if ascend_acts.backends.unavailable_reason("sim") is not None:
        pytest.skip("sim backend not built")
    from ascend_acts.ops.conv_bn_leaky_relu import kernels as conv_bn_sim

    assert not conv_bn_sim.conv_bn_leaky_relu_eval_has_tiling((1, 3, 2, 2100), (8, 3, 1, 1), (1, 1), (0, 0, 0, 0),
                                                              (1, 1), 4)
    torch.manual_seed(0)
    seq = nn.Sequential(nn.Conv2d(3, 8, 1, bias=False), nn.BatchNorm2d(8), nn.LeakyReLU(0.2)).eval()
    seq[1].running_var.uniform_(0.5, 2.0)
    x = torch.randn(1, 3, 2, 2100)
    converted = ascend_acts.convert(copy.deepcopy(seq))
    with ascend_acts.use_backend("sim"):
        out = converted(x)
    torch.testing.assert_close(out, seq(x), rtol=1e-5, atol=1e-5)
