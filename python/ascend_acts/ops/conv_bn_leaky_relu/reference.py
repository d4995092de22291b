"""The fused Conv2d -> BatchNorm2d -> LeakyReLU on the NumPy reference: the float64 oracle the tests compare every
backend against (`train_forward`, `train_backward`, `eval_forward`, `eval_backward` on arrays), written for
clarity, not speed, and the "reference" backend's functions (the ops' names, on tensors), which do not run it.

Arrays are NCHW; float64 stays float64, other dtypes are computed in float32 (callers round once).
Convolution is im2col + GEMM per group: `padding` is (top, bottom, left, right), so torch's "same"
(asymmetric when the kernel extent is even) is expressible.

Training backward is InPlace-ABN style: from the post-activation output the BN output is recovered
by inverting LeakyReLU (slope > 0) and x-hat by inverting the affine (no zero bn_weight); otherwise
the caller keeps the conv output and x-hat is recomputed from it. `norm_groups` G >= 1 takes the statistics per
sample over groups of C/G channels (InstanceNorm G == C, GroupNorm) instead of per channel over the batch: they are
then (N, G).

The reference backend's convolution (transposed too) is the platform's, as on the NPU: torch's CPU convolution
(oneDNN; torch.nn.functional.conv2d or conv_transpose2d forward, aten::convolution_backward for grad_input,
grad_weight and grad_bias). What is ours runs on NumPy: the BatchNorm + LeakyReLU passes (reference_batch_norm.py)
and the eval epilogue (leaky_relu's reference). Half types are computed in float32 (conv included) and rounded once
at the end; the conv output is rounded to the input dtype only where it is kept for the backward (and then
normalised as rounded, so that forward and backward see the same values). float64 stays
float64.
"""

from __future__ import annotations

import numpy as np
import torch

from ...numerics.dtypes import compute_dtype, to_array
from ...numerics.elementwise import quiet
from ...numerics.layout import channel_view
from ..leaky_relu import reference as leaky_relu_reference
from . import cpu_batch_norm, reference_batch_norm
from .folding import eval_op_backward, eval_pre_activation
from .torch_ops import ALL_GRADIENTS, update_running_statistics
from .torch_ops import conv2d as torch_conv2d
from .torch_ops import conv2d_backward as platform_conv2d_backward


def platform_conv2d(*args) -> torch.Tensor:
    """torch's convolution, C-contiguous: its result follows the input's memory format (channels_last, or a
    (N, C, 1, 1) input that is contiguous in both formats), and the NumPy code below works on C-ordered arrays. The
    kernels' values are opaque to autograd and tracers: a large upsampling may take the channels_last route."""
    return torch_conv2d(*args, layout_route=True).contiguous()


