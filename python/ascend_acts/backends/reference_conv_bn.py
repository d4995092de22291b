"""The fused Conv2d + BatchNorm2d + LeakyReLU ops on the reference backend, at the tensor level.

The convolution is the platform's, as on the NPU: torch's CPU convolution (oneDNN; torch.nn.functional.conv2d
forward, aten::convolution_backward for grad_input, grad_weight and grad_bias). What is ours runs on the
NumPy reference: the BatchNorm + LeakyReLU passes (reference/batch_norm_leaky_relu.py) and the eval
epilogue (reference/activations.py). The float64 oracle the tests compare against is reference/conv_bn.py.

Half types are computed in float32 (conv included) and rounded once at the end; the conv output is
rounded to the input dtype only where it is kept for the backward. float64 stays float64.
"""

from __future__ import annotations

import numpy as np
import torch

from ..reference import activations
from ..reference import batch_norm_leaky_relu as kernels
from .torch_ops.conv_bn import conv2d as platform_conv2d
from .torch_ops.conv_bn import conv2d_backward as platform_conv2d_backward
from .torch_ops.conv_bn import update_running_statistics


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def array(t: torch.Tensor | None, dtype: torch.dtype):
    """A NumPy array of t in dtype (shares t's memory when it already has it)."""
    return None if t is None else t.detach().to(dtype).contiguous().numpy()


def tensor(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).to(like.dtype)


def conv_bn_leaky_relu_train(input, weight, bias, bn_weight, bn_bias, running_mean, running_var, stride, padding,
                             dilation, groups, momentum, eps, negative_slope, save_output):
    c = compute_dtype(input.dtype)
    with torch.no_grad():
        y = platform_conv2d(input.detach().to(c), weight.detach().to(c), None if bias is None else bias.detach().to(c),
                            stride, padding, dilation, groups)
        kept = torch.empty(0, dtype=input.dtype) if save_output else y.to(input.dtype)
        out = torch.empty_like(y) if kept is y else y  # normalised in place unless y itself is kept
        mean, invstd, variance = kernels.forward(y.numpy(), array(bn_weight, c), array(bn_bias, c), eps,
                                                 negative_slope, out.numpy())
        mean, invstd = torch.from_numpy(mean), torch.from_numpy(invstd)
        update_running_statistics(running_mean, running_var, mean, torch.from_numpy(variance),
                                  y.numel() // max(y.shape[1], 1), momentum)
        return out.to(input.dtype), kept, mean, invstd


def conv_bn_leaky_relu_train_backward(grad_out, saved, saved_is_result, input, weight, bn_weight, bn_bias, mean,
                                      invstd, stride, padding, dilation, groups, negative_slope):
    c = compute_dtype(input.dtype)
    with torch.no_grad():
        grad = grad_out.detach().to(c)
        grad_y = grad if grad_out.dtype != c else torch.empty_like(grad)  # in place only in our own copy
        grad_gamma, grad_beta = kernels.backward(
            grad.numpy(), array(saved, c), saved_is_result, array(bn_weight, c), array(bn_bias, c), array(mean, c),
            array(invstd, c), negative_slope, grad_y.numpy())
        grad_input, grad_weight, grad_bias = platform_conv2d_backward(
            grad_y, input.detach().to(c), weight.detach().to(c), stride, padding, dilation, groups)
        return (grad_input.to(input.dtype), grad_weight.to(weight.dtype), grad_bias.to(weight.dtype),
                tensor(grad_gamma, bn_weight), tensor(grad_beta, bn_bias))


def conv_bn_leaky_relu_eval(input, weight, bias, stride, padding, dilation, groups, negative_slope):
    c = compute_dtype(input.dtype)
    with torch.no_grad():
        y = platform_conv2d(input.detach().to(c), weight.detach().to(c), bias.detach().to(c), stride, padding,
                            dilation, groups)
        activations.leaky_relu(y.numpy(), negative_slope, out=y.numpy())
        return y.to(input.dtype)


def conv_bn_leaky_relu_eval_backward(grad_out, input, weight, bias, stride, padding, dilation, groups, negative_slope):
    """Recomputes the pre-activation for the LeakyReLU mask (works for any slope): nothing else is kept."""
    c = compute_dtype(input.dtype)
    with torch.no_grad():
        x, w = input.detach().to(c), weight.detach().to(c)
        pre = platform_conv2d(x, w, bias.detach().to(c), stride, padding, dilation, groups)
        grad_pre = pre.numpy()  # overwritten with the gradient through the LeakyReLU
        activations.leaky_relu_backward(array(grad_out, c), grad_pre, negative_slope, out=grad_pre)
        grads = platform_conv2d_backward(pre, x, w, stride, padding, dilation, groups)
        return tuple(g.to(like.dtype) for g, like in zip(grads, (input, weight, bias)))
