"""The NPU build without CANN: cmake/npu.cmake's configure-time decisions, scripts/build_npu.sh and
install_npu.sh driven by a stand-in msopgen and package installer that behave as CANN 8.1's do (one op per
msopgen call, its file naming, the installer's choice of directory), and setup.py's decision about the torch_npu
extension. The real msopgen runs in test_npu_real_toolkit.py when an extracted CANN 8.1 toolkit is here."""

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

import ascend_acts
from ascend_acts import info, op_table
from ascend_acts.backends import npu
from wheel_build import checkout_copy, reuse_emulator_env

pytestmark = pytest.mark.slow  # cmake, the build scripts and setup.py in subprocesses
ROOT = Path(__file__).resolve().parents[1]


def clean_env(**overrides):
    """The environment without any Ascend variable (and without a preset CMake generator)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND") and k != "CMAKE_GENERATOR"}
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def one_line(text):
    return " ".join(text.split())


def configure(build, *args, **env):
    # this Python: the emulator modules' pybind11 comes from it
    return subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Unix Makefiles",
                           f"-DPython_EXECUTABLE={sys.executable}", *args],
                          capture_output=True, text=True, env=clean_env(**env), timeout=120)


def npu_status_lines(stdout):
    return [line for line in stdout.splitlines() if line.startswith("-- ascend_acts NPU:")]


def targets(build):
    result = subprocess.run(["cmake", "--build", str(build), "--target", "help"], capture_output=True, text=True,
                            timeout=60, check=True)
    return {line.split()[1] for line in result.stdout.splitlines() if line.startswith("... ")}


def fake_cann(tmp_path):
    cann = tmp_path / "cann"
    (cann / "include/acl").mkdir(parents=True)
    (cann / "include/acl/acl.h").write_text("/* stand-in: only its existence marks a toolkit */\n")
    return cann


# --- CMake configure -----------------------------------------------------------------------------------
def test_configure_without_cann_builds_the_emulator_only(tmp_path):
    result = configure(tmp_path / "build")
    assert result.returncode == 0, result.stderr
    (line,) = npu_status_lines(result.stdout)
    for checked in ("-DASCEND_CANN_PACKAGE_PATH", "$ASCEND_CANN_PACKAGE_PATH", "$ASCEND_HOME_PATH", "unset",
                    "emulator only"):
        assert checked in line
    found = targets(tmp_path / "build")
    assert {"ascend_acts_sim", "ascend_acts_sim_tests"} <= found and "npu_op_package" not in found


def test_requesting_the_npu_build_without_cann_fails(tmp_path):
    result = configure(tmp_path / "build", "-DASCEND_ACTS_NPU=ON")
    assert result.returncode != 0
    message = one_line(result.stderr)
    assert "ASCEND_ACTS_NPU=ON but CANN toolkit not found" in message
    assert "source <CANN>/set_env.sh, or pass -DASCEND_CANN_PACKAGE_PATH=<CANN toolkit dir>" in message


def test_an_explicit_path_that_is_no_toolkit_fails(tmp_path):
    result = configure(tmp_path / "build", "-DASCEND_CANN_PACKAGE_PATH=/nonexistent")
    assert result.returncode != 0
    assert "-DASCEND_CANN_PACKAGE_PATH=/nonexistent is not a CANN toolkit (no include/acl/acl.h there)" \
        in one_line(result.stderr)


def test_an_environment_path_that_is_no_toolkit_is_reported(tmp_path):
    result = configure(tmp_path / "build", ASCEND_HOME_PATH=tmp_path)  # exists, but no include/acl/acl.h
    assert result.returncode == 0, result.stderr
    (line,) = npu_status_lines(result.stdout)
    assert f"$ASCEND_HOME_PATH={tmp_path} is not a CANN toolkit" in line and "emulator only" in line
    result = configure(tmp_path / "build2", "-DASCEND_ACTS_NPU=ON", ASCEND_HOME_PATH=tmp_path)
    assert result.returncode != 0 and f"$ASCEND_HOME_PATH={tmp_path} is not a CANN toolkit" in one_line(result.stderr)


@pytest.mark.parametrize("soc, ok", [("ascend910b", True), ("ascend910_93", True), ("ascend310p", False),
                                     ("Ascend910B3", False), ("ascend910", False), ("ascend910b;x", False),
                                     ("", False)])
def test_soc_is_validated(tmp_path, soc, ok):
    """Short SoC names only (the op project's ASCEND_COMPUTE_UNIT and AddConfig take them); 310P is dropped."""
    result = configure(tmp_path / "build", f"-DASCEND_ACTS_SOC={soc}")
    assert (result.returncode == 0) == ok, result.stderr
    if not ok:
        assert f"ASCEND_ACTS_SOC='{soc}' is not supported: use ascend910b (Atlas A2, chips Ascend910B1-B4) or " \
               "ascend910_93" in one_line(result.stderr)


# --- a stand-in toolkit: msopgen and the package installer as CANN 8.1 ships them ------------------------
FAKE_MSOPGEN = '''\
#!/usr/bin/env python3
# Stand-in for msopgen 8.1 gen: ONE op per call (-op; without it, a JSON of several ops makes msopgen ask on
# stdin, which fails without a tty), written as op_host/<op>.cpp (+ <op>_tiling.h) and op_kernel/<op>.cpp named
# by fix_name_lower_with_under (ActsRrelu -> acts_rrelu), into a new project (-m 0) or an existing one (-m 1).
# -c takes a SoC version, mapped to the short name by transform.json's SOC_VERSION_TYPE. Records its arguments.
import json, os, re, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
value = lambda flag, default=None: args[args.index(flag) + 1] if flag in args else default
out = Path(value("-out"))
ops = [entry["op"] for entry in json.loads(Path(value("-i")).read_text())]
op = value("-op")
if op is None and len(ops) > 1:
    input("Input the number of the ops: ")  # EOFError without a tty
if op is not None and op not in ops:
    sys.exit(f"Failed to find '{op}' in json.")
op = op or ops[0]
name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", op).lower()
if os.environ.get("FAKE_NAMING") == "joined":  # a naming rule other than msopgen's: ActsRrelu -> actsrrelu
    name = op.lower()
if value("-m", "0") == "1":
    assert (out / "CMakePresets.json").exists(), "-m 1 needs an existing project"
else:
    (out / "op_host").mkdir(parents=True, exist_ok=True)
    (out / "op_kernel").mkdir(exist_ok=True)
    soc = {"ascend910b1": "ascend910b", "ascend910_9391": "ascend910_93", "ascend910b": "ascend910"}[
        value("-c").split("-", 1)[1].lower()]
    variables = {"ASCEND_COMPUTE_UNIT": {"type": "STRING", "value": soc},
                 "vendor_name": {"type": "STRING", "value": "customize"},
                 "ENABLE_BINARY_PACKAGE": {"type": "BOOL", "value": "False"}}
    (out / "CMakePresets.json").write_text(json.dumps({"version": 1, "configurePresets": [
        {"name": "default", "cacheVariables": variables}]}))
    (out / "build.sh").write_text(f"exec python3 {os.environ['FAKE_BUILD']}\\n")
(out / "op_host" / f"{name}.cpp").write_text(f'#include "{name}_tiling.h"\\nclass {op} : public OpDef {{}};\\n')
(out / "op_host" / f"{name}_tiling.h").write_text("// template tiling data\\n")
(out / "op_kernel" / f"{name}.cpp").write_text(f'extern "C" __global__ __aicore__ void {name}(GM_ADDR x) {{}}\\n')
'''

FAKE_BUILD = '''\
# Stand-in for the generated project's build: compiles the top-level .cpp of op_host/ and op_kernel/ (what
# includes they name resolved relative to them, as the compiler does), refuses an op defined twice or a file that
# does not compile (an include that is not there), makes a .run whose installer picks
# its directory as the template's scripts/install.sh does (--install-path, else $ASCEND_CUSTOM_OPP_PATH, else
# $ASCEND_OPP_PATH) and installs <dir>/vendors/<vendor_name> laid out as the template's CMake installs it (op_proto/,
# op_impl/, version.info; op_api/lib/libcust_opapi.so and the kernel binaries only if the binary package is on),
# plus, for --install-path, the bin/set_env.bash naming that directory (install.sh lines 270-282).
import collections, json, re
from pathlib import Path
CANN_HEADERS = {"kernel_operator.h", "lib/matmul_intf.h", "register/op_def_registry.h",
                "tiling/platform/platform_ascendc.h", "tiling/tiling_api.h"}
def preprocessed(path):
    text = path.read_text()
    for include in re.findall(r'#include "([^"]+)"', text):
        if (path.parent / include).is_file():
            text += preprocessed(path.parent / include)
        elif include not in CANN_HEADERS:
            raise SystemExit(f"{path}: {include}: No such file or directory")
    return text
found = collections.Counter()
for pattern, folder in [(r"class (\\w+) : public OpDef", "op_host"), (r"__aicore__ void (\\w+)\\(", "op_kernel")]:
    for f in Path(folder).glob("*.cpp"):
        found.update(re.findall(pattern, preprocessed(f)))
twice = [name for name, count in found.items() if count > 1]
if twice:
    raise SystemExit(f"defined more than once: {twice}")
variables = json.loads(Path("CMakePresets.json").read_text())["configurePresets"][0]["cacheVariables"]
vendor = variables["vendor_name"]["value"]
soc = variables["ASCEND_COMPUTE_UNIT"]["value"]
files = ["version.info", "op_proto/lib/linux/x86_64/libcust_opsproto_rt2.0.so",
         "op_impl/ai_core/tbe/op_tiling/lib/linux/x86_64/libcust_opmaster_rt2.0.so"]
if variables["ENABLE_BINARY_PACKAGE"]["value"] == "True":
    files += ["op_api/lib/libcust_opapi.so", f"op_impl/ai_core/tbe/kernel/{soc}/binary_info_config.json"]
run = f"""#!/bin/bash
if [ -n "$ASCEND_CUSTOM_OPP_PATH" ]; then dest="$ASCEND_CUSTOM_OPP_PATH"; else dest="$ASCEND_OPP_PATH"; fi
custom=""
for a in "$@"; do case "$a" in --install-path=*) dest="${{a#--install-path=}}"; custom=1;; esac; done
[ -n "$dest" ] || {{ echo "env ASCEND_OPP_PATH no exist"; exit 1; }}
target="$dest/vendors/{vendor}"
for f in {" ".join(files)}; do mkdir -p "$(dirname "$target/$f")" && touch "$target/$f"; done
if [ -n "$custom" ]; then
  mkdir -p "$target/bin"
  echo "export ASCEND_CUSTOM_OPP_PATH=$target:\\${{ASCEND_CUSTOM_OPP_PATH}}" >"$target/bin/set_env.bash"
fi
"""
Path("build_out").mkdir(exist_ok=True)
Path("build_out/custom_opp_ubuntu_x86_64.run").write_text(run)
'''

# The CANN files the generated project's build needs (scripts/build_npu.sh checks them before building).
CANN_FILES = {"include/register/op_def_registry.h": False, "lib64/libexe_graph.so": False,
              "lib64/libregister.so": False, "lib64/libtiling_api.a": False,
              "toolkit/tools/opbuild/op_build": True, "lib64/libnnopbase.so": False,
              "lib64/librt2_registry.a": False, "bin/opc": True, "compiler/ccec_compiler/bin/bisheng": True}


@pytest.fixture
def toolkit(tmp_path):
    """A stand-in Ascend machine: CANN directory, msopgen on PATH, an output directory for the scripts."""
    cann = fake_cann(tmp_path)
    for path, executable in CANN_FILES.items():
        (cann / path).parent.mkdir(parents=True, exist_ok=True)
        (cann / path).write_text("#!/bin/sh\n" if executable else "")
        (cann / path).chmod(0o755 if executable else 0o644)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "msopgen").write_text(FAKE_MSOPGEN)
    (bin_dir / "msopgen").chmod(0o755)
    (tmp_path / "fake_build.py").write_text(FAKE_BUILD)
    out = tmp_path / "out"
    env = dict(PATH=f"{bin_dir}:/usr/bin:/bin", ASCEND_ACTS_BUILD_OUT=out, FAKE_LOG=tmp_path / "msopgen.json",
               FAKE_BUILD=tmp_path / "fake_build.py")
    return SimpleNamespace(cann=cann, out=out, env=env, log=tmp_path / "msopgen.json", tmp=tmp_path)


