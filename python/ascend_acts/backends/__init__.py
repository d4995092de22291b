"""CPU kernel backends: which implementation runs the ops for CPU tensors.

A backend is a module that exposes the kernel functions listed in `KERNELS` with the array interface of
`ascend_acts.reference.activations` (contiguous NumPy arrays of one dtype in, results written into
`out`) and those in `FUSED_KERNELS` with the tensor interface of the fused ops' schemas
(`ascend_acts.backends.reference_conv_bn`). "reference" (NumPy, the default) is always there; "sim" runs the AscendC kernels of op_kernel/
through our emulator when its library is built. Selection: `use_backend(name)` (a plain call or a
context manager) or the environment variable ASCEND_ACTS_BACKEND.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

KERNELS = ("leaky_relu", "leaky_relu_backward", "rrelu", "rrelu_backward")
FUSED_KERNELS = ("conv_bn_leaky_relu_train", "conv_bn_leaky_relu_train_backward", "conv_bias_leaky_relu",
                 "conv_bias_leaky_relu_backward")

# name -> module path; each module has `unavailable_reason() -> str | None`.
_REGISTRY = {
    "reference": "ascend_acts.backends.reference",
    "sim": "ascend_acts.backends.sim",
}
_ENV_VAR = "ASCEND_ACTS_BACKEND"
_active: str | None = None


def _module(name: str) -> ModuleType:
    return importlib.import_module(_REGISTRY[name])


def unavailable_reason(name: str) -> str | None:
    """None when backend `name` can run here, otherwise why not."""
    if name not in _REGISTRY:
        return f"unknown backend (known: {', '.join(_REGISTRY)})"
    try:
        return _module(name).unavailable_reason()
    except ImportError as exc:  # a backend whose module is missing or broken
        return f"cannot import {_REGISTRY[name]}: {exc}"


def known_backends() -> list[str]:
    return list(_REGISTRY)


def available_backends() -> list[str]:
    return [name for name in _REGISTRY if unavailable_reason(name) is None]


def _check(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"use_backend(): name must be a str, got {type(name).__name__}")
    reason = unavailable_reason(name)
    if reason is not None:
        raise RuntimeError(f"ascend_acts backend {name!r} is not available: {reason}")
    return name


def current_backend_name() -> str:
    if _active is not None:
        return _active
    return _check(os.environ.get(_ENV_VAR, "reference"))


def current_backend() -> ModuleType:
    return _module(current_backend_name())


class use_backend:  # noqa: N801 - used like a function: use_backend("sim") or `with use_backend("sim"):`
    """Select the CPU backend for this process, or for a `with` block (restored on exit)."""

    def __init__(self, name: str):
        global _active
        self._previous = _active
        _active = _check(name)
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        global _active
        _active = self._previous
        return False

    def __repr__(self):
        return f"use_backend({self.name!r})"
