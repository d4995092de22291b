"""Mixed precision and memory format: the fused op under torch.autocast behaves like nn.Sequential(conv, bn,
LeakyReLU) under autocast (dtype, error within 2x torch's own); channels_last in, channels_last out and
gradients (as torch's CPU convolution). The same for StyleGAN2's fused bias + LeakyReLU
after a conv under autocast (its float32 bias takes the conv output's dtype, as mmcv casts it)."""

import copy

import pytest
import torch
from torch import nn

import ascend_acts
from markers import fast_only

ops = torch.ops.ascend_acts
CL = torch.channels_last
MARGIN = {torch.bfloat16: 5e-2, torch.float16: 1e-2}


def models(seed=0, slope=0.2, bias=False):
    torch.manual_seed(seed)
    seq = nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1, bias=bias), nn.BatchNorm2d(8), nn.LeakyReLU(slope))
    with torch.no_grad():
        seq[1].weight.uniform_(0.5, 1.5), seq[1].bias.uniform_(-0.5, 0.5)
        seq[1].running_mean.uniform_(-0.2, 0.2), seq[1].running_var.uniform_(0.5, 2)
    fused = ascend_acts.nn.ConvBNLeakyReLU2d(3, 8, 4, 2, 1, bias=bias, negative_slope=slope)
    fused.load_state_dict(seq.state_dict())
    return seq, fused


@pytest.mark.parametrize("dtype", fast_only([torch.bfloat16, torch.float16], [torch.bfloat16]), ids=str)
@pytest.mark.parametrize("training", fast_only([True, False], [True]))
@pytest.mark.parametrize("bias", fast_only([False, True], [True]))
def test_autocast_matches_sequential(dtype, training, bias, backend):
    seq, fused = models(bias=bias)
    seq64 = copy.deepcopy(seq).double().train(training)
    seq.train(training), fused.train(training)
    x = torch.randn(4, 3, 16, 16)
    exact = seq64(x.double())
    x_seq, x_ours = x.clone().requires_grad_(), x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=dtype):
        theirs, ours = seq(x_seq), fused(x_ours)
    assert ours.dtype == theirs.dtype == dtype
    assert (ours.double() - exact).abs().max() <= 2 * (theirs.double() - exact).abs().max() + 1e-3
    # parameters keep their float32 gradients; the input gradient is float32 like the input. Where the
    # pre-activation is within rounding of 0 a half-precision run may take the other slope (torch's too):
    # the incoming gradient is 0 there, so the comparison measures rounding, not which side a tie fell on
    with torch.no_grad():
        pre = seq64[1](seq64[0](x.double()))
    grad = torch.randn(exact.shape) * (pre.abs() > MARGIN[dtype])
    g_theirs = torch.autograd.grad(theirs, [x_seq, seq[0].weight, seq[1].weight], grad.to(dtype))
    g_ours = torch.autograd.grad(ours, [x_ours, fused.conv.weight, fused.bn.weight], grad.to(dtype))
    x64 = x.double().requires_grad_()
    g_exact = torch.autograd.grad(seq64(x64), [x64, seq64[0].weight, seq64[1].weight], grad.double())
    for a, b, e in zip(g_ours, g_theirs, g_exact):
        assert a.dtype == b.dtype == torch.float32
        assert (a.double() - e).abs().max() <= 2 * (b.double() - e).abs().max() + 1e-3
    if training:
        torch.testing.assert_close(fused.bn.running_mean, seq[1].running_mean, rtol=2e-2, atol=2e-3)
        assert fused.bn.running_mean.dtype == torch.float32


