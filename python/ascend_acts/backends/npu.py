"""What the op layer's NPU (PrivateUse1) kernels run, found once: the AscendC kernels through our torch_npu
extension, or the "torch" backend's torch-op fallback.

The op layer registers the PrivateUse1 kernel of every ascend_acts op itself, the same generic kernel as the CPU's
(`ascend_acts.ops._kernels.device_kernel`: the op's one validation, in-place targets, contiguous inputs, the
results' layout), so every device accepts the same calls with the same errors and gives results the layout the
fake kernels promise. What that kernel runs:

- Our AscendC kernels, when the torch_npu extension `ascend_acts._npu_ops` (python/ascend_acts/csrc/) was built
  and the AscendC custom op package is installed: the same launch sequence the emulator runs (the "sim" backend's
  functions, `ascend_acts.ops.<op>.kernels`), whose launches on NPU tensors call the extension's private ops
  `ascend_acts_npu::<kernel>` (op_table.NPU_NAMESPACE: one per AscendC kernel, `Kernel.npu_schema`; generated
  C++ that only prepares the tensors for the device and calls the package's generated aclnn API;
  `backends.launch`).
- Otherwise the "torch" backend (`ascend_acts.ops.<op>.torch_ops`: torch built-ins on the device, the reference's
  results), behind a one-time warning that says why (`check_fallback_allowed`); ASCEND_ACTS_NPU_STRICT=1 turns
  that into an error.

`status()` loads the extension (on its first call, by `ascend_acts.ops` as it registers the ops) and says which
one this process uses and why. This module registers nothing, imports no op layer and never imports torch_npu
(without CANN that import fails): the extension is only loaded when it and the op package are both there, and a
failure to load it falls back instead of failing `import ascend_acts`. At import it puts the op package a wheel
built with CANN carries on ASCEND_CUSTOM_OPP_PATH (`use_vendored_op_package`), where CANN's loader looks.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, MutableMapping

import torch

from ..op_table import KERNELS, NPU_NAMESPACE, TORCH_OPS, kernel

STRICT_ENV = "ASCEND_ACTS_NPU_STRICT"
EXTENSION = "ascend_acts._npu_ops"
VENDOR = "ascend_acts"  # the vendor_name scripts/build_npu.sh gives the op package
OP_API_LIBRARY = Path("op_api", "lib", "libcust_opapi.so")  # the generated aclnn API inside the vendor dir
CANN_VARIABLES = ("ASCEND_CANN_PACKAGE_PATH", "ASCEND_HOME_PATH")  # as cmake/npu.cmake and setup.py
CUSTOM_OPP_PATH = "ASCEND_CUSTOM_OPP_PATH"
# the op package a wheel built with CANN carries (setup.py's build_op_package); absent from a CPU wheel
VENDORED_PACKAGE = Path(__file__).resolve().parents[1] / "packages" / "vendors" / VENDOR


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
    """Where the op package may be, in the order CANN's loader prefers them (use_vendored_op_package): entries of
    ASCEND_CUSTOM_OPP_PATH named after our vendor (this install's own once `import ascend_acts` put it there, or a
    user's install with --install-path), this install's own package if the variable does not list it, then
    $ASCEND_OPP_PATH/vendors/ascend_acts (default: <CANN>/opp)."""
    env = os.environ if env is None else env
    found = [Path(entry) for entry in env.get(CUSTOM_OPP_PATH, "").split(":")
             if entry and Path(entry).name == VENDOR]
    if _readable(VENDORED_PACKAGE.is_dir) and VENDORED_PACKAGE not in found:
        found.append(VENDORED_PACKAGE)
    cann = cann_home(env)
    opp = env.get("ASCEND_OPP_PATH") or (str(Path(cann[1], "opp")) if cann else None)
    if opp:
        found.append(Path(opp, "vendors", VENDOR))
    return found


def _readable(check) -> bool:
    """`check()` (a Path test), False where the path cannot be examined (Python 3.11's is_file/is_dir raise for
    EACCES or a name too long): an entry of ASCEND_CUSTOM_OPP_PATH must never fail `import ascend_acts`."""
    try:
        return check()
    except OSError:
        return False


def _same_directory(a: Path, b: Path) -> bool:
    """One directory however spelt (a symlink, `..`); equal paths where either cannot be examined."""
    try:
        return a == b or os.path.samefile(a, b)
    except OSError:
        return False


def has_op_api(vendor_dir: Path) -> bool:
    """Whether a vendor directory holds the generated aclnn library."""
    return _readable((vendor_dir / OP_API_LIBRARY).is_file)


def find_op_package(env: Mapping[str, str] | None = None) -> Path | None:
    """The op package's vendor directory this process uses (the first candidate with the aclnn library), or None."""
    return next((d for d in op_package_candidates(env) if has_op_api(d)), None)


def use_vendored_op_package(env: MutableMapping[str, str] | None = None) -> Path | None:
    """Puts the op package this install carries first on ASCEND_CUSTOM_OPP_PATH, in this process's environment
    (and so its children's), and returns it; None when there is none (a CPU wheel, a source checkout) or when the
    variable already lists another ascend_acts package with the aclnn library: a user's explicit choice (e.g. a build
    installed with install_npu.sh --install-path and its set_env.bash sourced), which keeps precedence. Entries of
    other vendors stay, after ours (CANN takes each op from the first package that has it; our op types are ours).

    Why this works, as CANN 8.1 reads the variable (leideng/CANN-8.1.RC1, Ascend/ascend-toolkit/8.1.RC1/tools/
    msopgen/template/custom_operator_sample/, the metadef sources shipped with msopgen; the runtime itself is
    closed): AICPU/Onnx/metadef/register/op_lib_register.cc, PreProcessForCustomOp (lines 94-109), reads
    getenv("ASCEND_CUSTOM_OPP_PATH") once per process and splits it on ':'; DSL/PyTorch/metadef/graph/common/plugin/
    plugin_manager.cc, GetPluginPathFromCustomOppPath (lines 201-220), takes every entry as one vendor directory
    (<entry>/op_proto/, <entry>/op_impl/ai_core/tbe/, ...), in list order, ahead of the vendors of
    $ASCEND_OPP_PATH/vendors/config.ini and built-in (lines 537-542); the package installer's set_env.bash does the
    same prepending for <dir>/vendors/<vendor> (tools/op_project_templates/ascendc/customize/scripts/install.sh,
    lines 270-282). Read once, early in CANN's initialisation: so at import, before torch_npu first uses the device."""
    env = os.environ if env is None else env
    if not has_op_api(VENDORED_PACKAGE):
        return None
    value = env.get(CUSTOM_OPP_PATH, "")
    entries = [Path(entry) for entry in value.split(":") if entry]
    if any(not _same_directory(entry, VENDORED_PACKAGE) and entry.name == VENDOR and has_op_api(entry)
           for entry in entries):
        return None
    if not any(_same_directory(entry, VENDORED_PACKAGE) for entry in entries):
        env[CUSTOM_OPP_PATH] = f"{VENDORED_PACKAGE}:{value}" if value else str(VENDORED_PACKAGE)
    return VENDORED_PACKAGE


use_vendored_op_package()  # at import, before anything can load the extension or start CANN


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


def extension_has_kernel(base: str) -> bool:
    """Whether the loaded extension defines the private op of AscendC kernel `base` with the table's schema
    (`Kernel.npu_schema`) and an NPU kernel (a stale build may define another schema)."""
    qualified = f"{NPU_NAMESPACE}::{base}"
    try:
        schema = torch._C._get_schema(qualified, "")
    except RuntimeError:  # not defined
        return False
    expected = torch._C.parse_schema(qualified + kernel(base).npu_schema)
    return str(schema) == str(expected) and torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1")


def _load_extension() -> Status:
    """Loads the extension if it and the op package are there. All ops run on it, or (it is missing, failed to
    load or misses a kernel) all run on the fallback: a stale extension's other private ops may not match the
    arguments the launch sequences pass either."""
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
    missing = [k.base for k in KERNELS if not extension_has_kernel(k.base)]
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
