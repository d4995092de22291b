"""Downloads the torch-npu wheel released for the installed torch (`pip download --no-deps`: never installed,
never imported) and extracts its headers, so the torch_npu extension can be compiled without an NPU or CANN.

Usage: python scripts/fetch_torch_npu_headers.py CACHE_DIR
Prints the directory holding `torch_npu/include` (CACHE_DIR/torch_npu-<torch version>); reuses it when present.
Exit status 1, with pip's last lines, when the wheel cannot be downloaded (no PyPI, or no release for this torch).
"""

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import torch

INCLUDE_PREFIX = "torch_npu/include/"


def torch_version() -> str:
    return torch.__version__.split("+")[0]


def fetch(cache: Path) -> Path:
    """The headers' directory for this torch; downloads the wheel into a temporary directory if needed."""
    target = cache / f"torch_npu-{torch_version()}"
    if (target / INCLUDE_PREFIX).is_dir():
        return target
    with tempfile.TemporaryDirectory() as download:
        # torch_npu X.Y.Z (or X.Y.Z.postN) is the release for torch X.Y.Z
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                   "--dest", download, f"torch-npu=={torch_version()}.*"]
        result = subprocess.run(command, capture_output=True, text=True)
        wheels = sorted(Path(download).glob("torch_npu-*.whl"))
        if result.returncode != 0 or not wheels:
            tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-3:])
            raise RuntimeError(f"pip download of torch-npu=={torch_version()}.* failed: {tail}")
        partial = target.with_name(target.name + ".partial")
        with zipfile.ZipFile(wheels[-1]) as wheel:
            wheel.extractall(partial, [name for name in wheel.namelist() if name.startswith(INCLUDE_PREFIX)])
        partial.rename(target)  # only a complete extraction is reused
    return target


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        print(fetch(Path(sys.argv[1]).resolve()))
    except RuntimeError as error:
        print(f"fetch_torch_npu_headers.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
