"""Pads folded into the fused run: an exact ReflectionPad2d or ReplicationPad2d before a Conv2d -> norm (-> activation)
run, and a Conv2d's own reflect or replicate padding_mode, run as one op that keeps the unpadded input (a circular
padding_mode pads before the op, and circular, zero and constant pad modules run themselves: torch keeps only their
padded copy, so their input may change in place after the forward); and the recompute rule (runs that keep their
conv output recompute it in the backward when the convolution is cheap on the NPU). The oracle is the unconverted
torch model (CycleGAN's ResNet generator from gan_models, and small blocks of each pad type) on every CPU backend:
outputs, every gradient, running statistics, Adam steps, train/eval, checkpoints, channels_last, compile, autocast and
double backward. A pad that cannot join runs as its module and the rest of the run still fuses; `explain` shows the
pad in the pattern and counts the padded copy and the recomputed conv output as no longer kept."""

import copy
import math

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import ascend_acts
import op_counter
from ascend_acts import backends
from ascend_acts.nn import SyncBatchNorm, fusion
from gan_models import (
    NORMS,
    assert_autocast_as_torch,
    assert_compiled_as_torch,
    assert_gradient_penalty_as_torch,
    assert_training_step_as_torch,
    resnet_generator,
)
from markers import fast_only, slow

# the pads that fold, each asymmetric between the axes somewhere (both sides of one axis alike: the op's padding)
PADS = {
    "reflect": lambda: nn.ReflectionPad2d(1),
    "replicate": lambda: nn.ReplicationPad2d((2, 2, 1, 1)),
}
# the pads whose backward takes no input: torch keeps only the conv's padded copy, so they run themselves
INPUT_FREE_PADS = {
    "circular": lambda: nn.CircularPad2d(1),
    "zero": lambda: nn.ZeroPad2d(2),
    "constant 0": lambda: nn.ConstantPad2d((1, 1, 2, 2), 0.0),
}
ACTIVATIONS = {"relu": lambda: [nn.ReLU(True)], "leaky": lambda: [nn.LeakyReLU(0.2, True)], "none": list}
GENERATOR_RUNS = 9  # resnet_generator's 5 runs + 2 blocks of 2, every pad but the last (before a norm-less conv)


def dtype_of(backend):
    return torch.float64 if backend == "reference" else torch.float32  # the kernels have no float64


def tolerance(dtype, runs=1):
    return dict(rtol=1e-9, atol=1e-9) if dtype == torch.float64 else dict(rtol=2e-4 * runs, atol=2e-4 * runs)


