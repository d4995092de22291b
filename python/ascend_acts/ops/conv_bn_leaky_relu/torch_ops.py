"""The fused Conv2d + BatchNorm2d + LeakyReLU ops written with torch tensor ops only, so they run on any device
(the "torch" backend; the protocol of `ascend_acts.backends`): the mathematics of the NumPy reference
(this folder's reference.py), statistics and the BN + LeakyReLU part in float32 (float64 stays float64), the
convolution in the input dtype as the device runs it (torch's oneDNN on the CPU, torch_npu's on the NPU).
Also the platform's convolution every backend of these ops runs (`conv2d`, `conv2d_backward`), torch's update
of the running statistics and the statistics' shapes: per channel (C,) for BatchNorm (norm_groups 0), per sample and
group of C/G channels (N, G) for norm_groups G >= 1 (InstanceNorm G == C, GroupNorm).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...numerics.dtypes import compute_dtype
from ...numerics.layout import channel_view as channel


def _symmetric(padding) -> tuple[int, int] | None:
    top, bottom, left, right = padding
    return (top, left) if top == bottom and left == right else None


def _pad(input: torch.Tensor, padding) -> torch.Tensor:
    top, bottom, left, right = padding
    return F.pad(input, (left, right, top, bottom))


def output_channels(weight: torch.Tensor, groups: int, transposed: bool) -> int:
    """The convolution's output channels: weight (C_out, C_in/groups, kh, kw), or transposed (C_in, C_out/groups,
    kh, kw)."""
    return weight.shape[1] * groups if transposed else weight.shape[0]


def conv2d(input, weight, bias, stride, padding, dilation, groups, transposed=False,
           output_padding=(0, 0)) -> torch.Tensor:
    """The platform's convolution (every backend's: ours never implement one), in the tensors' dtype and
    differentiable; padding is (top, bottom, left, right), an asymmetric one applied by F.pad. `transposed`:
    conv_transpose2d (aten::convolution's argument; its padding is always symmetric)."""
    symmetric = _symmetric(padding)
    if transposed:
        return F.conv_transpose2d(input, weight, bias, stride, symmetric, output_padding, groups, dilation)
    if symmetric is None:
        input, symmetric = _pad(input, padding), (0, 0)
    return F.conv2d(input, weight, bias, stride, symmetric, dilation, groups)


def conv2d_backward(grad, input, weight, stride, padding, dilation, groups, transposed=False, output_padding=(0, 0)):
    """(grad_input, grad_weight, grad_bias) of conv2d (or its transposed) from one aten::convolution_backward, with
    grad in the input's dtype."""
    symmetric = _symmetric(padding)
    padded = input if symmetric is not None else _pad(input, padding)
    grad_input, grad_weight, grad_bias = torch.ops.aten.convolution_backward(
        grad, padded, weight, [output_channels(weight, groups, transposed)], stride, symmetric or (0, 0), dilation,
        transposed, output_padding if transposed else (0, 0), groups, (True, True, True))
    if symmetric is None:
        top, _, left, _ = padding
        grad_input = grad_input[:, :, top: top + input.shape[2], left: left + input.shape[3]]
    return grad_input.contiguous(), grad_weight, grad_bias


def update_running_statistics(running_mean, running_var, mean, variance, shape, momentum: float) -> None:
    """torch's update of the running statistics, in place (when given): running = (1 - momentum) * running
    + momentum * batch value, the variance unbiased; `mean` and `variance` (biased) are the statistics of the
    (N, C, *spatial) `shape`: per channel, or per instance (N, C) as F.instance_norm updates them (the batch value
    is then the mean over the samples of each instance's value). Computed in mean's dtype (float32, or float64),
    rounded once to the buffers' dtype. An empty batch leaves them, as torch's batch_norm does; one value per
    channel (instance) gives NaN variance, as torch."""
    per_instance = mean.dim() == 2
    count = math.prod(shape[2:]) if per_instance else math.prod(shape) // max(shape[1], 1)
    if running_mean is None or count == 0 or shape[0] == 0:
        return
    unbiased = variance * (count / (count - 1) if count > 1 else float("inf"))
    if per_instance:
        mean, unbiased = mean.mean(0), unbiased.mean(0)
    with torch.no_grad():
        for running, batch in ((running_mean, mean), (running_var, unbiased)):
            running.copy_(running.to(batch.dtype) * (1 - momentum) + batch * momentum)


def activation(z: torch.Tensor, negative_slope: float, relu: bool) -> torch.Tensor:
    """The ops' activation: torch's relu (z < 0 ? +0 : z) or leaky_relu (slope 0 gives -0.0 for a negative z)."""
    return F.relu(z) if relu else F.leaky_relu(z, negative_slope)


def activation_gradient(z: torch.Tensor, grad: torch.Tensor, negative_slope: float, relu: bool) -> torch.Tensor:
    """The gradient through `activation` at z, as torch's relu backward (0 where z <= 0, NaN passes the gradient) or
    leaky_relu backward (grad * slope where not z > 0); differentiable."""
    if relu:
        return torch.where(z <= 0, grad.new_zeros(()), grad)
    return torch.where(z > 0, grad, grad * negative_slope)


def _grouped(t: torch.Tensor, norm_groups: int) -> torch.Tensor:
    """(N, C, *spatial) seen as (N, G, C/G * prod(spatial)): the values of each group's statistics in a row."""
    return t.reshape(t.shape[0], norm_groups, math.prod(t.shape[1:]) // norm_groups)


def statistics(y: torch.Tensor, norm_groups: int = 0):
    """(mean, biased variance) of y (N, C, H, W): per channel over N, H, W, or per sample and group (N, G)."""
    if norm_groups:
        grouped = _grouped(y, norm_groups)
        return grouped.mean(2), grouped.var(2, unbiased=False)
    return y.mean((0, 2, 3)), y.var((0, 2, 3), unbiased=False)


def statistic_view(values: torch.Tensor, like: torch.Tensor, norm_groups: int = 0) -> torch.Tensor:
    """Statistics (C,) or (N, G) broadcastable over `like` (N, C, H, W)."""
    if norm_groups:
        return values.repeat_interleave(like.shape[1] // norm_groups, dim=1)[:, :, None, None]
    return channel(values)


def statistics_mean(t: torch.Tensor, norm_groups: int = 0) -> torch.Tensor:
    """The mean of t over the values that share statistics, broadcastable over t."""
    if norm_groups:
        return statistic_view(_grouped(t, norm_groups).mean(2), t, norm_groups)
    return t.mean((0, 2, 3), keepdim=True)


def normalised_gradient(dxhat: torch.Tensor, xhat: torch.Tensor, invstd: torch.Tensor,
                        norm_groups: int = 0) -> torch.Tensor:
    """The gradient of the normalisation's input from that of x-hat (the statistics' own derivatives included)."""
    return statistic_view(invstd, xhat, norm_groups) * (dxhat - statistics_mean(dxhat, norm_groups)
                                                        - xhat * statistics_mean(dxhat * xhat, norm_groups))


def conv_bn_leaky_relu_train(input, weight, bias, bn_weight, bn_bias, running_mean, running_var, stride, padding,
                             dilation, groups, momentum, eps, negative_slope, save_output, relu=False, transposed=False,
                             output_padding=(0, 0), norm_groups=0):
    y = conv2d(input, weight, bias, stride, padding, dilation, groups, transposed, output_padding)
    out, mean, invstd = batch_norm_activation(y, bn_weight, bn_bias, running_mean, running_var, momentum, eps,
                                              negative_slope, relu, norm_groups)
    kept = input.new_empty(0) if save_output else y
    return out, kept, mean, invstd


def batch_norm_activation(y, bn_weight, bn_bias, running_mean, running_var, momentum, eps, negative_slope, relu,
                          norm_groups=0):
    """The normalisation + activation part of the training op on the conv output y: (out, mean, invstd), the
    running statistics updated in place."""
    yc = y.to(compute_dtype(y.dtype))
    mean, variance = statistics(yc, norm_groups)
    invstd = torch.rsqrt(variance + eps)
    z = ((yc - statistic_view(mean, yc, norm_groups)) * statistic_view(invstd, yc, norm_groups)
         * channel(bn_weight.to(yc.dtype)) + channel(bn_bias.to(yc.dtype)))
    out = activation(z, negative_slope, relu).to(y.dtype)
    update_running_statistics(running_mean, running_var, mean, variance, y.shape, momentum)
    return out, mean, invstd


def conv_bn_leaky_relu_train_backward(grad_out, saved, saved_is_result, input, weight, bn_weight, bn_bias, mean,
                                      invstd, stride, padding, dilation, groups, negative_slope, relu=False,
                                      transposed=False, output_padding=(0, 0), norm_groups=0, bias=None):
    c = compute_dtype(input.dtype)
    gamma, beta = channel(bn_weight.to(c)), channel(bn_bias.to(c))
    saved, grad = saved.to(c), grad_out.to(c)
    if saved_is_result:  # InPlace-ABN: invert LeakyReLU and the affine
        z = torch.where(saved > 0, saved, saved / negative_slope)
        xhat = (z - beta) / gamma
    else:
        xhat = (saved - statistic_view(mean.to(c), saved, norm_groups)) * statistic_view(invstd.to(c), saved,
                                                                                          norm_groups)
        z = xhat * gamma + beta
    dz = activation_gradient(z, grad, negative_slope, relu)
    grad_gamma, grad_beta = (dz * xhat).sum((0, 2, 3)), dz.sum((0, 2, 3))
    dy = normalised_gradient(dz * gamma, xhat, invstd.to(c), norm_groups)
    grad_input, grad_weight, grad_bias = conv2d_backward(dy.to(input.dtype), input, weight, stride, padding,
                                                         dilation, groups, transposed, output_padding)
    return grad_input, grad_weight, grad_bias, grad_gamma.to(bn_weight.dtype), grad_beta.to(bn_bias.dtype)


def conv_bn_leaky_relu_eval(input, weight, bias, stride, padding, dilation, groups, negative_slope, relu=False,
                            transposed=False, output_padding=(0, 0)):
    return activation(conv2d(input, weight, bias, stride, padding, dilation, groups, transposed, output_padding),
                      negative_slope, relu)


def conv_bn_leaky_relu_eval_backward(grad_out, input, weight, bias, stride, padding, dilation, groups, negative_slope,
                                     relu=False, transposed=False, output_padding=(0, 0)):
    pre = conv2d(input, weight, bias, stride, padding, dilation, groups, transposed, output_padding)
    dz = activation_gradient(pre, grad_out, negative_slope, relu)
    return conv2d_backward(dz, input, weight, stride, padding, dilation, groups, transposed, output_padding)


