"""Builds the AscendC emulator modules (pybind11) with CMake as part of `pip install` (editable or not), and the
torch_npu extension ascend_acts._npu_ops (python/ascend_acts/csrc/) when the CANN toolkit, torch_npu and the
installed custom op package are all found; otherwise it prints one line saying why it skips the extension.

The extension needs torch and torch_npu at build time, so on an Ascend machine install with
`pip install --no-build-isolation -e .` (docs/npu.md). torch_npu is found, never imported, here: importing it
loads CANN's libraries, and TORCH_DEVICE_BACKEND_AUTOLOAD=0 keeps `import torch` from importing it.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
LIBRARIES = {"ascend_acts._sim": "ASCEND_ACTS_SIM_FILE", "ascend_acts._sim_tests": "ASCEND_ACTS_SIM_TESTS_FILE"}
NPU_EXTENSION = "ascend_acts._npu_ops"
VENDOR = "ascend_acts"  # scripts/build_npu.sh's vendor_name, as in ascend_acts.backends.npu.VENDOR


def op_package(cann: Path):
    """The installed op package's vendor directory, found as ascend_acts.backends.npu.find_op_package does."""
    candidates = [Path(entry) for entry in os.environ.get("ASCEND_CUSTOM_OPP_PATH", "").split(":")
                  if entry and Path(entry).name == VENDOR]
    candidates.append(Path(os.environ.get("ASCEND_OPP_PATH") or cann / "opp", "vendors", VENDOR))
    return next((d for d in candidates if (d / "op_api/lib/libcust_opapi.so").is_file()), None)


def npu_extension():
    """The torch_npu extension, or None after printing why not."""
    variable = next((name for name in ("ASCEND_CANN_PACKAGE_PATH", "ASCEND_HOME_PATH") if os.environ.get(name)), None)
    cann = Path(os.environ[variable]) if variable else None
    torch_npu = importlib.util.find_spec("torch_npu")
    package = op_package(cann) if cann else None
    if cann is None:
        reason = "CANN not found (ASCEND_CANN_PACKAGE_PATH and ASCEND_HOME_PATH unset; source <CANN>/set_env.sh)"
    elif not (cann / "include/acl/acl.h").is_file():
        reason = f"{variable}={cann} is not a CANN toolkit (no include/acl/acl.h)"
    elif torch_npu is None:
        reason = ("torch_npu is not importable here (install it; with pip use --no-build-isolation so the build "
                  "sees it)")
    elif package is None:
        reason = "the custom op package is not installed (scripts/build_npu.sh, then scripts/install_npu.sh)"
    else:
        reason = None
    if reason is not None:
        print(f"ascend_acts: not building the torch_npu extension {NPU_EXTENSION}: {reason}", file=sys.stderr)
        return None

    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    from torch.utils.cpp_extension import CppExtension

    torch_npu_dir = Path(torch_npu.origin).parent
    library_dirs = [torch_npu_dir / "lib", cann / "lib64", package / "op_api/lib"]
    print(f"ascend_acts: building the torch_npu extension {NPU_EXTENSION} (CANN {cann}, torch_npu {torch_npu_dir}, "
          f"op package {package})", file=sys.stderr)
    return CppExtension(
        NPU_EXTENSION, ["python/ascend_acts/csrc/npu_ops.cpp"],
        include_dirs=[str(d) for d in (torch_npu_dir / "include", cann / "include",
                                        torch_npu_dir / "include/third_party/acl/inc")],
        library_dirs=[str(d) for d in library_dirs],
        libraries=["torch_npu", "ascendcl", "nnopbase", "cust_opapi"],
        extra_link_args=[f"-Wl,-rpath,{d}" for d in library_dirs],
    )


NPU = npu_extension()
if NPU is not None:
    from torch.utils.cpp_extension import BuildExtension as BuildBase
else:
    BuildBase = build_ext


class CMakeBuild(BuildBase):
    """One CMake build makes both emulator modules (ascend_acts._sim, ascend_acts._sim_tests), named as
    setuptools expects the extension files; the torch_npu extension, if any, builds as usual."""

    def build_extension(self, ext: Extension) -> None:
        if ext.name not in LIBRARIES:
            return super().build_extension(ext)
        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        if target.exists() and getattr(self, "_cmake_done", False):
            return
        names = {var: Path(self.get_ext_fullpath(name)).name for name, var in LIBRARIES.items()}
        build_dir = Path(self.build_temp).resolve() / "cmake"
        import pybind11  # a build requirement (pyproject.toml)

        configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DPython_EXECUTABLE={sys.executable}", f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
                     f"-DASCEND_ACTS_OUTPUT_DIR={target.parent}", *(f"-D{var}={name}" for var, name in names.items())]
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--parallel", "2"], check=True)
        self._cmake_done = True


setup(
    ext_modules=[Extension(name, sources=[]) for name in LIBRARIES] + ([NPU] if NPU is not None else []),
    cmdclass={"build_ext": CMakeBuild},
)