class OpCounter(op_counter.OpCounter):
    """Counts the ops run on real tensors: the op checks a pad as F.pad would refuse it on a meta tensor."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(isinstance(a, torch.Tensor) and a.is_meta for a in args):
            return func(*args, **(kwargs or {}))
        return super().__torch_dispatch__(func, types, args, kwargs)


def pad_calls(counter: OpCounter) -> dict:
    return {name: count for name, count in counter.calls.items() if "pad" in name and count}


def padded_block(pad=None, norm="instance affine", activation="relu", in_channels=3, dtype=torch.float64, **conv):
    """[pad,] Conv2d(in_channels, 6, 3, **conv), a norm over 6 channels with random affine parameters, the
    activation."""
    torch.manual_seed(3)
    layers = [pad] if pad is not None else []
    layers += [nn.Conv2d(in_channels, 6, 3, **conv), NORMS[norm](6), *ACTIVATIONS[activation]()]
    model = nn.Sequential(*layers)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.modules.batchnorm._NormBase, nn.GroupNorm)) and module.affine:
                module.weight.uniform_(0.5, 1.5), module.bias.uniform_(-0.5, 0.5)
    return model.to(dtype)


def assert_trains_like_torch(original, converted, side, dtype, runs, folded_pads, tol):
    """Steps in train, eval and channels_last: one fused op per run, no pad op but those left out (`folded_pads`: the
    pad modules that run themselves), outputs, every gradient and the state after Adam's steps as torch's; then a
    checkpoint round trip."""
    # eps far above the rounding noise in the gradient of a conv bias the norm cancels (0 but for up to ~1e-5 in
    # float32, either way, which Adam's default eps turns into steps of +-lr) and far below the other gradients (> 1)
    optimizers = [torch.optim.Adam(m.parameters(), lr=1e-3, eps=1e-2) for m in (original, converted)]
    generator = torch.Generator().manual_seed(7)
    for step, training in enumerate([True, True, False, True]):
        original.train(training), converted.train(training)
        x = torch.randn(2, 3, side, side, generator=generator, dtype=torch.float64).to(dtype)
        if step == 3:
            x = x.contiguous(memory_format=torch.channels_last)
        xs, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
        with OpCounter() as counter:
            got = converted(xc)
        assert counter.fused == runs
        assert pad_calls(counter) == folded_pads, counter.calls
        expected = original(xs)
        torch.testing.assert_close(got, expected, **tol)
        assert_training_step_as_torch(original, converted, optimizers, expected, got, xs, xc, step, **tol)
    again = copy.deepcopy(original)
    again.load_state_dict(converted.state_dict())
    converted.load_state_dict(again.state_dict())
    for training in (False, True):
        torch.testing.assert_close(converted.train(training)(x), again.train(training)(x), **tol)


@pytest.mark.parametrize("backend", fast_only(backends.known_backends(), ["reference"]), indirect=True)
@pytest.mark.parametrize("norm", fast_only(["instance", "instance affine", "group"], ["instance"]))
def test_the_cyclegan_generator_folds_its_pads_and_trains_like_torch(norm, backend):
    dtype = dtype_of(backend)
    original = resnet_generator(norm, dtype)
    converted = ascend_acts.convert(copy.deepcopy(original))
    # the last ReflectionPad2d(3) precedes the norm-less Conv2d -> Tanh: it runs itself
    assert_trains_like_torch(original, converted, 16, dtype, GENERATOR_RUNS, {"reflection_pad2d": 1},
                             tolerance(dtype, GENERATOR_RUNS))


@pytest.mark.parametrize("backend", fast_only(backends.known_backends(), ["reference"]), indirect=True)
@pytest.mark.parametrize("pad", fast_only(PADS, ["reflect"]))
@pytest.mark.parametrize("norm, activation", fast_only(
    [("batch", "relu"), ("instance tracked", "none"), ("group", "leaky")], [("instance tracked", "none")],
    unpack=True))
def test_each_pad_folds_into_the_run_as_torch(pad, norm, activation, backend):
    dtype = dtype_of(backend)
    original = padded_block(PADS[pad](), norm, activation, dtype=dtype)
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert_trains_like_torch(original, converted, 6, dtype, 1, {}, tolerance(dtype))


@pytest.mark.parametrize("backend", fast_only(backends.known_backends(), ["reference"]), indirect=True)
@pytest.mark.parametrize("mode", fast_only(["reflect", "replicate", "circular"], ["reflect"]))
def test_a_conv_padding_mode_fuses_alone(mode, backend):
    """Conv2d(padding_mode=...) alone, and with padding="same" on an even kernel (one more row and column at the
    bottom and right, torch's split)."""
    dtype = dtype_of(backend)
    for original in (padded_block(None, "instance tracked", "relu", dtype=dtype, padding=(1, 2), padding_mode=mode),
                     nn.Sequential(nn.Conv2d(3, 6, 4, padding="same", padding_mode=mode),
                                   nn.InstanceNorm2d(6, affine=True), nn.ReLU()).to(dtype)):
        converted = ascend_acts.convert(copy.deepcopy(original))
        assert_trains_like_torch(original, converted, 6, dtype, 1, {}, tolerance(dtype))


def test_a_zero_pad_runs_itself_before_a_padding_conv():
    original = padded_block(nn.ZeroPad2d((1, 1, 2, 2)), padding=1)
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert_trains_like_torch(original, converted, 5, torch.float64, 1, {"constant_pad_nd": 1},
                             tolerance(torch.float64))


# (model, whether torch's backward still works once the conv's input before its padding changed in place)
IN_PLACE_AFTER_THE_FORWARD = {
    **{name: (lambda build=build: padded_block(build()), True) for name, build in INPUT_FREE_PADS.items()},
    "conv circular": (lambda: padded_block(None, padding=1, padding_mode="circular"), True),
    "conv zeros": (lambda: padded_block(None, padding=1), False),  # the conv keeps its input itself
    **{name: (lambda build=build: padded_block(build()), False) for name, build in PADS.items()},
    "conv reflect": (lambda: padded_block(None, padding=1, padding_mode="reflect"), False),
}


@pytest.mark.parametrize("case", IN_PLACE_AFTER_THE_FORWARD)
def test_the_input_changed_in_place_after_the_forward_fails_the_backward_only_where_torchs_does(case):
    """torch's circular, zero and constant pads (modules or the conv's padding_mode) keep nothing of their input:
    it may change in place after the forward. Reflect and replicate keep it (their backward takes it): folded, the op
    keeps the same input, and both raise."""
    build, backward_works = IN_PLACE_AFTER_THE_FORWARD[case]
    original = build()
    converted = ascend_acts.convert(copy.deepcopy(original))
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64, requires_grad=True)
    gradients = []
    for model in (original, converted):
        source = x * 1
        output = model(source)
        source.add_(1)
        if backward_works:
            gradients.append(torch.autograd.grad(output.square().sum(), [x, *model.parameters()]))
        else:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                output.square().sum().backward()
    for ours, theirs in zip(*gradients[::-1]):
        torch.testing.assert_close(ours, theirs, **tolerance(torch.float64))


