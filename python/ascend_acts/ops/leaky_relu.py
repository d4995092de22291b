"""ascend_acts::leaky_relu, leaky_relu_ and leaky_relu_backward.

Backward from the output when negative_slope >= 0 (x > 0 <=> y > 0), so the input need not be kept.
"""

from __future__ import annotations

import torch

from ._library import (
    OpFunction,
    check_inplace_target,
    check_result_based_backward,
    lib,
    register_autograd_function,
    run_below_autograd,
    run_cpu_kernel,
)

lib.define("leaky_relu(Tensor self, float negative_slope) -> Tensor")
lib.define("leaky_relu_(Tensor(a!) self, float negative_slope) -> ()")
lib.define(
    "leaky_relu_backward(Tensor grad_output, Tensor self, float negative_slope, bool self_is_result)"
    " -> Tensor"
)

ops = torch.ops.ascend_acts


def saves_result(negative_slope: float) -> bool:
    return negative_slope >= 0


# --- CPU kernels -------------------------------------------------------------------------------
@torch.library.impl(lib, "leaky_relu", "CPU")
def _leaky_relu_cpu(x, negative_slope):
    out = torch.empty_like(x)
    run_cpu_kernel("leaky_relu", out, (x,), negative_slope)
    return out


@torch.library.impl(lib, "leaky_relu_", "CPU")
def _leaky_relu_inplace_cpu(x, negative_slope):
    check_inplace_target(x)
    run_cpu_kernel("leaky_relu", x, (x,), negative_slope)


@torch.library.impl(lib, "leaky_relu_backward", "CPU")
def _leaky_relu_backward_cpu(grad_output, saved, negative_slope, self_is_result):
    check_result_based_backward("leakyReLu", negative_slope < 0, self_is_result)
    grad_input = torch.empty_like(saved)
    run_cpu_kernel("leaky_relu_backward", grad_input, (grad_output, saved), negative_slope)
    return grad_input


# --- fake kernels (torch.compile, meta) --------------------------------------------------------
@torch.library.register_fake("ascend_acts::leaky_relu", lib=lib)
def _leaky_relu_fake(x, negative_slope):
    return torch.empty_like(x)


@torch.library.register_fake("ascend_acts::leaky_relu_", lib=lib)
def _leaky_relu_inplace_fake(x, negative_slope):
    return None


@torch.library.register_fake("ascend_acts::leaky_relu_backward", lib=lib)
def _leaky_relu_backward_fake(grad_output, saved, negative_slope, self_is_result):
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
        ctx.self_is_result = saves_result(ctx.negative_slope)
        saved = output if ctx.self_is_result else x
        ctx.save_for_backward(saved)
        ctx.save_for_forward(saved)

    @staticmethod
    def backward(ctx, grad_output):
        (saved,) = ctx.saved_tensors
        return ops.leaky_relu_backward(grad_output, saved, ctx.negative_slope, ctx.self_is_result), None

    @staticmethod
    def jvp(ctx, x_tangent, _):
        (saved,) = ctx.saved_tensors
        return ops.leaky_relu_backward(x_tangent, saved, ctx.negative_slope, ctx.self_is_result)


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
    def forward(grad_output, saved, negative_slope, self_is_result):
        return run_below_autograd(ops.leaky_relu_backward, grad_output, saved, negative_slope, self_is_result)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, saved, ctx.negative_slope, ctx.self_is_result = inputs
        ctx.save_for_backward(saved)
        ctx.save_for_forward(saved)

    @staticmethod
    def backward(ctx, grad_grad_input):
        (saved,) = ctx.saved_tensors
        grad = ops.leaky_relu_backward(grad_grad_input, saved, ctx.negative_slope, ctx.self_is_result)
        return grad, None, None, None

    @staticmethod
    def jvp(ctx, grad_output_tangent, _saved_tangent, _slope, _flag):
        (saved,) = ctx.saved_tensors
        return ops.leaky_relu_backward(grad_output_tangent, saved, ctx.negative_slope, ctx.self_is_result)


register_autograd_function("leaky_relu", _LeakyRelu)
register_autograd_function("leaky_relu_", _LeakyReluInplace)
register_autograd_function("leaky_relu_backward", _LeakyReluBackward)
