"""ascend_acts::conv_bn_leaky_relu_train (+ _backward) and conv_bias_leaky_relu (+ _backward).

Training keeps the post-activation output (InPlace-ABN) when the activation and the affine can be
inverted (negative_slope > 0, no zero bn_weight; the caller decides with `save_output`); otherwise it
keeps the conv output. Eval runs the conv with BN folded into weight and bias; its backward recomputes
the pre-activation, so nothing but the input and the folded weight is kept.
CPU kernels: the NumPy reference (the emulator has no kernels for these ops yet).
"""

from __future__ import annotations

import numpy as np
import torch

from ..reference import conv_bn as reference
from ._library import lib

_GEOMETRY = "int[2] stride, int[4] padding, int[2] dilation, int groups"
lib.define(
    f"conv_bn_leaky_relu_train(Tensor input, Tensor weight, Tensor? bias, Tensor bn_weight, Tensor bn_bias, "
    f"{_GEOMETRY}, float eps, float negative_slope, bool save_output) "
    "-> (Tensor out, Tensor conv_out, Tensor mean, Tensor invstd)"
)
lib.define(
    f"conv_bn_leaky_relu_train_backward(Tensor grad_out, Tensor saved, bool saved_is_output, Tensor input, "
    f"Tensor weight, Tensor bn_weight, Tensor bn_bias, Tensor mean, Tensor invstd, {_GEOMETRY}, "
    "float negative_slope) -> (Tensor, Tensor, Tensor, Tensor, Tensor)"
)
lib.define(f"conv_bias_leaky_relu(Tensor input, Tensor weight, Tensor bias, {_GEOMETRY}, float negative_slope) -> Tensor")
lib.define(
    f"conv_bias_leaky_relu_backward(Tensor grad_out, Tensor input, Tensor weight, Tensor bias, {_GEOMETRY}, "
    "float negative_slope) -> (Tensor, Tensor, Tensor)"
)

ops = torch.ops.ascend_acts


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _array(t: torch.Tensor | None, dtype: torch.dtype):
    return None if t is None else t.detach().to(dtype).contiguous().numpy()


def _tensor(a: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a)).to(like.dtype)