def test_a_hooked_pad_runs_itself_and_the_rest_of_the_run_fuses():
    original = padded_block(nn.ReflectionPad2d(2))
    converted = ascend_acts.convert(copy.deepcopy(original))
    seen = []
    converted[0].register_forward_hook(lambda module, args, output: seen.append(output.shape))
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    with OpCounter() as counter:
        got = converted(x)
    assert counter.fused == 1 and pad_calls(counter) == {"reflection_pad2d": 1}
    assert seen == [torch.Size([2, 3, 10, 10])]
    torch.testing.assert_close(got, original(x), **tolerance(torch.float64))
    original[0].register_forward_hook(lambda *args: None)
    (row,) = ascend_acts.explain(original, x)
    assert row.pattern == "ReflectionPad2d -> Conv2d -> InstanceNorm2d -> ReLU" and row.fused
    assert row.reason.startswith("the ReflectionPad2d runs itself: a hook on the pad")


# (model, input side, fused runs, how the pad's note begins): pads that cannot join; the rest of the run fuses
UNFOLDED = {
    "before a ConvTranspose2d": (lambda: nn.Sequential(nn.ReflectionPad2d(1), nn.ConvTranspose2d(3, 6, 3, 2),
                                                       nn.InstanceNorm2d(6), nn.ReLU()), 4, 1,
                                 "a pad folds into an exact nn.Conv2d only, not a ConvTranspose2d"),
    "asymmetric": (lambda: padded_block(nn.ReflectionPad2d((1, 0, 1, 0))), 6, 1,
                   "asymmetric padding (1, 0, 1, 0)"),
    **{f"a {name} pad": (lambda build=build: padded_block(build()), 6, 1,
                         f"torch's {type(build()).__name__} keeps no input: folded, the run would keep the unpadded "
                         "input") for name, build in INPUT_FREE_PADS.items()},
    "a constant other than 0": (lambda: padded_block(nn.ConstantPad2d(1, 0.5)), 6, 1,
                                "torch's ConstantPad2d keeps no input"),
    "cropping": (lambda: padded_block(nn.ReplicationPad2d((1, 1, -1, -1))), 8, 1, "a negative pad (it crops)"),
    "a conv that pads too": (lambda: padded_block(nn.ReflectionPad2d(1), padding=1), 6, 1, "the conv pads too"),
    "a 1-D pad": (lambda: nn.Sequential(nn.ReflectionPad1d(1), nn.Conv1d(3, 6, 3), nn.BatchNorm1d(6), nn.ReLU()),
                  6, 1, "only an exact nn.ReflectionPad2d"),
    "before a synchronised BatchNorm's run": (
        lambda: nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(3, 6, 3), nn.SyncBatchNorm(6), nn.ReLU()), 6, 1,
        "a synchronised BatchNorm's run pads with zeros only"),
}


