"""Builds, as part of `pip install` / `pip wheel` (editable or not):
- the AscendC emulator modules and the reference backend's compiled passes (pybind11) with CMake, always;
- on a machine with CANN and torch_npu, the torch_npu extension ascend_acts._npu_ops (python/ascend_acts/csrc/) and
  the custom op package it calls: command build_op_package runs scripts/build_npu.sh, then installs the package with
  scripts/install_npu.sh --install-path into ascend_acts/packages of the build (of the source tree for an editable
  install), laid out as the package's installer lays it out (packages/vendors/ascend_acts/{op_api,op_impl,
  op_proto,...}), so the wheel carries it; `import ascend_acts` puts it on ASCEND_CUSTOM_OPP_PATH
  (ascend_acts.backends.npu.use_vendored_op_package) and the extension finds its aclnn library by rpath.
  ASCEND_ACTS_OP_PACKAGE=installed links an installed package instead (the manual path of docs/npu.md), as the build
  does when the toolkit has no msopgen to build one.
Otherwise it prints one line saying why it skips the extension, and the wheel is the CPU one.

The extension needs torch and torch_npu at build time, so on an Ascend machine build with `--no-build-isolation`
(docs/npu.md). torch_npu is found, never imported, here: importing it loads CANN's libraries, and
TORCH_DEVICE_BACKEND_AUTOLOAD=0 keeps `import torch` from importing it.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Command, Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
LIBRARIES = {"ascend_acts._sim": "ASCEND_ACTS_SIM_FILE", "ascend_acts._sim_tests": "ASCEND_ACTS_SIM_TESTS_FILE",
             "ascend_acts._cpu": "ASCEND_ACTS_CPU_FILE"}
NPU_EXTENSION = "ascend_acts._npu_ops"
VENDOR = "ascend_acts"  # scripts/build_npu.sh's vendor_name, as in ascend_acts.backends.npu.VENDOR
# where the wheel carries the op package, in the ascend_acts package (ascend_acts.backends.npu.VENDORED_PACKAGE)
VENDORED = Path("packages", "vendors", VENDOR)
OP_API_LIBRARY_DIR = Path("op_api", "lib")  # the generated aclnn API inside the vendor dir: libcust_opapi.so
OP_PACKAGE_MODE = "ASCEND_ACTS_OP_PACKAGE"  # build (default) or installed
# a directory with the emulator modules already built from this tree for this Python: packaged as they are
REUSE_EMULATOR = "ASCEND_ACTS_REUSE_EMULATOR"


def op_package(cann: Path):
    """The installed op package's vendor directory, found as ascend_acts.backends.npu.find_op_package does."""
    candidates = [Path(entry) for entry in os.environ.get("ASCEND_CUSTOM_OPP_PATH", "").split(":")
                  if entry and Path(entry).name == VENDOR]
    candidates.append(Path(os.environ.get("ASCEND_OPP_PATH") or cann / "opp", "vendors", VENDOR))
    return next((d for d in candidates if _is_file(d / OP_API_LIBRARY_DIR / "libcust_opapi.so")), None)


def _is_file(path: Path) -> bool:
    try:  # an entry that cannot be examined (EACCES, a name too long) is not the package
        return path.is_file()
    except OSError:
        return False


def msopgen(cann: Path):
    """The msopgen scripts/build_npu.sh would run (PATH, else the toolkit's), or None."""
    found = shutil.which("msopgen") or cann / "python/site-packages/bin/msopgen"
    return found if Path(found).is_file() else None


