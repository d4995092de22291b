"""ascend_acts.compat.rosinality, the drop-in for rosinality's stylegan2-pytorch `op` package, each part against an
independent oracle: upfirdn2d against a float64 NumPy evaluation of its definition (index arithmetic, no conv);
conv2d_gradfix against F.conv2d / F.conv_transpose2d; a small network written after rosinality's model.py, built
from `op` (= the module) on every CPU backend, against the same network on plain torch composites (upfirdn2d as a
matrix built from the NumPy reference)."""

import math
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import autograd, nn

import ascend_acts
import ascend_acts.compat.rosinality as rosinality
from ascend_acts import backends
from ascend_acts.compat.rosinality import conv2d_gradfix, upfirdn2d
from markers import slow
from op_counter import OpCounter

F64 = torch.float64


# ---------------------------------------------------------------- upfirdn2d
def upfirdn2d_numpy(x: np.ndarray, kernel: np.ndarray, up=(1, 1), down=(1, 1), pad=(0, 0, 0, 0)) -> np.ndarray:
    """The definition, in float64: u = x with up - 1 zeros after every sample; p[y, x] = u[y - pad_y0, x - pad_x0]
    (zero outside u: a negative pad crops); f[y, x] = sum_ab kernel[a, b] * p[y + kh - 1 - a, x + kw - 1 - b]
    (true convolution, fully overlapping outputs only); out = f[::down_y, ::down_x]. up/down are (x, y) and pad
    (x0, x1, y0, y1), as rosinality's."""
    (up_x, up_y), (down_x, down_y) = up, down
    pad_x0, pad_x1, pad_y0, pad_y1 = pad
    n, c, h, w = x.shape
    kh, kw = kernel.shape
    u = np.zeros((n, c, h * up_y, w * up_x))
    u[:, :, ::up_y, ::up_x] = x
    hp, wp = h * up_y + pad_y0 + pad_y1, w * up_x + pad_x0 + pad_x1
    ys, xs = np.arange(hp) - pad_y0, np.arange(wp) - pad_x0
    inside = (ys >= 0) & (ys < u.shape[2]), (xs >= 0) & (xs < u.shape[3])
    p = u[:, :, np.clip(ys, 0, u.shape[2] - 1)][:, :, :, np.clip(xs, 0, u.shape[3] - 1)]
    p = p * inside[0][:, None] * inside[1][None, :]
    hf, wf = hp - kh + 1, wp - kw + 1
    f = np.zeros((n, c, hf, wf))
    for a in range(kh):
        for b in range(kw):
            f += kernel[a, b] * p[:, :, kh - 1 - a:kh - 1 - a + hf, kw - 1 - b:kw - 1 - b + wf]
    return f[:, :, ::down_y, ::down_x]


def as_xy(value):
    return tuple(value) if isinstance(value, tuple) else (value, value)


def as_pad4(pad):
    return tuple(pad) if len(pad) == 4 else (pad[0], pad[1], pad[0], pad[1])


# (shape, kernel shape, up, down, pad): StyleGAN2's Upsample / Blur / downsampling Blur, odd sizes, non-square
# kernels, per-axis factors, negative pads (crops), a 4-tuple pad
CASES = [
    ((2, 3, 4, 4), (4, 4), 2, 1, (2, 1)),
    ((2, 3, 5, 5), (4, 4), 1, 1, (2, 1)),
    ((1, 2, 6, 6), (4, 4), 1, 2, (2, 2)),
    ((2, 2, 5, 7), (3, 2), 2, 2, (1, 0)),
    ((1, 3, 7, 5), (2, 5), 1, 2, (-1, 2)),
    ((2, 1, 6, 5), (3, 3), 2, 1, (-2, -1)),
    ((1, 2, 5, 6), (3, 4), (2, 1), (1, 2), (1, 2, 0, 3)),
    ((1, 1, 4, 7), (1, 3), (1, 2), (2, 1), (0, -1, 2, -2)),
    ((3, 2, 3, 3), (1, 1), 2, 2, (0, 0)),
]