@pytest.mark.parametrize("case", UNFOLDED)
def test_a_pad_that_cannot_join_runs_itself_and_the_rest_fuses(case):
    build, side, runs, note = UNFOLDED[case]
    original = build().double()
    converted = ascend_acts.convert(copy.deepcopy(original))
    shape = (2, 3, side) if isinstance(original[1], nn.Conv1d) else (2, 3, side, side)
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    with OpCounter() as counter:
        got = converted(x)
    # (a circular pad runs as slices and copies, no op named pad)
    assert counter.fused == runs and (sum(pad_calls(counter).values()) >= 1 or isinstance(original[0],
                                                                                          nn.CircularPad2d))
    expected = original(x)
    torch.testing.assert_close(got, expected, **tolerance(torch.float64))
    ours = torch.autograd.grad(got.square().sum(), [x, *converted.parameters()])
    theirs = torch.autograd.grad(expected.square().sum(), [x, *original.parameters()])
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, **tolerance(torch.float64))
    (row,) = ascend_acts.explain(original, x.detach())
    assert row.fused and row.pattern.startswith(type(original[0]).__name__ + " -> "), row
    assert row.reason.startswith(f"the {type(original[0]).__name__} runs itself: {note}"), row.reason


@pytest.mark.parametrize("pad, side", [(nn.ReflectionPad2d(3), 3), (nn.CircularPad2d(4), 3)],
                         ids=["reflect", "circular"])
def test_a_pad_torch_refuses_is_its_error_and_changes_nothing(pad, side):
    original = padded_block(pad, "instance tracked")
    converted = ascend_acts.convert(copy.deepcopy(original))
    before = copy.deepcopy(converted.state_dict())
    x = torch.randn(2, 3, side, side, dtype=torch.float64)
    with pytest.raises(RuntimeError) as torchs:
        original(x)
    with pytest.raises(RuntimeError) as ours:
        converted(x)
    assert str(ours.value) == str(torchs.value)
    for key, value in converted.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_a_hooked_conv_leaves_the_run_as_torchs_modules_pad_included():
    """An unfused run's row counts what torch's modules keep, the pad's copy included, on both sides."""
    model = nn.Sequential(nn.Conv2d(3, 8, 1), nn.ReflectionPad2d(1), nn.Conv2d(8, 8, 3), nn.InstanceNorm2d(8),
                          nn.ReLU())
    model[2].register_forward_pre_hook(lambda *args: None)
    (row,) = ascend_acts.explain(model, torch.randn(2, 3, 8, 8))
    assert (row.path, row.fused, row.reason) == ("<model>[1:5]", False, "a hook on the conv")
    assert row.saved_bytes_converted == row.saved_bytes_torch > 0


def test_kept_bytes_drop_by_the_padded_copy_and_the_recomputed_conv_output():
    """explain counts what autograd keeps: a folded pad's copy is gone (the op keeps the unpadded input, which the
    layer before produced); a ReLU run whose convolution is cheap (K = 8 * 9 = 72 MACs per output) also drops its
    conv output, one of K = 48 * 9 = 432 keeps it. (BatchNorm2d: torch's instance_norm keeps its statistics and
    affine in other shapes than the op, a few bytes apart.)"""
    n, side = 2, 8
    padded, z = 4 * n * (side + 2) ** 2, 4 * n * side * side  # float32 bytes per channel

    def model(width):
        return nn.Sequential(nn.Conv2d(3, width, 1), nn.ReflectionPad2d(1), nn.Conv2d(width, 8, 3),
                             nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 3, 1))

    (cheap,) = ascend_acts.explain(model(8), torch.randn(n, 3, side, side))
    (costly,) = ascend_acts.explain(model(48), torch.randn(n, 3, side, side))
    assert cheap.reason == "recomputes the conv output in backward" and costly.reason == ""
    assert costly.saved_bytes_torch - costly.saved_bytes_converted == 48 * padded
    weight_copy = (8 * 8 * 9 + 8) * 4  # recomputing keeps the conv weight and bias as the forward used them
    assert cheap.saved_bytes_torch - cheap.saved_bytes_converted == 8 * padded + 8 * z - weight_copy


