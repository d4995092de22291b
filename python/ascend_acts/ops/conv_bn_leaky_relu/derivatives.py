"""The fused Conv+BN+LeakyReLU ops' layout and derivatives in differentiable torch ops (any device, any backend).

- the layout of the ops' 4-D results (channels_last as torch's convolution chooses it);
- the backward ops as differentiable functions of the forward's inputs (double backward, forward-over-reverse);
- the forward ops' forward-mode derivatives (jvp).
"""

from __future__ import annotations

import torch
from torch._prims_common import suggest_memory_format

from ...numerics.dtypes import compute_dtype
from ...numerics.layout import channel_view as channel
from .folding import affine_fold, eval_op_backward, scale_output_channels
from .torch_ops import (
    ALL_GRADIENTS,
    activation_gradient,
    conv2d,
    conv2d_backward,
    normalised_gradient,
    pre_activation,
    statistic_view,
    statistics,
    statistics_mean,
)


def memory_format(input: torch.Tensor, weight: torch.Tensor, padding_mode: str = "zeros") -> torch.memory_format:
    """The layout of the ops' 4-D results: channels_last when the input or the weight is, as torch's CPU
    convolution chooses (its output and both gradients follow; BatchNorm and LeakyReLU keep it). The convolution
    sees the padded input: F.pad's circular mode makes it contiguous whatever the input's layout."""
    if (channels_last(input) and padding_mode != "circular") or channels_last(weight):
        return torch.channels_last
    return torch.contiguous_format


def input_gradient_format(input: torch.Tensor, weight: torch.Tensor,
                          padding_mode: str = "zeros") -> torch.memory_format:
    """The layout of the input's gradient: the convolution's (memory_format), except through F.pad's modes as torch's
    pad backward gives it: the input's own layout for reflect and replicate, contiguous for circular."""
    if padding_mode == "zeros":
        return memory_format(input, weight)
    if padding_mode != "circular" and channels_last(input):
        return torch.channels_last
    return torch.contiguous_format


def channels_last(t: torch.Tensor) -> bool:
    return t.dim() == 4 and suggest_memory_format(t) == torch.channels_last


def in_format(t: torch.Tensor, layout: torch.memory_format) -> torch.Tensor:
    return t.contiguous(memory_format=layout)


def input_gradient_in_format(grad_input: torch.Tensor, layout: torch.memory_format) -> torch.Tensor:
    """The input's gradient in `layout` with the strides torch's convolution backward allocates it with (torch.empty's
    for the format): where a dim has size 1 a tensor is contiguous in both formats, and .contiguous() keeps the strides
    it has ((N, C, 1, 1) from a permuted input: torch's (C, 1, C, C), not (C, 1, 1, 1)). Autograd's accumulation into
    the input's .grad keeps them as they are. Only tensors with a size-1 dim can differ: nothing else is checked."""
    grad_input = grad_input.contiguous(memory_format=layout)
    if layout == torch.channels_last and grad_input.dim() == 4 and 1 in grad_input.shape:
        shape = grad_input.shape
        if grad_input.stride() != (shape[1] * shape[2] * shape[3], 1, shape[3] * shape[1], shape[1]):
            return torch.empty_like(grad_input, memory_format=layout).copy_(grad_input)
    return grad_input


# --- the backward ops as differentiable functions of the forward's inputs -----------------------
# What the ops' autograd runs when a backward op is itself differentiated (double backward, forward-over-
# reverse, torch.func): everything is recomputed from input, weight and the BN parameters, so the
# gradients through the batch statistics and through the kept output (both functions of the input) are
# included, and torch differentiates it to any order. Computed in float32 (float64 stays float64).
def conv_bias_shifts_statistics(norm_groups: int, channels: int) -> bool:
    """Whether a per-channel conv bias changes x-hat: with groups of several channels (GroupNorm); it cancels in
    per-channel (BatchNorm) and per-instance (InstanceNorm) statistics."""
    return 0 < norm_groups < channels


NO_ACTIVATION_SLOPE = 1.0  # what nn's fused runs without an activation pass (nn.fusion.IDENTITY_SLOPE): z * 1 = z


def _recorded_activation_gradient(z, grad, negative_slope, relu):
    """activation_gradient as torch's own backward ops compute it (threshold_backward, leaky_relu_backward), whose
    derivative in z is a zero tensor, not none: differentiated again (an R1 or WGAN-GP penalty), everything z depends
    on only through the activation's branch (the norm's bias; the conv bias in eval) gets a zero gradient, as torch
    gives it, so an optimizer's step (momentum, Adam's state) updates it as torch's. Slope 1 is no activation (nn's
    fused runs without one): torch's composite has no activation node there, and those parameters no gradient."""
    if relu:
        # from the ReLU's result, as torch's relu backward: its zero derivative then flows back through the relu to z,
        # so a third derivative finds the input used (zeros, torch's) even where z's graph alone does not reach it
        return torch.ops.aten.threshold_backward(grad, torch.relu(z), 0)
    if negative_slope == NO_ACTIVATION_SLOPE:
        return grad
    return torch.ops.aten.leaky_relu_backward(grad, z, negative_slope, False)