def case_id(case):
    shape, kshape, up, down, pad = case
    return f"{'x'.join(map(str, shape))}-k{kshape[0]}x{kshape[1]}-up{up}-down{down}-pad{pad}".replace(" ", "")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_upfirdn2d_matches_the_definition(case):
    shape, kshape, up, down, pad = case
    g = torch.Generator().manual_seed(0)
    x, kernel = torch.randn(shape, generator=g, dtype=F64), torch.randn(kshape, generator=g, dtype=F64)
    expected = upfirdn2d_numpy(x.numpy(), kernel.numpy(), as_xy(up), as_xy(down), as_pad4(pad))
    out = upfirdn2d(x, kernel, up=up, down=down, pad=pad)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)
    out32 = upfirdn2d(x.float(), kernel.float(), up=up, down=down, pad=pad)
    assert out32.dtype == torch.float32
    np.testing.assert_allclose(out32.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_upfirdn2d_output_size_and_argument_forms():
    x, kernel = torch.randn(1, 1, 5, 7, dtype=F64), torch.randn(3, 2, dtype=F64)
    out = upfirdn2d(x, kernel, up=2, down=3, pad=(1, 2))
    assert out.shape == (1, 1, (5 * 2 + 3 - 3 + 3) // 3, (7 * 2 + 3 - 2 + 3) // 3)
    torch.testing.assert_close(upfirdn2d(x, kernel, up=[2, 2], down=(3, 3), pad=[1, 2, 1, 2]), out, rtol=0, atol=0)
    with pytest.raises(ValueError, match="pad"):
        upfirdn2d(x, kernel, pad=(1, 2, 3))
    with pytest.raises(ValueError, match="kernel"):
        upfirdn2d(x, kernel[0])


@slow  # gradgradcheck: seconds each; the values are checked against the NumPy definition in the fast subset
@pytest.mark.parametrize("case", [CASES[0], CASES[2], CASES[4], CASES[6]],
                         ids=case_id)
def test_upfirdn2d_gradcheck_and_gradgradcheck(case):
    shape, kshape, up, down, pad = case
    g = torch.Generator().manual_seed(1)
    x = torch.randn((1, *shape[1:]), generator=g, dtype=F64, requires_grad=True)
    kernel = torch.randn(kshape, generator=g, dtype=F64, requires_grad=True)

    def fn(x, kernel):
        return upfirdn2d(x, kernel, up=up, down=down, pad=pad)

    assert autograd.gradcheck(fn, (x, kernel), fast_mode=True)
    assert autograd.gradgradcheck(fn, (x, kernel), fast_mode=True)


# ---------------------------------------------------------------- conv2d_gradfix
CONVS = {  # name: (ours, torch's, input shape, weight shape, keyword arguments)
    "conv2d": (conv2d_gradfix.conv2d, F.conv2d, (2, 4, 7, 6), (6, 2, 3, 3),
               dict(stride=2, padding=1, dilation=1, groups=2)),
    "conv2d-dilated": (conv2d_gradfix.conv2d, F.conv2d, (1, 3, 8, 7), (4, 3, 3, 2),
                       dict(stride=(1, 2), padding=(2, 0), dilation=(2, 1))),
    "conv_transpose2d": (conv2d_gradfix.conv_transpose2d, F.conv_transpose2d, (2, 4, 5, 4), (4, 3, 3, 3),
                         dict(stride=2, padding=0, output_padding=1, groups=2)),
    "conv_transpose2d-dilated": (conv2d_gradfix.conv_transpose2d, F.conv_transpose2d, (1, 2, 4, 5), (2, 3, 2, 3),
                                 dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
}


def conv_inputs(name, bias=True, seed=2):
    _, _, xshape, wshape, kwargs = CONVS[name]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(xshape, generator=g, dtype=F64, requires_grad=True)
    w = torch.randn(wshape, generator=g, dtype=F64, requires_grad=True)
    out_channels = wshape[0] if "transpose" not in name else wshape[1] * kwargs.get("groups", 1)
    b = torch.randn(out_channels, generator=g, dtype=F64, requires_grad=True) if bias else None
    return x, w, b, kwargs


def r1_like(conv, x, w, b, kwargs, context=None):
    """A conv's output, the gradient of a loss of it w.r.t. the input (create_graph, inside `context`), and the
    parameter gradients of a penalty on that gradient plus the loss: values, first and second order."""
    out = conv(x, w, b, **kwargs)
    loss = (out.tanh() * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(out.shape)).sum()
    with context if context is not None else torch.enable_grad():
        (grad_x,) = autograd.grad(loss, x, create_graph=True)
    total = loss + grad_x.pow(2).sum()
    params = [t for t in (x, w, b) if t is not None]
    return out, grad_x, autograd.grad(total, params)


@pytest.mark.parametrize("name", CONVS)
def test_conv2d_gradfix_equals_torch_values_grads_and_double_backward(name):
    ours, theirs = CONVS[name][:2]
    x, w, b, kwargs = conv_inputs(name)
    for got, expected in zip(r1_like(ours, x, w, b, kwargs), r1_like(theirs, x, w, b, kwargs)):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


@slow  # gradgradcheck of a convolution; the double backward is compared with F.conv2d's in the fast tests
@pytest.mark.parametrize("name", CONVS)
def test_conv2d_gradfix_gradcheck_and_gradgradcheck(name):
    ours = CONVS[name][0]
    x, w, _, kwargs = conv_inputs(name, bias=False)
    assert autograd.gradcheck(lambda x, w: ours(x, w, None, **kwargs), (x, w), fast_mode=True)
    assert autograd.gradgradcheck(lambda x, w: ours(x, w, None, **kwargs), (x, w), fast_mode=True)


@pytest.mark.parametrize("name", CONVS)
def test_conv2d_gradfix_float32_is_torch_bit_for_bit(name):
    ours, theirs = CONVS[name][:2]
    x, w, b, kwargs = (t.detach().float().requires_grad_() if isinstance(t, torch.Tensor) else t
                       for t in conv_inputs(name))
    for got, expected in zip(r1_like(ours, x, w, b, kwargs), r1_like(theirs, x, w, b, kwargs)):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["conv2d", "conv_transpose2d"])
def test_no_weight_gradients_skips_the_weight_gradient_of_a_backward_run_inside_it(name):
    ours, theirs = CONVS[name][:2]
    x, w, b, kwargs = conv_inputs(name)
    expected = autograd.grad(theirs(x, w, b, **kwargs).pow(2).sum(), (x, b))
    out = ours(x, w, b, **kwargs)  # the forward outside: the flag is read by the backward
    with conv2d_gradfix.no_weight_gradients():
        assert conv2d_gradfix.weight_gradients_disabled
        out.pow(2).sum().backward()
    assert not conv2d_gradfix.weight_gradients_disabled
    assert w.grad is None  # no gradient at all, as rosinality's op (not a zero one)
    torch.testing.assert_close(x.grad, expected[0], rtol=0, atol=0)
    torch.testing.assert_close(b.grad, expected[1], rtol=0, atol=0)


@pytest.mark.parametrize("name", ["conv2d", "conv_transpose2d"])
def test_no_weight_gradients_leaves_the_r1_penalty_gradients_unchanged(name):
    """train.py's d_r1_loss: autograd.grad w.r.t. the images inside the context, the penalty's backward outside:
    the weights get the full second-order gradient, as with torch's convolution and no context."""
    ours, theirs = CONVS[name][:2]
    x, w, b, kwargs = conv_inputs(name)
    for got, expected in zip(r1_like(ours, x, w, b, kwargs, conv2d_gradfix.no_weight_gradients()),
                             r1_like(theirs, x, w, b, kwargs)):
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_no_weight_gradients_state_nesting_and_enabled():
    assert conv2d_gradfix.enabled and not conv2d_gradfix.weight_gradients_disabled
    with conv2d_gradfix.no_weight_gradients():
        with conv2d_gradfix.no_weight_gradients(disable=False):
            assert conv2d_gradfix.weight_gradients_disabled
        with pytest.raises(KeyError):
            with conv2d_gradfix.no_weight_gradients():
                raise KeyError
        assert conv2d_gradfix.weight_gradients_disabled
    assert not conv2d_gradfix.weight_gradients_disabled
    with conv2d_gradfix.no_weight_gradients(disable=False):
        assert not conv2d_gradfix.weight_gradients_disabled
    x, w, b, kwargs = conv_inputs("conv2d")
    conv2d_gradfix.enabled = False  # torch's own conv2d: the flag does nothing (rosinality's fallback path)
    try:
        with conv2d_gradfix.no_weight_gradients():
            conv2d_gradfix.conv2d(x, w, b, **kwargs).sum().backward()
    finally:
        conv2d_gradfix.enabled = True
    assert w.grad is not None


def test_conv2d_gradfix_under_autocast_casts_as_torch():
    x, w, b, kwargs = (t.detach().float().requires_grad_() if isinstance(t, torch.Tensor) else t
                       for t in conv_inputs("conv2d"))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, expected = conv2d_gradfix.conv2d(x, w, b, **kwargs), F.conv2d(x, w, b, **kwargs)
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    grads = autograd.grad(got.float().sum(), (x, w, b)), autograd.grad(expected.float().sum(), (x, w, b))
    for g1, g2 in zip(*grads):
        assert g1.dtype == torch.float32
        torch.testing.assert_close(g1, g2, rtol=0, atol=0)


# ---------------------------------------------------------------- the package as `op`
@pytest.fixture
def as_op(monkeypatch):
    """`sys.modules["op"] = ascend_acts.compat.rosinality` for one test; its `op.*` submodule entries go after."""
    monkeypatch.setitem(sys.modules, "op", rosinality)
    yield
    for name in [name for name in sys.modules if name.startswith("op.")]:
        del sys.modules[name]


def test_the_module_stands_in_for_the_op_package(as_op):
    import op.conv2d_gradfix as aliased  # a second import of the file, as "op.conv2d_gradfix": the same module
    from op import FusedLeakyReLU, conv2d_gradfix, fused_leaky_relu, upfirdn2d
    from op.conv2d_gradfix import no_weight_gradients
    from op.fused_act import FusedLeakyReLU as FusedLeakyReLU2

    assert FusedLeakyReLU is FusedLeakyReLU2 is ascend_acts.nn.FusedLeakyReLU
    assert fused_leaky_relu is ascend_acts.fused_bias_leaky_relu
    assert upfirdn2d is rosinality.upfirdn2d
    assert aliased is conv2d_gradfix is sys.modules["ascend_acts.compat.rosinality.conv2d_gradfix"]
    with no_weight_gradients():
        assert conv2d_gradfix.weight_gradients_disabled
    import ascend_acts.compat.rosinality.conv2d_gradfix as by_path

    assert by_path is conv2d_gradfix


@slow
def test_import_compiles_nothing_and_touches_no_cuda(tmp_path):
    script = textwrap.dedent("""
        import sys
        sys.modules["torch.utils.cpp_extension"] = None  # any import of it raises ImportError
        import torch
        import ascend_acts.compat.rosinality
        sys.modules["op"] = ascend_acts.compat.rosinality
        from op import FusedLeakyReLU, conv2d_gradfix, fused_leaky_relu, upfirdn2d
        x = torch.randn(1, 2, 4, 4, requires_grad=True)
        y = upfirdn2d(FusedLeakyReLU(2)(x), torch.ones(2, 2) / 4, up=2, pad=(1, 0))
        y = conv2d_gradfix.conv2d(y, torch.randn(3, 2, 3, 3, requires_grad=True), padding=1)
        fused_leaky_relu(y, torch.zeros(3)).sum().backward()
        assert not torch.cuda.is_initialized()
        assert not [m for m in sys.modules if "cpp_extension" in m and sys.modules[m] is not None]
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


# ---------------------------------------------------------------- a rosinality-style GAN
class TorchFusedLeakyReLU(nn.Module):
    def __init__(self, channel, bias=True, negative_slope=0.2, scale=2**0.5):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channel)) if bias else None
        self.negative_slope, self.scale = negative_slope, scale

    def forward(self, input):
        return torch_fused_leaky_relu(input, self.bias, self.negative_slope, self.scale)


def torch_fused_leaky_relu(input, bias=None, negative_slope=0.2, scale=2**0.5):
    if bias is not None:
        input = input + bias.view(1, -1, *[1] * (input.ndim - 2))
    return F.leaky_relu(input, negative_slope) * scale


_MATRICES = {}


def matrix_upfirdn2d(input, kernel, up=1, down=1, pad=(0, 0)):
    """upfirdn2d as the linear map it is: a matrix from the NumPy reference applied to the basis images."""
    n, c, h, w = input.shape
    key = (h, w, kernel.numpy().tobytes(), kernel.shape, str(up), str(down), str(pad))
    if key not in _MATRICES:
        basis = np.eye(h * w).reshape(h * w, 1, h, w)
        out = upfirdn2d_numpy(basis, kernel.double().numpy(), as_xy(up), as_xy(down), as_pad4(pad))
        _MATRICES[key] = (torch.from_numpy(out.reshape(h * w, -1).T.copy()), out.shape[2:])
    matrix, (oh, ow) = _MATRICES[key]
    out = input.reshape(n * c, h * w) @ matrix.to(input.dtype).T
    return out.reshape(n, c, oh, ow)


TORCH_OPS = SimpleNamespace(
    FusedLeakyReLU=TorchFusedLeakyReLU, fused_leaky_relu=torch_fused_leaky_relu, upfirdn2d=matrix_upfirdn2d,
    conv2d_gradfix=SimpleNamespace(conv2d=F.conv2d, conv_transpose2d=F.conv_transpose2d,
                                   no_weight_gradients=lambda: torch.enable_grad()))


def build_gan(FusedLeakyReLU, fused_leaky_relu, upfirdn2d, conv2d_gradfix, seed=0):  # noqa: N803
    """A generator (mapping network, modulated convs with a fused upsampling, noise, ToRGB skips; 8x8 -> 16x16)
    and a residual discriminator, with the layers of rosinality's model.py, on the four names of `op`."""

    def make_kernel(k):
        k = torch.tensor(k, dtype=torch.float32)
        k = k[None, :] * k[:, None] if k.ndim == 1 else k
        return k / k.sum()

    class Upsample(nn.Module):
        def __init__(self, kernel, factor=2):
            super().__init__()
            self.factor = factor
            self.register_buffer("kernel", make_kernel(kernel) * factor**2)
            p = self.kernel.shape[0] - factor
            self.pad = ((p + 1) // 2 + factor - 1, p // 2)

        def forward(self, input):
            return upfirdn2d(input, self.kernel, up=self.factor, down=1, pad=self.pad)

    class Blur(nn.Module):
        def __init__(self, kernel, pad, upsample_factor=1):
            super().__init__()
            self.register_buffer("kernel", make_kernel(kernel) * upsample_factor**2)
            self.pad = pad

        def forward(self, input):
            return upfirdn2d(input, self.kernel, pad=self.pad)

    class EqualConv2d(nn.Module):
        def __init__(self, in_channel, out_channel, kernel_size, stride=1, padding=0, bias=True):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(out_channel, in_channel, kernel_size, kernel_size))
            self.scale = 1 / math.sqrt(in_channel * kernel_size**2)
            self.stride, self.padding = stride, padding
            self.bias = nn.Parameter(torch.randn(out_channel) * 0.1) if bias else None

        def forward(self, input):
            return conv2d_gradfix.conv2d(input, self.weight * self.scale, bias=self.bias, stride=self.stride,
                                         padding=self.padding)

    class EqualLinear(nn.Module):
        def __init__(self, in_dim, out_dim, bias=True, bias_init=0.0, lr_mul=1.0, activation=None):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(out_dim, in_dim).div_(lr_mul))
            self.bias = nn.Parameter(torch.zeros(out_dim).fill_(bias_init) + 0.1 * torch.randn(out_dim))
            self.activation, self.scale, self.lr_mul = activation, 1 / math.sqrt(in_dim) * lr_mul, lr_mul

        def forward(self, input):
            if self.activation:
                return fused_leaky_relu(F.linear(input, self.weight * self.scale), self.bias * self.lr_mul)
            return F.linear(input, self.weight * self.scale, bias=self.bias * self.lr_mul)

    class ModulatedConv2d(nn.Module):
        def __init__(self, in_channel, out_channel, kernel_size, style_dim, demodulate=True, upsample=False,
                     blur_kernel=(1, 3, 3, 1)):
            super().__init__()
            self.eps, self.kernel_size = 1e-8, kernel_size
            self.in_channel, self.out_channel = in_channel, out_channel
            self.upsample, self.demodulate = upsample, demodulate
            if upsample:
                factor = 2
                p = (len(blur_kernel) - factor) - (kernel_size - 1)
                self.blur = Blur(blur_kernel, pad=((p + 1) // 2 + factor - 1, p // 2 + 1), upsample_factor=factor)
            self.scale = 1 / math.sqrt(in_channel * kernel_size**2)
            self.padding = kernel_size // 2
            self.weight = nn.Parameter(torch.randn(1, out_channel, in_channel, kernel_size, kernel_size))
            self.modulation = EqualLinear(style_dim, in_channel, bias_init=1.0)

        def forward(self, input, style):
            batch, in_channel, height, width = input.shape
            style = self.modulation(style).view(batch, 1, in_channel, 1, 1)
            weight = self.scale * self.weight * style
            if self.demodulate:
                demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
                weight = weight * demod.view(batch, self.out_channel, 1, 1, 1)
            k = self.kernel_size
            if self.upsample:
                input = input.view(1, batch * in_channel, height, width)
                weight = weight.transpose(1, 2).reshape(batch * in_channel, self.out_channel, k, k)
                out = conv2d_gradfix.conv_transpose2d(input, weight, padding=0, stride=2, groups=batch)
                out = out.view(batch, self.out_channel, *out.shape[2:])
                return self.blur(out)
            input = input.view(1, batch * in_channel, height, width)
            out = conv2d_gradfix.conv2d(input, weight.view(batch * self.out_channel, in_channel, k, k),
                                        padding=self.padding, groups=batch)
            return out.view(batch, self.out_channel, *out.shape[2:])

    class StyledConv(nn.Module):
        def __init__(self, in_channel, out_channel, kernel_size, style_dim, upsample=False):
            super().__init__()
            self.conv = ModulatedConv2d(in_channel, out_channel, kernel_size, style_dim, upsample=upsample)
            self.noise_weight = nn.Parameter(torch.full((1,), 0.1))
            self.activate = FusedLeakyReLU(out_channel)
            with torch.no_grad():
                self.activate.bias.normal_(0, 0.1)

        def forward(self, input, style, noise):
            return self.activate(self.conv(input, style) + self.noise_weight * noise)

    class ToRGB(nn.Module):
        def __init__(self, in_channel, style_dim, upsample=True, blur_kernel=(1, 3, 3, 1)):
            super().__init__()
            self.upsample = Upsample(blur_kernel) if upsample else None
            self.conv = ModulatedConv2d(in_channel, 3, 1, style_dim, demodulate=False)
            self.bias = nn.Parameter(0.1 * torch.randn(1, 3, 1, 1))

        def forward(self, input, style, skip=None):
            out = self.conv(input, style) + self.bias
            return out if skip is None else out + self.upsample(skip)

    class Generator(nn.Module):
        def __init__(self, style_dim=8, channels=(16, 8)):
            super().__init__()
            self.style = nn.Sequential(EqualLinear(style_dim, style_dim, lr_mul=0.01, activation="fused_lrelu"),
                                       EqualLinear(style_dim, style_dim, lr_mul=0.01, activation="fused_lrelu"))
            self.input = nn.Parameter(torch.randn(1, channels[0], 8, 8))
            self.conv1 = StyledConv(channels[0], channels[0], 3, style_dim)
            self.to_rgb1 = ToRGB(channels[0], style_dim, upsample=False)
            self.conv_up = StyledConv(channels[0], channels[1], 3, style_dim, upsample=True)
            self.conv2 = StyledConv(channels[1], channels[1], 3, style_dim)
            self.to_rgb = ToRGB(channels[1], style_dim)

        def forward(self, latent, noises):
            out = self.input.repeat(latent.shape[0], 1, 1, 1)
            out = self.conv1(out, latent[:, 0], noises[0])
            skip = self.to_rgb1(out, latent[:, 1])
            out = self.conv_up(out, latent[:, 1], noises[1])
            out = self.conv2(out, latent[:, 2], noises[2])
            return self.to_rgb(out, latent[:, 3], skip)

    class ConvLayer(nn.Sequential):
        def __init__(self, in_channel, out_channel, kernel_size, downsample=False, blur_kernel=(1, 3, 3, 1),
                     bias=True, activate=True):
            layers = []
            if downsample:
                p = (len(blur_kernel) - 2) + (kernel_size - 1)
                layers.append(Blur(blur_kernel, pad=((p + 1) // 2, p // 2)))
                stride, padding = 2, 0
            else:
                stride, padding = 1, kernel_size // 2
            layers.append(EqualConv2d(in_channel, out_channel, kernel_size, padding=padding, stride=stride,
                                      bias=bias and not activate))
            if activate:
                layers.append(FusedLeakyReLU(out_channel, bias=bias))
                with torch.no_grad():
                    layers[-1].bias.normal_(0, 0.1)
            super().__init__(*layers)

    class ResBlock(nn.Module):
        def __init__(self, in_channel, out_channel):
            super().__init__()
            self.conv1 = ConvLayer(in_channel, in_channel, 3)
            self.conv2 = ConvLayer(in_channel, out_channel, 3, downsample=True)
            self.skip = ConvLayer(in_channel, out_channel, 1, downsample=True, activate=False, bias=False)

        def forward(self, input):
            return (self.conv2(self.conv1(input)) + self.skip(input)) / math.sqrt(2)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = nn.Sequential(ConvLayer(3, 8, 1), ResBlock(8, 16))
            self.final_conv = ConvLayer(16, 16, 3)
            self.final_linear = nn.Sequential(EqualLinear(16 * 8 * 8, 16, activation="fused_lrelu"),
                                              EqualLinear(16, 1))

        def forward(self, input):
            out = self.final_conv(self.convs(input))
            return self.final_linear(out.view(out.shape[0], -1))

    torch.manual_seed(seed)
    return Generator(), Discriminator()


def gan_step(ops, seed=0, dtype=torch.float32):
    """Losses and every gradient of one rosinality-style step: the discriminator's loss + R1 penalty (the image
    gradient with create_graph, under no_weight_gradients as train.py), the generator's loss + path-length
    penalty (the latent gradient of the images times noise, with create_graph)."""
    generator, discriminator = build_gan(ops.FusedLeakyReLU, ops.fused_leaky_relu, ops.upfirdn2d,
                                         ops.conv2d_gradfix, seed)
    generator.to(dtype), discriminator.to(dtype)
    g = torch.Generator().manual_seed(seed + 1)
    real = torch.randn(2, 3, 16, 16, generator=g, dtype=dtype).requires_grad_()
    z = torch.randn(2, 8, generator=g, dtype=dtype)
    noises = [torch.randn(2, 1, s, s, generator=g, dtype=dtype) for s in (8, 16, 16)]
    path_noise = torch.randn(2, 3, 16, 16, generator=g, dtype=dtype) / 16

    fake = generator(generator.style(z).unsqueeze(1).repeat(1, 4, 1), noises)
    real_pred, fake_pred = discriminator(real), discriminator(fake.detach())
    d_loss = F.softplus(fake_pred).mean() + F.softplus(-real_pred).mean()
    with ops.conv2d_gradfix.no_weight_gradients():
        (grad_real,) = autograd.grad(real_pred.sum(), real, create_graph=True)
    r1 = grad_real.pow(2).flatten(1).sum(1).mean()
    d_params = list(discriminator.parameters())
    d_grads = autograd.grad(d_loss + 5 * r1, d_params)

    latent = generator.style(z).unsqueeze(1).repeat(1, 4, 1)
    fake = generator(latent, noises)
    g_loss = F.softplus(-discriminator(fake)).mean()
    (grad_latent,) = autograd.grad((fake * path_noise).sum(), latent, create_graph=True)
    path_lengths = grad_latent.pow(2).sum(2).mean(1).sqrt()
    path_penalty = (path_lengths - 0.5 * path_lengths.detach().mean()).pow(2).mean()
    g_params = list(generator.parameters())
    g_grads = autograd.grad(g_loss + 2 * path_penalty, g_params)
    names = [f"D.{n}" for n, _ in discriminator.named_parameters()] + [f"G.{n}" for n, _ in
                                                                       generator.named_parameters()]
    values = {"d_loss": d_loss, "r1": r1, "g_loss": g_loss, "path_penalty": path_penalty, "fake": fake,
              "grad_real": grad_real, "grad_latent": grad_latent}
    values.update(zip(names, (*d_grads, *g_grads)))
    return {k: v.detach() for k, v in values.items()}


def op_namespace():
    """The four names as rosinality's model.py and train.py get them: `from op import ...`."""
    from op import FusedLeakyReLU, conv2d_gradfix, fused_leaky_relu, upfirdn2d
    return SimpleNamespace(FusedLeakyReLU=FusedLeakyReLU, fused_leaky_relu=fused_leaky_relu, upfirdn2d=upfirdn2d,
                           conv2d_gradfix=conv2d_gradfix)


def assert_close_relative(got, expected, rtol):
    assert got.keys() == expected.keys()
    for name in expected:
        error = (got[name].double() - expected[name].double()).norm()
        assert error <= rtol * expected[name].double().norm() + 1e-12, (name, error, expected[name].norm())


@pytest.fixture(scope="module")
def torch_gan_step():
    return gan_step(TORCH_OPS)


@slow  # a whole GAN step with two penalties: seconds per backend
@pytest.mark.parametrize("name", ["reference", "torch", "sim"])
def test_rosinality_style_gan_on_op_equals_torch_composites(name, as_op, torch_gan_step):
    reason = backends.unavailable_reason(name)
    if reason is not None:
        pytest.skip(f"backend {name!r} unavailable: {reason}")
    ops = op_namespace()
    with ascend_acts.use_backend(name), OpCounter() as counter:
        got = gan_step(ops)
    assert_close_relative(got, torch_gan_step, 1e-5)
    # through our op, its backward and the backward's own backward (the penalties' double backward)
    assert counter.calls["fused_bias_leaky_relu"] >= 20 and counter.calls["fused_bias_leaky_relu_backward"] >= 20
    assert counter.calls["convolution_backward"] > 0


@slow
def test_the_composite_oracle_is_exact_in_float64(as_op):
    """The oracle itself: the torch-composite GAN and the one on `op`, both in float64, agree to rounding."""
    ops = op_namespace()
    with ascend_acts.use_backend("torch"):
        got = gan_step(ops, dtype=F64)
    assert_close_relative(got, gan_step(TORCH_OPS, dtype=F64), 1e-10)
