"""ascend_acts::rrelu, rrelu_ and rrelu_backward (RReLU training).

The random slopes are a pure function of (seed, flat index) (docs/rng.md): the forward takes the seed
as a one-element int64 tensor, and the backward regenerates the slopes from it, so no noise tensor is
kept. With lower >= 0 the backward works from the output (x > 0 <=> y > 0).
RReLU in eval mode is leaky_relu((lower + upper) / 2) and uses the leaky_relu ops.
"""

from __future__ import annotations

import torch

from .._library import (
    OpFunction,
    autograd_function,
    check_backward_operands,
    check_floating,
    check_result_based_backward,
    per_sample_vmap,
    run_below_autograd,
)
from .._semantics import declare, like_argument

ops = torch.ops.ascend_acts


def saves_result(lower: float) -> bool:
    return lower >= 0


def _check_seed(seed: torch.Tensor) -> None:
    if seed.numel() != 1 or seed.dtype != torch.int64:
        raise ValueError(f"rrelu: seed must be a one-element int64 tensor, got {seed.dtype} {tuple(seed.shape)}")


def _check(x, seed, lower, upper):
    check_floating("rrelu", "self", x)
    _check_seed(seed)


def _check_backward(grad_output, saved, seed, lower, upper, saved_is_result):
    check_backward_operands("rrelu_backward", grad_output, saved)
    check_result_based_backward("RReLU", not lower >= 0, saved_is_result)
    _check_seed(seed)


# --- fake kernels: the device kernels' checks, so that both accept the same calls ------------------------------
def _rrelu_fake(x, seed, lower, upper):
    """Contiguous, whatever x's layout: torch's rrelu allocates its result so (rrelu_with_noise)."""
    _check(x, seed, lower, upper)
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _rrelu_backward_fake(grad_output, saved, seed, lower, upper, saved_is_result):
    _check_backward(grad_output, saved, seed, lower, upper, saved_is_result)
    return torch.empty_like(saved)


# --- autograd (reverse and forward mode) ------------------------------------------------------
# d rrelu / dx is the slope rrelu_backward applies (1 or the seed's noise), so that op is the
# jvp too; the backward op is linear in grad_output and piecewise constant in `saved` (derivative 0).
def _grad_of(grad, saved, seed, lower, upper, saved_is_result):
    return ops.rrelu_backward(grad, saved, seed, lower, upper, saved_is_result)


class _Rrelu(OpFunction):
    @staticmethod
    def forward(x, seed, lower, upper):
        return run_below_autograd(ops.rrelu, x, seed, lower, upper)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, seed, ctx.lower, ctx.upper = inputs
        ctx.saved_is_result = saves_result(ctx.lower)
        saved = (output if ctx.saved_is_result else x, seed)
        ctx.save_for_backward(*saved)
        ctx.save_for_forward(*saved)

    @staticmethod
    def backward(ctx, grad_output):
        saved, seed = ctx.saved_tensors
        return _grad_of(grad_output, saved, seed, ctx.lower, ctx.upper, ctx.saved_is_result), None, None, None

    @staticmethod
    def jvp(ctx, x_tangent, *_):
        saved, seed = ctx.saved_tensors
        return _grad_of(x_tangent, saved, seed, ctx.lower, ctx.upper, ctx.saved_is_result)


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


class _RreluInplace(OpFunction):
    """With lower >= 0 the result tells x > 0; with lower < 0 it cannot, so the x > 0 mask is packed
    into bits (numel / 8 bytes) before the input is overwritten. The noise comes back from the seed."""

    @staticmethod
    def forward(x, seed, lower, upper, positive_bits):
        run_below_autograd(ops.rrelu_, x, seed, lower, upper)
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
        return _RreluInplace._derivative(ctx, grad_output), None, None, None, None

    @staticmethod
    def jvp(ctx, x_tangent, *_):
        return x_tangent.copy_(_RreluInplace._derivative(ctx, x_tangent))


def _inplace_bits(recording, x, seed, lower, upper):
    return (pack_positive(x) if recording and not saves_result(lower) else None,)


class _RreluBackward(OpFunction):
    @staticmethod
    def forward(grad_output, saved, seed, lower, upper, saved_is_result):
        return run_below_autograd(ops.rrelu_backward, grad_output, saved, seed, lower, upper,
                                  saved_is_result)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, saved, seed, ctx.lower, ctx.upper, ctx.saved_is_result = inputs
        ctx.save_for_backward(saved, seed)
        ctx.save_for_forward(saved, seed)

    @staticmethod
    def backward(ctx, grad_grad_input):
        saved, seed = ctx.saved_tensors
        grad = _grad_of(grad_grad_input, saved, seed, ctx.lower, ctx.upper, ctx.saved_is_result)
        return grad, None, None, None, None, None

    @staticmethod
    def jvp(ctx, grad_output_tangent, *_):
        saved, seed = ctx.saved_tensors
        return _grad_of(grad_output_tangent, saved, seed, ctx.lower, ctx.upper, ctx.saved_is_result)


# vmap: per sample (the slopes are keyed on the flat index within a sample, so one call over the batch would
# change them); vmap's randomness applies where the seed is drawn (torch.randint in functional.rrelu)
declare("rrelu", fake=_rrelu_fake, check=_check, autograd=autograd_function(_Rrelu),
        vmap=per_sample_vmap("rrelu"))
declare("rrelu_", check=_check, autograd=autograd_function(_RreluInplace, extra_arguments=_inplace_bits))
declare("rrelu_backward", fake=_rrelu_backward_fake, check=_check_backward,
        autograd=autograd_function(_RreluBackward), layout=like_argument(1),
        vmap=per_sample_vmap("rrelu_backward"))
