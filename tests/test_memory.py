"""Saved-for-backward: less than PyTorch (output instead of input; no RReLU noise tensor)."""

import pytest
import torch
import torch.nn.functional as F

import ascend_acts


def saved_tensors(fn, x):
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = fn(x)
    return y, saved


def saved_bytes(tensors):
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())


@pytest.mark.parametrize("slope", [0.0, 0.2])
def test_leaky_relu_saves_the_output(slope):
    x = torch.randn(100, 100, requires_grad=True) * 1.0
    y, saved = saved_tensors(lambda t: ascend_acts.leaky_relu(t, slope), x)
    assert len(saved) == 1 and saved[0].data_ptr() == y.data_ptr()


def test_leaky_relu_negative_slope_saves_the_input():
    x = torch.randn(100, requires_grad=True) * 1.0
    _, saved = saved_tensors(lambda t: ascend_acts.leaky_relu(t, -0.2), x)
    assert len(saved) == 1 and saved[0].data_ptr() == x.data_ptr()


def test_rrelu_training_saves_output_and_seed_only():
    x = torch.randn(256, 256, requires_grad=True) * 1.0
    y, saved = saved_tensors(lambda t: ascend_acts.rrelu(t, training=True), x)
    big = [t for t in saved if t.numel() == x.numel()]
    assert len(big) == 1 and big[0].data_ptr() == y.data_ptr()
    assert sum(t.numel() for t in saved if t.numel() != x.numel()) == 1  # the int64 seed
    # beyond the output (which the next layer keeps anyway) we save 8 bytes; torch saves input + noise
    _, torch_saved = saved_tensors(lambda t: F.rrelu(t, training=True), x)
    ours_extra = saved_bytes([t for t in saved if t.data_ptr() != y.data_ptr()])
    assert ours_extra == 8
    # output + 8-byte seed against torch's input + noise: half, give or take the seed
    assert saved_bytes(saved) - 8 <= 0.5 * saved_bytes(torch_saved)


@pytest.mark.parametrize("numel", [64 * 64, 1001])
def test_inplace_rrelu_negative_lower_keeps_one_bit_per_element(numel):
    """In-place with lower < 0 the result cannot tell x > 0: the mask is kept as bits (numel / 8 bytes)
    plus the 8-byte seed, against torch's noise tensor of numel elements."""
    x = torch.randn(numel, requires_grad=True)
    y, saved = saved_tensors(lambda t: ascend_acts.rrelu(t * 1.0, -0.5, 0.3, training=True, inplace=True), x)
    ours = saved_bytes(saved)
    assert ours <= -(-numel // 8) + 8
    _, torch_saved = saved_tensors(lambda t: F.rrelu(t * 1.0, -0.5, 0.3, training=True, inplace=True), x)
    assert ours * 30 <= saved_bytes(torch_saved)  # about 1/32 of torch's float32 noise


def test_fused_bias_leaky_relu_keeps_the_output_where_torch_keeps_the_pre_activation():
    """StyleGAN2's default (slope 0.2, scale sqrt 2): ours keeps the output, which the next layer keeps anyway;
    torch's composite keeps x + bias, a tensor of its own (rosinality's CUDA op keeps the output, as ours)."""
    x, bias = torch.randn(8, 16, 32, requires_grad=True) * 1.0, torch.randn(16, requires_grad=True)
    y, saved = saved_tensors(lambda t: ascend_acts.fused_bias_leaky_relu(t, bias), x)
    assert len(saved) == 1 and saved[0].data_ptr() == y.data_ptr()
    y_torch, torch_saved = saved_tensors(lambda t: F.leaky_relu(t + bias.view(1, -1, 1), 0.2) * 2**0.5, x)
    extra = [t for t in torch_saved if t.data_ptr() not in (y_torch.data_ptr(), x.data_ptr())]
    assert saved_bytes(extra) == saved_bytes([y_torch])  # the pre-activation, as large as the output
