"""`python -m ascend_acts info`: versions, and which backends run here (and why not)."""

from __future__ import annotations

import importlib.util
import os
import platform

from . import __version__, backends


def report() -> str:
    import numpy
    import torch

    lines = [
        f"ascend-acts {__version__}",
        f"python {platform.python_version()}, torch {torch.__version__}, numpy {numpy.__version__}",
        "CPU backends:",
    ]
    for name in backends.known_backends():
        reason = backends.unavailable_reason(name)
        lines.append(f"  {name:10s} {'available' if reason is None else 'unavailable: ' + reason}")
    lines.append(f"selected: {backends.current_backend_name()}")
    lines += ["NPU:", *(f"  {line}" for line in npu_report())]
    return "\n".join(lines)


def npu_report() -> list[str]:
    """What an NPU user has here, found without importing torch_npu (which breaks without CANN)."""
    cann = os.environ.get("ASCEND_HOME_PATH") or os.environ.get("ASCEND_TOOLKIT_HOME")
    torch_npu = importlib.util.find_spec("torch_npu") is not None
    return [
        f"CANN       {'found at ' + cann if cann else 'not found (source the CANN set_env.sh on an Ascend machine)'}",
        f"torch_npu  {'installed' if torch_npu else 'not installed (pip install torch-npu matching torch, on an Ascend machine)'}",
        "kernels    AscendC custom op package: not part of this release yet; NPU tensors run the ops with torch "
        "built-ins (ascend_acts.torch_kernels, same results), with a warning (ASCEND_ACTS_NPU_STRICT=1: error)",
    ]