def run_script(name, *args, **env):
    return subprocess.run(["bash", str(ROOT / "scripts" / name), *args], capture_output=True, text=True,
                          env=clean_env(**env), timeout=60)


def msopgen_calls(toolkit):
    return [json.loads(line) for line in toolkit.log.read_text().splitlines()]


def all_ops():
    """(json, op type) in the order build_npu.sh generates them: every op of every JSON of op_host/<family>/."""
    specs = sorted(ROOT.glob("op_host/*/*.json"), key=lambda path: path.relative_to(ROOT).as_posix())
    assert len(specs) == len(op_table.KERNELS)
    return [(spec, entry["op"]) for spec in specs for entry in json.loads(spec.read_text())]


def test_build_script_makes_the_package_from_our_sources(toolkit):
    result = run_script("build_npu.sh", **toolkit.env, ASCEND_HOME_PATH=toolkit.cann,
                        ASCEND_COMPUTE_UNIT="ascend910_93")
    assert result.returncode == 0, result.stderr
    calls = msopgen_calls(toolkit)
    # one msopgen call per op (-op), non-interactive; the first creates the project, the others add to it
    assert [(Path(args[args.index("-i") + 1]), args[args.index("-op") + 1]) for args in calls] == all_ops()
    assert all(args[0] == "gen" and args[args.index("-c") + 1] == "ai_core-Ascend910_9391" for args in calls)
    assert "-m" not in calls[0] and all(args[args.index("-m") + 1] == "1" for args in calls[1:])
    work = toolkit.out / "msopgen"
    for kernel in op_table.KERNELS:
        # each template replaced by an include of our file for that op
        for folder in ("op_host", "op_kernel"):
            ours = f"{kernel.family}/{kernel.base}.cpp"
            assert f'#include "{ours}"' in (work / folder / f"{kernel.entry}.cpp").read_text().splitlines()
        assert not (work / f"op_host/{kernel.entry}_tiling.h").exists()
    # our folders next to the templates, as they are (less msopgen's JSON)
    ours = [p for p in [*ROOT.glob("op_host/*/*"), *ROOT.glob("op_kernel/*/*")] if p.suffix != ".json"]
    assert sorted(p.relative_to(work).as_posix() for p in work.glob("op_*/*/*")) == \
           sorted(p.relative_to(ROOT).as_posix() for p in ours)
    assert all((work / p.relative_to(ROOT)).read_text() == p.read_text() for p in ours)
    variables = json.loads((work / "CMakePresets.json").read_text())["configurePresets"][0]["cacheVariables"]
    assert {k: v["value"] for k, v in variables.items()} == {
        "vendor_name": npu.VENDOR, "ENABLE_BINARY_PACKAGE": "True", "ASCEND_CANN_PACKAGE_PATH": str(toolkit.cann),
        "ASCEND_COMPUTE_UNIT": "ascend910_93"}
    assert [p.name for p in toolkit.out.glob("custom_opp_*.run")] == ["custom_opp_ubuntu_x86_64.run"]
    assert "for ascend910_93 (vendor ascend_acts)" in result.stdout


