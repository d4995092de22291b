"""NPU (PrivateUse1) kernels for the ascend_acts ops, chosen once at import.

- The torch_npu extension `ascend_acts._npu_ops` (python/ascend_acts/csrc/npu_ops.cpp), when it was built
  and the AscendC custom op package is installed: its TORCH_LIBRARY_IMPL(ascend_acts, PrivateUse1) kernels run
  our AscendC kernels through the package's generated aclnn API.
- Otherwise `torch_kernels` (torch built-ins on the device, bit-identical to the reference) with a one-time
  warning that says why; ASCEND_ACTS_NPU_STRICT=1 turns that into an error.
  The fused Conv+BN+LeakyReLU ops fall back to `torch_kernels_conv_bn` (torch_npu's conv and elementwise
  built-ins, the reference's mathematics).

`STATUS` records which one this process uses and why. This module never imports torch_npu (without CANN that
import fails): registering PrivateUse1 kernels needs no torch_npu, and the extension is only loaded when it
and the op package are both there; a failure to load it falls back instead of failing `import ascend_acts`.
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

from . import torch_kernels, torch_kernels_conv_bn
from .backends import FUSED_KERNELS
from .ops._library import check_inplace_target, check_result_based_backward, lib

STRICT_ENV = "ASCEND_ACTS_NPU_STRICT"
EXTENSION = "ascend_acts._npu_ops"
VENDOR = "ascend_acts"  # the vendor_name scripts/build_npu.sh gives the op package
OP_API_LIBRARY = Path("op_api", "lib", "libcust_opapi.so")  # the generated aclnn API inside the vendor dir
CANN_VARIABLES = ("ASCEND_CANN_PACKAGE_PATH", "ASCEND_HOME_PATH")  # as cmake/npu.cmake and setup.py


@dataclass(frozen=True)
class Status:
    source: str  # "extension" (AscendC kernels) or "fallback" (torch built-ins)
    detail: str  # where the extension came from, or why the fallback is used


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


def _has_npu_kernel(name: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"ascend_acts::{name}", "PrivateUse1")


def _load_extension() -> tuple[Status, list[str]]:
    """Loads the extension if it and the op package are there; returns the status and the ops it left
    without a PrivateUse1 kernel (all of them unless it loaded)."""
    everything = list(KERNELS)
    path = extension_path()
    if path is None:
        return Status("fallback", "the torch_npu extension is not built"), everything
    package = find_op_package()
    if package is None:
        dirs = ", ".join(str(d) for d in op_package_candidates()) or "no ASCEND_OPP_PATH or CANN variable set"
        return Status("fallback", f"the op package is not installed (looked in: {dirs})"), everything
    try:
        importlib.import_module(EXTENSION)
    except Exception as error:  # ImportError/OSError for a missing library; never fail `import ascend_acts`
        return Status("fallback", f"the extension {path} failed to load: {error}"), everything
    missing = [name for name in everything if not _has_npu_kernel(name)]
    if missing:
        return Status("fallback", f"the extension {path} registers no NPU kernel for {', '.join(missing)} "
                                  "(stale build? rebuild it)"), missing
    return Status("extension", f"{path}, op package {package}"), []


def check_fallback_allowed() -> None:
    """Warn once (or raise in strict mode) that NPU tensors run torch built-ins, not our kernels."""
    global _warned
    message = (f"ascend_acts: the AscendC custom op package is not available ({STATUS.detail}), so NPU tensors "
               "run the ops with torch_npu built-ins (same results, no fused kernels)")
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
    check_inplace_target(x)
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
    check_inplace_target(x)
    x.copy_(torch_kernels.rrelu(x, lower, upper, seed))


def _rrelu_backward(grad_output, saved, seed, lower, upper, self_is_result):
    check_fallback_allowed()
    check_result_based_backward("RReLU", lower < 0, self_is_result)
    return torch_kernels.rrelu_backward(grad_output, saved, lower, upper, seed)



def fused_fallback(name: str):
    """The fallback PrivateUse1 kernel of fused op `name`: torch_kernels_conv_bn's, behind the warning."""
    kernel = getattr(torch_kernels_conv_bn, name)

    def run(*args):
        check_fallback_allowed()
        return kernel(*args)

    run.__name__ = f"_{name}"
    return run


# The ops with NPU kernels: the fallback's here, the extension's in csrc/npu_ops.cpp (the same set).
KERNELS = {
    "leaky_relu": _leaky_relu, "leaky_relu_": _leaky_relu_, "leaky_relu_backward": _leaky_relu_backward,
    "rrelu_with_seed": _rrelu, "rrelu_with_seed_": _rrelu_, "rrelu_with_seed_backward": _rrelu_backward,
    **{name: fused_fallback(name) for name in FUSED_KERNELS},
}

_warned = False
STATUS, FALLBACK_OPS = _load_extension()
for _name in FALLBACK_OPS:
    lib.impl(_name, KERNELS[_name], "PrivateUse1")
