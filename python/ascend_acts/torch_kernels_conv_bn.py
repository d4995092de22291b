"""The fused Conv2d + BatchNorm2d + LeakyReLU ops written with torch tensor ops only, so they run on
any device: the NPU fallback (torch_npu's conv and elementwise built-ins) until the custom op package
and extension are installed. Same signatures as the ops' schemas (backends.FUSED_KERNELS), same
mathematics as the NumPy reference (ascend_acts.reference.conv_bn): statistics and the BN + LeakyReLU
part in float32 (float64 stays float64), the convolution in the input dtype as the device runs it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch._prims_common import suggest_memory_format


def _compute(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _channel(v: torch.Tensor) -> torch.Tensor:
    return v[None, :, None, None]


def memory_format(input: torch.Tensor, weight: torch.Tensor) -> torch.memory_format:
    """The layout of the ops' 4-D results: channels_last when the input or the weight is, as torch's CPU
    convolution chooses (its output and both gradients follow; BatchNorm and LeakyReLU keep it)."""
    if channels_last(input) or channels_last(weight):
        return torch.channels_last
    return torch.contiguous_format


def channels_last(t: torch.Tensor) -> bool:
    return t.dim() == 4 and suggest_memory_format(t) == torch.channels_last


def in_format(t: torch.Tensor, layout: torch.memory_format) -> torch.Tensor:
    return t.contiguous(memory_format=layout)


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


def update_running_statistics(running_mean, running_var, mean, variance, count: int, momentum: float) -> None:
    """torch's update of the running statistics, in place (when given): running = (1 - momentum) * running
    + momentum * batch value, the variance unbiased; `variance` is the biased batch variance of `count`
    values per channel. Computed in mean's dtype (float32, or float64), rounded once to the buffers' dtype.
    An empty batch leaves them, as torch's batch_norm does; one value per channel gives NaN variance, as torch."""
    if running_mean is None or count == 0:
        return
    unbiased = variance * (count / (count - 1) if count > 1 else float("inf"))
    with torch.no_grad():
        for running, batch in ((running_mean, mean), (running_var, unbiased)):
            running.copy_(running.to(batch.dtype) * (1 - momentum) + batch * momentum)


