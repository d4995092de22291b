"""NPU (PrivateUse1) kernels for the ascend_acts ops.

The AscendC custom op package and its torch_npu extension are not built yet, so NPU tensors run
`torch_kernels` (torch built-ins on the device, bit-identical to the reference) with a one-time
warning; ASCEND_ACTS_NPU_STRICT=1 turns that into an error. Registering a kernel for the
PrivateUse1 key needs no torch_npu, so this module never imports it.
"""

from __future__ import annotations

import os
import warnings

import torch

from . import torch_kernels
from .ops._library import check_no_internal_overlap, check_result_based_backward, lib

STRICT_ENV = "ASCEND_ACTS_NPU_STRICT"
_warned = False


def check_fallback_allowed() -> None:
    """Warn once (or raise in strict mode) that NPU tensors run torch built-ins, not our kernels."""
    global _warned
    message = ("ascend_acts: the AscendC custom op package is not available, so NPU tensors run the ops "
               "with torch_npu built-ins (same results, no fused kernels)")
    if os.environ.get(STRICT_ENV) == "1":
        raise RuntimeError(message + f"; unset {STRICT_ENV} to allow that")
    if not _warned:
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        _warned = True


def _leaky_relu(x, negative_slope):
    check_fallback_allowed()
    return torch_kernels.leaky_relu(x, negative_slope)


def _leaky_relu_(x, negative_slope):
    check_fallback_allowed()
    check_no_internal_overlap(x)
    x.copy_(torch_kernels.leaky_relu(x, negative_slope))


def _leaky_relu_backward(grad_output, saved, negative_slope, self_is_result):
    check_fallback_allowed()
    check_result_based_backward("leakyReLu", negative_slope < 0, self_is_result)
    return torch_kernels.leaky_relu_backward(grad_output, saved, negative_slope)


def _rrelu(x, seed, lower, upper):
    check_fallback_allowed()
    return torch_kernels.rrelu(x, lower, upper, seed)


def _rrelu_(x, seed, lower, upper):
    check_fallback_allowed()
    check_no_internal_overlap(x)
    x.copy_(torch_kernels.rrelu(x, lower, upper, seed))


def _rrelu_backward(grad_output, saved, seed, lower, upper, self_is_result):
    check_fallback_allowed()
    check_result_based_backward("RReLU", lower < 0, self_is_result)
    return torch_kernels.rrelu_backward(grad_output, saved, lower, upper, seed)


KERNELS = {
    "leaky_relu": _leaky_relu, "leaky_relu_": _leaky_relu_, "leaky_relu_backward": _leaky_relu_backward,
    "rrelu_with_seed": _rrelu, "rrelu_with_seed_": _rrelu_, "rrelu_with_seed_backward": _rrelu_backward,
}

for _name, _kernel in KERNELS.items():
    lib.impl(_name, _kernel, "PrivateUse1")