def test_the_cyclegan_generator_keeps_less_by_its_pads_and_recomputed_outputs():
    """ngf 8 at 32x32: the first 7x7 conv (K = 147) and the last transposed conv (K = 8 * 9 / 4 = 18) recompute
    their z (the convs whose weight is larger than their output at this size do not); every residual pad's copy is
    gone; the last pad (before the norm-less conv) is torch's. A run with neither keeps torch's bytes, but for the
    affine=False norm's ones and zeros the op takes (2 C floats)."""
    torch.manual_seed(0)
    model = resnet_generator("instance", ngf=8)
    x = torch.randn(1, 3, 32, 32)
    table = ascend_acts.explain(model, x)
    assert len(table) == GENERATOR_RUNS and all(r.fused for r in table), str(table)
    assert sum(r.pattern.startswith("ReflectionPad2d -> ") for r in table) == 5, str(table)
    rows = {r.path: r for r in table}
    assert rows["<model>[0:4]"].reason == rows["<model>[15:18]"].reason == "recomputes the conv output in backward"
    for r in table:
        if r.pattern.startswith("ReflectionPad2d -> ") or r.reason:
            assert r.saved_bytes_converted < r.saved_bytes_torch, str(table)
        else:
            assert r.saved_bytes_converted <= r.saved_bytes_torch + 2 * 64 * 4, str(table)
    assert table.saved_bytes_converted < 0.7 * table.saved_bytes_torch, str(table)


def test_the_recompute_rule_is_the_npu_figures_and_counts_macs_as_torch():
    """K < 393 MACs per output (314.5 TFLOPS fp16, 1.6 TB/s, 2-byte z); the MACs of each conv as torch's flop
    counter counts them (FLOPs / 2 / output elements), a transposed conv's spread over its larger output."""
    bound = fusion.Z_ELEMENT_BYTES * fusion.CUBE_FLOPS / fusion.HBM_BYTES_PER_SECOND
    assert math.floor(bound) == 393
    assert fusion.recompute_is_cheaper(393) and not fusion.recompute_is_cheaper(394)
    convs = {nn.Conv2d(3, 64, 7): True, nn.Conv2d(64, 128, 3, 2, 1): False, nn.Conv2d(256, 256, 3): False,
             nn.ConvTranspose2d(128, 64, 3, 2, 1, output_padding=1): True,
             nn.ConvTranspose2d(256, 128, 3, 2, 1, output_padding=1): False, nn.Conv2d(64, 64, 3, groups=4): True}
    for conv, cheaper in convs.items():
        x = torch.randn(1, conv.in_channels, 12, 12)
        with torch.no_grad(), FlopCounterMode(display=False) as flops:
            y = conv(x)
        macs = fusion.macs_per_output(conv, 12, 12)
        assert macs == pytest.approx(flops.get_total_flops() / 2 / y.numel()), conv
        assert fusion.recompute_is_cheaper(macs) is cheaper, conv


def test_gradient_penalty_through_a_padded_run_as_torch():
    for pad in (nn.ReflectionPad2d(1), nn.ReplicationPad2d(1)):
        original = padded_block(pad, "instance affine", "relu")
        converted = ascend_acts.convert(copy.deepcopy(original))
        assert_gradient_penalty_as_torch(original, converted, torch.randn(2, 3, 6, 6, dtype=torch.float64),
                                         **tolerance(torch.float64))


@slow
def test_gradient_penalty_through_the_padded_generator_as_torch(backend):
    dtype = dtype_of(backend)
    original = resnet_generator("instance affine", dtype)
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert_gradient_penalty_as_torch(original, converted, torch.randn(2, 3, 16, 16, dtype=dtype),
                                     **tolerance(dtype, GENERATOR_RUNS))


