"""ascend_acts::conv_bn_leaky_relu_train (+ _backward) and conv_bias_leaky_relu (+ _backward).

Training keeps the post-activation output (InPlace-ABN) when the activation and the affine can be
inverted (negative_slope > 0, no zero bn_weight, |bn_bias| / |bn_weight| small enough for the dtype; the caller
decides with `save_output`, see conv_bn.output_determines_batch_norm); otherwise it
keeps the conv output. Eval runs the conv with BN folded into weight and bias; its backward recomputes
the pre-activation, so nothing but the input and the folded weight is kept.
CPU kernels: the selected backend's (NumPy reference, or on "sim" the platform conv + the AscendC
BatchNorm+LeakyReLU kernels on the emulator).
"""

from __future__ import annotations

import torch

from .. import backends
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


# --- CPU kernels: the selected backend's (backends.FUSED_KERNELS) -------------------------------
def _register_cpu(op: str) -> None:
    def kernel(*args):
        return getattr(backends.current_backend(), op)(*args)

    kernel.__name__ = f"{op}_cpu"
    torch.library.impl(lib, op, "CPU")(kernel)


for _op in backends.FUSED_KERNELS:
    _register_cpu(_op)


# --- fake kernels ------------------------------------------------------------------------------
@torch.library.register_fake("ascend_acts::conv_bn_leaky_relu_train", lib=lib)
def _train_fake(input, weight, bias, bn_weight, bn_bias, stride, padding, dilation, groups, eps, negative_slope,
                save_output):
    shape = reference.output_shape(input.shape, weight.shape, stride, padding, dilation)
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
    return input.new_empty(reference.output_shape(input.shape, weight.shape, stride, padding, dilation))


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