def test_build_script_gives_msopgen_a_soc_version_of_the_chosen_soc(toolkit):
    """msopgen's -c takes a SoC version: "ascend910b" itself would mean the first-generation ascend910."""
    assert run_script("build_npu.sh", **toolkit.env, ASCEND_HOME_PATH=toolkit.cann).returncode == 0
    assert {args[args.index("-c") + 1] for args in msopgen_calls(toolkit)} == {"ai_core-Ascend910B1"}
    variables = json.loads((toolkit.out / "msopgen/CMakePresets.json").read_text())["configurePresets"][0]
    assert variables["cacheVariables"]["ASCEND_COMPUTE_UNIT"]["value"] == "ascend910b"


def test_build_script_finds_the_toolkits_msopgen_without_set_env(toolkit):
    """Not on PATH (set_env.sh not sourced): the toolkit's python/site-packages/bin/msopgen."""
    site_bin = toolkit.cann / "python/site-packages/bin"
    site_bin.mkdir(parents=True)
    (toolkit.tmp / "bin/msopgen").rename(site_bin / "msopgen")
    result = run_script("build_npu.sh", **toolkit.env, ASCEND_HOME_PATH=toolkit.cann)
    assert result.returncode == 0, result.stderr
    assert len(msopgen_calls(toolkit)) == len(all_ops())


