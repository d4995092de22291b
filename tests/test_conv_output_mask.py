"""The fused blocks' backward ops compute only the conv gradients autograd needs (`output_mask`, as
aten::convolution_backward's): a discriminator frozen in a generator step needs only its input's gradient, a detached
or leaf input none, a conv without bias no bias gradient. A gradient asked for is what the unmasked call gives, bit
for bit, on every backend; one not asked for is empty in the op's results and None in autograd; the platform's conv
backward is called with the mask; and whole G and D steps of converted models give torch's gradients."""

from __future__ import annotations

import copy
import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile

import ascend_acts
from ascend_acts.backends import use_backend
from ascend_acts.ops.conv_bn_leaky_relu import torch_ops
from markers import fast_only, slow
from op_samples import SAMPLES

ops = torch.ops.ascend_acts
TRAIN_BACKWARD, EVAL_BACKWARD = "conv_bn_leaky_relu_train_backward", "conv_bn_leaky_relu_eval_backward"
MASKS = [list(m) for m in itertools.product((True, False), repeat=3) if not all(m)]
# the options after negative_slope, in the schemas' order, up to padding_mode (the mask follows)
OPTION_DEFAULTS = {TRAIN_BACKWARD: (False, False, [0, 0], 0, None, "zeros"),
                   EVAL_BACKWARD: (False, False, [0, 0], "zeros")}
SLOPE_INDEX = {TRAIN_BACKWARD: 13, EVAL_BACKWARD: 8}
# unmasked samples of each kind: plain (the representative), channels_last with a circular pad, transposed, GroupNorm,
# the eval's BN affine
SAMPLE_PREFIXES = ("3x3", "padding-circular", "transposed-strided", "norm-groups-group", "affine-both-3x3")


def unmasked_samples(name, dtype=torch.float32):
    with use_backend("reference"):
        samples = SAMPLES[name](dtype, "cpu")
    chosen = []
    for prefix in SAMPLE_PREFIXES:
        sample = next((s for s in samples if s.name.startswith(prefix) and "mask" not in s.name), None)
        if sample is not None:
            chosen.append(sample)
    return chosen


def with_mask(name, args, mask):
    """The call with every option given, then `mask` (in place of the sample's), then the arguments after it (the eval
    backward's affine)."""
    position, defaults = SLOPE_INDEX[name] + 1, OPTION_DEFAULTS[name]
    options, after = tuple(args[position:position + len(defaults)]), tuple(args[position + len(defaults) + 1:])
    return (*args[:position], *options, *defaults[len(options):], mask, *after)


def conv_gradient_likes(name, args):
    """The tensors whose dtype each conv gradient has: input, weight, and weight (train) or the folded bias (eval)."""
    if name == TRAIN_BACKWARD:
        return args[3], args[4], args[4]
    return args[1], args[2], args[3]


def assert_masked_as_unmasked(name, args, mask, results, unmasked):
    assert len(results) == len(unmasked)
    for i, (got, want) in enumerate(zip(results, unmasked)):
        if i < 3 and not mask[i]:
            like = conv_gradient_likes(name, args)[i]
            assert got.numel() == 0 and got.dtype == like.dtype and got.device == like.device, (i, got.shape)
        else:
            assert got.shape == want.shape and got.dtype == want.dtype and got.stride() == want.stride(), i
            assert torch.equal(got, want), (i, (got.double() - want.double()).abs().max())


@pytest.mark.parametrize("backend", fast_only(["reference", "torch", "sim"], ["sim"]))
@pytest.mark.parametrize("name", [TRAIN_BACKWARD, EVAL_BACKWARD])
def test_computed_gradients_are_the_unmasked_calls_and_the_others_empty(name, backend):
    op = getattr(ops, name)
    for sample in unmasked_samples(name):
        with use_backend(backend):
            unmasked = op(*sample.args)
            assert all(torch.equal(a, b) for a, b in zip(op(*with_mask(name, sample.args, [True] * 3)), unmasked))
            for mask in MASKS:
                results = op(*with_mask(name, sample.args, mask))
                assert_masked_as_unmasked(name, sample.args, mask, results, unmasked)


