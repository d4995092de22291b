"""The device kernels of every op, one generic function: validate, then run the implementation's function of the
op's name under the backend protocol (`ascend_acts.backends`).

The CPU kernel runs the selected CPU backend; the NPU (PrivateUse1) kernel runs the "sim" backend's functions, the
launch sequence of our AscendC kernels (`ascend_acts.ops.<op>.kernels`: on NPU tensors they launch through the
torch_npu extension's private ops, `backends.launch`) or, without the extension, the "torch" backend on the device
behind the warning (or strict-mode error) of `backends.npu.check_fallback_allowed`. In-place ops `X_` run
`X(..., out=self)`.
A CPU backend's functions are found in the ops' folders by name (`BackendFunctions`).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import torch

from .. import backends
from ..backends import npu
from ..op_table import TorchOp, torch_op
from ._library import AUTOCAST_KEY_SET, check_inplace_target
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


class BackendFunctions:
    """The functions of one CPU backend, an attribute per functional op: `name` is the function `name` of the module
    ascend_acts.ops.<folder of op `name`>.<module> (`backends.OP_MODULE`), looked up at each access."""

    def __init__(self, module: str):
        self.module = module
        self.__name__ = f"{__package__}.<op>.{module}"

    def __getattr__(self, name: str):
        modules = self.__dict__.setdefault("_modules", {})  # op name -> its folder's module, found once
        module = modules.get(name)
        if module is None:
            try:
                folder = torch_op(name).folder
            except KeyError:
                raise AttributeError(name) from None
            module = modules[name] = importlib.import_module(f"{__package__}.{folder}.{self.module}")
        return getattr(module, name)


_BACKENDS = {name: BackendFunctions(module) for name, module in backends.OP_MODULE.items()}


def backend_functions(name: str) -> BackendFunctions:
    """CPU backend `name`'s functions (tests check them against the protocol)."""
    return _BACKENDS[name]


def device_kernel(op: TorchOp, semantics: Semantics, implementation: Callable[[], Any]) -> Callable:
    """The kernel of `op` that runs `implementation()`'s function of the op's (functional) name: `implementation()`
    returns an object with an attribute per functional op (a `BackendFunctions`)."""
    mutated = mutable_arguments(op)
    inplace, functional = op.inplace, op.functional  # static: not recomputed per call

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
        # the backend's torch ops (the platform convolution, the torch backend) are the op's own computation: an
        # enclosing autocast must not re-cast them (ops without an autocast rule reach here with it still on)
        with torch._C._ExcludeDispatchKeyGuard(AUTOCAST_KEY_SET):
            return run(args)

    def run(args):
        backend = implementation()
        function = getattr(backend, functional, None)
        if function is None:  # tests/test_op_registration.py keeps backends and the op table in step
            raise RuntimeError(f"ascend_acts::{op.name}: backend {getattr(backend, '__name__', backend)} has no "
                               f"function {functional!r} though the op table lists it for that backend")
        if inplace:
            check_inplace_target(args[0])
        if semantics.check is not None:
            semantics.check(*args)
        if inplace:
            return run_in_place(function, args[0], args[1:])
        # _prepared inlined (a call per argument of a ~20-argument op is most of this line's cost)
        result = function(*[a.detach().contiguous() if i not in mutated and isinstance(a, torch.Tensor) else a
                             for i, a in enumerate(args)])
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


def npu_kernels() -> BackendFunctions:
    """What NPU tensors run, chosen per call: the launch sequence the emulator runs (the "sim" backend's functions),
    its launches through the extension's private ops, when the extension loaded with every kernel; otherwise the
    "torch" backend once the fallback is allowed (warns once; strict mode raises)."""
    if npu.status().source == "extension":
        return _BACKENDS["sim"]
    npu.check_fallback_allowed()
    return _BACKENDS["torch"]


def cpu_backend() -> BackendFunctions:
    return _BACKENDS[backends.current_backend_name()]
