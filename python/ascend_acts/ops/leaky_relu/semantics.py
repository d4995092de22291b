"""ascend_acts::leaky_relu, leaky_relu_ and leaky_relu_backward.

Backward from the output when negative_slope >= 0 (x > 0 <=> y > 0), so the input need not be kept.
"""

from __future__ import annotations

import torch

from .._library import (
    OpFunction,
    autograd_function,
    check_backward_operands,
    check_floating,
    check_result_based_backward,
    elementwise_vmap,
    run_below_autograd,
)
from .._semantics import declare, like_argument
from .._validation import check_number

ops = torch.ops.ascend_acts


def saves_result(negative_slope: float) -> bool:
    return negative_slope >= 0


def _check(x, negative_slope):
    check_floating("leaky_relu", "self", x)
    check_number("leaky_relu", "negative_slope", negative_slope, x)  # a slope beyond float32's range: aten's error


def _check_backward(grad_output, saved, negative_slope, saved_is_result):
    check_backward_operands("leaky_relu_backward", grad_output, saved)
    check_number("leaky_relu_backward", "negative_slope", negative_slope, saved)
    check_result_based_backward("leakyReLu", not negative_slope >= 0, saved_is_result)  # NaN too, as torch


# --- fake kernels (torch.compile, meta): the device kernels' checks, so that both accept the same calls -------
def _leaky_relu_fake(x, negative_slope):
    _check(x, negative_slope)
    return torch.empty_like(x)


def _leaky_relu_backward_fake(grad_output, saved, negative_slope, saved_is_result):
    _check_backward(grad_output, saved, negative_slope, saved_is_result)
    return torch.empty_like(saved)


# --- autograd (reverse and forward mode) ------------------------------------------------------
# The derivative of leaky_relu is the 0/1-or-slope mask leaky_relu_backward applies, so that op is the
# jvp too; leaky_relu_backward is linear in grad_output and piecewise constant in `saved` (derivative 0).
class _LeakyRelu(OpFunction):
    @staticmethod
    def forward(x, negative_slope):
        return run_below_autograd(ops.leaky_relu, x, negative_slope)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, ctx.negative_slope = inputs
        ctx.saved_is_result = saves_result(ctx.negative_slope)
        saved = output if ctx.saved_is_result else x
        ctx.save_for_backward(saved)
        ctx.save_for_forward(saved)

    @staticmethod
    def backward(ctx, grad_output):
        (saved,) = ctx.saved_tensors
        return ops.leaky_relu_backward(grad_output, saved, ctx.negative_slope, ctx.saved_is_result), None

    @staticmethod
    def jvp(ctx, x_tangent, _):
        (saved,) = ctx.saved_tensors
        return ops.leaky_relu_backward(x_tangent, saved, ctx.negative_slope, ctx.saved_is_result)


class _LeakyReluInplace(OpFunction):
    @staticmethod
    def forward(x, negative_slope):
        run_below_autograd(ops.leaky_relu_, x, negative_slope)
        return x

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, ctx.negative_slope = inputs
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)  # the result: torch, too, fails in backward for negative slopes
        ctx.save_for_forward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return ops.leaky_relu_backward(grad_output, result, ctx.negative_slope, True), None

    @staticmethod
    def jvp(ctx, x_tangent, _):
        (result,) = ctx.saved_tensors
        return x_tangent.copy_(ops.leaky_relu_backward(x_tangent, result, ctx.negative_slope, True))


class _LeakyReluBackward(OpFunction):
    @staticmethod
    def forward(grad_output, saved, negative_slope, saved_is_result):
        return run_below_autograd(ops.leaky_relu_backward, grad_output, saved, negative_slope, saved_is_result)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, saved, ctx.negative_slope, ctx.saved_is_result = inputs
        ctx.save_for_backward(saved)
        ctx.save_for_forward(saved)

    @staticmethod
    def backward(ctx, grad_grad_input):
        (saved,) = ctx.saved_tensors
        grad = ops.leaky_relu_backward(grad_grad_input, saved, ctx.negative_slope, ctx.saved_is_result)
        return grad, None, None, None

    @staticmethod
    def jvp(ctx, grad_output_tangent, _saved_tangent, _slope, _flag):
        (saved,) = ctx.saved_tensors
        return ops.leaky_relu_backward(grad_output_tangent, saved, ctx.negative_slope, ctx.saved_is_result)


declare("leaky_relu", fake=_leaky_relu_fake, check=_check, autograd=autograd_function(_LeakyRelu),
        layout=like_argument(0), vmap=elementwise_vmap("leaky_relu", 1))
declare("leaky_relu_", check=_check, autograd=autograd_function(_LeakyReluInplace))
declare("leaky_relu_backward", fake=_leaky_relu_backward_fake, check=_check_backward,
        autograd=autograd_function(_LeakyReluBackward), layout=like_argument(1),
        vmap=elementwise_vmap("leaky_relu_backward", 2))
