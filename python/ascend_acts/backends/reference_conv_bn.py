"""The fused Conv2d + BatchNorm2d + LeakyReLU ops on the NumPy reference, at the tensor level.

Half types are computed in float32 and rounded once at the end; float64 stays float64.
"""

from __future__ import annotations

import numpy as np
import torch

from ..reference import conv_bn as reference
from .torch_ops.conv_bn import update_running_statistics


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def array(t: torch.Tensor | None, dtype: torch.dtype):
    return None if t is None else t.detach().to(dtype).contiguous().numpy()


def tensor(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).to(like.dtype)


def conv_bn_leaky_relu_train(input, weight, bias, bn_weight, bn_bias, running_mean, running_var, stride, padding,
                             dilation, groups, momentum, eps, negative_slope, save_output):
    c = compute_dtype(input.dtype)
    out, conv_out, mean, invstd, variance = reference.train_forward(
        array(input, c), array(weight, c), array(bias, c), array(bn_weight, c), array(bn_bias, c),
        stride, padding, dilation, groups, eps, negative_slope)
    stats = torch.empty(0, dtype=c)
    kept = torch.empty(0, dtype=input.dtype) if save_output else tensor(conv_out, input)
    mean = tensor(mean, stats)
    update_running_statistics(running_mean, running_var, mean, tensor(variance, stats),
                              conv_out.size // max(conv_out.shape[1], 1), momentum)
    return tensor(out, input), kept, mean, tensor(invstd, stats)


def conv_bn_leaky_relu_train_backward(grad_out, saved, saved_is_output, input, weight, bn_weight, bn_bias, mean,
                                      invstd, stride, padding, dilation, groups, negative_slope):
    c = compute_dtype(input.dtype)
    grads = reference.train_backward(
        array(grad_out, c), array(saved, c), saved_is_output, array(input, c), array(weight, c),
        array(bn_weight, c), array(bn_bias, c), array(mean, c), array(invstd, c), stride, padding, dilation,
        groups, negative_slope)
    likes = (input, weight, weight, bn_weight, bn_bias)
    return tuple(tensor(g, like) for g, like in zip(grads, likes))


def conv_bias_leaky_relu(input, weight, bias, stride, padding, dilation, groups, negative_slope):
    c = compute_dtype(input.dtype)
    out = reference.conv_bias_leaky_relu(array(input, c), array(weight, c), array(bias, c), stride, padding,
                                         dilation, groups, negative_slope)
    return tensor(out, input)


def conv_bias_leaky_relu_backward(grad_out, input, weight, bias, stride, padding, dilation, groups, negative_slope):
    c = compute_dtype(input.dtype)
    grads = reference.conv_bias_leaky_relu_backward(
        array(grad_out, c), array(input, c), array(weight, c), array(bias, c), stride, padding, dilation, groups,
        negative_slope)
    return tuple(tensor(g, like) for g, like in zip(grads, (input, weight, bias)))