@slow
@pytest.mark.parametrize("training, backend", [(True, "reference"), (False, "sim")], indirect=["backend"])
def test_compile_fullgraph_with_folded_pads(training, backend):
    """The graph is the op's, whichever backend runs it: the training op on one, the eval op on another."""
    original = resnet_generator("instance tracked")
    converted = ascend_acts.convert(copy.deepcopy(original))
    original.train(training), converted.train(training)
    assert_compiled_as_torch(original, converted, torch.randn(2, 3, 16, 16), **tolerance(torch.float32,
                                                                                         GENERATOR_RUNS))


@slow
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_autocast_with_folded_pads(dtype, backend):
    original = resnet_generator("instance tracked")
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert_autocast_as_torch(original, converted, torch.randn(2, 3, 16, 16), dtype, GENERATOR_RUNS)


def test_a_padding_mode_set_after_convert_is_seen_at_the_next_call():
    original = padded_block(None, "batch", "leaky", padding=1)
    converted = ascend_acts.convert(copy.deepcopy(original))
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    for mode in ("reflect", "circular", "zeros"):
        original[0].padding_mode = converted[0].padding_mode = mode
        with OpCounter() as counter:
            got = converted(x)
        assert counter.fused == 1 and not pad_calls(counter), counter.calls
        torch.testing.assert_close(got, original(x), **tolerance(torch.float64))


def test_a_zero_pad_runs_itself_before_a_synchronised_batch_norm():
    """The synchronised op takes the conv's zeros-mode padding; a pad module before it runs itself (above)."""
    torch.manual_seed(0)
    original = nn.Sequential(nn.ZeroPad2d(1), nn.Conv2d(3, 6, 3, padding=1), nn.SyncBatchNorm(6), nn.ReLU()).double()
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert_trains_like_torch(original, converted, 6, torch.float64, 1, {"constant_pad_nd": 1},
                             tolerance(torch.float64))


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_a_negative_conv_padding_is_left_to_the_modules(mode):
    """torch's Conv2d crops with a negative padding (F.pad) in the padding modes and refuses it in zeros mode."""
    original = padded_block(None, "batch", "relu", padding=(1, -1), padding_mode=mode)
    converted = ascend_acts.convert(copy.deepcopy(original))
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    if mode == "zeros":
        with pytest.raises(RuntimeError) as torchs:
            original(x)
        with OpCounter() as counter, pytest.raises(RuntimeError) as ours:
            converted(x)
        assert str(ours.value) == str(torchs.value)
    else:
        with OpCounter() as counter:
            got = converted(x)
        torch.testing.assert_close(got, original(x), **tolerance(torch.float64))
        (row,) = ascend_acts.explain(original, x)
        assert not row.fused and row.reason == "a negative padding (1, -1) (a crop): the conv's own", row
    assert counter.fused == 0
    for key, value in converted.state_dict().items():
        assert torch.equal(value, original.state_dict()[key]), key


@pytest.mark.parametrize("momentum", [0.1, None])
def test_a_failed_call_leaves_num_batches_tracked_and_its_version(momentum):
    """torch's conv raises before its BatchNorm2d counts the batch: the buffer's value and version stay. A call that
    succeeds counts it, momentum=None averaging with 1 / the new count, as torch's."""
    models = [nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4, momentum=momentum), nn.LeakyReLU(0.2)),
              nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(3, 4, 7), nn.BatchNorm2d(4, momentum=momentum),
                            nn.ReLU()),
              nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), SyncBatchNorm(4, momentum=momentum), nn.ReLU())]
    bad_inputs = [torch.randn(2, 5, 4, 4), torch.randn(2, 3, 3, 3), torch.randn(2, 5, 4, 4)]
    for original, bad in zip(models, bad_inputs):
        converted = ascend_acts.convert(copy.deepcopy(original))
        for model in (original, converted):
            counted = model[-2].num_batches_tracked
            version = counted._version
            with pytest.raises(RuntimeError):
                model(bad)
            assert counted._version == version and counted.item() == 0, model
        for side in (5, 6):
            x = torch.randn(2, 3, side, side)
            torch.testing.assert_close(converted(x), original(x), **tolerance(torch.float32))
        for key, value in original.state_dict().items():
            torch.testing.assert_close(converted.state_dict()[key], value, **tolerance(torch.float32))