def test_build_script_stops_when_msopgen_names_an_op_differently(toolkit):
    result = run_script("build_npu.sh", **toolkit.env, ASCEND_HOME_PATH=toolkit.cann, FAKE_NAMING="joined")
    assert result.returncode == 5
    assert "no file in op_kernel/ defines actsbatchnormleakyrelu (msopgen generated actsbatchnormleakyrelu.cpp for " \
           "it)" in result.stderr
    assert not list(toolkit.out.glob("custom_opp_*.run"))


@pytest.mark.parametrize("missing, reason", [
    ("compiler/ccec_compiler/bin/bisheng", "not there (the AscendC compiler opc runs)"),
    ("toolkit/tools/opbuild/op_build", "not there (generates the aclnn API and op proto, cmake/func.cmake)"),
    ("bin/opc", "there, but not executable"),
    ("toolkit/tools/opbuild/op_build", "there, but built for another architecture")])
def test_build_script_stops_at_the_first_cann_binary_that_is_missing(toolkit, missing, reason):
    binary = toolkit.cann / missing
    if reason.startswith("not there"):
        binary.unlink()
    elif "not executable" in reason:
        binary.chmod(0o644)
    else:  # an ELF header for a machine that is not this one (62 x86-64, 183 AArch64)
        other = 183 if os.uname().machine == "x86_64" else 62
        binary.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(11) + other.to_bytes(2, "little") + bytes(44))
    result = run_script("build_npu.sh", **toolkit.env, ASCEND_HOME_PATH=toolkit.cann)
    assert result.returncode == 6, result.stderr
    message = one_line(result.stderr)
    assert f"msopgen generated the project for all {len(all_ops())} ops" in message
    assert f"the first CANN file it needs is missing: {binary}: {reason}" in message
    assert len(msopgen_calls(toolkit)) == len(all_ops())
    assert not list(toolkit.out.glob("custom_opp_*.run")) and not (toolkit.out / "msopgen/build_out").exists()


@pytest.mark.parametrize("soc, hint", [("ascend910", ""), ("ascend310p", " (310P is not supported: docs/npu.md)"),
                                       ("Ascend910B3",
                                        " (Ascend910B3 is a chip of the SoC ascend910b: set ascend910b)"),
                                       ("Ascend910_9391", " (Ascend910_9391 is a chip of the SoC ascend910_93: set "
                                                          "ascend910_93)")])
def test_build_script_rejects_an_unsupported_soc(toolkit, soc, hint):
    result = run_script("build_npu.sh", **toolkit.env, ASCEND_HOME_PATH=toolkit.cann, ASCEND_COMPUTE_UNIT=soc)
    assert result.returncode == 2
    assert f"unsupported SoC '{soc}': set ASCEND_COMPUTE_UNIT to ascend910b or ascend910_93{hint}" in result.stderr
    assert not toolkit.out.exists() and not toolkit.log.exists()


def test_install_script_puts_the_package_where_ascend_acts_looks(toolkit):
    assert run_script("build_npu.sh", **toolkit.env, ASCEND_HOME_PATH=toolkit.cann).returncode == 0
    opp = toolkit.cann / "opp"
    env = dict(toolkit.env, ASCEND_HOME_PATH=toolkit.cann, ASCEND_OPP_PATH=opp)
    result = run_script("install_npu.sh", **env)
    assert result.returncode == 0, result.stderr
    vendor = opp / "vendors" / npu.VENDOR
    assert f"to {vendor}" in result.stdout and "ASCEND_CUSTOM_OPP_PATH" not in result.stdout
    assert npu.find_op_package({"ASCEND_HOME_PATH": str(toolkit.cann)}) == vendor

    custom = toolkit.tmp / "custom"
    custom.mkdir()
    result = run_script("install_npu.sh", "--install-path", str(custom), **env)
    assert result.returncode == 0, result.stderr
    vendor = custom / "vendors" / npu.VENDOR
    assert f"export ASCEND_CUSTOM_OPP_PATH={vendor}:" in result.stdout
    assert npu.find_op_package({"ASCEND_CUSTOM_OPP_PATH": f"/elsewhere:{vendor}"}) == vendor


