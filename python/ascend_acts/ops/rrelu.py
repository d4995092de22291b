"""ascend_acts::rrelu_with_seed, rrelu_with_seed_ and rrelu_with_seed_backward (RReLU training).

The random slopes are a pure function of (seed, flat index) (docs/rng.md): the forward takes the seed
as a one-element int64 tensor, and the backward regenerates the slopes from it, so no noise tensor is
kept. With lower >= 0 the backward works from the output (x > 0 <=> y > 0).
RReLU in eval mode is leaky_relu((lower + upper) / 2) and uses the leaky_relu ops.
"""

from __future__ import annotations

import torch

from ..reference.rng import MASK64
from ._library import (
    check_no_internal_overlap,
    check_result_based_backward,
    lib,
    register_inplace_autograd,
    run_below_autograd,
    run_cpu_kernel,
)

lib.define("rrelu_with_seed(Tensor self, Tensor seed, float lower, float upper) -> Tensor")
lib.define("rrelu_with_seed_(Tensor(a!) self, Tensor seed, float lower, float upper) -> ()")
lib.define(
    "rrelu_with_seed_backward(Tensor grad_output, Tensor self, Tensor seed, float lower, float upper,"
    " bool self_is_result) -> Tensor"
)

ops = torch.ops.ascend_acts


def saves_result(lower: float) -> bool:
    return lower >= 0


def _seed_value(seed: torch.Tensor) -> int:
    if seed.numel() != 1 or seed.dtype != torch.int64:
        raise ValueError(f"rrelu: seed must be a one-element int64 tensor, got {seed.dtype} {tuple(seed.shape)}")
    return int(seed.item()) & MASK64


# --- CPU kernels -------------------------------------------------------------------------------
@torch.library.impl(lib, "rrelu_with_seed", "CPU")
def _rrelu_cpu(x, seed, lower, upper):
    out = torch.empty_like(x)
    run_cpu_kernel("rrelu", out, (x,), lower, upper, _seed_value(seed))
    return out


@torch.library.impl(lib, "rrelu_with_seed_", "CPU")
def _rrelu_inplace_cpu(x, seed, lower, upper):
    check_no_internal_overlap(x)
    run_cpu_kernel("rrelu", x, (x,), lower, upper, _seed_value(seed))


@torch.library.impl(lib, "rrelu_with_seed_backward", "CPU")
def _rrelu_backward_cpu(grad_output, saved, seed, lower, upper, self_is_result):
    check_result_based_backward("RReLU", lower < 0, self_is_result)
    grad_input = torch.empty_like(saved)
    run_cpu_kernel("rrelu_backward", grad_input, (grad_output, saved), lower, upper, _seed_value(seed))
    return grad_input


# --- fake kernels ------------------------------------------------------------------------------
@torch.library.register_fake("ascend_acts::rrelu_with_seed", lib=lib)
def _rrelu_fake(x, seed, lower, upper):
    return torch.empty_like(x)


@torch.library.register_fake("ascend_acts::rrelu_with_seed_", lib=lib)
def _rrelu_inplace_fake(x, seed, lower, upper):
    return None


@torch.library.register_fake("ascend_acts::rrelu_with_seed_backward", lib=lib)
def _rrelu_backward_fake(grad_output, saved, seed, lower, upper, self_is_result):
    return torch.empty_like(saved)


# --- autograd ----------------------------------------------------------------------------------
def _setup_context(ctx, inputs, output):
    x, seed, ctx.lower, ctx.upper = inputs
    ctx.self_is_result = saves_result(ctx.lower)
    ctx.save_for_backward(output if ctx.self_is_result else x, seed)


def _backward(ctx, grad_output):
    saved, seed = ctx.saved_tensors
    grad_input = ops.rrelu_with_seed_backward(
        grad_output, saved, seed, ctx.lower, ctx.upper, ctx.self_is_result
    )
    return grad_input, None, None, None


torch.library.register_autograd(
    "ascend_acts::rrelu_with_seed", _backward, setup_context=_setup_context, lib=lib
)


def _setup_context_grad(ctx, inputs, output):
    _, saved, seed, ctx.lower, ctx.upper, ctx.self_is_result = inputs
    ctx.save_for_backward(saved, seed)


def _backward_grad(ctx, grad_grad_input):
    saved, seed = ctx.saved_tensors
    grad = ops.rrelu_with_seed_backward(
        grad_grad_input, saved, seed, ctx.lower, ctx.upper, ctx.self_is_result
    )
    return grad, None, None, None, None, None


torch.library.register_autograd(
    "ascend_acts::rrelu_with_seed_backward", _backward_grad, setup_context=_setup_context_grad, lib=lib
)


class _RReluInplace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, seed, lower, upper):
        run_below_autograd(ops.rrelu_with_seed_, x, seed, lower, upper)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x, seed)
        ctx.lower, ctx.upper = lower, upper
        return x

    @staticmethod
    def backward(ctx, grad_output):
        result, seed = ctx.saved_tensors
        grad_input = ops.rrelu_with_seed_backward(grad_output, result, seed, ctx.lower, ctx.upper, True)
        return grad_input, None, None, None


register_inplace_autograd("rrelu_with_seed_", _RReluInplace)
