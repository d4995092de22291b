"""Eval-mode BatchNorm folded into the convolution, in two parts.

The normalisation by the running statistics folds outside the eval op (`normalisation_fold`): the op convolves with
weight * invstd and (bias - running_mean) * invstd, whose output is x-hat. The affine (bn_weight, bn_bias) is applied
inside it (`eval_pre_activation`), so that the op's backward takes the affine's gradients as torch's batch_norm does:
sum(dz * x-hat) and sum(dz) per channel (`eval_op_backward`). Through a folded weight instead, bn_weight's gradient
would be the conv weight gradient (a float32 sum over N*H*W) dotted with the weight, several times torch's float32
error, and bn_bias's the platform's bias gradient. In float32 and float64 the op folds the affine into its conv
weight and bias too (`affine_fold`): one convolution, then the activation.

A 16-bit convolution (16-bit weights, or autocast's) folds nothing into its weight and bias, whose 16-bit rounding
would move the pre-activations (a bias's rounding a whole channel's) by more than torch's own rounding: the op gets
the conv's own weight and bias and, as its affine, the whole BatchNorm's float32 scale and shift
(`eval_arguments`), applied after the convolution in float32, as torch's batch_norm computes on a 16-bit conv
output."""

from __future__ import annotations

import torch

from ...numerics.dtypes import compute_dtype
from ...numerics.layout import channel_view as channel
from .._library import autocast_dtype

HALF_TYPES = (torch.float16, torch.bfloat16)