def npu_extension():
    """(the torch_npu extension or None after printing why not, CANN toolkit, the installed op package it links or
    None when build_op_package builds the package into the wheel)."""
    mode = os.environ.get(OP_PACKAGE_MODE) or "build"
    if mode not in ("build", "installed"):
        raise SystemExit(f"ascend_acts: {OP_PACKAGE_MODE}={mode!r} is not a choice: build (the default: build the op "
                         "package into the wheel) or installed (link the op package scripts/install_npu.sh installed)")
    variable = next((name for name in ("ASCEND_CANN_PACKAGE_PATH", "ASCEND_HOME_PATH") if os.environ.get(name)), None)
    cann = Path(os.environ[variable]) if variable else None
    torch_npu = importlib.util.find_spec("torch_npu")
    build_package = package = None
    if cann is None:
        reason = "CANN not found (ASCEND_CANN_PACKAGE_PATH and ASCEND_HOME_PATH unset; source <CANN>/set_env.sh)"
    elif not (cann / "include/acl/acl.h").is_file():
        reason = f"{variable}={cann} is not a CANN toolkit (no include/acl/acl.h)"
    elif torch_npu is None:
        reason = ("torch_npu is not importable here (install it; with pip use --no-build-isolation so the build "
                  "sees it)")
    else:
        build_package = mode == "build" and msopgen(cann) is not None
        package = None if build_package else op_package(cann)
        not_built = "" if mode == "installed" else (
            f"no msopgen on PATH nor in {cann}/python/site-packages/bin to build the op package into the wheel "
            "(source <CANN>/set_env.sh), and ")
        reason = None if build_package or package is not None else (
            f"{not_built}the custom op package is not installed (scripts/build_npu.sh, then scripts/install_npu.sh)")
    if reason is not None:
        print(f"ascend_acts: not building the torch_npu extension {NPU_EXTENSION}: {reason}", file=sys.stderr)
        return None, None, None

    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    from torch.utils.cpp_extension import CppExtension

    torch_npu_dir = Path(torch_npu.origin).parent
    if build_package:
        soc = os.environ.get("ASCEND_COMPUTE_UNIT") or "ascend910b"
        source = f"built into ascend_acts/{VENDORED.as_posix()} by scripts/build_npu.sh for {soc}"
    else:
        source = str(package)
    print(f"ascend_acts: building the torch_npu extension {NPU_EXTENSION} (CANN {cann}, torch_npu {torch_npu_dir}, "
          f"op package {source})", file=sys.stderr)
    # the op package's aclnn library joins the link when the package's place is known (CMakeBuild.build_extension)
    library_dirs = [torch_npu_dir / "lib", cann / "lib64"]
    extension = CppExtension(
        NPU_EXTENSION, ["python/ascend_acts/csrc/npu_ops.cpp"],
        include_dirs=[str(d) for d in (torch_npu_dir / "include", cann / "include",
                                        torch_npu_dir / "include/third_party/acl/inc")],
        library_dirs=[str(d) for d in library_dirs],
        libraries=["torch_npu", "ascendcl", "nnopbase", "cust_opapi"],
        extra_link_args=[f"-Wl,-rpath,{d}" for d in library_dirs],
    )
    return extension, cann, package


NPU, CANN, INSTALLED_PACKAGE = npu_extension()
if NPU is not None:
    from torch.utils.cpp_extension import BuildExtension as BuildBase
else:
    BuildBase = build_ext


class BuildOpPackage(Command):
    """Builds the AscendC custom op package (scripts/build_npu.sh, its msopgen project in the build's temporary
    directory) and installs it (scripts/install_npu.sh --install-path) into the ascend_acts package of the build, or
    of the source tree for an editable install, where the wheel carries it: ascend_acts/packages/vendors/ascend_acts.
    A failed package build fails the wheel build: with CANN and torch_npu here the kernels are what was asked for."""

    description = "build the AscendC op package into ascend_acts/packages (needs CANN with msopgen and torch_npu)"
    user_options = [("build-lib=", "b", "directory of the built packages"),
                    ("build-temp=", "t", "directory for the msopgen project and the .run"),
                    ("inplace", "i", "into the source tree (python/ascend_acts/packages)")]
    boolean_options = ["inplace"]

    def initialize_options(self):
        self.build_lib = self.build_temp = self.inplace = None

    def finalize_options(self):
        self.set_undefined_options("build", ("build_lib", "build_lib"), ("build_temp", "build_temp"))
        self.set_undefined_options("build_ext", ("inplace", "inplace"))  # an editable install builds in place

    def packages_dir(self) -> Path:
        return (ROOT / "python" if self.inplace else Path(self.build_lib)).resolve() / "ascend_acts" / "packages"

    def run(self):
        if NPU is None:
            raise SystemExit("ascend_acts: build_op_package: no torch_npu extension to build here (the line above "
                             "says why), so no op package either")
        if INSTALLED_PACKAGE is not None:
            raise SystemExit(f"ascend_acts: build_op_package: the extension links the installed op package "
                             f"{INSTALLED_PACKAGE} ({OP_PACKAGE_MODE}=installed, or no msopgen)")
        env = dict(os.environ, ASCEND_HOME_PATH=str(CANN),
                   ASCEND_ACTS_BUILD_OUT=str(Path(self.build_temp).resolve() / "npu_op_package"))
        self.script(["build_npu.sh"], env)
        packages = self.packages_dir()
        shutil.rmtree(packages, ignore_errors=True)  # a fresh copy: the package installer merges into what is there
        packages.mkdir(parents=True)
        self.script(["install_npu.sh", "--install-path", str(packages)], env)
        # For --install-path the installer writes bin/set_env.bash exporting this build's absolute path (CANN 8.1
        # tools/op_project_templates/ascendc/customize/scripts/install.sh, lines 270-282): wrong once the wheel is
        # installed anywhere else; `import ascend_acts` sets ASCEND_CUSTOM_OPP_PATH itself.
        shutil.rmtree(packages / "vendors" / VENDOR / "bin", ignore_errors=True)
        print(f"ascend_acts: op package in {packages / 'vendors' / VENDOR}", file=sys.stderr)

    @staticmethod
    def script(command, env):
        result = subprocess.run(["bash", str(ROOT / "scripts" / command[0]), *command[1:]], env=env)
        if result.returncode != 0:
            raise SystemExit(f"ascend_acts: scripts/{command[0]} failed (exit {result.returncode}, its message is "
                             f"above): fix that, or set {OP_PACKAGE_MODE}=installed to link an installed op package "
                             "instead (docs/npu.md)")

    def get_outputs(self):
        return [str(path) for path in self.packages_dir().rglob("*") if path.is_file()]


