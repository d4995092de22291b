"""The default CPU backend: the NumPy reference (`ascend_acts.reference`, the float64 oracle) behind the
backend protocol of `ascend_acts.backends` (tensors in, tensors out).

The elementwise ops and the fused bias + LeakyReLU run on NumPy views of the tensors (shared memory, no copy);
the fused Conv+BN ops are `reference_conv_bn`'s.
"""

from __future__ import annotations

from typing import Callable

import ml_dtypes
import numpy as np
import torch

from ..reference import activations
from ..reference import fused_bias_leaky_relu as fused_bias
from ..reference.rng import MASK64
from .reference_conv_bn import (  # noqa: F401
    conv_bn_leaky_relu_eval,
    conv_bn_leaky_relu_eval_backward,
    conv_bn_leaky_relu_train,
    conv_bn_leaky_relu_train_backward,
)


def unavailable_reason() -> str | None:
    return None


def to_array(tensor: torch.Tensor) -> np.ndarray:
    """A NumPy view (shared memory) of a contiguous CPU tensor; bfloat16 through ml_dtypes."""
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def seed_value(seed: torch.Tensor) -> int:
    """The RReLU seed (a one-element int64 tensor) as the unsigned 64-bit key of docs/rng.md."""
    return int(seed.item()) & MASK64


def _elementwise(kernel: Callable, out: torch.Tensor | None, inputs: tuple[torch.Tensor, ...], *attributes):
    """Runs `kernel(*arrays, *attributes, out_array)` of the reference; the result is `out` or a new tensor."""
    result = torch.empty_like(inputs[0]) if out is None else out
    kernel(*(to_array(t) for t in inputs), *attributes, to_array(result))
    return result


def leaky_relu(self, negative_slope, *, out=None):
    return _elementwise(activations.leaky_relu, out, (self,), negative_slope)


def leaky_relu_backward(grad_output, self, negative_slope, saved_is_result):
    return _elementwise(activations.leaky_relu_backward, None, (grad_output, self), negative_slope)


def rrelu(self, seed, lower, upper, *, out=None):
    return _elementwise(activations.rrelu, out, (self,), lower, upper, seed_value(seed))


def rrelu_backward(grad_output, self, seed, lower, upper, saved_is_result):
    return _elementwise(activations.rrelu_backward, None, (grad_output, self), lower, upper, seed_value(seed))


def fused_bias_leaky_relu(input, bias, negative_slope, scale):
    out = torch.empty_like(input)
    fused_bias.forward(to_array(input), None if bias is None else to_array(bias), negative_slope, scale, to_array(out))
    return out


def fused_bias_leaky_relu_backward(grad_output, saved, bias, negative_slope, scale, saved_is_result):
    grad_input, grad_bias = torch.empty_like(saved), saved.new_empty(saved.shape[1])
    if saved.numel() == 0:  # nothing to sum: a zero bias gradient (and no (N * C, S) view of zero channels)
        return grad_input, grad_bias.zero_()
    fused_bias.backward(to_array(grad_output), to_array(saved), None if bias is None else to_array(bias),
                        negative_slope, scale, saved_is_result, to_array(grad_input), to_array(grad_bias))
    return grad_input, grad_bias
