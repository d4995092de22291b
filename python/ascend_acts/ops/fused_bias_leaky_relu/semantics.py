"""ascend_acts::fused_bias_leaky_relu and fused_bias_leaky_relu_backward (StyleGAN2's fused bias + LeakyReLU).

y = leaky_relu(x + bias[c], negative_slope) * scale, with c the index along dimension 1 of an input of rank >= 2;
NVlabs bias_act's modes: `relu=True` runs torch.relu in place of the LeakyReLU (negative_slope unused: +0.0 for
x + bias < 0, -0.0 and NaN kept, where the LeakyReLU with slope 0 gives -0.0 for a negative and -inf * 0 = NaN), and
`clamp` >= 0 clamps y to [-clamp, clamp] after the scale (a negative clamp, the default -1, is none).
With negative_slope >= 0 (or relu), scale >= 1 and no clamp the output has the pre-activation's sign (y > 0 <=>
x + bias > 0), so autograd keeps the output only; otherwise it keeps the input and the bias (never a
pre-activation tensor): with 0 < scale < 1 a tiny positive pre-activation times scale can round to 0, whose
gradient would take the slope; with a clamp, y = clamp does not tell the bound (gradient passes, as torch.clamp's)
from beyond it (zero), so the backward recomputes the unclamped output from the input. The input is the least
kept: the bias is a parameter, alive anyway, and a boundary mask would be another output and launch.
The backward op returns grad_input and grad_bias (the sum of grad_input over every dim but 1), always both.
"""

from __future__ import annotations

import torch

from ...numerics.layout import channel_view
from .._library import OpFunction, autograd_function, check_floating, per_sample_vmap, run_below_autograd
from .._semantics import declare, like_argument

ops = torch.ops.ascend_acts
FORWARD, BACKWARD = "fused_bias_leaky_relu", "fused_bias_leaky_relu_backward"


def saves_result(negative_slope: float, scale: float, clamp: float = -1.0, relu: bool = False) -> bool:
    """Whether the output alone tells the gradient: y = t * scale (t > 0) cannot round to 0 when scale >= 1,
    whatever the dtype; y <= 0 for t <= 0 when the slope is >= 0 (or relu); and no clamp (see above)."""
    return (relu or negative_slope >= 0) and scale >= 1 and not clamp >= 0


# --- what the ops accept (checked by the device and fake kernels before anything runs) -------------------
def check_input_and_bias(op: str, input: torch.Tensor, bias: torch.Tensor | None, input_name: str = "input") -> None:
    check_floating(op, input_name, input)
    if input.dim() < 2:
        raise ValueError(f"ascend_acts::{op}: '{input_name}' must have rank >= 2 (N, C, ...), got "
                         f"{tuple(input.shape)}")
    if bias is None:
        return
    if bias.shape != (input.shape[1],):
        raise RuntimeError(f"ascend_acts::{op}: 'bias' must have shape ({input.shape[1]},) (dimension 1 of "
                           f"'{input_name}'), got {tuple(bias.shape)}")
    if bias.dtype != input.dtype:
        raise RuntimeError(f"ascend_acts::{op}: 'bias' must have the input's dtype {input.dtype}, got {bias.dtype} "
                        "(mixed precision: use torch.autocast)")
    if bias.device != input.device:
        raise RuntimeError(f"ascend_acts::{op}: 'bias' is on {bias.device}, '{input_name}' on {input.device}")


def _check_clamp(op: str, clamp: float) -> None:
    if clamp != clamp:
        raise ValueError(f"ascend_acts::{op}: 'clamp' must be a number >= 0 (or negative for no clamp), got nan")


def _check(input, bias, negative_slope, scale, clamp=-1.0, relu=False):
    check_input_and_bias(FORWARD, input, bias)
    _check_clamp(FORWARD, clamp)


def _check_backward(grad_output, saved, bias, negative_slope, scale, saved_is_result, clamp=-1.0, relu=False):
    check_input_and_bias(BACKWARD, saved, bias, "saved")
    _check_clamp(BACKWARD, clamp)
    if grad_output.shape != saved.shape or grad_output.dtype != saved.dtype or grad_output.device != saved.device:
        raise RuntimeError(f"ascend_acts::{BACKWARD}: 'grad_output' ({tuple(grad_output.shape)}, {grad_output.dtype},"
                           f" {grad_output.device}) must have the shape, dtype and device of 'saved' "
                           f"({tuple(saved.shape)}, {saved.dtype}, {saved.device})")
    if saved_is_result and not saves_result(negative_slope, scale, relu=relu):
        raise RuntimeError(f"ascend_acts::{BACKWARD}: saved_is_result=True needs negative_slope >= 0 and scale >= 1 "
                           f"(only then does the output always have the pre-activation's sign), got negative_slope="
                           f"{negative_slope}, scale={scale}; save the input instead")
    if saved_is_result and clamp >= 0:
        raise RuntimeError(f"ascend_acts::{BACKWARD}: saved_is_result=True with clamp={clamp}: a clamped output does "
                           "not tell the bound (gradient passes) from beyond it (zero); save the input instead")


def _backward_layout(args, results):
    """grad_input in the layout of `saved` (as torch's elementwise backward); grad_bias is (C,)."""
    grad_input, grad_bias = results
    return like_argument(1)(args, (grad_input,))[0], grad_bias


# --- fake kernels ------------------------------------------------------------------------------
def _forward_fake(input, bias, negative_slope, scale, clamp=-1.0, relu=False):
    _check(input, bias, negative_slope, scale, clamp, relu)
    return torch.empty_like(input)


