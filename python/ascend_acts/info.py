"""`python -m ascend_acts info`: versions, and which backends run here (and why not)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
from pathlib import Path
from typing import Mapping

import torch

from . import __version__, backends
from .backends import npu
from .numerics import compiled


def report() -> str:
    import numpy

    lines = [
        f"ascend-acts {__version__}",
        f"python {platform.python_version()}, torch {torch.__version__}, numpy {numpy.__version__}",
        "CPU backends:",
    ]
    for name in backends.known_backends():
        reason = backends.unavailable_reason(name)
        lines.append(f"  {name:10s} {'available' if reason is None else 'unavailable: ' + reason}")
    lines.append(f"selected: {backends.current_backend_name()}")
    lines.append(f"reference backend's float32 passes: {compiled.describe()}")
    lines += ["NPU:", *(f"  {line}" for line in npu_report())]
    return "\n".join(lines)


def npu_report(env: Mapping[str, str] | None = None) -> list[str]:
    """What an NPU user has here and the next step for what is missing, found without importing torch_npu
    (which fails without CANN) and without loading anything."""
    env = os.environ if env is None else env
    cann = npu.cann_home(env)
    if cann is None:
        cann_line = (f"not found ({' and '.join('$' + v for v in npu.CANN_VARIABLES)} unset); next: install the CANN "
                     "toolkit and kernels package, then source <CANN>/set_env.sh (docs/npu.md)")
    elif not Path(cann[1], "include", "acl", "acl.h").is_file():
        cann_line = (f"${cann[0]}={cann[1]} is not a CANN toolkit (no include/acl/acl.h); next: source the "
                     "set_env.sh of an installed CANN toolkit")
    else:
        cann_line = f"found at {cann[1]} (${cann[0]})"

    if importlib.util.find_spec("torch_npu") is None:
        torch_npu_line = (f"not installed; next: pip install the torch-npu release made for torch "
                          f"{torch.__version__.split('+')[0]} (docs/npu.md)")
    else:
        try:
            torch_npu_line = f"installed ({importlib.metadata.version('torch_npu')})"
        except importlib.metadata.PackageNotFoundError:
            torch_npu_line = "installed (version unknown)"

    package = npu.find_op_package(env)
    if package == npu.VENDORED_PACKAGE:
        package_line = f"carried by this install (built with the extension) at {package}, on ${npu.CUSTOM_OPP_PATH}"
    elif package is not None:
        package_line = f"installed at {package}"
        if npu.has_op_api(npu.VENDORED_PACKAGE):
            package_line += (f" (${npu.CUSTOM_OPP_PATH} names it, so this install's own package "
                             f"{npu.VENDORED_PACKAGE} is not used)")
    else:
        looked = ", ".join(str(d) for d in npu.op_package_candidates(env))
        where = f"no {npu.OP_API_LIBRARY} under {looked}" if looked else "no CANN or $ASCEND_OPP_PATH to look under"
        package_line = f"not installed ({where}); next: scripts/build_npu.sh, then scripts/install_npu.sh"

    extension = npu.extension_path()
    extension_line = (f"built: {extension}" if extension is not None else
                      "not built; next: pip install --no-build-isolation -e . (or a wheel of `pip wheel "
                      "--no-build-isolation .`) where CANN and torch_npu are: it builds the op package into it")

    status = npu.status()
    if status.source == "extension":
        kernels_line = "AscendC kernels of the op package, through the extension"
    else:
        kernels_line = (f"torch built-ins (ascend_acts.ops.<op>.torch_ops, same results) because {status.detail}; "
                        f"warns once ({npu.STRICT_ENV}=1: error)")
    return [f"CANN        {cann_line}", f"torch_npu   {torch_npu_line}", f"op package  {package_line}",
            f"extension   {extension_line}", f"kernels     {kernels_line}"]
