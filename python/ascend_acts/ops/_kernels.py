"""The device kernels of every op, one generic function: validate, then run the backend's function of the op's
name under the backend protocol (`ascend_acts.backends`).

The CPU kernel runs the selected CPU backend; the NPU (PrivateUse1) kernel runs the torch_npu extension's private
ops (`backends.npu.ExtensionKernels`) or, without the extension, the "torch" backend on the device behind the
warning (or strict-mode error) of `backends.npu.check_fallback_allowed`. In-place ops `X_` run `X(..., out=self)`.
"""

from __future__ import annotations

from types import ModuleType
from typing import Callable

import torch

from .. import backends
from ..backends import npu, torch_ops
from ..op_table import TorchOp
from ._library import check_inplace_target
from ._semantics import Semantics


def mutable_arguments(op: TorchOp) -> frozenset[int]:
    """Positions of the schema's arguments written in place (`Tensor(a!)`)."""
    schema = getattr(torch.ops.ascend_acts, op.name).default._schema
    return frozenset(i for i, argument in enumerate(schema.arguments)
                     if argument.alias_info is not None and argument.alias_info.is_write)


def _prepared(argument):
    """What a backend gets for a tensor argument: detached and contiguous (row-major: the flat index the RReLU
    noise is keyed on)."""
    return argument.detach().contiguous() if isinstance(argument, torch.Tensor) else argument


def device_kernel(op: TorchOp, semantics: Semantics, implementation: Callable[[], object]) -> Callable:
    """The kernel of `op` that runs `implementation()`'s function of the op's (functional) name."""
    mutated = mutable_arguments(op)

    def run_in_place(function, target: torch.Tensor, args) -> None:
        # below ADInplaceOrView: the backend's writes (and the write-back) bump no version counter; the one
        # bump torch makes is the Autograd kernel's (mark_dirty), or bump_skipped_version's under inference mode
        with torch._C._AutoDispatchBelowADInplaceOrView():
            work = target if target.is_contiguous() else target.contiguous()  # a strided view: written back below
            out = work.detach()
            function(out, *map(_prepared, args), out=out)
            if work is not target:
                target.copy_(work)
        bump_skipped_version(target)

    def kernel(*args):
        backend = implementation()
        function = getattr(backend, op.functional, None)
        if function is None:  # tests/test_op_registration.py keeps backends and the op table in step
            raise RuntimeError(f"ascend_acts::{op.name}: backend {backend.__name__} has no function "
                               f"{op.functional!r} though the op table lists it for that backend")
        if op.inplace:
            check_inplace_target(args[0])
        if semantics.check is not None:
            semantics.check(*args)
        if op.inplace:
            return run_in_place(function, args[0], args[1:])
        result = function(*(a if i in mutated else _prepared(a) for i, a in enumerate(args)))
        if semantics.layout is None:
            return result
        if isinstance(result, torch.Tensor):
            return semantics.layout(args, (result,))[0]
        return tuple(semantics.layout(args, result))

    kernel.__name__ = f"{op.name}_kernel"
    return kernel


def bump_skipped_version(target: torch.Tensor) -> None:
    """Inference mode skips the Autograd kernels (whose mark_dirty bumps an in-place target's version), but torch
    still bumps a normal tensor's version there: without it a backward through a tensor modified under
    inference mode would not see the change."""
    if torch.is_inference_mode_enabled() and not target.is_inference():
        torch.autograd.graph.increment_version(target)


def resolved_in_place_kernel(op: TorchOp) -> Callable:
    """The Negative/Conjugate kernel of in-place op `op` (torch's fallbacks for them need a returned tensor, and
    ours return ()): the op runs on a materialised copy, written back through the view's negation."""
    overload = getattr(torch.ops.ascend_acts, op.name).default

    def kernel(target: torch.Tensor, *args) -> None:
        check_inplace_target(target)
        work = target.resolve_conj().resolve_neg()
        overload(work, *args)
        with torch._C._AutoDispatchBelowADInplaceOrView():
            target.copy_(work)
        bump_skipped_version(target)

    kernel.__name__ = f"{op.name}_resolved"
    return kernel


def npu_kernels() -> ModuleType | npu.ExtensionKernels:
    """What NPU tensors run, chosen per call: the extension's private ops when it loaded with every op, otherwise
    the "torch" backend once the fallback is allowed (warns once; strict mode raises)."""
    if npu.status().source == "extension":
        return npu.extension_kernels
    npu.check_fallback_allowed()
    return torch_ops


def cpu_backend() -> ModuleType:
    return backends.current_backend()