def scale_output_channels(weight: torch.Tensor, scale: torch.Tensor, transposed: bool = False,
                          groups: int = 1) -> torch.Tensor:
    """weight * scale per output channel: dim 0 of a conv weight (C_out, C_in/groups, kh, kw); dim 1, within each
    group, of a transposed one (C_in, C_out/groups, kh, kw)."""
    if transposed:
        c_in, per_group, kh, kw = weight.shape
        grouped = weight.reshape(groups, c_in // groups, per_group, kh, kw) * scale.reshape(groups, 1, per_group, 1, 1)
        return grouped.reshape(weight.shape)
    return weight * scale.reshape(-1, 1, 1, 1)


def normalisation_fold(weight, bias, running_mean, running_var, eps: float, transposed: bool = False, groups: int = 1):
    """Conv weight and bias with the running statistics' normalisation folded in (differentiable), in the weight's
    dtype: conv(x, weight') + bias' is x-hat, up to rounding."""
    invstd = torch.rsqrt(running_var + eps)
    shift = -running_mean * invstd if bias is None else (bias - running_mean) * invstd
    return scale_output_channels(weight, invstd.to(weight.dtype), transposed, groups), shift.to(weight.dtype)


def eval_arguments(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, eps: float,
                   transposed: bool = False, groups: int = 1):
    """(weight, bias, bn_weight, bn_bias) to give the eval op for an eval BatchNorm after a convolution of `input`
    (differentiable in every tensor): the normalised conv weight and bias and the BN's affine; for a 16-bit
    convolution (`input` 16-bit, or cast to 16 bits by autocast) the conv's weight and bias (zeros for None) and the
    BN's scale and shift in float32."""
    if input.dtype not in HALF_TYPES and not (input.dtype == torch.float32 and autocast_dtype(input) in HALF_TYPES):
        return (*normalisation_fold(weight, bias, running_mean, running_var, eps, transposed, groups), bn_weight,
                bn_bias)
    scale = torch.rsqrt(running_var.float() + eps)
    if bn_weight is not None:
        scale = scale * bn_weight.float()
    shift = -running_mean.float() * scale
    if bn_bias is not None:
        shift = shift + bn_bias.float()
    return weight, bias if bias is not None else weight.new_zeros(running_var.shape), scale, shift


def affine_fold(weight, bias, bn_weight, bn_bias, transposed: bool = False, groups: int = 1):
    """weight * bn_weight and bias * bn_weight + bn_bias (a None parameter: the identity), computed in float32
    (float64 for float64) and rounded once to the weight's dtype."""
    if bn_weight is None and bn_bias is None:
        return weight, bias
    dtype = weight.dtype
    c = compute_dtype(dtype)
    weight, bias = weight.to(c), bias.to(c)
    if bn_weight is not None:
        gamma = bn_weight.to(c)
        weight, bias = scale_output_channels(weight, gamma, transposed, groups), bias * gamma
    if bn_bias is not None:
        bias = bias + bn_bias.to(c)
    return weight.to(dtype), bias.to(dtype)


def affine_follows_conv(weight: torch.Tensor, bn_weight, bn_bias) -> bool:
    """Whether the eval op applies its affine after a 16-bit convolution rather than folding it into the weight (see
    the module's text)."""
    return weight.dtype in HALF_TYPES and (bn_weight is not None or bn_bias is not None)


def _affine(xhat: torch.Tensor, bn_weight, bn_bias) -> torch.Tensor:
    """xhat * bn_weight + bn_bias per channel, in float32: batch_norm's arithmetic on its 16-bit input."""
    c = compute_dtype(xhat.dtype)
    pre = xhat.to(c)
    if bn_weight is not None:
        pre = pre * channel(bn_weight.to(c))
    return pre if bn_bias is None else pre + channel(bn_bias.to(c))


def eval_pre_activation(convolve, weight, bias, bn_weight, bn_bias, transposed: bool = False, groups: int = 1,
                        wants_xhat: bool = False):
    """(pre, x_hat): the eval op's pre-activation, `convolve(weight, bias)` being the backend's convolution of the
    input, as the forward computes it and the backward recomputes it (so that the activation's mask is the
    forward's); with `wants_xhat`, the normalised conv x-hat too (None otherwise). Folded (float32, float64): one
    convolution with affine_fold's weight and bias, and x-hat one more, as torch's batch_norm has it from its input
    (recovered from pre as (pre - bn_bias) / bn_weight, it would carry pre's rounding divided by bn_weight: large for
    a small bn_weight under a large bn_bias, nothing for a zero one). After a 16-bit convolution: x-hat is its output
    and pre x-hat's affine, in float32."""
    if affine_follows_conv(weight, bn_weight, bn_bias):
        xhat = convolve(weight, bias)
        return _affine(xhat, bn_weight, bn_bias), xhat
    pre = convolve(*affine_fold(weight, bias, bn_weight, bn_bias, transposed, groups))
    return pre, convolve(weight, bias) if wants_xhat else None


def _conv_backward_arguments(grad_pre, weight, bias, bn_weight, bn_bias, transposed: bool = False, groups: int = 1):
    """(the gradient to give the convolution's backward, the weight it convolves with): the pre-activation's gradient
    and the folded weight where the affine folds in (the weight's gradient is then scaled by bn_weight:
    _eval_gradients); after a 16-bit convolution, that gradient times bn_weight in the weight's dtype and the op's
    weight, as torch's batch_norm backward gives its input's gradient to the convolution's."""
    if affine_follows_conv(weight, bn_weight, bn_bias):
        grad = grad_pre if bn_weight is None else grad_pre * channel(bn_weight.to(grad_pre.dtype))
        return grad.to(weight.dtype), weight
    return grad_pre, affine_fold(weight, bias, bn_weight, None, transposed, groups)[0]


def _conv_gradient_mask(output_mask) -> tuple[bool, bool, bool]:
    """The aten::convolution_backward mask of the eval backward: `output_mask`'s input and weight gradients; the
    bias's is eval_gradients' sum (the platform's float32 CPU bias gradient adds the planes one after another)."""
    return bool(output_mask[0]), bool(output_mask[1]), False


def _eval_gradients(conv_gradients, grad_pre, xhat, weight, bn_weight, bn_bias, output_mask, affine_mask,
                   transposed: bool = False, groups: int = 1, result_dtype: torch.dtype | None = None) -> tuple:
    """The eval backward's five results: the gradients of input and weight (from aten::convolution_backward with
    _conv_gradient_mask and _conv_backward_arguments; the weight's scaled by bn_weight where it was the folded one's),
    of the bias, sum(dz) * bn_weight, of bn_weight, sum(dz * x-hat), and of bn_bias, sum(dz), the sums torch's
    batch_norm takes (`xhat` from eval_pre_activation with wants_xhat). `weight` is the one the backend convolved
    with; the bias's gradient, and an empty one, are in `result_dtype` (the op's weight's, by default `weight`'s). A
    gradient `output_mask` or `affine_mask` does not ask for, or of a None parameter, is empty. Differentiable in
    every argument."""
    grad_input, grad_weight, _ = conv_gradients
    c = compute_dtype(grad_pre.dtype)
    dz = grad_pre.to(c)
    gamma = None if bn_weight is None else bn_weight.to(c)
    # accumulated in float64 on the CPU, as torch's CPU batch_norm backward accumulates (its float32 sums come out
    # rounded once); elsewhere in the compute dtype
    accumulate = torch.float64 if dz.device.type == "cpu" else c
    result_dtype = weight.dtype if result_dtype is None else result_dtype
    grad_bias, grad_gamma, grad_beta = (grad_pre.new_empty(0, dtype=result_dtype) for _ in range(3))  # never aliased
    if output_mask[2] or (bn_bias is not None and affine_mask[1]):
        sums = dz.sum((0, 2, 3), dtype=accumulate)
        if output_mask[2]:
            grad_bias = (sums if gamma is None else sums * gamma).to(result_dtype)
        if bn_bias is not None and affine_mask[1]:
            grad_beta = sums.to(bn_bias.dtype)
    if bn_weight is not None and affine_mask[0]:
        grad_gamma = (dz * xhat.to(c)).sum((0, 2, 3), dtype=accumulate).to(bn_weight.dtype)
    folded = not affine_follows_conv(weight, bn_weight, bn_bias)
    if gamma is not None and folded and grad_weight.numel():
        grad_weight = scale_output_channels(grad_weight.to(c), gamma, transposed, groups).to(grad_weight.dtype)
    return grad_input, grad_weight, grad_bias, grad_gamma, grad_beta


def eval_op_backward(convolve, activation_gradient, convolve_backward, weight, bias, bn_weight, bn_bias, output_mask,
                  affine_mask, transposed: bool = False, groups: int = 1, result_dtype: torch.dtype | None = None):
    """The eval backward op's five results (grad_input, grad_weight, grad_bias, grad_bn_weight, grad_bn_bias), from a
    backend's convolution of the input `convolve(weight, bias)`, the activation's gradient at a pre-activation
    `activation_gradient(pre)` (it may overwrite pre) and the convolution's backward `convolve_backward(grad,
    weight, mask)` (aten::convolution_backward's three results). Differentiable where those are."""
    pre, xhat = eval_pre_activation(convolve, weight, bias, bn_weight, bn_bias, transposed, groups,
                                    wants_xhat=bn_weight is not None and bool(affine_mask[0]))
    grad_pre = activation_gradient(pre)
    grad, conv_weight = _conv_backward_arguments(grad_pre, weight, bias, bn_weight, bn_bias, transposed, groups)
    return _eval_gradients(convolve_backward(grad, conv_weight, _conv_gradient_mask(output_mask)), grad_pre, xhat,
                           weight, bn_weight, bn_bias, output_mask, affine_mask, transposed, groups, result_dtype)
