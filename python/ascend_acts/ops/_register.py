"""Registers every op of `op_table.TORCH_OPS` with torch.library, one loop: the CPU and NPU kernels (one generic
kernel: the NPU's runs the torch_npu extension or its fallback), the fake kernel, autograd, vmap and autocast."""

from __future__ import annotations

import torch

from ..backends import npu
from ..op_table import TORCH_OPS, TorchOp
from ._kernels import cpu_backend, device_kernel, npu_kernels, resolved_in_place_kernel
from ._library import AUTOCAST_KEYS, lib
from ._semantics import SEMANTICS


def _returns_nothing(*args):
    return None


def _autocast_kernel(op: TorchOp, cast_arguments, device_type: str, key: torch._C.DispatchKey):
    overload = getattr(torch.ops.ascend_acts, op.name).default

    def kernel(*args):
        args = cast_arguments(args, torch.get_autocast_dtype(device_type), device_type)
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)):
            return overload(*args)

    kernel.__name__ = f"{op.name}_{key.name}"
    return kernel


def register_all() -> None:
    names = {op.name for op in TORCH_OPS}
    if set(SEMANTICS) != names:
        raise RuntimeError(f"ops without declared semantics: {sorted(names - set(SEMANTICS))}; "
                           f"declared but not in the op table: {sorted(set(SEMANTICS) - names)}")
    npu.status()  # loads the extension now rather than in the first NPU call
    for op in TORCH_OPS:
        semantics = SEMANTICS[op.name]
        lib.impl(op.name, device_kernel(op, semantics, cpu_backend), "CPU")
        lib.impl(op.name, device_kernel(op, semantics, npu_kernels), "PrivateUse1")
        fake = semantics.fake if semantics.fake is not None else _returns_nothing
        torch.library.register_fake(op.qualified_name, lib=lib)(fake)
        lib.impl(op.name, semantics.autograd(op), "Autograd", with_keyset=True)
        if op.inplace:  # e.g. leaky_relu_ on x.conj().imag or torch._neg_view(x)
            for key in ("Negative", "Conjugate"):
                lib.impl(op.name, resolved_in_place_kernel(op), key)
        if semantics.vmap is not None:
            torch.library.register_vmap(op.qualified_name, lib=lib)(semantics.vmap)
        if semantics.autocast is not None:
            for device_type, key in AUTOCAST_KEYS:
                lib.impl(op.name, _autocast_kernel(op, semantics.autocast, device_type, key), key.name)