@pytest.mark.parametrize("name", [TRAIN_BACKWARD, EVAL_BACKWARD])
def test_the_differentiable_backward_takes_the_mask_too(name):
    """Differentiated (double backward), the backward ops run their torch composite: masked the same way, and its
    computed results differentiate as the unmasked call's."""
    op = getattr(ops, name)
    sample = unmasked_samples(name, torch.float64)[0]
    with use_backend("reference"):
        differentiable = [i for i, a in enumerate(sample.args) if isinstance(a, torch.Tensor) and i in (
            (3, 4, 5, 6) if name == TRAIN_BACKWARD else (1, 2, 3))]

        def call(mask):
            args = list(with_mask(name, sample.args, mask))
            leaves = [args[i].detach().requires_grad_() for i in differentiable]
            for i, leaf in zip(differentiable, leaves):
                args[i] = leaf
            return op(*args), leaves

        unmasked, unmasked_leaves = call([True] * 3)
        for mask in MASKS:
            results, leaves = call(mask)
            assert_masked_as_unmasked(name, sample.args, mask, [r.detach() for r in results],
                                      [u.detach() for u in unmasked])
            kept = [i for i, r in enumerate(results) if r.numel() and r.requires_grad]
            if not kept:
                continue
            want = torch.autograd.grad([unmasked[i].sum() for i in kept], unmasked_leaves, allow_unused=True,
                                       retain_graph=True)
            got = torch.autograd.grad([results[i].sum() for i in kept], leaves, allow_unused=True)
            for g, w in zip(got, want):
                assert (g is None) == (w is None) or float((g if w is None else w).abs().max()) == 0
                if g is not None and w is not None:
                    torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", [TRAIN_BACKWARD, EVAL_BACKWARD])
def test_a_mask_of_another_length_is_refused_by_name(name):
    sample = unmasked_samples(name)[0]
    with pytest.raises(RuntimeError, match="output_mask"):
        getattr(ops, name)(*with_mask(name, sample.args, [True, False]))


# --- autograd sets the mask -----------------------------------------------------------------------------------
def block_call(training, needs_input, needs_weight, bias, padding_mode="zeros"):
    """A fused call (training or eval) with the input, the conv weight and the conv bias requiring grad or not; the
    norm's parameters always require it. (output, {name: tensor} of x, weight, bias (when given), gamma, beta)."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 7, 7, generator=generator, dtype=torch.float64).requires_grad_(needs_input)
    weight = (torch.randn(5, 3, 3, 3, generator=generator, dtype=torch.float64) * 0.3).requires_grad_(needs_weight)
    conv_bias = torch.randn(5, generator=generator, dtype=torch.float64).requires_grad_() if bias else None
    gamma = (torch.rand(5, generator=generator, dtype=torch.float64) + 0.5).requires_grad_()
    beta = (torch.randn(5, generator=generator, dtype=torch.float64) * 0.1).requires_grad_()
    running = (torch.zeros(5, dtype=torch.float64), torch.ones(5, dtype=torch.float64))
    out = ascend_acts.conv_bn_leaky_relu(x, weight, conv_bias, *running, gamma, beta, training, negative_slope=0.2,
                                         padding=1, padding_mode=padding_mode)
    tensors = {"x": x, "weight": weight, "bias": conv_bias, "gamma": gamma, "beta": beta}
    return out, {name: t for name, t in tensors.items() if t is not None}


def masks_of_our_conv_backwards(run, with_projections=False):
    """The output_mask of every aten::convolution_backward that one of our backward ops calls during `run()`; with
    `with_projections` also, separately, those of the transposed convolutions from 1x1 planes, which run as matrix
    products (torch_ops._is_projection)."""
    projected = []
    projection = torch_ops._projection_backward

    def recorded(*args):
        projected.append(list(args[-1]))
        return projection(*args)

    with pytest.MonkeyPatch.context() as patch, profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        patch.setattr(torch_ops, "_projection_backward", recorded)
        run()
    masks = []
    for event in prof.events():
        if event.name != "aten::convolution_backward":
            continue
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("ascend_acts::"):
            parent = parent.cpu_parent
        if parent is not None and parent.name.endswith("_backward"):
            masks.append([bool(m) for m in event.concrete_inputs[-1]])
    return (masks, projected) if with_projections else masks


CASES = [(needs_input, needs_weight, bias) for needs_input, needs_weight, bias in
         itertools.product((True, False), (True, False), (True, False))]


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("needs_input, needs_weight, bias", fast_only(CASES, [(False, True, False)], unpack=True))
def test_autograd_asks_only_for_the_gradients_that_are_needed(training, needs_input, needs_weight, bias):
    out, leaves = block_call(training, needs_input, needs_weight, bias)
    grad = torch.randn_like(out)
    masks = masks_of_our_conv_backwards(lambda: torch.autograd.backward(out, grad))
    # eval: the BN affine folds in inside the op, so the conv weight needs a gradient only if it does; the conv bias's
    # is a sum of the eval backward's own (folding.conv_gradient_mask), never aten's
    expected = [needs_input, needs_weight, bias and training]
    assert masks == ([expected] if any(expected) else [])
    # the gradients computed are those of the call where everything needs one; the others are not there
    full_out, full = block_call(training, True, True, bias)
    torch.autograd.backward(full_out, grad)
    for name, t in leaves.items():
        assert torch.equal(t.grad, full[name].grad) if t.requires_grad else t.grad is None, name


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_a_gradient_not_needed_is_none_from_the_autograd_function(training):
    out, _ = block_call(training, False, True, False)
    grads = out.grad_fn.apply(torch.ones_like(out), *(None,) * (3 if training else 0))
    assert grads[0] is None  # the input's
    assert grads[1] is not None and grads[1].shape == (5, 3, 3, 3)
    if training:
        assert grads[2] is None  # no conv bias


def test_a_padded_input_gets_its_gradient_alone():
    """A pad F.pad makes (reflect) is folded back onto the input: also when only the input's gradient is asked."""
    out, tensors = block_call(True, True, False, False, "reflect")
    grad = torch.randn_like(out)
    masks = masks_of_our_conv_backwards(lambda: torch.autograd.backward(out, grad))
    assert masks == [[True, False, False]]
    full_out, full = block_call(True, True, True, False, "reflect")
    torch.autograd.backward(full_out, grad)
    assert torch.equal(tensors["x"].grad, full["x"].grad)