def _windows(x, kernel, stride, padding, dilation):
    """cols[n, c, i, j, oh, ow] = padded x at (oh*sh + i*dh, ow*sw + j*dw)."""
    top, bottom, left, right = padding
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    cols = np.empty(x.shape[:2] + (kh, kw, oh, ow), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
    return cols, xp.shape


def conv2d(x, weight, bias, stride, padding, dilation, groups):
    cols, _ = _windows(x, weight.shape[2:], stride, padding, dilation)
    n, cin = x.shape[:2]
    cout = weight.shape[0]
    g_in, g_out = cin // groups, cout // groups
    out = np.empty((n, cout) + cols.shape[4:], dtype=x.dtype)
    for g in range(groups):
        c = cols[:, g * g_in:(g + 1) * g_in]
        w = weight[g * g_out:(g + 1) * g_out]
        out[:, g * g_out:(g + 1) * g_out] = np.einsum("ncijhw,ocij->nohw", c, w, optimize=True)
    if bias is not None:
        out += channel_view(bias)
    return out


def conv2d_backward(grad, x, weight, stride, padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of conv2d."""
    cols, padded_shape = _windows(x, weight.shape[2:], stride, padding, dilation)
    n, cin = x.shape[:2]
    cout, _, kh, kw = weight.shape
    g_in, g_out = cin // groups, cout // groups
    grad_weight = np.empty_like(weight)
    grad_cols = np.empty_like(cols)
    for g in range(groups):
        go = grad[:, g * g_out:(g + 1) * g_out]
        grad_weight[g * g_out:(g + 1) * g_out] = np.einsum("nohw,ncijhw->ocij", go, cols[:, g * g_in:(g + 1) * g_in],
                                                             optimize=True)
        grad_cols[:, g * g_in:(g + 1) * g_in] = np.einsum("nohw,ocij->ncijhw", go, weight[g * g_out:(g + 1) * g_out],
                                                          optimize=True)
    grad_padded = np.zeros(padded_shape, dtype=x.dtype)
    (sh, sw), (dh, dw) = stride, dilation
    oh, ow = grad.shape[2:]
    for i in range(kh):
        for j in range(kw):
            grad_padded[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw] += \
                grad_cols[:, :, i, j]
    top, bottom, left, right = padding
    grad_input = grad_padded[:, :, top: padded_shape[2] - bottom, left: padded_shape[3] - right]
    return np.ascontiguousarray(grad_input), grad_weight, grad.sum(axis=(0, 2, 3))


def _leaky(z, slope, relu=False):
    if relu:
        return np.where(z < 0, z.dtype.type(0), z)  # torch's relu: -0.0 and NaN stay
    return np.where(z > 0, z, z * z.dtype.type(slope))


def _activation_gradient(z, grad_out, slope, relu=False):
    if relu:
        return reference_batch_norm.relu_gradient(grad_out, z)
    return np.where(z > 0, grad_out, grad_out * grad_out.dtype.type(slope))


def batch_statistics(y, norm_groups=0):
    """Mean and biased variance per channel over N, H, W, or (norm_groups G >= 1) per sample and group of C/G
    channels, (N, G)."""
    if norm_groups:
        grouped = y.reshape(y.shape[0], norm_groups, -1)
        return grouped.mean(axis=2), grouped.var(axis=2)
    mean = y.mean(axis=(0, 2, 3))
    return mean, ((y - channel_view(mean)) ** 2).mean(axis=(0, 2, 3))


def statistic_view(values, shape, norm_groups=0):
    """Statistics (C,) or (N, G) broadcast over an (N, C, H, W) `shape`."""
    if norm_groups:
        return np.repeat(values, shape[1] // norm_groups, axis=1)[:, :, None, None]
    return channel_view(values)


def _statistics_mean(t, norm_groups=0):
    """The mean over what shares statistics, broadcastable over t."""
    if norm_groups:
        return statistic_view(t.reshape(t.shape[0], norm_groups, -1).mean(axis=2), t.shape, norm_groups)
    return t.mean(axis=(0, 2, 3), keepdims=True)


def train_forward(x, weight, bias, gamma, beta, stride, padding, dilation, groups, eps, slope, relu=False,
                  norm_groups=0):
    """(out, conv output, mean, invstd, biased variance) of the statistics; gamma/beta are arrays (ones/zeros
    when absent)."""
    y = conv2d(x, weight, bias, stride, padding, dilation, groups)
    mean, variance = batch_statistics(y, norm_groups)
    invstd = 1.0 / np.sqrt(variance + y.dtype.type(eps))
    xhat = (y - statistic_view(mean, y.shape, norm_groups)) * statistic_view(invstd, y.shape, norm_groups)
    z = xhat * channel_view(gamma) + channel_view(beta)
    return _leaky(z, slope, relu), y, mean, invstd, variance


def train_backward(grad_out, saved, saved_is_result, x, weight, gamma, beta, mean, invstd, stride, padding, dilation,
                   groups, slope, relu=False, norm_groups=0):
    """Gradients for (input, weight, bias, gamma, beta). `saved` is the output when saved_is_result,
    else the conv output."""
    dy, grad_gamma, grad_beta = batch_norm_leaky_relu_backward(grad_out, saved, saved_is_result, gamma, beta, mean,
                                                               invstd, slope, relu, norm_groups)
    grad_input, grad_weight, grad_bias = conv2d_backward(dy, x, weight, stride, padding, dilation, groups)
    return grad_input, grad_weight, grad_bias, grad_gamma, grad_beta


def batch_norm_leaky_relu_backward(grad_out, saved, saved_is_result, gamma, beta, mean, invstd, slope, relu=False,
                                   norm_groups=0):
    """Gradients for (conv output, gamma, beta) of the BN + LeakyReLU (or ReLU) part (norm_groups: the statistics'
    groups, mean and invstd (N, G))."""
    invstd = statistic_view(invstd, saved.shape, norm_groups)
    if saved_is_result:
        z = np.where(saved > 0, saved, saved / saved.dtype.type(slope))
        xhat = (z - channel_view(beta)) / channel_view(gamma)
    else:
        xhat = (saved - statistic_view(mean, saved.shape, norm_groups)) * invstd
        z = xhat * channel_view(gamma) + channel_view(beta)
    dz = _activation_gradient(z, grad_out, slope, relu)
    grad_gamma = (dz * xhat).sum(axis=(0, 2, 3))
    grad_beta = dz.sum(axis=(0, 2, 3))
    dxhat = dz * channel_view(gamma)
    dy = invstd * (dxhat - _statistics_mean(dxhat, norm_groups) - xhat * _statistics_mean(dxhat * xhat, norm_groups))
    return dy, grad_gamma, grad_beta


def eval_forward(x, weight, bias, stride, padding, dilation, groups, slope, relu=False):
    """Eval: conv with the BN-folded weight and bias, then LeakyReLU (or ReLU)."""
    return _leaky(conv2d(x, weight, bias, stride, padding, dilation, groups), slope, relu)


def eval_backward(grad_out, x, weight, bias, stride, padding, dilation, groups, slope, relu=False):
    """Recomputes the pre-activation for the mask (works for any slope); (grad_input, grad_weight, grad_bias)."""
    pre = conv2d(x, weight, bias, stride, padding, dilation, groups)
    dz = _activation_gradient(pre, grad_out, slope, relu)
    return conv2d_backward(dz, x, weight, stride, padding, dilation, groups)


# --- the "reference" backend (ascend_acts.backends' protocol: tensors in, tensors out) ---------------------------
def _array(t: torch.Tensor | None, dtype: torch.dtype):
    """A NumPy array of t in dtype (shares t's memory when it already has it)."""
    return None if t is None else to_array(t.to(dtype).contiguous())


def _tensor(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).to(like.dtype)


def _passes(values: np.ndarray, norm_groups: int):
    """The normalisation + activation passes for values: compiled (cpu_batch_norm) where they handle them, else
    NumPy's (reference_batch_norm), their oracle."""
    return cpu_batch_norm if cpu_batch_norm.handles(values, norm_groups) else reference_batch_norm


def conv_bn_leaky_relu_train(input, weight, bias, bn_weight, bn_bias, running_mean, running_var, stride, padding,
                             dilation, groups, momentum, eps, negative_slope, save_output, relu=False, transposed=False,
                             output_padding=(0, 0), norm_groups=0, recompute=False, padding_mode="zeros"):
    c = compute_dtype(input.dtype)
    with torch.no_grad():
        y = platform_conv2d(input.detach().to(c), weight.detach().to(c), None if bias is None else bias.detach().to(c),
                            stride, padding, dilation, groups, transposed, output_padding, padding_mode)
        kept = torch.empty(0, dtype=input.dtype) if save_output or recompute else y.to(input.dtype)
        if not save_output and input.dtype != c:
            # the backward rebuilds z and x-hat from the kept (or recomputed) conv output, rounded to the input dtype:
            # the forward normalises those same values, so its activation and the backward's agree (as torch's BN
            # reads its rounded input); where they did not, a z near 0 took the other branch and its whole gradient
            y = (y.to(input.dtype) if recompute else kept).to(c)
        gamma, beta = _array(bn_weight, c), _array(bn_bias, c)
        # normalised in place unless y itself is kept, or a degenerate affine needs y once normalised (see below)
        degenerate = not 0 < eps < np.inf or not np.isfinite(gamma).all() or not gamma.all()
        out = torch.empty_like(y) if kept is y or degenerate else y
        # without the output kept, the backward recovers z from the conv output: normalised as it will be (centred on
        # the mean), so that its activation's branch is the forward's
        mean, invstd, variance = _passes(y.numpy(), norm_groups).forward(
            y.numpy(), gamma, beta, eps, negative_slope, out.numpy(), relu, norm_groups, centre_on_mean=not save_output)
        if degenerate:
            _degenerate_affine(y.numpy(), out.numpy(), gamma, beta, mean, invstd, negative_slope, relu, norm_groups)
        mean, invstd = torch.from_numpy(mean), torch.from_numpy(invstd)
        update_running_statistics(running_mean, running_var, mean, torch.from_numpy(variance), y.shape, momentum)
        return out.to(input.dtype), kept, mean, invstd


def _degenerate_affine(y, out, gamma, beta, mean, invstd, slope, relu, norm_groups) -> None:
    """out where gamma * invstd (alpha) is 0 or infinite (a zero or infinite BN weight; an invstd of inf with eps 0)
    as torch computes it there: y * alpha + (beta - mean * alpha), activated (aten's batch_norm and group_norm on the
    CPU). The centred form the passes use gives the zeros the sign of y - mean instead of y's, and an infinity where
    torch's two infinite terms meet as NaN."""
    alpha = statistic_view(invstd, y.shape, norm_groups) * channel_view(gamma)
    degenerate = (alpha == 0) | np.isinf(alpha)
    if degenerate.any():
        with quiet():
            z = y * alpha + (channel_view(beta) - statistic_view(mean, y.shape, norm_groups) * alpha)
            np.copyto(out, _leaky(z, slope, relu), where=np.broadcast_to(degenerate, out.shape))


def _degenerate_affine_gradients(grad, y, gamma, beta, mean, invstd, slope, relu, norm_groups):
    """(channels, grad_gamma, grad_beta) of the channels whose gamma * invstd (alpha) is 0 or infinite, with the
    activation's branch at the forward's z there (_degenerate_affine's torch form; reference_batch_norm's backward
    recovers the centred one, whose +-inf is NaN in torch's), x-hat from the conv output y; None if there are none.
    torch's norm weight and bias gradients are finite there (its input gradient is not, through an infinite alpha)."""
    alpha = statistic_view(invstd, y.shape, norm_groups) * channel_view(gamma)
    channels = ((alpha == 0) | np.isinf(alpha)).any(axis=(0, 2, 3))
    if not channels.any():
        return None
    with quiet():
        alpha, y, grad = alpha[:, channels], y[:, channels], grad[:, channels]
        mean_view = statistic_view(mean, (y.shape[0], len(channels)), norm_groups)[:, channels]
        z = y * alpha + (channel_view(beta[channels]) - mean_view * alpha)
        dz = _activation_gradient(z, grad, slope, relu)
        xhat = (y - mean_view) * statistic_view(invstd, (y.shape[0], len(channels)), norm_groups)[:, channels]
        return channels, (dz * xhat).sum(axis=(0, 2, 3), dtype=np.float64), dz.sum(axis=(0, 2, 3), dtype=np.float64)


def conv_bn_leaky_relu_train_backward(grad_out, saved, saved_is_result, input, weight, bn_weight, bn_bias, mean,
                                      invstd, stride, padding, dilation, groups, negative_slope, relu=False,
                                      transposed=False, output_padding=(0, 0), norm_groups=0, bias=None,
                                      padding_mode="zeros", output_mask=ALL_GRADIENTS):
    c = compute_dtype(input.dtype)
    with torch.no_grad():
        grad = grad_out.detach().to(c).contiguous()
        copied = grad_out.dtype != c or not grad_out.is_contiguous()
        grad_y = grad if copied else torch.empty_like(grad)  # in place only in our own copy
        gamma, beta, mean, invstd, saved = (_array(t, c) for t in (bn_weight, bn_bias, mean, invstd, saved))
        # read before the backward, which may write grad_y over grad
        exact = None if saved_is_result else _degenerate_affine_gradients(
            grad.numpy(), saved, gamma, beta, mean, invstd, negative_slope, relu, norm_groups)
        grad_gamma, grad_beta = _passes(grad.numpy(), norm_groups).backward(
            grad.numpy(), saved, saved_is_result, gamma, beta, mean, invstd, negative_slope, grad_y.numpy(), relu,
            norm_groups)
        if exact is not None:
            channels, grad_gamma[channels], grad_beta[channels] = exact
        grad_input, grad_weight, grad_bias = platform_conv2d_backward(
            grad_y, input.detach().to(c), weight.detach().to(c), stride, padding, dilation, groups, transposed,
            output_padding, padding_mode, output_mask)
        return (grad_input.to(input.dtype), grad_weight.to(weight.dtype), grad_bias.to(weight.dtype),
                _tensor(grad_gamma, bn_weight), _tensor(grad_beta, bn_bias))


def conv_bn_leaky_relu_eval(input, weight, bias, stride, padding, dilation, groups, negative_slope, relu=False,
                            transposed=False, output_padding=(0, 0), padding_mode="zeros", bn_weight=None,
                            bn_bias=None):
    c = compute_dtype(input.dtype)
    with torch.no_grad():
        x, w, b = input.detach().to(c), weight.detach().to(c), bias.detach().to(c)
        geometry = (stride, padding, dilation, groups, transposed, output_padding, padding_mode)
        y, _ = eval_pre_activation(lambda w, b: platform_conv2d(x, w, b, *geometry), w, b, bn_weight, bn_bias,
                                   transposed, groups)
        if relu:
            reference_batch_norm.relu_in_place(y.numpy())
        else:
            leaky_relu_reference.forward(y.numpy(), negative_slope, out=y.numpy())
        return y.to(input.dtype)


def conv_bn_leaky_relu_eval_backward(grad_out, input, weight, bias, stride, padding, dilation, groups, negative_slope,
                                     relu=False, transposed=False, output_padding=(0, 0), padding_mode="zeros",
                                     output_mask=ALL_GRADIENTS, bn_weight=None, bn_bias=None, affine_mask=(True, True)):
    """Recomputes the pre-activation for the LeakyReLU (or ReLU) mask (works for any slope): nothing else is kept.
    It is overwritten by its gradient."""
    c = compute_dtype(input.dtype)

    def activation_gradient(pre):
        grad_pre = pre.numpy()
        if relu:
            reference_batch_norm.relu_gradient(_array(grad_out, c), grad_pre, out=grad_pre)
        else:
            leaky_relu_reference.backward(_array(grad_out, c), grad_pre, negative_slope, out=grad_pre)
        return pre

    with torch.no_grad():
        x, w, b = input.detach().to(c), weight.detach().to(c), bias.detach().to(c)
        geometry = (stride, padding, dilation, groups, transposed, output_padding, padding_mode)
        grad_input, grad_weight, *rest = eval_op_backward(
            lambda w, b: platform_conv2d(x, w, b, *geometry), activation_gradient,
            lambda grad, w, mask: platform_conv2d_backward(grad, x, w, *geometry, mask),
            w, b, bn_weight, bn_bias, output_mask, affine_mask, transposed, groups, weight.dtype)
        return grad_input.to(input.dtype), grad_weight.to(weight.dtype), *rest
