"""rosinality's `op.conv2d_gradfix`, on torch's own convolution (any device, no compiled op).

`conv2d` and `conv_transpose2d` take F.conv2d's / F.conv_transpose2d's arguments and compute exactly what they
compute, first and second derivatives included. `no_weight_gradients()` is a context manager: while it is active,
the backward of these two functions does not compute the gradient with respect to the weight (the weight gets
none from that backward), as rosinality's op does. The flag is read when the backward runs, not when the forward
ran, which is how train.py uses it: `real_pred = discriminator(real_img)` outside, then
`autograd.grad(real_pred.sum(), real_img, create_graph=True)` inside, and the R1 penalty's `.backward()` outside,
which still gives the weights their gradient through the input gradient's dependence on them (the double backward
is not affected). The gradients of input and bias are always computed.

Module attributes, as in rosinality's module: `enabled` (True; set it False to call F.conv2d /
F.conv_transpose2d directly, which ignores the flag, as rosinality's fallback does off CUDA) and
`weight_gradients_disabled` (the flag; `no_weight_gradients` sets and restores it).
"""

from __future__ import annotations

import contextlib
import sys

import torch
import torch.nn.functional as F

__all__ = ["conv2d", "conv_transpose2d", "enabled", "no_weight_gradients", "weight_gradients_disabled"]

enabled = True
weight_gradients_disabled = False


@contextlib.contextmanager
def no_weight_gradients(disable: bool = True):
    """While active (with `disable`), backward passes through `conv2d` / `conv_transpose2d` skip the weight
    gradient. Restores the previous state on exit; `disable=False` leaves it unchanged (NVlabs' signature)."""
    global weight_gradients_disabled
    old = weight_gradients_disabled
    if disable:
        weight_gradients_disabled = True
    try:
        yield
    finally:
        weight_gradients_disabled = old


class _Convolution(torch.autograd.Function):
    """torch.convolution whose backward is aten's convolution_backward (itself differentiable: double backward
    works) with the weight gradient left out while `weight_gradients_disabled`."""

    @staticmethod
    def forward(ctx, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
        ctx.save_for_backward(input, weight)
        ctx.bias_sizes = None if bias is None else list(bias.shape)
        ctx.params = (list(stride), list(padding), list(dilation), transposed, list(output_padding), groups)
        return torch.convolution(input, weight, bias, *ctx.params)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        need_input, need_weight, need_bias = ctx.needs_input_grad[:3]
        need_weight = need_weight and not weight_gradients_disabled
        grads = (None, None, None)
        if need_input or need_weight or need_bias:
            grads = torch.ops.aten.convolution_backward(grad_output, input, weight, ctx.bias_sizes, *ctx.params,
                                                        [need_input, need_weight, need_bias])
        masked = (g if need else None for g, need in zip(grads, (need_input, need_weight, need_bias)))
        return (*masked, None, None, None, None, None, None)


def _pair(value, name: str) -> tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    value = tuple(value)
    if len(value) == 1:
        value = value * 2
    if len(value) != 2:
        raise ValueError(f"conv2d_gradfix: {name} must be an int or a pair, got {value!r}")
    return value


def _apply(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    device_type = input.device.type
    if torch.is_autocast_enabled(device_type):  # the casts autocast applies to a convolution, then none inside
        dtype = torch.get_autocast_dtype(device_type)
        input, weight, bias = (t.to(dtype) if t is not None and t.is_floating_point() else t
                               for t in (input, weight, bias))
        with torch.autocast(device_type, enabled=False):
            return _Convolution.apply(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                                      groups)
    return _Convolution.apply(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


def _use_function(input, weight, padding) -> bool:
    """The weight-gradient switch matters only when a weight gradient could be asked for."""
    return (enabled and torch.is_grad_enabled() and isinstance(weight, torch.Tensor)
            and weight.requires_grad and isinstance(input, torch.Tensor) and input.ndim == 4
            and not isinstance(padding, str))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """F.conv2d(input, weight, bias, stride, padding, dilation, groups), honouring `no_weight_gradients`."""
    if not _use_function(input, weight, padding):
        return F.conv2d(input, weight, bias, stride, padding, dilation, groups)
    return _apply(input, weight, bias, _pair(stride, "stride"), _pair(padding, "padding"),
                  _pair(dilation, "dilation"), False, (0, 0), groups)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """F.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation), honouring
    `no_weight_gradients`."""
    if not _use_function(input, weight, padding):
        return F.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)
    return _apply(input, weight, bias, _pair(stride, "stride"), _pair(padding, "padding"),
                  _pair(dilation, "dilation"), True, _pair(output_padding, "output_padding"), groups)


# `sys.modules["op"] = ascend_acts.compat.rosinality` then `import op.conv2d_gradfix` (or `from op.conv2d_gradfix
# import ...`) would execute this file a second time as a new module "op.conv2d_gradfix" with flags of its own;
# such a copy puts the installed module in its place instead (the import system returns what sys.modules holds).
_CANONICAL = "ascend_acts.compat.rosinality.conv2d_gradfix"
if __name__ != _CANONICAL and _CANONICAL in sys.modules:
    sys.modules[__name__] = sys.modules[_CANONICAL]
