"""scripts/npu_selftest.sh cannot run here (no NPU): its argument handling, its ordered step list and its refusal
to run anything without an NPU are tested, and the hardware checks of scripts/npu_selftest.py are run on the CPU
reference backend, where they must pass, and with a wrong oracle, where they must fail."""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from real_toolchain import ROOT

STEPS = ["1 build", "2 install", "3 extension", "4 wraparound", "5 index 2**24", "6 index 2**31", "7 eval kernel",
         "8 npu tests", "9 timings"]


def selftest(*args, **env):
    base = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND")}
    base.update({"PATH": "/usr/bin:/bin", **{k: str(v) for k, v in env.items()}})
    return subprocess.run(["bash", str(ROOT / "scripts/npu_selftest.sh"), "--python", sys.executable, *args],
                          capture_output=True, text=True, env=base, timeout=120)


def test_lists_what_only_hardware_can_show_in_order():
    result = selftest("--list")
    assert result.returncode == 0 and result.stdout.splitlines() == STEPS


@pytest.mark.parametrize("args, message", [
    (["--bogus"], "unknown argument --bogus"), (["--soc"], "--soc needs a value"),
    (["--soc", "ascend310p"], "--soc ascend310p is not supported"), (["--timeout", "10s"], "--timeout takes seconds"),
    (["--python", "/nonexistent/python"], "no python at /nonexistent/python")])
def test_bad_arguments_are_refused(args, message):
    result = selftest(*args)
    assert result.returncode == 2 and message in result.stderr


@pytest.mark.slow
def test_refuses_without_an_npu_and_runs_nothing(tmp_path):
    out = tmp_path / "out"
    result = selftest(ASCEND_ACTS_BUILD_OUT=out)
    assert result.returncode == 3 and "needs an Ascend NPU: npu-smi not found" in result.stderr
    # with the driver's tool and CANN's variable present, torch_npu still has to see a device
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npu-smi").write_text("#!/bin/sh\n")
    (bin_dir / "npu-smi").chmod(0o755)
    result = selftest(ASCEND_ACTS_BUILD_OUT=out, ASCEND_HOME_PATH=tmp_path, PATH=f"{bin_dir}:/usr/bin:/bin")
    assert result.returncode == 3 and "torch_npu in" in result.stderr and "sees no device" in result.stderr
    assert not out.exists() and "===" not in result.stderr


def load_checks():
    spec = importlib.util.spec_from_file_location("npu_selftest", ROOT / "scripts/npu_selftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("check", ["wraparound", "noise-past-2**24"])
def test_the_checks_pass_on_the_cpu_reference(check):
    result = subprocess.run([sys.executable, str(ROOT / "scripts/npu_selftest.py"), check, "--device", "cpu"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and f"{check}: pass: noise bit-identical" in result.stdout, result.stderr


def test_a_noise_check_fails_against_a_wrong_oracle(monkeypatch):
    checks = load_checks()
    true_noise = checks.rng.noise
    monkeypatch.setattr(checks.rng, "noise", lambda seed, index, lower, upper: true_noise(
        seed, np.where(index == 5, 6, index), lower, upper))
    ok, detail = checks.check_wraparound("cpu")
    assert not ok and "noise differs from the reference at flat index 5 (1 of 1048576" in detail
