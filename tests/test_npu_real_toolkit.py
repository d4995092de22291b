"""scripts/build_npu.sh against the REAL CANN 8.1 toolkit files, as far as they go on this machine: the
toolkit's own msopgen generates the project for every op (accepting every generated JSON), our OpDefs and kernels
replace its templates, and the
script stops at the first CANN binary the package build needs that the extracted toolkit does not have, naming
it. Runs when an extracted toolkit is here (tests/real_toolchain.py says where it looks), skips otherwise."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_acts import op_table
from real_toolchain import ROOT, cann_toolkit

pytestmark = pytest.mark.slow  # the real msopgen over every op
SPECS = sorted(ROOT.glob("op_host/*/*.json"))


def installed_view(tmp_path) -> Path:
    """The extracted toolkit with the installer's links laid over it (scripts/cann_toolkit_view.sh)."""
    view = tmp_path / "cann"
    subprocess.run(["bash", str(ROOT / "scripts/cann_toolkit_view.sh"), str(cann_toolkit()), str(view)],
                   check=True, capture_output=True, text=True, timeout=60)
    return view


@pytest.mark.parametrize("soc", ["ascend910b", "ascend910_93"])
def test_build_script_runs_the_real_msopgen_for_every_op(tmp_path, soc):
    view = installed_view(tmp_path)
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND") and k != "PYTHONPATH"}
    env.update(PATH="/usr/bin:/bin", ASCEND_HOME_PATH=str(view), ASCEND_ACTS_BUILD_OUT=str(out),
               ASCEND_COMPUTE_UNIT=soc)  # no msopgen on PATH: the toolkit's own
    result = subprocess.run(["bash", str(ROOT / "scripts/build_npu.sh")], capture_output=True, text=True, env=env,
                            timeout=600)
    ops = [entry["op"] for spec in SPECS for entry in json.loads(spec.read_text())]
    assert result.stdout.count("Generation completed") == len(ops), result.stdout[-3000:]
    assert result.returncode == 6, result.stderr
    message = " ".join(result.stderr.split())
    assert f"msopgen generated the project for all {len(ops)} ops" in message
    # the snapshot has no CANN libraries: the generated project's opbuild step links libexe_graph first
    assert f"the first CANN file it needs is missing: {view}/lib64/libexe_graph.so: not there" in message
    assert "compiler/ccec_compiler/bin/bisheng: not there" in message
    work = out / "msopgen"
    assert sorted(ops) == sorted(kernel.op_type for kernel in op_table.KERNELS)
    for folder in ("op_host", "op_kernel"):  # msopgen named each op's files as the table names its entry
        assert sorted(p.stem for p in (work / folder).glob("*.cpp")) == sorted(k.entry for k in op_table.KERNELS)
    for kernel in op_table.KERNELS:  # msopgen's templates were all replaced by includes of our files
        for folder in ("op_host", "op_kernel"):
            template = (work / folder / f"{kernel.entry}.cpp").read_text()
            assert f'#include "{kernel.family}/{kernel.base}.cpp"' in template and "TODO" not in template
            assert (work / folder / kernel.family / f"{kernel.base}.cpp").read_text() == \
                (ROOT / folder / kernel.family / f"{kernel.base}.cpp").read_text()
    # the real msopgen mapped our SoC version to the short name the project builds for
    assert f"set(ASCEND_COMPUTE_UNIT {soc} " in (work / "cmake/config.cmake").read_text()


def test_the_wheel_build_runs_the_real_msopgen_and_stops_where_the_package_build_would(tmp_path):
    """setup.py's build_op_package (what `pip wheel .` runs with CANN and torch_npu) drives the same script against
    the real toolkit: msopgen generates every op, then the wheel build fails with the script's exit code 6 and how
    to link an installed package instead, leaving nothing half-built in the package directory."""
    view = installed_view(tmp_path)
    site = tmp_path / "site"  # torch_npu found, never imported
    (site / "torch_npu").mkdir(parents=True)
    (site / "torch_npu/__init__.py").write_text("raise ImportError('stand-in torch_npu must not be imported')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND") and k != "PYTHONPATH"}
    env.update(PATH="/usr/bin:/bin", ASCEND_HOME_PATH=str(view), PYTHONPATH=str(site))
    result = subprocess.run([sys.executable, "setup.py", "build_op_package", "--build-lib", str(tmp_path / "lib"),
                             "--build-temp", str(tmp_path / "temp")], cwd=ROOT, capture_output=True, text=True,
                            env=env, timeout=600)
    ops = [entry["op"] for spec in SPECS for entry in json.loads(spec.read_text())]
    assert result.stdout.count("Generation completed") == len(ops), result.stdout[-3000:]
    assert result.returncode != 0
    message = " ".join(result.stderr.split())
    assert "op package built into ascend_acts/packages/vendors/ascend_acts by scripts/build_npu.sh for ascend910b" \
        in message
    assert f"the first CANN file it needs is missing: {view}/lib64/libexe_graph.so: not there" in message
    assert "ascend_acts: scripts/build_npu.sh failed (exit 6, its message is above): fix that, or set " \
           "ASCEND_ACTS_OP_PACKAGE=installed" in message
    assert not (tmp_path / "lib/ascend_acts/packages").exists()
