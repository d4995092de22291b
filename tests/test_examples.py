"""Smoke runs: every example and benchmark script with --quick, outputs into a temporary directory."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

import ascend_acts

pytestmark = pytest.mark.slow  # each runs a script in a fresh interpreter
ROOT = Path(__file__).resolve().parents[1]

# script -> files it must write into its output directory (the step benchmarks: tests/test_benchmarks_norm.py)
SCRIPTS = {
    "examples/dcgan.py": ["samples_final.png", "losses.png", "real.png", "checkpoint.pt"],
    "examples/slope_sweep.py": ["slope_sweep.csv", "slope_sweep_runs.csv", "slope_sweep.png"],
    "examples/stylegan2_r1.py": ["stylegan2_r1.png", "losses.csv", "checkpoint.pt"],
    "examples/stylegan2_ada.py": ["stylegan2_ada.png", "losses.csv", "checkpoint.pt"],
    "benchmarks/bench_leaky_relu.py": ["leaky_relu.csv", "leaky_relu.md", "leaky_relu.png"],
    "benchmarks/bench_rrelu.py": ["rrelu.csv", "rrelu.md", "rrelu.png"],
    "benchmarks/bench_conv_bn_leaky_relu.py": ["conv_bn_leaky_relu.csv", "conv_bn_leaky_relu.md",
                                               "conv_bn_leaky_relu.png"],
    "benchmarks/perf_model.py": ["perf_model.csv", "perf_model.md", "perf_model.png"],
    "benchmarks/fused_traffic.py": ["fused_traffic.csv", "fused_traffic.md", "fused_traffic.png"],
    "benchmarks/bench_fused_bias_leaky_relu.py": ["fused_bias_leaky_relu.csv", "fused_bias_leaky_relu.md",
                                                  "fused_bias_leaky_relu.png"],
    "benchmarks/bench_bias_act.py": ["bias_act.csv", "bias_act.md", "bias_act.png"],
    "benchmarks/bench_small_steps.py": ["small_steps.csv", "small_steps.md", "small_steps.png"],
}
DIGITS_EXAMPLES = ("examples/dcgan.py", "examples/stylegan2_r1.py", "examples/stylegan2_ada.py")


def run(script: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(ROOT / script), "--quick", *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_quick_run_writes_its_outputs(script, tmp_path):
    if script in DIGITS_EXAMPLES:
        pytest.importorskip("sklearn", reason="the digits examples need pip install -e '.[examples]'")
    run(script, "--out", str(tmp_path))
    missing = [name for name in SCRIPTS[script] if not (tmp_path / name).is_file()]
    assert not missing, f"{script} did not write {missing}"


def test_sine_gan_example(tmp_path):
    figure = tmp_path / "sine.png"
    output = run("examples/sine_gan.py", "--out", str(figure), "--slope", "0.1")
    assert figure.is_file() and "sliced Wasserstein distance" in output


def test_conv_bn_benchmark_measures_every_backend_and_keeps_less(tmp_path):
    """The fused-op benchmark's CSV: every phase for torch, each available backend and the ceilings; the
    fused op keeps fewer bytes than torch's composite in training and matches the float64 composite."""
    run("benchmarks/bench_conv_bn_leaky_relu.py", "--out", str(tmp_path))
    with open(tmp_path / "conv_bn_leaky_relu.csv") as handle:
        rows = list(csv.DictReader(handle))
    phases = {"train forward", "train backward", "train forward+backward", "eval forward"}
    backends = [name for name in ascend_acts.available_backends() if name != "torch"]  # "torch": the baseline
    for impl in ["torch", *backends, "clone ceiling", "copy_ ceiling"]:
        assert {row["phase"] for row in rows if row["impl"] == impl} == phases, impl
    measured = {(row["impl"], row["phase"]): row for row in rows}
    torch_saved = int(measured[("torch", "train forward")]["saved_bytes"])
    for impl in ["torch", *backends]:
        for phase in ("train forward", "eval forward"):
            assert float(measured[(impl, phase)]["max_rel_error"]) < 1e-5, (impl, phase)
    for backend in backends:
        assert 0 < int(measured[(backend, "train forward")]["saved_bytes"]) < torch_saved, backend


def read_losses(path: Path) -> list[dict[str, float]]:
    with open(path) as handle:
        return [{name: float(value) for name, value in row.items()} for row in csv.DictReader(handle)]


def test_stylegan2_example_same_losses_with_our_fused_leaky_relu_and_torchs_composite(tmp_path):
    """From one seed, training with ascend_acts.nn.FusedLeakyReLU and with the torch composite module (same
    parameters, same init) gives the same losses and R1 values step by step: forward, backward and the R1
    double backward of our op agree with torch's autograd of the composite, through Adam updates."""
    pytest.importorskip("sklearn", reason="the digits examples need pip install -e '.[examples]'")
    losses = {}
    for impl in ("torch", "ascend"):
        # --quick: 5 steps; R1 on steps 0, 2, 4, weighted so that its updates dominate the discriminator's
        run("examples/stylegan2_r1.py", "--impl", impl, "--r1-every", "2", "--r1-gamma", "10", "--quiet",
            "--out", str(tmp_path / impl))
        losses[impl] = read_losses(tmp_path / impl / "losses.csv")
    assert len(losses["torch"]) == len(losses["ascend"]) == 5
    assert [row["r1"] == row["r1"] for row in losses["torch"]] == [True, False, True, False, True]  # NaN: no R1
    for step, (ours, theirs) in enumerate(zip(losses["ascend"], losses["torch"])):
        for name in ("d_loss", "g_loss", "r1"):
            assert ours[name] == pytest.approx(theirs[name], rel=1e-3, abs=1e-5, nan_ok=True), (step, name)


def test_stylegan2_ada_example_same_losses_with_our_bias_act_and_nvlabs_reference_composite(tmp_path):
    """From one seed, the StyleGAN2-ADA-style networks on ascend_acts.compat.nvlabs.bias_act and on NVlabs'
    reference semantics written as a torch composite (same parameters, same init) give the same losses and R1
    values step by step: linear and lrelu with gain and clamp, their gradients and the R1 double backward agree,
    through Adam updates."""
    pytest.importorskip("sklearn", reason="the digits examples need pip install -e '.[examples]'")
    losses = {}
    for impl in ("composite", "ascend"):
        # --quick: 5 steps; R1 on steps 0, 2, 4, weighted so that its updates dominate the discriminator's
        run("examples/stylegan2_ada.py", "--impl", impl, "--r1-every", "2", "--r1-gamma", "10", "--quiet",
            "--out", str(tmp_path / impl))
        losses[impl] = read_losses(tmp_path / impl / "losses.csv")
    assert len(losses["composite"]) == len(losses["ascend"]) == 5
    assert [row["r1"] == row["r1"] for row in losses["composite"]] == [True, False, True, False, True]
    for step, (ours, theirs) in enumerate(zip(losses["ascend"], losses["composite"])):
        for name in ("d_loss", "g_loss", "r1"):
            # float32 rounding only (measured: ~1e-7 relative after 5 steps)
            assert ours[name] == pytest.approx(theirs[name], rel=1e-5, abs=1e-7, nan_ok=True), (step, name)