def test_install_script_honours_ascend_custom_opp_path_as_the_installer_does(toolkit):
    """The package's installer installs into $ASCEND_CUSTOM_OPP_PATH when set (and no --install-path)."""
    assert run_script("build_npu.sh", **toolkit.env, ASCEND_HOME_PATH=toolkit.cann).returncode == 0
    custom = toolkit.tmp / "custom_opp"
    env = dict(toolkit.env, ASCEND_HOME_PATH=toolkit.cann, ASCEND_OPP_PATH=toolkit.cann / "opp")
    result = run_script("install_npu.sh", **env, ASCEND_CUSTOM_OPP_PATH=custom)
    assert result.returncode == 0, result.stderr
    vendor = custom / "vendors" / npu.VENDOR
    assert f"installed custom_opp_ubuntu_x86_64.run to {vendor}" in result.stdout
    assert f"export ASCEND_CUSTOM_OPP_PATH={vendor}:" in result.stdout
    assert (vendor / "op_api/lib/libcust_opapi.so").is_file() and not (toolkit.cann / "opp").exists()
    # a list, or the vendor directory the runtime reads: the installer would misplace the package
    for value, message in [(f"{custom}:/other", "lists several directories"),
                           (vendor, "is the vendor directory the runtime reads")]:
        result = run_script("install_npu.sh", **env, ASCEND_CUSTOM_OPP_PATH=value)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not (vendor / "vendors").exists() and not Path(f"{custom}:").exists()


def test_install_script_refuses_a_package_without_the_aclnn_api(toolkit):
    toolkit.out.mkdir()
    no_api = '#!/bin/bash\nmkdir -p "$ASCEND_OPP_PATH/vendors/ascend_acts/op_impl"\n'
    (toolkit.out / "custom_opp_x.run").write_text(no_api)
    opp = toolkit.cann / "opp"
    result = run_script("install_npu.sh", **toolkit.env, ASCEND_HOME_PATH=toolkit.cann, ASCEND_OPP_PATH=opp)
    assert result.returncode == 5 and "lacks the aclnn API" in result.stderr
    result = run_script("install_npu.sh", "--install-path", str(toolkit.tmp / "missing"), **toolkit.env,
                        ASCEND_HOME_PATH=toolkit.cann)
    assert result.returncode == 2 and "no directory" in result.stderr