def conv_bn_leaky_relu_train_backward_differentiable(grad_out, saved, saved_is_result, input, weight, bn_weight,
                                                     bn_bias, mean, invstd, stride, padding, dilation, groups,
                                                     negative_slope, relu=False, transposed=False,
                                                     output_padding=(0, 0), norm_groups=0, bias=None,
                                                     padding_mode="zeros", output_mask=ALL_GRADIENTS):
    c = compute_dtype(input.dtype)
    x, w = input.to(c), weight.to(c)
    geometry = (stride, padding, dilation, groups, transposed, output_padding, padding_mode)
    shifts = bias is not None and conv_bias_shifts_statistics(norm_groups, bn_weight.shape[0])
    y = conv2d(x, w, bias.to(c) if shifts else None, *geometry)
    batch_mean, variance = statistics(y, norm_groups)
    if bias is not None and not shifts:
        # cancelled by per-channel and per-instance statistics, the conv bias still has a gradient (torch's composite
        # reaches it through the conv output, zero up to rounding): its exact one, zero, changing no value
        batch_mean = batch_mean + bias.to(c) * 0
    # eps is no argument of the backward; the saved invstd carries it (variance + eps = invstd^-2): this has the
    # saved value and the derivatives of (variance + eps)^(-1/2)
    invstd = torch.rsqrt(variance - variance.detach() + invstd.detach().to(c).pow(-2))
    xhat = (y - statistic_view(batch_mean, y, norm_groups)) * statistic_view(invstd, y, norm_groups)
    gamma, beta = channel(bn_weight.to(c)), channel(bn_bias.to(c))
    grad = grad_out.to(c)
    z = pre_activation(y, statistic_view(batch_mean, y, norm_groups), statistic_view(invstd, y, norm_groups), gamma,
                       beta)
    dz = _recorded_activation_gradient(z, grad, negative_slope, relu)
    grad_gamma, grad_beta = (dz * xhat).sum((0, 2, 3)), dz.sum((0, 2, 3))
    dy = normalised_gradient(dz * gamma, xhat, invstd, norm_groups)
    return (*_conv_gradients(dy, x, w, geometry, input, weight, weight, output_mask),
            grad_gamma.to(bn_weight.dtype), grad_beta.to(bn_bias.dtype))


def conv_bn_leaky_relu_eval_backward_differentiable(grad_out, input, weight, bias, stride, padding, dilation, groups,
                                                 negative_slope, relu=False, transposed=False, output_padding=(0, 0),
                                                 padding_mode="zeros", output_mask=ALL_GRADIENTS, bn_weight=None,
                                                 bn_bias=None, affine_mask=(True, True)):
    c = compute_dtype(input.dtype)
    x, w, b = input.to(c), weight.to(c), bias.to(c)
    geometry = (stride, padding, dilation, groups, transposed, output_padding, padding_mode)
    grad_input, grad_weight, grad_bias, *affine = eval_op_backward(
        lambda w, b: conv2d(x, w, b, *geometry),
        lambda pre: _recorded_activation_gradient(pre, grad_out.to(c), negative_slope, relu),
        lambda grad, w, mask: conv2d_backward(grad, x, w, *geometry, mask),
        w, b, bn_weight, bn_bias, output_mask, affine_mask, transposed, groups, weight.dtype)
    return (*_conv_gradients_in_formats(grad_input, grad_weight, grad_bias, input, weight, bias, padding_mode,
                                        output_mask), *affine)


def _conv_gradients(grad, x, w, geometry, input, weight, bias_like, output_mask):
    """The conv gradients of the backward ops (grad_input, grad_weight, grad_bias) in the dtypes and layouts of
    input, weight and `bias_like`; those `output_mask` does not ask for empty, as the backends give them."""
    return _conv_gradients_in_formats(*conv2d_backward(grad, x, w, *geometry, output_mask), input, weight, bias_like,
                                      geometry[-1], output_mask)


def _conv_gradients_in_formats(grad_input, grad_weight, grad_bias, input, weight, bias_like, padding_mode,
                               output_mask):
    wants_input, wants_weight, _ = output_mask
    return (input_gradient_in_format(grad_input.to(input.dtype), input_gradient_format(input, weight, padding_mode))
            if wants_input else grad_input.to(input.dtype),
            in_format(grad_weight.to(weight.dtype), memory_format(input, weight, padding_mode))
            if wants_weight else grad_weight.to(weight.dtype),
            grad_bias.to(bias_like.dtype))


# --- forward-mode derivatives (jvp) of the forward ops ----------------------------------------
def _tangent_conv(input, weight, input_tangent, weight_tangent, geometry):
    """d conv(input, weight) along the tangents (None = 0), or None when both are None; `geometry` is conv2d's
    arguments after the bias (a pad of any mode is linear: the tangent's pad is the pad's tangent)."""
    parts = []
    if input_tangent is not None:
        parts.append(conv2d(input_tangent, weight, None, *geometry))
    if weight_tangent is not None:
        parts.append(conv2d(input, weight_tangent, None, *geometry))
    return sum(parts[1:], parts[0]) if parts else None