def test_autocast_functional_keeps_bn_parameters_float32():
    """Under autocast the op gets half input/weight and float32 BatchNorm parameters; outside autocast the
    op layer refuses a dtype mismatch and names the argument."""
    x, w = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)
    gamma, beta = torch.rand(4) + 0.5, torch.randn(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ascend_acts.conv_bn_leaky_relu(x, w, None, None, None, gamma, beta, training=True, padding=1)
    assert out.dtype == torch.bfloat16
    geometry = ([1, 1], [1, 1, 1, 1], [1, 1], 1)
    ok = ops.conv_bn_leaky_relu_train(x.bfloat16(), w.bfloat16(), None, gamma, beta, None, None, *geometry, 0.1, 1e-5,
                                      0.2, False)
    assert ok[0].dtype == torch.bfloat16 and ok[2].dtype == torch.float32
    with pytest.raises(RuntimeError):  # the oracle: torch's own error type for these mismatches
        torch.nn.functional.conv2d(x.bfloat16(), w)
    with pytest.raises(RuntimeError):
        torch.nn.functional.batch_norm(x.half(), None, None, gamma.double(), beta, training=True)
    with pytest.raises(RuntimeError, match="'weight' must have the input's dtype torch.bfloat16"):
        ops.conv_bn_leaky_relu_train(x.bfloat16(), w, None, gamma, beta, None, None, *geometry, 0.1, 1e-5, 0.2, False)
    with pytest.raises(RuntimeError, match="'bn_weight' must be"):
        ops.conv_bn_leaky_relu_train(x, w, None, gamma.double(), beta, None, None, *geometry, 0.1, 1e-5, 0.2, False)
    with pytest.raises(RuntimeError, match="'bias' must have the input's dtype torch.float16"):
        ops.conv_bn_leaky_relu_eval(x.half(), w.half(), torch.zeros(4), *geometry, 0.2)


@pytest.mark.slow
def test_autocast_compiles():
    seq, fused = models(1)
    compiled = torch.compile(fused, backend="aot_eager", fullgraph=True)
    x = torch.randn(2, 3, 16, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, expected = compiled(x), fused(x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), expected.float(), rtol=2e-2, atol=2e-2)


def _strides_like_torch(ours, theirs):
    assert ours.stride() == theirs.stride(), (ours.stride(), theirs.stride())


@pytest.mark.parametrize("training", fast_only([True, False], [True]))
@pytest.mark.parametrize("layout", fast_only(["input", "weight", "both"], ["both"]))
def test_channels_last_like_torch(training, layout, backend):
    seq, fused = models(2)
    seq.train(training), fused.train(training)
    if layout in ("weight", "both"):
        seq.to(memory_format=CL), fused.to(memory_format=CL)
    x = torch.randn(4, 3, 16, 16)
    if layout in ("input", "both"):
        x = x.contiguous(memory_format=CL)
    xs, xf = x.clone().requires_grad_(), x.clone().requires_grad_()
    ys, yf = seq(xs), fused(xf)
    _strides_like_torch(yf, ys)
    torch.testing.assert_close(yf, ys, rtol=2e-4, atol=2e-4)
    grad = torch.randn(ys.shape)
    gs = torch.autograd.grad(ys, [xs, seq[0].weight], grad)
    gf = torch.autograd.grad(yf, [xf, fused.conv.weight], grad)
    for a, b in zip(gf, gs):
        _strides_like_torch(a, b)
        torch.testing.assert_close(a, b, rtol=2e-4, atol=2e-4)


# --- StyleGAN2's fused bias + LeakyReLU after a conv under autocast ---------------------------------------------
def _stylegan_layer(seed=0):
    torch.manual_seed(seed)
    conv, act = nn.Conv2d(3, 6, 3, padding=1, bias=False), ascend_acts.nn.FusedLeakyReLU(6)
    with torch.no_grad():
        act.bias.normal_()
    return conv, act


def _composite(x, bias):
    return torch.nn.functional.leaky_relu(x + bias.view(1, -1, 1, 1), 0.2) * 2**0.5


@pytest.mark.parametrize("dtype", fast_only([torch.bfloat16, torch.float16], [torch.bfloat16]), ids=str)
@pytest.mark.parametrize("form", ["module", "functional"])
def test_fused_bias_autocast_output_in_the_conv_dtype_and_float32_bias_grad(dtype, form, backend):
    """Under autocast the conv gives `dtype`; the float32 bias is cast to it (by the module, or the op's autocast
    rule for the functional), so the output is `dtype` and the bias gradient float32; values and gradients within
    2x the error of the composite with the same cast (mmcv's), against float64."""
    conv, act = _stylegan_layer()
    x = torch.randn(2, 3, 5, 5)
    grad = torch.randn(2, 6, 5, 5)

    def ours(h):
        return act(h) if form == "module" else ascend_acts.fused_bias_leaky_relu(h, act.bias)

    results = {}
    for name, fn in (("ours", ours), ("theirs", lambda h: _composite(h, act.bias.to(h.dtype)))):
        act.bias.grad = None
        with torch.autocast("cpu", dtype=dtype):
            h = conv(x)
            h.retain_grad()
            y = fn(h)
        assert h.dtype == y.dtype == dtype, name
        y.backward(grad.to(dtype))
        assert act.bias.grad.dtype == torch.float32
        results[name] = (h.detach(), y.detach(), h.grad, act.bias.grad.clone())
    h = results["ours"][0].double().requires_grad_()
    bias = act.bias.detach().to(dtype).double().requires_grad_()  # the cast both sides take
    exact = _composite(h, bias)
    exact_grads = torch.autograd.grad(exact, [h, bias], grad.to(dtype).double())
    for index, want in zip((1, 2, 3), (exact, *exact_grads)):
        errors = [(results[side][index].double() - want).abs().max().item() for side in ("ours", "theirs")]
        assert errors[0] <= max(2 * errors[1], torch.finfo(dtype).eps / 2 * want.abs().max().item()), (index, errors)


def test_fused_bias_dtype_rules_outside_and_inside_autocast():
    x, bias = torch.randn(2, 3, 4).bfloat16(), torch.randn(3)
    with pytest.raises(RuntimeError, match="'bias' has dtype torch.float32 but 'input' has torch.bfloat16"):
        ascend_acts.fused_bias_leaky_relu(x, bias)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = ascend_acts.fused_bias_leaky_relu(x, bias)
        y32 = ascend_acts.fused_bias_leaky_relu(x.float(), bias.bfloat16())  # a float32 input stays float32
        with pytest.raises(RuntimeError, match="'bias' has dtype torch.float64"):  # autocast leaves float64 alone
            ascend_acts.fused_bias_leaky_relu(x, bias.double())
    assert y.dtype == torch.bfloat16 and y32.dtype == torch.float32
    assert torch.equal(y, ascend_acts.fused_bias_leaky_relu(x, bias.bfloat16()))
    assert torch.equal(y32, ascend_acts.fused_bias_leaky_relu(x.float(), bias.bfloat16().float()))


@pytest.mark.parametrize("negative_slope", [0.2, -0.2])
def test_fused_bias_channels_last_like_torch(negative_slope, backend):
    x = torch.randn(2, 5, 4, 3).contiguous(memory_format=CL)
    bias = torch.randn(5)
    results = []
    for fn in (ascend_acts.fused_bias_leaky_relu, lambda a, b, s: _composite_slope(a, b, s)):
        xs, bs = x.clone().requires_grad_(), bias.clone().requires_grad_()
        y = fn(xs, bs, negative_slope)
        results.append((y, *torch.autograd.grad(y, [xs, bs], torch.randn(y.shape, generator=torch.Generator()
                                                                             .manual_seed(1)))))
    for got, want in zip(*results):
        _strides_like_torch(got, want)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert results[0][0].is_contiguous(memory_format=CL)


def _composite_slope(x, bias, slope):
    return torch.nn.functional.leaky_relu(x + bias.view(1, -1, 1, 1), slope) * 2**0.5
