"""StyleGAN2's fused bias + LeakyReLU (with bias_act's relu and clamp modes) written with torch tensor ops only, so
it runs on any device (the "torch" backend; the protocol of `ascend_acts.backends`): the reference's rounding
order (this folder's reference.py), computed in float32 (float64 stays float64) and rounded once. The values and
grad_input are the reference's bit for bit; grad_bias is accumulated in the compute dtype (per (n, c) row, then
over n), where the reference accumulates in float64.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...numerics.dtypes import compute_dtype
from ...numerics.layout import channel_view


def _pre_activation(values: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """values + bias over dim 1, as a new compute-dtype tensor."""
    pre = values.to(compute_dtype(values.dtype), copy=True)
    if bias is not None:
        pre += channel_view(bias.to(pre.dtype), values.dim())
    return pre


def _activated(pre: torch.Tensor, negative_slope: float, scale: float, relu: bool) -> torch.Tensor:
    return (F.relu(pre) if relu else F.leaky_relu(pre, negative_slope)) * scale


def fused_bias_leaky_relu(input, bias, negative_slope, scale, clamp=-1.0, relu=False):
    result = _activated(_pre_activation(input, bias), negative_slope, scale, relu)
    if clamp >= 0:
        result = result.clamp_(-clamp, clamp)
    return result.to(input.dtype)


def fused_bias_leaky_relu_backward(grad_output, saved, bias, negative_slope, scale, saved_is_result, clamp=-1.0,
                                   relu=False):
    pre = _pre_activation(saved, None if saved_is_result else bias)
    passed = grad_output.to(pre.dtype)
    if clamp >= 0:  # torch.clamp's gradient: the bounds pass, outside (and NaN) +0.0
        unclamped = _activated(pre, negative_slope, scale, relu)
        passed = torch.where((unclamped >= -clamp) & (unclamped <= clamp), passed, 0.0)
    scaled = passed * scale
    if relu:  # threshold_backward: +0.0 where pre <= 0, NaN passes
        grad = torch.where(pre <= 0, 0.0, scaled)
    else:
        grad = torch.where(pre > 0, scaled, scaled * negative_slope)
    grad_bias = grad.reshape(*saved.shape[:2], math.prod(saved.shape[2:])).sum(2).sum(0)
    return grad.to(saved.dtype), grad_bias.to(saved.dtype)
