"""CPU backends: which implementation runs the ops for CPU tensors.

"reference" (the NumPy float64 oracle, the default) and "torch" (torch ops; also the NPU fallback) are always
there; "sim" runs the AscendC kernels of op_kernel/ through our emulator (`backends.sim`) when its library is
built: the ops' `kernels` modules, the launch sequence NPU tensors run too (`backends.launch`).
`ascend_acts.op_table` says which ops each implements and for which dtypes (BACKEND_DTYPES).

The protocol (tensors in, tensors out): for each functional op of the table it implements, a backend has a
function named as the op in the op's folder, `ascend_acts.ops.<TorchOp.folder>.<OP_MODULE[backend]>`, taking the
schema's arguments in schema order -- contiguous, detached CPU tensors (`Tensor?` may be None), Python scalars and
lists -- and returning the schema's results as new tensors (a tuple when several). The elementwise forward ops also
take `out=`: the result is written there (it may be the input itself: the op layer runs `X_` as
`X(self, ..., out=self)`) and returned.
Mutable schema arguments (the running statistics) are updated in place. The op layer validates the arguments
first; a backend raises only for what it cannot run (sim and float64: TypeError). This package (selection,
availability, the NPU's status and the emulator) never imports the op layer (`ascend_acts.ops`).

Selection, first match wins: the innermost `with use_backend(name):` block of the current context (this
thread, or this asyncio task), then the process-wide default set by the latest plain call
`use_backend(name)`, then the environment variable ASCEND_ACTS_BACKEND, then "reference". A new thread
starts without the `with` selections of the thread that started it (threading.Thread runs in a fresh
contextvars context) and so uses the process-wide default; a fork-started child process (DataLoader
workers) keeps the forking thread's selection.
"""

from __future__ import annotations

import contextvars
import importlib
import os

# name -> the module of each op's folder that holds the backend's functions: ascend_acts.ops.<folder>.<module>
OP_MODULE = {"reference": "reference", "sim": "kernels", "torch": "torch_ops"}
# what a backend needs beyond the ops' folders: a module with `unavailable_reason() -> str | None`
_REQUIRES = {"sim": "ascend_acts.backends.sim"}
_ENV_VAR = "ASCEND_ACTS_BACKEND"
_context_selection: contextvars.ContextVar[str | None] = contextvars.ContextVar("ascend_acts_backend", default=None)
_process_default: str | None = None  # set by a plain use_backend(name) call


def unavailable_reason(name: str) -> str | None:
    """None when backend `name` can run here, otherwise why not."""
    if name not in OP_MODULE:
        return f"unknown backend (known: {', '.join(OP_MODULE)})"
    if name not in _REQUIRES:
        return None
    try:
        return importlib.import_module(_REQUIRES[name]).unavailable_reason()
    except ImportError as exc:  # a backend whose module is missing or broken
        return f"cannot import {_REQUIRES[name]}: {exc}"


def known_backends() -> list[str]:
    return list(OP_MODULE)


def available_backends() -> list[str]:
    return [name for name in OP_MODULE if unavailable_reason(name) is None]


def _check(name: str) -> str:
    if not isinstance(name, str):
        raise TypeError(f"use_backend(): name must be a str, got {type(name).__name__}")
    reason = unavailable_reason(name)
    if reason is not None:
        raise RuntimeError(f"ascend_acts backend {name!r} is not available: {reason}")
    return name


def current_backend_name() -> str:
    name = _context_selection.get()
    if name is None:
        name = _process_default
    if name is None:
        name = _check(os.environ.get(_ENV_VAR, "reference"))
    return name


class use_backend:  # noqa: N801 - used like a function: use_backend("sim") or `with use_backend("sim"):`
    """Select the CPU backend: a plain call `use_backend("sim")` sets the process-wide default (every
    thread and context without a `with` selection of its own); `with use_backend("sim"):` selects it for
    the current context only (this thread or asyncio task), restored on exit.

    The call cannot know whether a `with` statement will enter it, so it selects for the current context
    at once, and publishes the name as the process-wide default only once the object is released without
    having been entered: for the statement `use_backend("sim")` that is right after the call (CPython frees
    the unused result at once). Publishing at the call itself would let other threads see a `with` block's
    backend until its __enter__ ran.
    """

    def __init__(self, name: str):
        self._entered = False
        self.name = _check(name)
        self._token = _context_selection.set(self.name)

    def __enter__(self):
        self._entered = True
        return self

    def __exit__(self, *exc_info):
        _context_selection.reset(self._token)
        return False

    def __del__(self):
        global _process_default
        if self._entered or not hasattr(self, "_token"):  # a `with` block, or a rejected name
            return
        _process_default = self.name
        try:  # the context follows the process-wide default again, like every other one
            _context_selection.reset(self._token)
        except (ValueError, RuntimeError):  # released in another context: nothing of this call left to undo
            pass

    def __repr__(self):
        return f"use_backend({self.name!r})"