def _as(t, dtype):
    return None if t is None else t.to(dtype)


def conv_bn_leaky_relu_train_jvp(input, weight, bn_weight, bn_bias, invstd, tangents, stride, padding,
                                 dilation, groups, negative_slope, like, relu=False, transposed=False,
                                 output_padding=(0, 0), norm_groups=0, bias=None, padding_mode="zeros"):
    """Tangent of the training output along tangents (input, weight, bias, bn_weight, bn_bias); the conv bias and
    its tangent cancel in the statistics unless they are over groups of several channels (then `bias` is needed)."""
    c = compute_dtype(input.dtype)
    input_t, weight_t, bias_t, gamma_t, beta_t = (_as(t, c) for t in tangents)
    x, w = input.to(c), weight.to(c)
    geometry = (stride, padding, dilation, groups, transposed, output_padding, padding_mode)
    shifts = conv_bias_shifts_statistics(norm_groups, bn_weight.shape[0])
    y = conv2d(x, w, bias.to(c) if shifts and bias is not None else None, *geometry)  # so not `mean` but y's own
    # the saved invstd is detached: a tangent differentiated again (reverse-over-forward) needs its dependence on the
    # inputs too, which y's own variance carries; adding that zero keeps the saved value bit for bit
    variance = statistics(y, norm_groups)[1]
    reconnected = torch.rsqrt(variance - variance.detach() + invstd.detach().to(c).pow(-2))
    invstd = invstd.to(c) + (reconnected - reconnected.detach())
    mean_view, invstd_view = statistics_mean(y, norm_groups), statistic_view(invstd, y, norm_groups)
    xhat = (y - mean_view) * invstd_view
    gamma, beta = channel(bn_weight.to(c)), channel(bn_bias.to(c))
    z_t = torch.zeros_like(xhat)
    y_t = _tangent_conv(x, w, input_t, weight_t, geometry)
    if shifts and bias_t is not None:
        y_t = channel(bias_t).expand_as(y) if y_t is None else y_t + channel(bias_t)
    if y_t is not None:
        z_t = z_t + normalised_gradient(y_t, xhat, invstd, norm_groups) * gamma
    if gamma_t is not None:
        z_t = z_t + xhat * channel(gamma_t)
    if beta_t is not None:
        z_t = z_t + channel(beta_t)
    out_t = activation_gradient(pre_activation(y, mean_view, invstd_view, gamma, beta), z_t, negative_slope, relu)
    return in_format(out_t.to(like.dtype), memory_format(input, weight, padding_mode))


def conv_bn_leaky_relu_eval_jvp(input, weight, bias, tangents, stride, padding, dilation, groups, negative_slope, like,
                                relu=False, transposed=False, output_padding=(0, 0), padding_mode="zeros",
                                bn_weight=None, bn_bias=None, affine_tangents=(None, None)):
    """Tangent of the eval output along tangents (input, weight, bias) and affine_tangents (bn_weight, bn_bias)."""
    c = compute_dtype(input.dtype)
    input_t, weight_t, bias_t = (_as(t, c) for t in tangents)
    gamma_t, beta_t = (_as(t, c) for t in affine_tangents)
    x, w, b = input.to(c), weight.to(c), bias.to(c)
    geometry = (stride, padding, dilation, groups, transposed, output_padding, padding_mode)
    folded_weight, folded_bias = affine_fold(w, b, bn_weight, bn_bias, transposed, groups)
    pre = conv2d(x, folded_weight, folded_bias, *geometry)
    # the folded weight's and bias's tangents: d(w * gamma) = dw * gamma + w * dgamma, d(b * gamma + beta) likewise
    gamma = None if bn_weight is None else bn_weight.to(c)
    scaled = (lambda t: t) if gamma is None else (lambda t: scale_output_channels(t, gamma, transposed, groups))
    folded_weight_t = None if weight_t is None else scaled(weight_t)
    folded_bias_t = None if bias_t is None else bias_t if gamma is None else bias_t * gamma
    if gamma_t is not None:
        weight_part = scale_output_channels(w, gamma_t, transposed, groups)
        folded_weight_t = weight_part if folded_weight_t is None else folded_weight_t + weight_part
        folded_bias_t = b * gamma_t if folded_bias_t is None else folded_bias_t + b * gamma_t
    if beta_t is not None:
        folded_bias_t = beta_t if folded_bias_t is None else folded_bias_t + beta_t
    pre_t = _tangent_conv(x, folded_weight, input_t, folded_weight_t, geometry)
    pre_t = torch.zeros_like(pre) if pre_t is None else pre_t
    if folded_bias_t is not None:
        pre_t = pre_t + channel(folded_bias_t)
    out_t = activation_gradient(pre, pre_t, negative_slope, relu)
    return in_format(out_t.to(like.dtype), memory_format(input, weight, padding_mode))
