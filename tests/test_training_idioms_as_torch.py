"""A GAN practitioner's review of a converted model (issue 11): idioms of real training code, each judged
against plain torch (the unconverted model, torch.nn.functional, float64). Every test here failed on the
branch it was written against."""

import copy

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import ascend_acts

F64 = torch.float64


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def conv_bn_act(dtype=F64, seed=0, **bn_kwargs) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8, **bn_kwargs), nn.LeakyReLU(0.2)).to(dtype)


def torch_and_converted(model):
    return model, ascend_acts.convert(copy.deepcopy(model))


def batch(n=4, dtype=F64, seed=1):
    return torch.randn(n, 3, 6, 6, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# --- 1. an in-place op on the output of an out-of-place LeakyReLU ------------------------------------
# torch's out-of-place leaky_relu keeps its input, so `h = act(h); h += skip` backpropagates; ours keeps the
# output (the memory saving, README "Deliberate differences"), so autograd's version check refuses the
# backward loudly, never silently; the out-of-place spelling `h = h + skip` gives torch's gradients.
def test_inplace_update_of_leaky_relu_output_is_refused_loudly_and_out_of_place_matches_torch():
    x = torch.randn(4, 5, dtype=F64, requires_grad=True)
    y = ascend_acts.leaky_relu(x, 0.2)
    y += 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(y.square().sum(), x)
    grads = [torch.autograd.grad((leaky_relu(x, 0.2) + 1.0).square().sum(), x)[0]
             for leaky_relu in (torch.nn.functional.leaky_relu, ascend_acts.leaky_relu)]
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=0)


def test_inplace_update_of_converted_block_output_is_refused_loudly_and_out_of_place_matches_torch():
    reference, converted = torch_and_converted(conv_bn_act())
    h = converted(batch())
    h += 1.0  # e.g. `h += shortcut(x)` after a Conv-BN-LeakyReLU block
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        h.sum().backward()
    converted.zero_grad()
    grads = []
    for model in (reference, converted):
        (model(batch()) + 1.0).square().sum().backward()
        grads.append(model[0].weight.grad)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-9, atol=1e-12)


# --- 2. activation checkpointing (torch.utils.checkpoint, non-reentrant, default early stop) ----------
# torch's recomputation runs BatchNorm again, so its running statistics see two updates per step; the
# fused op's recomputation is stopped inside the op, before its Python-side statistics update: the
# converted model's running statistics silently differ from torch's (with early stop disabled they agree).
def test_checkpointed_training_step_updates_running_statistics_as_torch():
    reference, converted = torch_and_converted(conv_bn_act())
    for model in (reference, converted):
        x = batch().requires_grad_()
        checkpoint(model, x, use_reentrant=False).square().sum().backward()
    assert converted[1].num_batches_tracked.item() == reference[1].num_batches_tracked.item()
    torch.testing.assert_close(converted[1].running_mean, reference[1].running_mean, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(converted[1].running_var, reference[1].running_var, rtol=1e-9, atol=1e-12)


# --- 3. torch.compile(fullgraph=True, dynamic=True) -------------------------------------------------
# With dynamic=True, Dynamo passes module float attributes (momentum, eps, RReLU bounds) as symbolic
# floats; the argument checks call math.isfinite on them and fullgraph fails with "torch.* op returned
# non-Tensor" where the torch model compiles.
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_compile_fullgraph_dynamic_of_converted_block(mode):
    reference, converted = torch_and_converted(conv_bn_act())
    reference.train(mode == "train")
    converted.train(mode == "train")
    x = batch()
    expected = reference(x)
    compiled = torch.compile(converted, backend="aot_eager", fullgraph=True, dynamic=True)
    torch.testing.assert_close(compiled(x), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
def test_compile_fullgraph_dynamic_of_converted_rrelu_module():
    module = ascend_acts.convert(nn.Sequential(nn.RReLU()))
    module.eval()
    x = torch.randn(5, dtype=F64)
    compiled = torch.compile(module, backend="aot_eager", fullgraph=True, dynamic=True)
    torch.testing.assert_close(compiled(x), torch.nn.functional.rrelu(x), rtol=0, atol=0)


# --- 4. float32 training gradients when |bn_bias| / |bn_weight| is large -----------------------------
# output_determines_batch_norm kept only the output (InPlace-ABN) up to |beta| / |gamma| ~ 8e4 in float32,
# where rebuilding x-hat from the output costs ~1e-2 absolute: parameter gradients then carry relative
# errors of 1e-4 .. 4e-3 against float64, where torch's own float32 gradients are within ~1e-6.
def test_float32_gradients_with_a_nearly_switched_off_batch_norm_channel_within_10x_torch_error():
    model = conv_bn_act(dtype=torch.float32)
    with torch.no_grad():
        model[1].weight.fill_(1e-4)  # gamma decayed towards 0, beta kept: |beta / gamma| = 5e4
        model[1].bias.fill_(5.0)
    exact = copy.deepcopy(model).double()
    reference, converted = torch_and_converted(model)
    x = batch(8, torch.float32)
    grad_out = torch.randn(8, 8, 6, 6, generator=torch.Generator().manual_seed(2))
    grads = {}
    for name, m, dtype in (("torch", reference, torch.float32), ("ours", converted, torch.float32),
                           ("f64", exact, F64)):
        m(x.to(dtype)).backward(grad_out.to(dtype))
        grads[name] = [m[0].weight.grad.double(), m[1].weight.grad.double()]
    for ours, theirs, exact_grad in zip(grads["ours"], grads["torch"], grads["f64"]):
        scale = exact_grad.abs().max()
        torch_error = ((theirs - exact_grad).abs().max() / scale).item()
        our_error = ((ours - exact_grad).abs().max() / scale).item()
        assert our_error <= max(10 * torch_error, 1e-5), (our_error, torch_error)


# --- 5. in-place LeakyReLU on tensors torch refuses to modify ------------------------------------------
# `with torch.inference_mode(): fake = G(z)` and later an in-place op on `fake`: torch refuses the write
# (an inference tensor has no version counter); ours writes silently.
def test_inplace_leaky_relu_on_an_inference_tensor_outside_inference_mode_raises_as_torch():
    before = torch.randn(4, 5, dtype=F64)
    with torch.inference_mode():
        theirs, ours = before.clone(), before.clone()
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        torch.nn.functional.leaky_relu(theirs, 0.2, inplace=True)  # (torch 2.13 writes before it raises)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        ascend_acts.leaky_relu(ours, 0.2, inplace=True)
    assert torch.equal(ours, before)  # a failed call changes nothing


# A view taken under no_grad of a tensor that requires grad, then modified in place with grad enabled:
# torch explains exactly that ("A view was created in no_grad mode ..."); ours says "a leaf Variable that
# requires grad is being used in an in-place operation", about a tensor that is neither.
def test_inplace_leaky_relu_on_a_no_grad_view_gives_torchs_error():
    h = torch.randn(4, 5, dtype=F64, requires_grad=True) * 1.0
    with torch.no_grad():
        row = h[0]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        torch.nn.functional.leaky_relu(row, 0.2, inplace=True)
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        ascend_acts.leaky_relu(row, 0.2, inplace=True)
