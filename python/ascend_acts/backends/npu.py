"""What the op layer's NPU (PrivateUse1) kernels run, found once: the AscendC kernels through our torch_npu
extension, or the "torch" backend's torch-op fallback.

The op layer registers the PrivateUse1 kernel of every ascend_acts op itself, the same generic kernel as the CPU's
(`ascend_acts.ops._kernels.device_kernel`: the op's one validation, in-place targets, contiguous inputs, the
results' layout), so every device accepts the same calls with the same errors and gives results the layout the
fake kernels promise. What that kernel runs:

- The torch_npu extension `ascend_acts._npu_ops` (python/ascend_acts/csrc/npu_ops.cpp), when it was built and
  the AscendC custom op package is installed: `ExtensionKernels`, the extension's private ops
  `ascend_acts_npu::<op>` (op_table.NPU_NAMESPACE: one per functional op, the public op's schema), whose
  PrivateUse1 kernels only prepare the tensors for the device and call the package's generated aclnn API.
- Otherwise the "torch" backend (`ascend_acts.backends.torch_ops`: torch built-ins on the device, the reference's
  results), behind a one-time warning that says why (`check_fallback_allowed`); ASCEND_ACTS_NPU_STRICT=1 turns
  that into an error.

`status()` loads the extension (on its first call, by `ascend_acts.ops` as it registers the ops) and says which
one this process uses and why. This module registers nothing, imports no op layer and never imports torch_npu
(without CANN that import fails): the extension is only loaded when it and the op package are both there, and a
failure to load it falls back instead of failing `import ascend_acts`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import torch

from ..op_table import NPU_NAMESPACE, TORCH_OPS, torch_op

STRICT_ENV = "ASCEND_ACTS_NPU_STRICT"
EXTENSION = "ascend_acts._npu_ops"
VENDOR = "ascend_acts"  # the vendor_name scripts/build_npu.sh gives the op package
OP_API_LIBRARY = Path("op_api", "lib", "libcust_opapi.so")  # the generated aclnn API inside the vendor dir
CANN_VARIABLES = ("ASCEND_CANN_PACKAGE_PATH", "ASCEND_HOME_PATH")  # as cmake/npu.cmake and setup.py


@dataclass(frozen=True)
class Status:
    source: str  # "extension" (AscendC kernels) or "fallback" (torch built-ins)
    detail: str  # where the extension came from, or why the fallback is used
    fallback_ops: tuple[str, ...]  # the ops that run on the fallback: none, or all of them


def cann_home(env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """(variable, directory) of the first CANN variable that is set, or None."""
    env = os.environ if env is None else env
    return next(((name, env[name]) for name in CANN_VARIABLES if env.get(name)), None)


def op_package_candidates(env: Mapping[str, str] | None = None) -> list[Path]:
    """Where an installed op package may be: entries of ASCEND_CUSTOM_OPP_PATH named after our vendor
    (installs with --install-path), then $ASCEND_OPP_PATH/vendors/ascend_acts (default: <CANN>/opp)."""
    env = os.environ if env is None else env
    found = [Path(entry) for entry in env.get("ASCEND_CUSTOM_OPP_PATH", "").split(":")
             if entry and Path(entry).name == VENDOR]
    cann = cann_home(env)
    opp = env.get("ASCEND_OPP_PATH") or (str(Path(cann[1], "opp")) if cann else None)
    if opp:
        found.append(Path(opp, "vendors", VENDOR))
    return found


def find_op_package(env: Mapping[str, str] | None = None) -> Path | None:
    """The installed op package's vendor directory (one with the aclnn library), or None."""
    return next((d for d in op_package_candidates(env) if (d / OP_API_LIBRARY).is_file()), None)


def extension_path() -> str | None:
    """The built extension's file, found without loading it."""
    try:
        spec = importlib.util.find_spec(EXTENSION)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None else None


