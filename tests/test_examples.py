"""Smoke runs: every example and benchmark script with --quick, outputs into a temporary directory."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# script -> files it must write into its output directory
SCRIPTS = {
    "examples/dcgan.py": ["samples_final.png", "losses.png", "real.png", "checkpoint.pt"],
    "examples/slope_sweep.py": ["slope_sweep.csv", "slope_sweep_runs.csv", "slope_sweep.png"],
    "benchmarks/bench_leaky_relu.py": ["leaky_relu.csv", "leaky_relu.md", "leaky_relu.png"],
    "benchmarks/bench_rrelu.py": ["rrelu.csv", "rrelu.md", "rrelu.png"],
    "benchmarks/bench_dcgan_step.py": ["dcgan_step.csv", "dcgan_step.md", "dcgan_step.png"],
}


def run(script: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(ROOT / script), "--quick", *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_quick_run_writes_its_outputs(script, tmp_path):
    if script == "examples/dcgan.py":
        pytest.importorskip("sklearn", reason="the DCGAN example needs pip install -e '.[examples]'")
    run(script, "--out", str(tmp_path))
    missing = [name for name in SCRIPTS[script] if not (tmp_path / name).is_file()]
    assert not missing, f"{script} did not write {missing}"


def test_sine_gan_example(tmp_path):
    figure = tmp_path / "sine.png"
    output = run("examples/sine_gan.py", "--out", str(figure), "--slope", "0.1")
    assert figure.is_file() and "sliced Wasserstein distance" in output