def test_cmake_target_runs_the_build_script_for_the_chosen_soc(toolkit):
    build = toolkit.tmp / "build"
    result = configure(build, "-DASCEND_ACTS_SOC=ascend910_93", ASCEND_HOME_PATH=toolkit.cann)
    assert result.returncode == 0, result.stderr
    (line,) = npu_status_lines(result.stdout)
    assert f"CANN toolkit at {toolkit.cann} (from $ASCEND_HOME_PATH)" in line and "--target npu_op_package" in line
    assert "npu_op_package" in targets(build)
    assert "all: CMakeFiles/npu_op_package.dir/all" not in (build / "CMakeFiles/Makefile2").read_text()
    result = subprocess.run(["cmake", "--build", str(build), "--target", "npu_op_package"], capture_output=True,
                            text=True, env=clean_env(**toolkit.env), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    calls = [json.loads(line) for line in toolkit.log.read_text().splitlines()]
    assert calls and all(args[args.index("-c") + 1] == "ai_core-Ascend910_9391" for args in calls)
    assert list(toolkit.out.glob("custom_opp_*.run"))
    variables = json.loads((toolkit.out / "msopgen/CMakePresets.json").read_text())["configurePresets"][0]
    assert variables["cacheVariables"]["ASCEND_CANN_PACKAGE_PATH"]["value"] == str(toolkit.cann)


def test_cmake_npu_on_with_cann_builds_the_package_with_all(toolkit):
    build = toolkit.tmp / "build"
    result = configure(build, "-DASCEND_ACTS_NPU=ON", ASCEND_HOME_PATH=toolkit.cann)
    assert result.returncode == 0, result.stderr
    assert "builds with `all`" in npu_status_lines(result.stdout)[0]
    assert "all: CMakeFiles/npu_op_package.dir/all" in (build / "CMakeFiles/Makefile2").read_text()


# --- setup.py: build the extension only with CANN, torch_npu and the op package ---------------------------
def fake_torch_npu(tmp_path):
    """A torch_npu that can be found but fails if imported (setup.py must only find it)."""
    site = tmp_path / "site"
    (site / "torch_npu").mkdir(parents=True)
    (site / "torch_npu/__init__.py").write_text("raise ImportError('stand-in torch_npu must not be imported')\n")
    return site


def setup_py(*args, **env):
    return subprocess.run([sys.executable, "setup.py", *(args or ["--name"])], cwd=ROOT, capture_output=True,
                          text=True, env=clean_env(**env), timeout=120)


def setup_lines(result):
    return [line for line in result.stderr.splitlines() if line.startswith("ascend_acts:")]


def test_setup_skips_the_extension_with_one_line_saying_why(tmp_path):
    cann = fake_cann(tmp_path)
    site = fake_torch_npu(tmp_path)
    not_installed = "the custom op package is not installed (scripts/build_npu.sh, then scripts/install_npu.sh)"
    cases = [({}, "CANN not found (ASCEND_CANN_PACKAGE_PATH and ASCEND_HOME_PATH unset; source <CANN>/set_env.sh)"),
             ({"ASCEND_HOME_PATH": tmp_path},
              f"ASCEND_HOME_PATH={tmp_path} is not a CANN toolkit (no include/acl/acl.h)"),
             ({"ASCEND_HOME_PATH": cann}, "torch_npu is not importable here (install it; with pip use "
                                          "--no-build-isolation so the build sees it)"),
             # nothing to build the op package with, and none installed to link
             ({"ASCEND_HOME_PATH": cann, "PYTHONPATH": site},
              f"no msopgen on PATH nor in {cann}/python/site-packages/bin to build the op package into the wheel "
              f"(source <CANN>/set_env.sh), and {not_installed}"),
             ({"ASCEND_HOME_PATH": cann, "PYTHONPATH": site, "ASCEND_ACTS_OP_PACKAGE": "installed"}, not_installed)]
    for env, reason in cases:
        result = setup_py(**env)
        assert result.returncode == 0 and result.stdout.strip() == "ascend-acts", result.stderr
        (line,) = setup_lines(result)
        assert line.startswith("ascend_acts: not building the torch_npu extension ascend_acts._npu_ops: ")
        assert line.endswith(reason), (env, line)


def test_setup_builds_the_extension_against_an_installed_package(toolkit):
    """The manual path: an installed op package is linked when the toolkit has no msopgen to build one, or with
    ASCEND_ACTS_OP_PACKAGE=installed."""
    site = fake_torch_npu(toolkit.tmp)
    vendor = toolkit.cann / "opp/vendors/ascend_acts"
    (vendor / "op_api/lib").mkdir(parents=True)
    (vendor / "op_api/lib/libcust_opapi.so").write_bytes(b"")
    expected = [f"ascend_acts: building the torch_npu extension ascend_acts._npu_ops (CANN {toolkit.cann}, torch_npu "
                f"{site / 'torch_npu'}, op package {vendor})"]
    without_msopgen = dict(PATH="/usr/bin:/bin", ASCEND_HOME_PATH=toolkit.cann, PYTHONPATH=site)
    with_msopgen = dict(toolkit.env, ASCEND_HOME_PATH=toolkit.cann, PYTHONPATH=site, ASCEND_ACTS_OP_PACKAGE="installed")
    for env in (without_msopgen, with_msopgen):
        result = setup_py(**env)
        assert result.returncode == 0, result.stderr  # and the stand-in torch_npu was not imported
        assert setup_lines(result) == expected
    assert npu.find_op_package({"ASCEND_HOME_PATH": str(toolkit.cann)}) == vendor  # the same package ascend_acts loads
    result = setup_py("build_op_package", **without_msopgen)
    assert result.returncode != 0 and f"the extension links the installed op package {vendor}" in result.stderr

    result = setup_py(**without_msopgen, ASCEND_ACTS_OP_PACKAGE="vendored")
    assert result.returncode != 0
    assert "ASCEND_ACTS_OP_PACKAGE='vendored' is not a choice: build (the default: build the op package into the " \
           "wheel) or installed" in result.stderr


FAKE_CXX = """\
#!/usr/bin/env python3
# Stand-in for g++ building the torch_npu extension here (no torch_npu or CANN headers and libraries to compile and
# link it against): records each call, writes the files the build expects (-o, and -MF for ninja).
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
if "-dumpfullversion" in args:  # torch's compiler check
    sys.exit(print("11.4.0"))
with open(os.environ["FAKE_CXX_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
output = args[args.index("-o") + 1]
Path(output).write_bytes(b"")
if "-MF" in args:
    Path(args[args.index("-MF") + 1]).write_text(f"{output}:\\n")
"""


def test_the_wheel_carries_the_op_package_and_the_extension_finds_it(toolkit):
    """With CANN's msopgen and torch_npu here, `pip wheel .` builds the op package (build_npu.sh, then
    install_npu.sh --install-path) inside the build, laid out as the package's installer lays it out, links the
    extension to its aclnn library by a path relative to the extension, and carries both; importing the installed
    wheel puts the package first on ASCEND_CUSTOM_OPP_PATH, finds it first, and info names it. The stand-ins: the
    toolkit's msopgen, project build and installer, torch_npu, and the compiler of the extension."""
    (toolkit.tmp / "bin/g++").write_text(FAKE_CXX)
    (toolkit.tmp / "bin/g++").chmod(0o755)
    fake_cxx = str(toolkit.tmp / "bin/g++")
    site = fake_torch_npu(toolkit.tmp)
    source = checkout_copy(toolkit.tmp / "src")
    env = dict(toolkit.env, **reuse_emulator_env(), ASCEND_HOME_PATH=toolkit.cann, PYTHONPATH=site,
               ASCEND_COMPUTE_UNIT="ascend910_93", CC=fake_cxx, CXX=fake_cxx, LDSHARED=f"{fake_cxx} -shared",
               FAKE_CXX_LOG=toolkit.tmp / "cxx.json")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", ".", "--no-deps", "--no-build-isolation",
                             "-w", str(toolkit.tmp / "dist")], cwd=source, capture_output=True, text=True,
                            env=clean_env(**env), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert (f"ascend_acts: building the torch_npu extension ascend_acts._npu_ops (CANN {toolkit.cann}, torch_npu "
            f"{site / 'torch_npu'}, op package built into ascend_acts/packages/vendors/ascend_acts by "
            "scripts/build_npu.sh for ascend910_93)") in output
    assert [(args[args.index("-op") + 1], args[args.index("-c") + 1]) for args in msopgen_calls(toolkit)] == \
        [(op, "ai_core-Ascend910_9391") for _, op in all_ops()]

    (wheel,) = (toolkit.tmp / "dist").glob("ascend_acts-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    carried = "ascend_acts/packages/vendors/ascend_acts/"
    # the installer's layout, less the set_env.bash naming the build directory; no msopgen project, no .run
    assert sorted(name.removeprefix(carried) for name in names if name.startswith("ascend_acts/packages/")) == [
        "op_api/lib/libcust_opapi.so", "op_impl/ai_core/tbe/kernel/ascend910_93/binary_info_config.json",
        "op_impl/ai_core/tbe/op_tiling/lib/linux/x86_64/libcust_opmaster_rt2.0.so",
        "op_proto/lib/linux/x86_64/libcust_opsproto_rt2.0.so", "version.info"]
    assert f"ascend_acts/_npu_ops{sysconfig.get_config_var('EXT_SUFFIX')}" in names
    (link,) = [args for args in (json.loads(line) for line in (toolkit.tmp / "cxx.json").read_text().splitlines())
               if "-shared" in args]
    built = next(Path(arg[2:]) for arg in link if arg.startswith("-L") and arg.endswith(carried + "op_api/lib"))
    assert built.is_relative_to(source / "build") and "-lcust_opapi" in link
    assert "-Wl,-rpath,$ORIGIN/packages/vendors/ascend_acts/op_api/lib" in link  # wherever the wheel goes

    installed = toolkit.tmp / "site-packages"
    zipfile.ZipFile(wheel).extractall(installed)  # what pip installs
    other = toolkit.tmp / "opp/vendors/other"  # another vendor's package stays, after ours
    code = ("import json, os, ascend_acts\n"
            "from ascend_acts import info\n"
            "from ascend_acts.backends import npu\n"
            "print(json.dumps([os.environ['ASCEND_CUSTOM_OPP_PATH'], str(npu.find_op_package()), info.report()]))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env=clean_env(PYTHONPATH=installed, ASCEND_CUSTOM_OPP_PATH=other))
    assert result.returncode == 0, result.stderr
    variable, found, report = json.loads(result.stdout)
    vendor = (installed / carried).resolve()
    assert (variable, found) == (f"{vendor}:{other}", str(vendor))
    assert f"  op package  carried by this install (built with the extension) at {vendor}, on $ASCEND_CUSTOM_OPP_PATH" \
        in report.splitlines()


def test_setup_fails_when_the_op_package_build_fails(toolkit):
    """CANN and torch_npu are here, so the kernels were asked for: a failed package build fails the build, saying
    how to link an installed package instead."""
    (toolkit.cann / "compiler/ccec_compiler/bin/bisheng").unlink()
    env = dict(toolkit.env, ASCEND_HOME_PATH=toolkit.cann, PYTHONPATH=fake_torch_npu(toolkit.tmp))
    result = setup_py("build_op_package", "--build-lib", str(toolkit.tmp / "lib"), "--build-temp",
                      str(toolkit.tmp / "temp"), **env)
    assert result.returncode != 0
    assert "the first CANN file it needs is missing" in result.stderr
    assert "ascend_acts: scripts/build_npu.sh failed (exit 6, its message is above): fix that, or set " \
           "ASCEND_ACTS_OP_PACKAGE=installed to link an installed op package instead" in one_line(result.stderr)
    assert not (toolkit.tmp / "lib/ascend_acts/packages").exists()


# --- at import: the carried package first on ASCEND_CUSTOM_OPP_PATH, unless the user named another ---------
@pytest.fixture
def vendored(tmp_path, monkeypatch):
    """This install's own op package (as a wheel built with CANN carries it)."""
    package = tmp_path / "site/ascend_acts/packages/vendors/ascend_acts"
    (package / "op_api/lib").mkdir(parents=True)
    (package / "op_api/lib/libcust_opapi.so").write_bytes(b"")
    monkeypatch.setattr(npu, "VENDORED_PACKAGE", package)
    return package


def user_package(tmp_path, with_library=True):
    package = tmp_path / "custom/vendors/ascend_acts"
    (package / "op_api/lib").mkdir(parents=True)
    if with_library:
        (package / "op_api/lib/libcust_opapi.so").write_bytes(b"")
    return package


def test_the_carried_package_goes_first_on_the_custom_opp_path(vendored, tmp_path):
    env = {}
    assert npu.use_vendored_op_package(env) == vendored and env == {"ASCEND_CUSTOM_OPP_PATH": str(vendored)}
    env = {"ASCEND_CUSTOM_OPP_PATH": "/a/vendors/x::/b/vendors/y"}  # other vendors, kept as they are, after ours
    npu.use_vendored_op_package(env)
    assert env["ASCEND_CUSTOM_OPP_PATH"] == f"{vendored}:/a/vendors/x::/b/vendors/y"
    npu.use_vendored_op_package(env)  # once only (a child process inherits the variable)
    assert env["ASCEND_CUSTOM_OPP_PATH"] == f"{vendored}:/a/vendors/x::/b/vendors/y"
    cann = fake_cann(tmp_path)
    installed = cann / "opp/vendors/ascend_acts"
    (installed / "op_api/lib").mkdir(parents=True)
    (installed / "op_api/lib/libcust_opapi.so").write_bytes(b"")
    env["ASCEND_HOME_PATH"] = str(cann)  # CANN takes ASCEND_CUSTOM_OPP_PATH's vendors before $ASCEND_OPP_PATH's
    assert npu.op_package_candidates(env) == [vendored, installed] and npu.find_op_package(env) == vendored
    assert info.npu_report(env)[2] == (f"op package  carried by this install (built with the extension) at {vendored}, "
                                       "on $ASCEND_CUSTOM_OPP_PATH")
    # a stale entry of ours without the aclnn library is no choice of the user's
    env = {"ASCEND_CUSTOM_OPP_PATH": str(user_package(tmp_path, with_library=False))}
    npu.use_vendored_op_package(env)
    assert env["ASCEND_CUSTOM_OPP_PATH"] == f"{vendored}:{tmp_path / 'custom/vendors/ascend_acts'}"


def test_a_users_own_package_on_the_custom_opp_path_keeps_precedence(vendored, tmp_path):
    """E.g. a build installed with install_npu.sh --install-path and its set_env.bash sourced."""
    mine = user_package(tmp_path)
    env = {"ASCEND_CUSTOM_OPP_PATH": f"/a/vendors/x:{mine}"}
    assert npu.use_vendored_op_package(env) is None and env == {"ASCEND_CUSTOM_OPP_PATH": f"/a/vendors/x:{mine}"}
    assert npu.op_package_candidates(env) == [mine, vendored] and npu.find_op_package(env) == mine
    assert info.npu_report(env)[2] == (f"op package  installed at {mine} ($ASCEND_CUSTOM_OPP_PATH names it, so this "
                                       f"install's own package {vendored} is not used)")


def test_without_a_carried_package_nothing_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(npu, "VENDORED_PACKAGE", tmp_path / "ascend_acts/packages/vendors/ascend_acts")  # CPU wheel
    env = {"ASCEND_CUSTOM_OPP_PATH": "/a/vendors/x"}
    assert npu.use_vendored_op_package(env) is None and env == {"ASCEND_CUSTOM_OPP_PATH": "/a/vendors/x"}
    assert npu.op_package_candidates(env) == []


def test_the_vendor_name_is_the_same_everywhere():
    assert f"vendor={npu.VENDOR}\n" in (ROOT / "scripts/build_npu.sh").read_text()
    assert f"vendor={npu.VENDOR}\n" in (ROOT / "scripts/install_npu.sh").read_text()
    assert f'VENDOR = "{npu.VENDOR}"' in (ROOT / "setup.py").read_text()
    # where setup.py puts the carried package is where ascend_acts looks for it
    assert 'VENDORED = Path("packages", "vendors", VENDOR)' in (ROOT / "setup.py").read_text()
    assert npu.VENDORED_PACKAGE.relative_to(Path(ascend_acts.__file__).parent) == Path("packages/vendors", npu.VENDOR)
    assert f'NPU_EXTENSION = "{npu.EXTENSION}"' in (ROOT / "setup.py").read_text()


def test_the_carried_package_spelt_another_way_is_still_ours(vendored, tmp_path):
    """A symlink to this install's package (or a `..` spelling) is not a user's other package."""
    link = tmp_path / "link"
    link.symlink_to(vendored.parent)
    for spelling in (link / "ascend_acts", vendored.parent / ".." / "vendors" / "ascend_acts"):
        env = {"ASCEND_CUSTOM_OPP_PATH": str(spelling)}
        assert npu.use_vendored_op_package(env) == vendored
        assert env["ASCEND_CUSTOM_OPP_PATH"] == str(spelling)  # already there: nothing prepended


def test_an_entry_that_cannot_be_examined_fails_nothing(vendored, tmp_path):
    """Python 3.11's Path.is_file raises for a name too long (or EACCES): neither import nor info may."""
    too_long = f"/{'x' * 300}/ascend_acts"
    env = {"ASCEND_CUSTOM_OPP_PATH": too_long}
    assert npu.use_vendored_op_package(env) == vendored
    assert env["ASCEND_CUSTOM_OPP_PATH"] == f"{vendored}:{too_long}"
    assert npu.find_op_package(env) == vendored
    assert info.npu_report(env)