def conv_bn_leaky_relu_train(input, weight, bias, bn_weight, bn_bias, running_mean, running_var, stride, padding,
                             dilation, groups, momentum, eps, negative_slope, save_output):
    c, layout = _compute(input.dtype), memory_format(input, weight)
    y = _conv(input, weight, bias, stride, padding, dilation, groups)
    yc = y.to(c)
    mean = yc.mean((0, 2, 3))
    variance = yc.var((0, 2, 3), unbiased=False)
    invstd = torch.rsqrt(variance + eps)
    z = (yc - _channel(mean)) * _channel(invstd) * _channel(bn_weight.to(c)) + _channel(bn_bias.to(c))
    out = in_format(F.leaky_relu(z, negative_slope).to(input.dtype), layout)
    kept = input.new_empty(0) if save_output else in_format(y, layout)
    update_running_statistics(running_mean, running_var, mean, variance, y.numel() // max(y.shape[1], 1), momentum)
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
    layout = memory_format(input, weight)
    return (in_format(grad_input, layout), in_format(grad_weight, layout), grad_bias, grad_gamma.to(bn_weight.dtype),
            grad_beta.to(bn_bias.dtype))


def conv_bias_leaky_relu(input, weight, bias, stride, padding, dilation, groups, negative_slope):
    out = F.leaky_relu(_conv(input, weight, bias, stride, padding, dilation, groups), negative_slope)
    return in_format(out, memory_format(input, weight))


def conv_bias_leaky_relu_backward(grad_out, input, weight, bias, stride, padding, dilation, groups, negative_slope):
    pre = _conv(input, weight, bias, stride, padding, dilation, groups)
    dz = torch.where(pre > 0, grad_out, grad_out * negative_slope)
    grad_input, grad_weight, grad_bias = _conv_backward(dz, input, weight, stride, padding, dilation, groups)
    layout = memory_format(input, weight)
    return in_format(grad_input, layout), in_format(grad_weight, layout), grad_bias


# --- the backward ops as differentiable functions of the forward's inputs -----------------------
# What the ops' autograd runs when a backward op is itself differentiated (double backward, forward-over-
# reverse, torch.func): everything is recomputed from input, weight and the BN parameters, so the
# gradients through the batch statistics and through the kept output (both functions of the input) are
# included, and torch differentiates it to any order. Computed in float32 (float64 stays float64).
def conv_bn_leaky_relu_train_backward_differentiable(grad_out, saved, saved_is_output, input, weight, bn_weight,
                                                     bn_bias, mean, invstd, stride, padding, dilation, groups,
                                                     negative_slope):
    c, layout = _compute(input.dtype), memory_format(input, weight)
    x, w = input.to(c), weight.to(c)
    y = _conv(x, w, None, stride, padding, dilation, groups)  # the conv bias cancels in the batch statistics
    batch_mean = y.mean((0, 2, 3))
    variance = y.var((0, 2, 3), unbiased=False)
    # eps is no argument of the backward; the saved invstd carries it (variance + eps = invstd^-2): this has the
    # saved value and the derivatives of (variance + eps)^(-1/2)
    invstd = torch.rsqrt(variance - variance.detach() + invstd.detach().to(c).pow(-2))
    xhat = (y - _channel(batch_mean)) * _channel(invstd)
    gamma, beta = _channel(bn_weight.to(c)), _channel(bn_bias.to(c))
    grad = grad_out.to(c)
    dz = torch.where(xhat * gamma + beta > 0, grad, grad * negative_slope)
    grad_gamma, grad_beta = (dz * xhat).sum((0, 2, 3)), dz.sum((0, 2, 3))
    dxhat = dz * gamma
    dy = _channel(invstd) * (dxhat - dxhat.mean((0, 2, 3), keepdim=True)
                             - xhat * (dxhat * xhat).mean((0, 2, 3), keepdim=True))
    grad_input, grad_weight, grad_bias = _conv_backward(dy, x, w, stride, padding, dilation, groups)
    return (in_format(grad_input.to(input.dtype), layout), in_format(grad_weight.to(weight.dtype), layout),
            grad_bias.to(weight.dtype), grad_gamma.to(bn_weight.dtype), grad_beta.to(bn_bias.dtype))


def conv_bias_leaky_relu_backward_differentiable(grad_out, input, weight, bias, stride, padding, dilation, groups,
                                                 negative_slope):
    c, layout = _compute(input.dtype), memory_format(input, weight)
    x, w = input.to(c), weight.to(c)
    pre = _conv(x, w, bias.to(c), stride, padding, dilation, groups)
    grad = grad_out.to(c)
    dz = torch.where(pre > 0, grad, grad * negative_slope)
    grad_input, grad_weight, grad_bias = _conv_backward(dz, x, w, stride, padding, dilation, groups)
    return (in_format(grad_input.to(input.dtype), layout), in_format(grad_weight.to(weight.dtype), layout),
            grad_bias.to(bias.dtype))


# --- forward-mode derivatives (jvp) of the forward ops ----------------------------------------
def _tangent_conv(input, weight, input_tangent, weight_tangent, stride, padding, dilation, groups):
    """d conv(input, weight) along the tangents (None = 0), or None when both are None."""
    parts = []
    if input_tangent is not None:
        parts.append(_conv(input_tangent, weight, None, stride, padding, dilation, groups))
    if weight_tangent is not None:
        parts.append(_conv(input, weight_tangent, None, stride, padding, dilation, groups))
    return sum(parts[1:], parts[0]) if parts else None


def _as(t, dtype):
    return None if t is None else t.to(dtype)


def conv_bn_leaky_relu_train_jvp(input, weight, bn_weight, bn_bias, invstd, tangents, stride, padding,
                                 dilation, groups, negative_slope, like):
    """Tangent of the training output along tangents (input, weight, bias, bn_weight, bn_bias); a conv bias
    tangent cancels in the batch statistics."""
    c = _compute(input.dtype)
    input_t, weight_t, _, gamma_t, beta_t = (_as(t, c) for t in tangents)
    x, w = input.to(c), weight.to(c)
    y = _conv(x, w, None, stride, padding, dilation, groups)  # without the conv bias, so not `mean` but y's own
    xhat = (y - y.mean((0, 2, 3), keepdim=True)) * _channel(invstd.to(c))
    gamma, beta = _channel(bn_weight.to(c)), _channel(bn_bias.to(c))
    z_t = torch.zeros_like(xhat)
    y_t = _tangent_conv(x, w, input_t, weight_t, stride, padding, dilation, groups)
    if y_t is not None:
        xhat_t = _channel(invstd.to(c)) * (y_t - y_t.mean((0, 2, 3), keepdim=True)
                                           - xhat * (xhat * y_t).mean((0, 2, 3), keepdim=True))
        z_t = z_t + xhat_t * gamma
    if gamma_t is not None:
        z_t = z_t + xhat * _channel(gamma_t)
    if beta_t is not None:
        z_t = z_t + _channel(beta_t)
    out_t = torch.where(xhat * gamma + beta > 0, z_t, z_t * negative_slope)
    return in_format(out_t.to(like.dtype), memory_format(input, weight))


def conv_bias_leaky_relu_jvp(input, weight, bias, tangents, stride, padding, dilation, groups, negative_slope, like):
    """Tangent of the eval output along tangents (input, weight, bias)."""
    c = _compute(input.dtype)
    input_t, weight_t, bias_t = (_as(t, c) for t in tangents)
    x, w = input.to(c), weight.to(c)
    pre = _conv(x, w, bias.to(c), stride, padding, dilation, groups)
    pre_t = _tangent_conv(x, w, input_t, weight_t, stride, padding, dilation, groups)
    pre_t = torch.zeros_like(pre) if pre_t is None else pre_t
    if bias_t is not None:
        pre_t = pre_t + _channel(bias_t)
    out_t = torch.where(pre > 0, pre_t, pre_t * negative_slope)
    return in_format(out_t.to(like.dtype), memory_format(input, weight))
