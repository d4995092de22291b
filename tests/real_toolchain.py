"""Where the tests find the real files this machine may or may not have: an extracted CANN 8.1 toolkit tree
(../shared/tools/cann81_check.sh extracts one from the public snapshot) and the headers of the torch-npu wheel
released for the installed torch (scripts/fetch_torch_npu_headers.py; .ci/run fetches them before pytest)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLKIT_ENV = "ASCEND_ACTS_CANN_TOOLKIT"
DEFAULT_TOOLKIT = Path.home() / ".cache/cann81_check/toolkit/Ascend/ascend-toolkit/8.1.RC1"
HEADERS_ENV = "ASCEND_ACTS_TORCH_NPU_HEADERS"


def cann_toolkit() -> Path:
    """The extracted CANN 8.1 toolkit ($ASCEND_ACTS_CANN_TOOLKIT, else cann81_check.sh's cache), or a skip."""
    configured = os.environ.get(TOOLKIT_ENV)
    if configured:
        assert (Path(configured) / "aarch64-linux/include/acl/acl.h").is_file(), \
            f"{TOOLKIT_ENV}={configured} is not an extracted CANN 8.1 toolkit (no aarch64-linux/include/acl/acl.h)"
        return Path(configured)
    if not (DEFAULT_TOOLKIT / ".extracted").exists():  # written once cann81_check.sh's extraction is complete
        pytest.skip(f"no extracted CANN 8.1 toolkit at {DEFAULT_TOOLKIT} (set {TOOLKIT_ENV}, or run "
                    "../shared/tools/cann81_check.sh --mirror <snapshot of leideng/CANN-8.1.RC1>)")
    return DEFAULT_TOOLKIT


def torch_npu_headers() -> Path:
    """The unzipped torch-npu wheel (a directory with torch_npu/include): $ASCEND_ACTS_TORCH_NPU_HEADERS, else
    downloaded into ~/.cache/ascend_acts. Skips when PyPI is unreachable, except under CI (CI=true), where the
    compile must run."""
    configured = os.environ.get(HEADERS_ENV)
    if configured:
        assert (Path(configured) / "torch_npu/include").is_dir(), f"{HEADERS_ENV}={configured} has no torch_npu/include"
        return Path(configured)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ascend_acts"
    result = subprocess.run([sys.executable, str(ROOT / "scripts/fetch_torch_npu_headers.py"), str(cache)],
                            capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        reason = f"the torch-npu wheel's headers could not be fetched: {result.stderr.strip()}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (under CI this compile must run: .ci/run fetches them into ${HEADERS_ENV})")
        pytest.skip(reason)
    return Path(result.stdout.strip())
