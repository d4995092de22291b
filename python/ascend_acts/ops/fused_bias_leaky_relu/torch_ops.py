"""StyleGAN2's fused bias + LeakyReLU written with torch tensor ops only, so it runs on any device (the "torch"
backend; the protocol of `ascend_acts.backends`): the reference's rounding order (this folder's reference.py),
computed in float32 (float64 stays float64) and rounded once. The values and grad_input are the reference's bit
for bit; grad_bias is accumulated in the compute dtype (per (n, c) row, then over n), where the reference
accumulates in float64.
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


def fused_bias_leaky_relu(input, bias, negative_slope, scale):
    return (F.leaky_relu(_pre_activation(input, bias), negative_slope) * scale).to(input.dtype)


def fused_bias_leaky_relu_backward(grad_output, saved, bias, negative_slope, scale, saved_is_result):
    pre = _pre_activation(saved, None if saved_is_result else bias)
    scaled = grad_output.to(pre.dtype) * scale
    grad = torch.where(pre > 0, scaled, scaled * negative_slope)
    grad_bias = grad.reshape(*saved.shape[:2], math.prod(saved.shape[2:])).sum(2).sum(0)
    return grad.to(saved.dtype), grad_bias.to(saved.dtype)
