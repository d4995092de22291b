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
    OpFunction,
    check_inplace_target,
    check_result_based_backward,
    lib,
    register_autograd_function,
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
    check_inplace_target(x)
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


# --- autograd (reverse and forward mode) ------------------------------------------------------
# d rrelu / dx is the slope rrelu_with_seed_backward applies (1 or the seed's noise), so that op is the
# jvp too; the backward op is linear in grad_output and piecewise constant in `saved` (derivative 0).
def _grad_of(grad, saved, seed, lower, upper, self_is_result):
    return ops.rrelu_with_seed_backward(grad, saved, seed, lower, upper, self_is_result)


class _RRelu(OpFunction):
    @staticmethod
    def forward(x, seed, lower, upper):
        return run_below_autograd(ops.rrelu_with_seed, x, seed, lower, upper)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, seed, ctx.lower, ctx.upper = inputs
        ctx.self_is_result = saves_result(ctx.lower)
        saved = (output if ctx.self_is_result else x, seed)
        ctx.save_for_backward(*saved)
        ctx.save_for_forward(*saved)

    @staticmethod
    def backward(ctx, grad_output):
        saved, seed = ctx.saved_tensors
        return _grad_of(grad_output, saved, seed, ctx.lower, ctx.upper, ctx.self_is_result), None, None, None

    @staticmethod
    def jvp(ctx, x_tangent, *_):
        saved, seed = ctx.saved_tensors
        return _grad_of(x_tangent, saved, seed, ctx.lower, ctx.upper, ctx.self_is_result)


def pack_positive(x: torch.Tensor) -> torch.Tensor:
    """x > 0 as bits, 8 elements (row-major) per uint8; torch ops, so any device and backend."""
    flat = (x.detach() > 0).reshape(-1)
    padding = -flat.numel() % 8
    if padding:
        flat = torch.cat([flat, flat.new_zeros(padding)])
    shifts = torch.arange(8, dtype=torch.uint8, device=x.device)
    return (flat.view(-1, 8).to(torch.uint8) << shifts).sum(1, dtype=torch.uint8)  # disjoint bits: sum == or


def unpack_positive(bits: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """The 0/1 mask of pack_positive in `like`'s shape and dtype (1 where x > 0): a `saved` for the
    input-based backward."""
    shifts = torch.arange(8, dtype=torch.uint8, device=bits.device)
    flat = ((bits.unsqueeze(1) >> shifts) & 1).reshape(-1)[: like.numel()]
    return flat.reshape(like.shape).to(like.dtype)


class _RReluInplace(OpFunction):
    """With lower >= 0 the result tells x > 0; with lower < 0 it cannot, so the x > 0 mask is packed
    into bits (numel / 8 bytes) before the input is overwritten. The noise comes back from the seed."""

    @staticmethod
    def forward(x, seed, lower, upper, positive_bits):
        run_below_autograd(ops.rrelu_with_seed_, x, seed, lower, upper)
        return x

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, seed, ctx.lower, ctx.upper, positive_bits = inputs
        ctx.mark_dirty(x)
        ctx.from_bits = positive_bits is not None
        saved = (positive_bits if ctx.from_bits else x, seed)
        ctx.save_for_backward(*saved)
        ctx.save_for_forward(*saved)

    @staticmethod
    def _derivative(ctx, grad):
        saved, seed = ctx.saved_tensors
        if ctx.from_bits:
            return _grad_of(grad, unpack_positive(saved, grad), seed, ctx.lower, ctx.upper, False)
        return _grad_of(grad, saved, seed, ctx.lower, ctx.upper, True)

    @staticmethod
    def backward(ctx, grad_output):
        return _RReluInplace._derivative(ctx, grad_output), None, None, None, None

    @staticmethod
    def jvp(ctx, x_tangent, *_):
        return x_tangent.copy_(_RReluInplace._derivative(ctx, x_tangent))


def _inplace_bits(recording, x, seed, lower, upper):
    return (pack_positive(x) if recording and not saves_result(lower) else None,)


class _RReluBackward(OpFunction):
    @staticmethod
    def forward(grad_output, saved, seed, lower, upper, self_is_result):
        return run_below_autograd(ops.rrelu_with_seed_backward, grad_output, saved, seed, lower, upper,
                                  self_is_result)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, saved, seed, ctx.lower, ctx.upper, ctx.self_is_result = inputs
        ctx.save_for_backward(saved, seed)
        ctx.save_for_forward(saved, seed)

    @staticmethod
    def backward(ctx, grad_grad_input):
        saved, seed = ctx.saved_tensors
        grad = _grad_of(grad_grad_input, saved, seed, ctx.lower, ctx.upper, ctx.self_is_result)
        return grad, None, None, None, None, None

    @staticmethod
    def jvp(ctx, grad_output_tangent, *_):
        saved, seed = ctx.saved_tensors
        return _grad_of(grad_output_tangent, saved, seed, ctx.lower, ctx.upper, ctx.self_is_result)


register_autograd_function("rrelu_with_seed", _RRelu)
register_autograd_function("rrelu_with_seed_", _RReluInplace, extra_arguments=_inplace_bits)
register_autograd_function("rrelu_with_seed_backward", _RReluBackward)