# --- whole GAN steps: converted models against torch's --------------------------------------------------------
def generator(dtype):
    """A small DCGAN generator: ConvTranspose2d -> BatchNorm2d -> ReLU blocks, Tanh."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.ConvTranspose2d(6, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16), nn.ReLU(True),
        nn.ConvTranspose2d(16, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(True),
        nn.ConvTranspose2d(8, 3, 4, 2, 1, bias=False), nn.Tanh()).to(dtype)


def discriminator(dtype):
    """A small DCGAN discriminator: Conv2d -> BatchNorm2d -> LeakyReLU(0.2) blocks (one with a conv bias)."""
    torch.manual_seed(1)
    return nn.Sequential(
        nn.Conv2d(3, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.LeakyReLU(0.2, True),
        nn.Conv2d(8, 16, 4, 2, 1, bias=True), nn.BatchNorm2d(16), nn.LeakyReLU(0.2, True),
        nn.Conv2d(16, 1, 4, 1, 0, bias=False), nn.Flatten()).to(dtype)


def bce(logits, target):
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, target))


@pytest.mark.parametrize("backend", fast_only(["reference", "torch", "sim"], ["reference"]))
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_a_generator_step_through_a_frozen_discriminator_is_torchs(backend, mode):
    """The G step with D frozen (requires_grad_(False)): D gets no .grad, G the gradients torch's models give; D's
    fused blocks ask only for their input's gradient and G's first (its input a leaf noise) only for its weight's."""
    dtype = torch.float64 if backend == "reference" else torch.float32
    tolerance = {} if dtype == torch.float64 else {"rtol": 1e-4, "atol": 1e-5}
    models = {"torch": (generator(dtype), discriminator(dtype))}
    models["converted"] = tuple(ascend_acts.convert(copy.deepcopy(m)) for m in models["torch"])
    noise = torch.randn(4, 6, 1, 1, generator=torch.Generator().manual_seed(2), dtype=torch.float64).to(dtype)
    grads, masks = {}, []
    for kind, (netG, netD) in models.items():
        netD.requires_grad_(False)
        if mode == "eval":
            netD.eval()

        def step(netG=netG, netD=netD):
            bce(netD(netG(noise)), 1.0).backward()

        with use_backend(backend):
            if kind == "converted":
                masks, projected = masks_of_our_conv_backwards(step, with_projections=True)
            else:
                step()
        assert all(p.grad is None for p in netD.parameters()), kind
        grads[kind] = [p.grad for p in netG.parameters()]
    for got, want in zip(grads["converted"], grads["torch"]):
        torch.testing.assert_close(got, want, **tolerance)
    # backward order: D's two fused blocks (input only), G's second fused block (input and weight); G's first (a
    # projection of the noise, torch_ops._is_projection) only its weight's (its input is a leaf noise)
    assert masks == [[True, False, False]] * 2 + [[True, True, False]]
    assert projected == [[False, True, False]]


