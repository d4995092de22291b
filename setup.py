"""Builds the AscendC emulator libraries with CMake as part of `pip install` (editable or not)."""

import subprocess
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
LIBRARIES = {"ascend_acts._sim": "ASCEND_ACTS_SIM_FILE", "ascend_acts._sim_tests": "ASCEND_ACTS_SIM_TESTS_FILE"}


class CMakeBuild(build_ext):
    """One CMake build makes both libraries, named as setuptools expects the extension files
    (ascend_acts.backends.sim loads them with ctypes)."""

    def build_extension(self, ext: Extension) -> None:
        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        if target.exists() and getattr(self, "_cmake_done", False):
            return
        names = {var: Path(self.get_ext_fullpath(name)).name for name, var in LIBRARIES.items()}
        build_dir = Path(self.build_temp).resolve() / "cmake"
        configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DASCEND_ACTS_OUTPUT_DIR={target.parent}", *(f"-D{var}={name}" for var, name in names.items())]
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--parallel", "2"], check=True)
        self._cmake_done = True


setup(
    ext_modules=[Extension(name, sources=[]) for name in LIBRARIES],
    cmdclass={"build_ext": CMakeBuild},
)
