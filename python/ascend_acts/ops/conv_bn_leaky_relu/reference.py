"""NumPy reference for the fused Conv2d -> BatchNorm2d -> LeakyReLU, forward and backward: the float64
oracle the tests compare every backend against, written for clarity, not speed. The reference backend
does not run it: it runs torch's convolution and the two-pass kernels of batch_norm_leaky_relu.py.

Arrays are NCHW; float64 stays float64, other dtypes are computed in float32 (callers round once).
Convolution is im2col + GEMM per group: `padding` is (top, bottom, left, right), so torch's "same"
(asymmetric when the kernel extent is even) is expressible.

Training backward is InPlace-ABN style: from the post-activation output the BN output is recovered
by inverting LeakyReLU (slope > 0) and x-hat by inverting the affine (no zero bn_weight); otherwise
the caller keeps the conv output and x-hat is recomputed from it.
"""

from __future__ import annotations

import numpy as np


def output_shape(input_shape, weight_shape, stride, padding, dilation) -> list:
    """NCHW shape of the convolution's output; padding is (top, bottom, left, right)."""
    sizes = []
    for axis in range(2):
        extent = input_shape[2 + axis] + padding[2 * axis] + padding[2 * axis + 1]
        sizes.append((extent - dilation[axis] * (weight_shape[2 + axis] - 1) - 1) // stride[axis] + 1)
    return [input_shape[0], weight_shape[0], *sizes]


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
        out += bias[None, :, None, None]
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


def _channel(v):
    return v[None, :, None, None]


def _leaky(z, slope):
    return np.where(z > 0, z, z * z.dtype.type(slope))


def batch_statistics(y):
    """Per-channel mean and biased variance over N, H, W."""
    mean = y.mean(axis=(0, 2, 3))
    return mean, ((y - _channel(mean)) ** 2).mean(axis=(0, 2, 3))


def train_forward(x, weight, bias, gamma, beta, stride, padding, dilation, groups, eps, slope):
    """(out, conv output, batch mean, batch invstd, biased batch variance); gamma/beta are arrays (ones/zeros
    when absent)."""
    y = conv2d(x, weight, bias, stride, padding, dilation, groups)
    mean, variance = batch_statistics(y)
    invstd = 1.0 / np.sqrt(variance + y.dtype.type(eps))
    z = (y - _channel(mean)) * _channel(invstd) * _channel(gamma) + _channel(beta)
    return _leaky(z, slope), y, mean, invstd, variance


def train_backward(grad_out, saved, saved_is_result, x, weight, gamma, beta, mean, invstd, stride, padding, dilation,
                   groups, slope):
    """Gradients for (input, weight, bias, gamma, beta). `saved` is the output when saved_is_result,
    else the conv output."""
    dy, grad_gamma, grad_beta = batch_norm_leaky_relu_backward(grad_out, saved, saved_is_result, gamma, beta, mean,
                                                               invstd, slope)
    grad_input, grad_weight, grad_bias = conv2d_backward(dy, x, weight, stride, padding, dilation, groups)
    return grad_input, grad_weight, grad_bias, grad_gamma, grad_beta


def batch_norm_leaky_relu_backward(grad_out, saved, saved_is_result, gamma, beta, mean, invstd, slope):
    """Gradients for (conv output, gamma, beta) of the BN + LeakyReLU part."""
    if saved_is_result:
        z = np.where(saved > 0, saved, saved / saved.dtype.type(slope))
        xhat = (z - _channel(beta)) / _channel(gamma)
    else:
        xhat = (saved - _channel(mean)) * _channel(invstd)
        z = xhat * _channel(gamma) + _channel(beta)
    dz = np.where(z > 0, grad_out, grad_out * grad_out.dtype.type(slope))
    grad_gamma = (dz * xhat).sum(axis=(0, 2, 3))
    grad_beta = dz.sum(axis=(0, 2, 3))
    dxhat = dz * _channel(gamma)
    dy = _channel(invstd) * (dxhat - dxhat.mean(axis=(0, 2, 3), keepdims=True)
                              - xhat * (dxhat * xhat).mean(axis=(0, 2, 3), keepdims=True))
    return dy, grad_gamma, grad_beta


def conv_bn_leaky_relu_eval(x, weight, bias, stride, padding, dilation, groups, slope):
    """Eval: conv with the BN-folded weight and bias, then LeakyReLU."""
    return _leaky(conv2d(x, weight, bias, stride, padding, dilation, groups), slope)


def conv_bn_leaky_relu_eval_backward(grad_out, x, weight, bias, stride, padding, dilation, groups, slope):
    """Recomputes the pre-activation for the mask (works for any slope); (grad_input, grad_weight, grad_bias)."""
    pre = conv2d(x, weight, bias, stride, padding, dilation, groups)
    dz = np.where(pre > 0, grad_out, grad_out * grad_out.dtype.type(slope))
    return conv2d_backward(dz, x, weight, stride, padding, dilation, groups)
