"""The CPU wheel end to end: `pip wheel .` of a clean copy of the tree, installed into a fresh venv, runs the
README's demo (few steps) and a few fast test files against the installed package, away from the source tree.

Two shortcuts keep it near 30 s on 2 cores instead of ~2.5 min, and say what they skip:
- the emulator modules are the ones the editable install of this tree already built with CMake (CI's
  `pip install -e .` just did: wheel_build.reuse_emulator_env), so the wheel's CMake step, the same CMakeBuild code
  as the editable install's, does not run a second time; without built modules here it does run;
- the fresh venv gets the wheel's requirements (and pytest) as links to this environment's installed
  distributions, the closure of the wheel's own Requires-Dist, instead of ~1 GB of torch unpacked again; the wheel
  itself is installed by pip. A requirement the wheel does not declare is not there."""

import email.parser
import importlib.metadata
import os
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from wheel_build import ROOT, checkout_copy, reuse_emulator_env

pytestmark = pytest.mark.slow  # pip, a venv and subprocesses
FAST_TESTS = ["tests/test_api.py", "tests/test_leaky_relu.py", "tests/test_sim_kernels.py"]


def clean_env(**overrides):
    """No Ascend variable, nothing on PYTHONPATH: only the venv decides what is imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND") and k != "PYTHONPATH"}
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def link_requirements(requirements, target: Path) -> list[str]:
    """Links into `target` every distribution of this environment that `requirements` need, dependencies included
    (markers evaluated without extras), as pip would install them; returns their names."""
    todo, linked = [Requirement(text) for text in requirements], []
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in linked or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        linked.append(name)
        distribution = importlib.metadata.distribution(name)
        for top in {Path(f).parts[0] for f in distribution.files or () if not str(f).startswith("..")}:
            if not (target / top).exists():
                (target / top).symlink_to(Path(distribution.locate_file(top)))
        todo += [Requirement(text) for text in distribution.requires or ()]
    return linked


def run(command, timeout, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def test_the_cpu_wheel_installs_into_a_fresh_venv_and_runs_the_demo_and_tests(tmp_path):
    started = time.monotonic()
    source = checkout_copy(tmp_path / "src")
    built = run([sys.executable, "-m", "pip", "wheel", "-v", ".", "--no-deps", "--no-build-isolation", "-w",
                 str(tmp_path / "dist")], timeout=600, cwd=source, env=clean_env(**reuse_emulator_env()))
    # a CPU-only build says why there is no NPU extension, and carries no op package
    assert "not building the torch_npu extension ascend_acts._npu_ops: CANN not found" in built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("ascend_acts-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("_sim", "_sim_tests", "_cpu"):
        assert f"ascend_acts/{module}{sysconfig.get_config_var('EXT_SUFFIX')}" in names
    assert not [name for name in names if "/packages/" in name or "_npu_ops" in name]

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120)
    python = venv / "bin/python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        timeout=300, env=clean_env())
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    timeout=60).stdout.strip())
    metadata = email.parser.Parser().parsestr(zipfile.ZipFile(wheel).read(
        next(name for name in names if name.endswith(".dist-info/METADATA"))).decode())
    requirements = [f"{r.name}{r.specifier}" for r in map(Requirement, metadata.get_all("Requires-Dist"))
                    if not r.marker or r.marker.evaluate({"extra": "demo"})]  # the library's and the demo's
    assert {"torch", "numpy", "matplotlib"} <= {Requirement(r).name for r in requirements}
    links = tmp_path / "requirements"
    links.mkdir()
    link_requirements([*requirements, "pytest"], links)
    (site / "requirements.pth").write_text(f"{links}\n")  # after the venv's own site-packages on sys.path

    work = tmp_path / "work"  # nowhere near the source tree
    work.mkdir()
    where = run([str(python), "-c", "import ascend_acts, ascend_acts._sim as sim; print(ascend_acts.__file__); "
                                    "print(sim.__file__)"], timeout=120, cwd=work, env=clean_env()).stdout.split()
    assert all(Path(path).is_relative_to(site / "ascend_acts") for path in where), where

    demo = run([str(python), "-m", "ascend_acts", "demo", "--steps", "10", "--out", str(work / "sine.png")],
               timeout=300, cwd=work, env=clean_env())
    assert "trained 10 steps on backend 'reference'" in demo.stdout and (work / "sine.png").stat().st_size > 0
    info = run([str(python), "-m", "ascend_acts", "info"], timeout=120, cwd=work, env=clean_env()).stdout
    assert "sim        available" in info and "op package  not installed" in info

    # the fast subset of a few test files, against the installed package (imported first, so pytest cannot pick
    # up another one), the emulator required
    code = (f"import sys, ascend_acts, pytest; assert ascend_acts.__file__.startswith({str(site)!r}); "
            f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-o', 'addopts=', '-m', 'not slow', "
            f"*{[str(ROOT / path) for path in FAST_TESTS]!r}]))")
    tests = run([str(python), "-c", code], timeout=300, cwd=work, env=clean_env(ASCEND_ACTS_REQUIRE_SIM=1))
    assert " passed" in tests.stdout and "failed" not in tests.stdout and "skipped" not in tests.stdout
    print(f"wheel -> fresh venv -> demo and {len(FAST_TESTS)} test files: {time.monotonic() - started:.1f} s")
