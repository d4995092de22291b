"""Helpers of the wheel tests (test_wheel.py, test_npu_build.py): a clean copy of the tree to build from, and the
emulator modules this tree's editable install already built (setup.py's ASCEND_ACTS_REUSE_EMULATOR packages them
instead of a second CMake build of ~1 minute on 2 cores; the CMake step is the same CMakeBuild code either way)."""

import importlib.util
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# built, or local to a working copy: never in a clean checkout
NOT_IN_A_CHECKOUT = shutil.ignore_patterns(".git", ".venv", "build", "build_out", "outputs", "__pycache__", "*.so",
                                           "*.egg-info", ".ruff_cache", ".pytest_cache", "packages")


def checkout_copy(target: Path) -> Path:
    shutil.copytree(ROOT, target, ignore=NOT_IN_A_CHECKOUT)
    return target


def reuse_emulator_env() -> dict[str, str]:
    """ASCEND_ACTS_REUSE_EMULATOR=<the directory of this tree's built emulator modules>, or nothing (then the wheel
    build runs CMake) when they are not all built."""
    specs = [importlib.util.find_spec(f"ascend_acts.{name}") for name in ("_sim", "_sim_tests", "_cpu")]
    if None in specs:
        return {}
    folders = {str(Path(spec.origin).parent) for spec in specs}
    return {"ASCEND_ACTS_REUSE_EMULATOR": folders.pop()} if len(folders) == 1 else {}