def has_npu_kernel(name: str) -> bool:
    """Whether ascend_acts::<name> runs on NPU tensors (the op layer registers that kernel for every op)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"ascend_acts::{name}", "PrivateUse1")


def extension_has_kernel(name: str) -> bool:
    """Whether the loaded extension defines the private op of functional op `name` with the table's schema and an
    NPU kernel (a stale build may define another schema)."""
    qualified = f"{NPU_NAMESPACE}::{name}"
    try:
        schema = str(torch._C._get_schema(qualified, ""))
    except RuntimeError:  # not defined
        return False
    return (schema == qualified + torch_op(name).schema
            and torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1"))


def _load_extension() -> Status:
    """Loads the extension if it and the op package are there. All ops run on it, or (it is missing, failed to
    load or misses an op) all run on the fallback: a stale extension's other private ops may not match the
    arguments the op layer passes either."""
    everything = tuple(op.name for op in TORCH_OPS)
    path = extension_path()
    if path is None:
        return Status("fallback", "the torch_npu extension is not built", everything)
    package = find_op_package()
    if package is None:
        dirs = ", ".join(str(d) for d in op_package_candidates()) or "no ASCEND_OPP_PATH or CANN variable set"
        return Status("fallback", f"the op package is not installed (looked in: {dirs})", everything)
    try:
        importlib.import_module(EXTENSION)
    except Exception as error:  # ImportError/OSError for a missing library; never fail `import ascend_acts`
        return Status("fallback", f"the extension {path} failed to load: {error}", everything)
    missing = [op.name for op in TORCH_OPS if not op.inplace and not extension_has_kernel(op.name)]
    if missing:
        return Status("fallback", f"the extension {path} has no NPU kernel with the current schema for "
                                  f"{', '.join(missing)} (stale build? rebuild it)", everything)
    return Status("extension", f"{path}, op package {package}", ())


_status: Status | None = None


def status() -> Status:
    """Which NPU kernels this process runs; the first call loads the extension (`ascend_acts.ops` makes it when it
    registers the ops)."""
    global _status
    if _status is None:
        _status = _load_extension()
    return _status


_warned = False  # the fallback warning is given once per process


def check_fallback_allowed() -> None:
    """Warn once (or raise in strict mode) that NPU tensors run torch built-ins, not our kernels."""
    global _warned
    message = (f"ascend_acts: the AscendC custom op package is not available ({status().detail}), so NPU tensors "
               "run the ops with torch_npu built-ins (same results, no fused kernels)")
    if os.environ.get(STRICT_ENV) == "1":
        raise RuntimeError(message + f"; unset {STRICT_ENV} to allow that")
    if not _warned:
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        _warned = True



def _private_op(name: str, takes_out: bool):
    """The backend-protocol function of functional op `name` over the private op ascend_acts_npu::<name>."""

    def run(*args):
        return getattr(getattr(torch.ops, NPU_NAMESPACE), name)(*args)

    def run_into(*args, out: torch.Tensor | None = None):
        result = run(*args)
        return result if out is None else out.copy_(result)  # `out` may be the input: written after the kernel

    function = run_into if takes_out else run
    function.__name__ = name
    return function


class ExtensionKernels:
    """The extension's kernels under the backend protocol (`ascend_acts.backends`), run by the op layer's
    PrivateUse1 kernels: an attribute per functional op of the table, calling the private op on the arguments the
    op layer validated and prepared (detached, contiguous); the ops with an in-place variant also take `out=` (the
    op layer runs `X_` as `X(self, ..., out=self)`). The private ops return contiguous tensors: the op layer's
    layout step gives the results the fake kernels' layout."""

    __name__ = EXTENSION

    def __init__(self) -> None:
        in_place = {op.functional for op in TORCH_OPS if op.inplace}
        for op in TORCH_OPS:
            if not op.inplace:
                setattr(self, op.name, _private_op(op.name, takes_out=op.name in in_place))


extension_kernels = ExtensionKernels()
