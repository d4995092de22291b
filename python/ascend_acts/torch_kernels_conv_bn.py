"""The fused Conv2d + BatchNorm2d + LeakyReLU ops written with torch tensor ops only, so they run on
any device: the NPU fallback (torch_npu's conv and elementwise built-ins) until the custom op package
and extension are installed. Same signatures as the ops' schemas (backends.FUSED_KERNELS), same
mathematics as the NumPy reference (ascend_acts.reference.conv_bn): statistics and the BN + LeakyReLU
part in float32 (float64 stays float64), the convolution in the input dtype as the device runs it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _compute(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _channel(v: torch.Tensor) -> torch.Tensor:
    return v[None, :, None, None]


def _conv(input, weight, bias, stride, padding, dilation, groups):
    top, bottom, left, right = padding
    return F.conv2d(F.pad(input, (left, right, top, bottom)), weight, bias, stride, 0, dilation, groups)


def _conv_backward(grad, input, weight, stride, padding, dilation, groups):
    """(grad_input, grad_weight, grad_bias) of _conv, with grad in the input's dtype."""
    top, bottom, left, right = padding
    padded = F.pad(input, (left, right, top, bottom))
    grad_padded = torch.nn.grad.conv2d_input(padded.shape, weight, grad, stride, 0, dilation, groups)
    grad_input = grad_padded[:, :, top: padded.shape[2] - bottom, left: padded.shape[3] - right]
    grad_weight = torch.nn.grad.conv2d_weight(padded, weight.shape, grad, stride, 0, dilation, groups)
    return grad_input.contiguous(), grad_weight, grad.sum((0, 2, 3))


def conv_bn_leaky_relu_train(input, weight, bias, bn_weight, bn_bias, stride, padding, dilation, groups, eps,
                             negative_slope, save_output):
    c = _compute(input.dtype)
    y = _conv(input, weight, bias, stride, padding, dilation, groups)
    yc = y.to(c)
    mean = yc.mean((0, 2, 3))
    invstd = torch.rsqrt(yc.var((0, 2, 3), unbiased=False) + eps)
    z = (yc - _channel(mean)) * _channel(invstd) * _channel(bn_weight.to(c)) + _channel(bn_bias.to(c))
    out = F.leaky_relu(z, negative_slope).to(input.dtype)
    kept = input.new_empty(0) if save_output else y
    return out, kept, mean, invstd


def conv_bn_leaky_relu_train_backward(grad_out, saved, saved_is_output, input, weight, bn_weight, bn_bias, mean,
                                      invstd, stride, padding, dilation, groups, negative_slope):
    c = _compute(input.dtype)
    gamma, beta = _channel(bn_weight.to(c)), _channel(bn_bias.to(c))
    saved, grad = saved.to(c), grad_out.to(c)
    if saved_is_output:  # InPlace-ABN: invert LeakyReLU and the affine
        z = torch.where(saved > 0, saved, saved / negative_slope)
        xhat = (z - beta) / gamma
    else:
        xhat = (saved - _channel(mean.to(c))) * _channel(invstd.to(c))
        z = xhat * gamma + beta
    dz = torch.where(z > 0, grad, grad * negative_slope)
    grad_gamma, grad_beta = (dz * xhat).sum((0, 2, 3)), dz.sum((0, 2, 3))
    dxhat = dz * gamma
    dy = _channel(invstd.to(c)) * (dxhat - dxhat.mean((0, 2, 3), keepdim=True)
                                   - xhat * (dxhat * xhat).mean((0, 2, 3), keepdim=True))
    grad_input, grad_weight, grad_bias = _conv_backward(dy.to(input.dtype), input, weight, stride, padding, dilation,
                                                        groups)
    return grad_input, grad_weight, grad_bias, grad_gamma.to(bn_weight.dtype), grad_beta.to(bn_bias.dtype)


def conv_bias_leaky_relu(input, weight, bias, stride, padding, dilation, groups, negative_slope):
    return F.leaky_relu(_conv(input, weight, bias, stride, padding, dilation, groups), negative_slope)


def conv_bias_leaky_relu_backward(grad_out, input, weight, bias, stride, padding, dilation, groups, negative_slope):
    pre = _conv(input, weight, bias, stride, padding, dilation, groups)
    dz = torch.where(pre > 0, grad_out, grad_out * negative_slope)
    return _conv_backward(dz, input, weight, stride, padding, dilation, groups)