def _backward_fake(grad_output, saved, bias, negative_slope, scale, saved_is_result, clamp=-1.0, relu=False):
    _check_backward(grad_output, saved, bias, negative_slope, scale, saved_is_result, clamp, relu)
    return torch.empty_like(saved), saved.new_empty(saved.shape[1])


# --- autograd (reverse and forward mode) ------------------------------------------------------
# y is scale * (slope or 1 by the pre-activation's sign) * (x + bias): its derivative in x and bias is the
# mask the backward op applies, so the backward op is also the jvp (of the tangent x_t + bias_t). The backward
# op is linear in grad_output and piecewise constant in `saved` and `bias` (derivative 0).
def _gradients(grad, saved, bias, ctx):
    return ops.fused_bias_leaky_relu_backward(grad, saved, bias, ctx.negative_slope, ctx.scale, ctx.saved_is_result,
                                              ctx.clamp, ctx.relu)


def _per_element(tensor: torch.Tensor | None, per_channel: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """tensor + per_channel broadcast over dim 1 (either may be None: zeros), like's shape."""
    if per_channel is None:
        return tensor if tensor is not None else torch.zeros_like(like)
    spread = channel_view(per_channel, like.dim())
    return tensor + spread if tensor is not None else spread.expand_as(like).contiguous()


def _with_modes(inputs: tuple, positional: int) -> tuple:
    """The op's arguments with the defaults of the trailing clamp and relu filled in (the dispatcher omits
    trailing arguments equal to their defaults)."""
    return (*inputs, *(-1.0, False)[len(inputs) - positional:])


class _FusedBiasLeakyRelu(OpFunction):
    @staticmethod
    def forward(input, bias, negative_slope, scale, clamp=-1.0, relu=False):
        return run_below_autograd(ops.fused_bias_leaky_relu, input, bias, negative_slope, scale, clamp, relu)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, bias, ctx.negative_slope, ctx.scale, ctx.clamp, ctx.relu = _with_modes(inputs, 4)
        ctx.has_bias = bias is not None
        ctx.saved_is_result = saves_result(ctx.negative_slope, ctx.scale, ctx.clamp, ctx.relu)
        saved = (output, None) if ctx.saved_is_result else (input, bias)
        ctx.save_for_backward(*saved)
        ctx.save_for_forward(*saved)

    @staticmethod
    def backward(ctx, grad_output):
        saved, bias = ctx.saved_tensors
        grad_input, grad_bias = _gradients(grad_output, saved, bias, ctx)
        return grad_input, grad_bias if ctx.has_bias else None, None, None, None, None

    @staticmethod
    def jvp(ctx, input_tangent, bias_tangent, *_attributes):
        saved, bias = ctx.saved_tensors
        return _gradients(_per_element(input_tangent, bias_tangent, saved), saved, bias, ctx)[0]


class _FusedBiasLeakyReluBackward(OpFunction):
    @staticmethod
    def forward(grad_output, saved, bias, negative_slope, scale, saved_is_result, clamp=-1.0, relu=False):
        return run_below_autograd(ops.fused_bias_leaky_relu_backward, grad_output, saved, bias, negative_slope, scale,
                                  saved_is_result, clamp, relu)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, saved, bias, ctx.negative_slope, ctx.scale, ctx.saved_is_result, ctx.clamp, ctx.relu = _with_modes(inputs, 6)
        ctx.save_for_backward(saved, bias)
        ctx.save_for_forward(saved, bias)

    @staticmethod
    def backward(ctx, grad_grad_input, grad_grad_bias):
        # grad_bias = sum of grad_input over dims != 1, so its cotangent joins grad_input's per channel
        saved, bias = ctx.saved_tensors
        cotangent = _per_element(grad_grad_input, grad_grad_bias, saved)
        # piecewise constant in saved and bias: zero gradients (as torch's leaky_relu_backward gives), so that
        # autograd.grad(..., bias) finds them used; the saved one an expanded zero, no memory
        zero_saved = saved.new_zeros(()).expand_as(saved) if ctx.needs_input_grad[1] else None
        zero_bias = torch.zeros_like(bias) if bias is not None and ctx.needs_input_grad[2] else None
        return _gradients(cotangent, saved, bias, ctx)[0], zero_saved, zero_bias, None, None, None, None, None

    @staticmethod
    def jvp(ctx, grad_output_tangent, *_):
        saved, bias = ctx.saved_tensors
        return _gradients(grad_output_tangent, saved, bias, ctx)


# --- autocast: the bias takes the input's dtype (as mmcv's fused_bias_leakyrelu casts it, and as autocast casts
# a conv's or linear's bias to the dtype the op runs in); the input keeps its own dtype (an elementwise op, which
# autocast does not cast). float64 tensors are left alone, as autocast leaves them -----------------------------
def autocast_casts_bias(input: torch.Tensor, bias: torch.Tensor | None, device_type: str) -> bool:
    return (bias is not None and bias.is_floating_point() and bias.dtype != input.dtype
            and input.dtype in (torch.float16, torch.bfloat16, torch.float32)
            and bias.dtype != torch.float64 and bias.device.type == device_type)


def _cast_bias(args, dtype, device_type):
    input, bias, *rest = args
    return (input, bias.to(input.dtype) if autocast_casts_bias(input, bias, device_type) else bias, *rest)


declare(FORWARD, fake=_forward_fake, check=_check, autograd=autograd_function(_FusedBiasLeakyRelu),
        layout=like_argument(0), autocast=_cast_bias, vmap=per_sample_vmap(FORWARD))
declare(BACKWARD, fake=_backward_fake, check=_check_backward, autograd=autograd_function(_FusedBiasLeakyReluBackward),
        layout=_backward_layout, vmap=per_sample_vmap(BACKWARD))