def output_shape(input: torch.Tensor, weight: torch.Tensor, stride, padding, dilation) -> list:
    sizes = []
    for axis in range(2):
        extent = input.shape[2 + axis] + padding[2 * axis] + padding[2 * axis + 1]
        sizes.append((extent - dilation[axis] * (weight.shape[2 + axis] - 1) - 1) // stride[axis] + 1)
    return [input.shape[0], weight.shape[0], *sizes]


# --- CPU kernels -------------------------------------------------------------------------------
@torch.library.impl(lib, "conv_bn_leaky_relu_train", "CPU")
def _train_cpu(input, weight, bias, bn_weight, bn_bias, stride, padding, dilation, groups, eps, negative_slope,
               save_output):
    c = compute_dtype(input.dtype)
    out, conv_out, mean, invstd = reference.train_forward(
        _array(input, c), _array(weight, c), _array(bias, c), _array(bn_weight, c), _array(bn_bias, c),
        stride, padding, dilation, groups, eps, negative_slope)
    stats = torch.empty(0, dtype=c)
    kept = torch.empty(0, dtype=input.dtype) if save_output else _tensor(conv_out, input)
    return _tensor(out, input), kept, _tensor(mean, stats), _tensor(invstd, stats)


@torch.library.impl(lib, "conv_bn_leaky_relu_train_backward", "CPU")
def _train_backward_cpu(grad_out, saved, saved_is_output, input, weight, bn_weight, bn_bias, mean, invstd, stride,
                        padding, dilation, groups, negative_slope):
    c = compute_dtype(input.dtype)
    grads = reference.train_backward(
        _array(grad_out, c), _array(saved, c), saved_is_output, _array(input, c), _array(weight, c),
        _array(bn_weight, c), _array(bn_bias, c), _array(mean, c), _array(invstd, c), stride, padding, dilation,
        groups, negative_slope)
    likes = (input, weight, weight, bn_weight, bn_bias)
    return tuple(_tensor(g, like) for g, like in zip(grads, likes))


@torch.library.impl(lib, "conv_bias_leaky_relu", "CPU")
def _eval_cpu(input, weight, bias, stride, padding, dilation, groups, negative_slope):
    c = compute_dtype(input.dtype)
    out = reference.conv_bias_leaky_relu(_array(input, c), _array(weight, c), _array(bias, c), stride, padding,
                                         dilation, groups, negative_slope)
    return _tensor(out, input)


@torch.library.impl(lib, "conv_bias_leaky_relu_backward", "CPU")
def _eval_backward_cpu(grad_out, input, weight, bias, stride, padding, dilation, groups, negative_slope):
    c = compute_dtype(input.dtype)
    grads = reference.conv_bias_leaky_relu_backward(
        _array(grad_out, c), _array(input, c), _array(weight, c), _array(bias, c), stride, padding, dilation, groups,
        negative_slope)
    return tuple(_tensor(g, like) for g, like in zip(grads, (input, weight, bias)))


# --- fake kernels ------------------------------------------------------------------------------
@torch.library.register_fake("ascend_acts::conv_bn_leaky_relu_train", lib=lib)
def _train_fake(input, weight, bias, bn_weight, bn_bias, stride, padding, dilation, groups, eps, negative_slope,
                save_output):
    shape = output_shape(input, weight, stride, padding, dilation)
    c = compute_dtype(input.dtype)
    out = input.new_empty(shape)
    kept = input.new_empty(0) if save_output else input.new_empty(shape)
    return out, kept, input.new_empty(shape[1], dtype=c), input.new_empty(shape[1], dtype=c)


@torch.library.register_fake("ascend_acts::conv_bn_leaky_relu_train_backward", lib=lib)
def _train_backward_fake(grad_out, saved, saved_is_output, input, weight, bn_weight, bn_bias, mean, invstd, stride,
                         padding, dilation, groups, negative_slope):
    return (torch.empty_like(input), torch.empty_like(weight), weight.new_empty(weight.shape[0]),
            torch.empty_like(bn_weight), torch.empty_like(bn_bias))


@torch.library.register_fake("ascend_acts::conv_bias_leaky_relu", lib=lib)
def _eval_fake(input, weight, bias, stride, padding, dilation, groups, negative_slope):
    return input.new_empty(output_shape(input, weight, stride, padding, dilation))


@torch.library.register_fake("ascend_acts::conv_bias_leaky_relu_backward", lib=lib)
def _eval_backward_fake(grad_out, input, weight, bias, stride, padding, dilation, groups, negative_slope):
    return torch.empty_like(input), torch.empty_like(weight), torch.empty_like(bias)


# --- autograd ----------------------------------------------------------------------------------
def _setup_train(ctx, inputs, output):
    input, weight, bias, bn_weight, bn_bias, *geometry, _, ctx.negative_slope, ctx.save_output = inputs
    ctx.geometry, ctx.has_bias = geometry, bias is not None
    out, conv_out, mean, invstd = output
    ctx.mark_non_differentiable(conv_out, mean, invstd)
    ctx.save_for_backward(out if ctx.save_output else conv_out, input, weight, bn_weight, bn_bias, mean, invstd)


def _backward_train(ctx, grad_out, _grad_conv_out, _grad_mean, _grad_invstd):
    saved, input, weight, bn_weight, bn_bias, mean, invstd = ctx.saved_tensors
    grads = ops.conv_bn_leaky_relu_train_backward(
        grad_out.contiguous(), saved, ctx.save_output, input, weight, bn_weight, bn_bias, mean, invstd,
        *ctx.geometry, ctx.negative_slope)
    grad_input, grad_weight, grad_bias, grad_bn_weight, grad_bn_bias = grads
    return (grad_input, grad_weight, grad_bias if ctx.has_bias else None, grad_bn_weight, grad_bn_bias,
            None, None, None, None, None, None, None)


torch.library.register_autograd("ascend_acts::conv_bn_leaky_relu_train", _backward_train, setup_context=_setup_train,
                                lib=lib)


def _setup_eval(ctx, inputs, output):
    input, weight, bias, *ctx.geometry, ctx.negative_slope = inputs
    ctx.save_for_backward(input, weight, bias)


def _backward_eval(ctx, grad_out):
    input, weight, bias = ctx.saved_tensors
    grads = ops.conv_bias_leaky_relu_backward(grad_out.contiguous(), input, weight, bias, *ctx.geometry,
                                              ctx.negative_slope)
    return (*grads, None, None, None, None, None)


torch.library.register_autograd("ascend_acts::conv_bias_leaky_relu", _backward_eval, setup_context=_setup_eval, lib=lib)
