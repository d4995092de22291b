"""The fused Conv2d + BatchNorm2d + LeakyReLU on the "sim" backend, as on the NPU, with our AscendC
kernels on the emulator.

Training: the platform's convolution, then the BatchNorm+LeakyReLU kernels (op_kernel/
batch_norm_leaky_relu*.cpp). The platform convolution is the NumPy reference here (float32
accumulation, its output rounded to the input dtype as an NPU convolution returns it). The backward
runs the output-based (InPlace-ABN) kernel when the output was kept; when the conv output was kept
instead (slope <= 0, a zero bn_weight or a too large |bn_bias| / |bn_weight|) the BN part falls back to the
NumPy reference.
Eval: one launch of op_kernel/conv_bn_leaky_relu_eval.cpp (conv on the cube with the BN-folded
weights, bias and LeakyReLU on the vector unit) for groups = 1; grouped convolutions and the eval
backward (needed only to train through an eval-mode block) run the NumPy reference.
"""

from __future__ import annotations

import torch

from .reference import to_array
from ..reference import conv_bn as reference
from . import reference_conv_bn
from .reference_conv_bn import array, conv_bias_leaky_relu_backward, tensor  # noqa: F401

_SIM_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _check_dtype(input: torch.Tensor) -> None:
    if input.dtype not in _SIM_DTYPES:
        raise TypeError(f"the sim backend runs the NPU kernels, which take float32, float16 or bfloat16, got "
                        f"{input.dtype}; use the reference backend for float64")


def _platform_conv(input, weight, bias, stride, padding, dilation, groups) -> torch.Tensor:
    f = torch.float32
    y = reference.conv2d(array(input, f), array(weight, f), array(bias, f), stride, padding, dilation, groups)
    return tensor(y, input)


def _channel_floats(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float32).contiguous()


def conv_bn_leaky_relu_train(input, weight, bias, bn_weight, bn_bias, running_mean, running_var, stride, padding,
                             dilation, groups, momentum, eps, negative_slope, save_output):
    _check_dtype(input)
    y = _platform_conv(input, weight, bias, stride, padding, dilation, groups)
    channels = y.shape[1]
    out = torch.empty_like(y)
    mean, invstd = torch.empty(channels), torch.empty(channels)
    # the kernel updates the running statistics as torch does (momentum, unbiased variance), in float32:
    # on float32 copies, written back (in the buffers' dtype) once the kernel has run
    update = running_mean is not None
    staged = [t.detach().to(torch.float32, copy=True).contiguous() for t in (running_mean, running_var)] \
        if update else [None, None]
    sim.batch_norm_leaky_relu_forward(
        to_array(y), to_array(_channel_floats(bn_weight)), to_array(_channel_floats(bn_bias)),
        *(to_array(t) if update else None for t in staged), negative_slope, eps, momentum, update, to_array(out),
        to_array(mean), to_array(invstd))
    if update:
        with torch.no_grad():
            running_mean.copy_(staged[0])
            running_var.copy_(staged[1])
    kept = torch.empty(0, dtype=input.dtype) if save_output else y
    return out, kept, mean, invstd


def conv_bn_leaky_relu_train_backward(grad_out, saved, saved_is_output, input, weight, bn_weight, bn_bias, mean,
                                      invstd, stride, padding, dilation, groups, negative_slope):
    _check_dtype(input)
    gamma, beta = _channel_floats(bn_weight), _channel_floats(bn_bias)
    if saved_is_output:
        grad_y = torch.empty_like(grad_out)
        grad_gamma, grad_beta = torch.empty_like(gamma), torch.empty_like(beta)
        sim.batch_norm_leaky_relu_backward(
            to_array(grad_out.contiguous()), to_array(saved), to_array(gamma), to_array(beta),
            to_array(_channel_floats(invstd)), negative_slope, to_array(grad_y), to_array(grad_gamma),
            to_array(grad_beta))
        grad_y = grad_y.float().numpy()
    else:
        f = torch.float32
        grad_y, grad_gamma, grad_beta = reference.batch_norm_leaky_relu_backward(
            array(grad_out, f), array(saved, f), False, array(gamma, f), array(beta, f), array(mean, f),
            array(invstd, f), negative_slope)
        grad_gamma, grad_beta = torch.from_numpy(grad_gamma), torch.from_numpy(grad_beta)
    grads = reference.conv2d_backward(grad_y, array(input, torch.float32), array(weight, torch.float32), stride,
                                      padding, dilation, groups)
    grad_input, grad_weight, grad_bias = (tensor(g, like) for g, like in zip(grads, (input, weight, weight)))
    return grad_input, grad_weight, grad_bias, grad_gamma.to(bn_weight.dtype), grad_beta.to(bn_bias.dtype)


def conv_bias_leaky_relu(input, weight, bias, stride, padding, dilation, groups, negative_slope):
    _check_dtype(input)
    if groups != 1:
        return reference_conv_bn.conv_bias_leaky_relu(input, weight, bias, stride, padding, dilation, groups,
                                                      negative_slope)
    shape = reference.output_shape(input.shape, weight.shape, stride, padding, dilation)
    out = torch.empty(shape, dtype=input.dtype)
    if out.numel() == 0:  # an empty batch: nothing to launch (the emulator, like the NPU, takes no empty grid)
        return out
    sim.conv_bn_leaky_relu_eval(to_array(input.contiguous()), to_array(weight.detach().to(input.dtype).contiguous()),
                                to_array(_channel_floats(bias)), stride, padding, dilation, negative_slope,
                                to_array(out))
    return out


from . import sim  # noqa: E402  (last: sim imports this module's ops at its end, so either can be imported first)