@pytest.mark.parametrize("backend", fast_only(["reference", "sim"], ["sim"]))
def test_a_discriminator_step_on_detached_fakes_is_torchs(backend):
    """The D step on fake.detach() and real images: the first block needs no input gradient; D's gradients are
    torch's, G gets none."""
    dtype = torch.float32
    models = {"torch": (generator(dtype), discriminator(dtype))}
    models["converted"] = tuple(ascend_acts.convert(copy.deepcopy(m)) for m in models["torch"])
    noise = torch.randn(4, 6, 1, 1, generator=torch.Generator().manual_seed(2))
    real = torch.rand(4, 3, 16, 16, generator=torch.Generator().manual_seed(4)) * 2 - 1
    grads, masks = {}, []
    for kind, (netG, netD) in models.items():
        def step(netG=netG, netD=netD):
            fake = netG(noise)
            ((bce(netD(real), 1.0) + bce(netD(fake.detach()), 0.0)) / 2).backward()

        with use_backend(backend):
            if kind == "converted":
                masks = masks_of_our_conv_backwards(step)
            else:
                step()
        assert all(p.grad is None for p in netG.parameters()), kind
        grads[kind] = [p.grad for p in netD.parameters()]
    for got, want in zip(grads["converted"], grads["torch"]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert sorted(map(tuple, masks)) == sorted([(False, True, False), (True, True, True)] * 2)


@slow
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_compiled_masked_backward_is_eager(training):
    """torch.compile traces the backward op with the mask autograd sets (the conv weight frozen: input and norm
    parameters only) and gives eager's gradients."""
    def fused(x, weight, gamma, beta):
        running = (torch.zeros(5, dtype=x.dtype), torch.ones(5, dtype=x.dtype))
        return ascend_acts.conv_bn_leaky_relu(x, weight, None, *running, gamma, beta, training, negative_slope=0.2,
                                              padding=1).square().sum()

    torch._dynamo.reset()
    grads = {}
    for kind, function in (("eager", fused), ("compiled", torch.compile(fused, backend="aot_eager", fullgraph=True))):
        _, tensors = block_call(training, True, False, False)
        function(tensors["x"], tensors["weight"], tensors["gamma"], tensors["beta"]).backward()
        assert tensors["weight"].grad is None, kind
        grads[kind] = {name: tensors[name].grad for name in ("x", "gamma", "beta")}
    for name, want in grads["eager"].items():
        torch.testing.assert_close(grads["compiled"][name], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("affine_mask", [[False, True], [True, False], [False, False]])
def test_the_eval_backwards_empty_results_are_distinct_tensors(affine_mask, backend):
    """Gradients not asked for come back empty, each its own tensor (one tensor for several results would alias
    outputs the schema declares fresh: opcheck's test_schema)."""
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(2, 4, 5, 5, generator=g), torch.randn(6, 4, 3, 3, generator=g), torch.randn(6, generator=g)
    gamma, beta, grad = torch.randn(6, generator=g), torch.randn(6, generator=g), torch.randn(2, 6, 3, 3, generator=g)
    args = (grad, x, w, b, [1, 1], [0, 0, 0, 0], [1, 1], 1, 0.01)
    kwargs = dict(output_mask=[True, True, False], bn_weight=gamma, bn_bias=beta, affine_mask=affine_mask)
    results = ops.conv_bn_leaky_relu_eval_backward(*args, **kwargs)
    assert len({id(r) for r in results}) == len(results)
    assert [r.numel() == 0 for r in results[2:]] == [True, *(not m for m in affine_mask)]
    torch.library.opcheck(ops.conv_bn_leaky_relu_eval_backward, args, kwargs, test_utils=("test_schema",))
