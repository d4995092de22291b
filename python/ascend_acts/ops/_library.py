"""The `ascend_acts` torch.library namespace and the pieces every op module shares.

Each op is defined once here (schema, fake kernel, autograd); device kernels plug in per dispatch key:
"CPU" runs the selected CPU backend (NumPy reference or the AscendC emulator) on NumPy views of the
tensors; "PrivateUse1" (NPU) is registered by `ascend_acts.npu` when the custom op package is there.
"""

from __future__ import annotations

from typing import Callable

import ml_dtypes
import numpy as np
import torch

from .. import backends

lib = torch.library.Library("ascend_acts", "DEF")


def to_array(tensor: torch.Tensor) -> np.ndarray:
    """A NumPy view (shared memory) of a contiguous CPU tensor; bfloat16 through ml_dtypes."""
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def run_cpu_kernel(kernel: str, out: torch.Tensor, tensors: tuple[torch.Tensor, ...], *attrs) -> None:
    """Runs backend kernel `kernel(*arrays, *attrs, out_array)` and leaves the result in `out`.

    Inputs are made contiguous (the flat index the RReLU noise is keyed on is the row-major one);
    a non-contiguous `out` is written through a contiguous temporary.
    """
    arrays = [to_array(t.contiguous()) for t in tensors]
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype)
    getattr(backends.current_backend(), kernel)(*arrays, *attrs, to_array(target))
    if target is not out:
        out.copy_(target)


def check_no_internal_overlap(tensor: torch.Tensor) -> None:
    """torch's rule for in-place writes, checked before anything is written."""
    if torch._debug_has_internal_overlap(tensor) == 1:
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a single "
            "memory location. Please clone() the tensor before performing the operation."
        )


def check_inplace_autograd(tensor: torch.Tensor) -> None:
    """torch's errors for in-place on leaves that require grad, raised before the input is touched."""
    if not torch.is_grad_enabled():
        return
    if tensor.is_leaf and tensor.requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = tensor._base
    if base is not None and base.is_leaf and base.requires_grad:
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place operation."
        )


def check_result_based_backward(op: str, slope_may_be_negative: bool, self_is_result: bool) -> None:
    """A backward from the output cannot tell x <= 0 from x > 0 once a negative slope flipped signs."""
    if self_is_result and slope_may_be_negative:
        raise RuntimeError(
            f"In-place {op} backward calculation is triggered with a negative slope which is not "
            "supported. This is caused by calling in-place forward function with a negative slope, "
            "please call out-of-place version instead."
        )


def register_inplace_autograd(op_name: str, function: type[torch.autograd.Function]) -> None:
    """Autograd for an in-place op `op_name(Tensor(a!) self, ...) -> ()`.

    torch.library.register_autograd only takes functional ops, so the in-place ops get an
    autograd.Function that runs the op below autograd and marks `self` dirty.
    """

    def autograd_kernel(keyset, tensor, *args):
        check_inplace_autograd(tensor)
        function.apply(tensor, *args)

    lib.impl(op_name, autograd_kernel, "Autograd", with_keyset=True)


def run_below_autograd(op: Callable, *args) -> None:
    with torch._C._AutoDispatchBelowAutograd():
        op(*args)