class CMakeBuild(BuildBase):
    """One CMake build makes the emulator modules (ascend_acts._sim, ascend_acts._sim_tests) and the compiled passes
    (ascend_acts._cpu), named as setuptools expects the extension files; the torch_npu extension, if any, builds as
    usual, after build_op_package when the wheel carries the op package."""

    def run(self):
        if NPU is not None and INSTALLED_PACKAGE is None:
            self.run_command("build_op_package")  # here, before run() sets inplace aside, to see where it goes
        super().run()

    def build_extension(self, ext: Extension) -> None:
        if ext.name == NPU_EXTENSION:
            return self.build_npu_extension(ext)
        if ext.name not in LIBRARIES:
            return super().build_extension(ext)
        target = Path(self.get_ext_fullpath(ext.name)).resolve()
        if os.environ.get(REUSE_EMULATOR):
            return self.reuse_emulator_module(target)
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

    @staticmethod
    def reuse_emulator_module(target: Path) -> None:
        """Packages a module a build of this tree already made (the tests' wheel: the CMake build of the editable
        install, which CI has just run, instead of a second one of ~1 minute on 2 cores)."""
        source = Path(os.environ[REUSE_EMULATOR], target.name)
        if not source.is_file():
            raise SystemExit(f"ascend_acts: {REUSE_EMULATOR}={source.parent} has no {target.name} (built for this "
                             "Python by `pip install -e .` of this tree); unset it to build the emulator with CMake")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)

    def build_npu_extension(self, ext: Extension) -> None:
        """Links the op package's aclnn library: the installed one by its path, the carried one by a path relative
        to the extension ($ORIGIN: ascend_acts/_npu_ops*.so next to ascend_acts/packages), wherever the wheel goes."""
        if INSTALLED_PACKAGE is not None:
            library, rpath = INSTALLED_PACKAGE / OP_API_LIBRARY_DIR, INSTALLED_PACKAGE / OP_API_LIBRARY_DIR
        else:
            packages = self.get_finalized_command("build_op_package").packages_dir()
            library = packages.parent / VENDORED / OP_API_LIBRARY_DIR
            rpath = Path("$ORIGIN") / VENDORED / OP_API_LIBRARY_DIR
        ext.library_dirs = [*ext.library_dirs, str(library)]
        ext.extra_link_args = [*ext.extra_link_args, f"-Wl,-rpath,{rpath}"]
        super().build_extension(ext)


setup(
    ext_modules=[Extension(name, sources=[]) for name in LIBRARIES] + ([NPU] if NPU is not None else []),
    cmdclass={"build_ext": CMakeBuild, "build_op_package": BuildOpPackage},
)
