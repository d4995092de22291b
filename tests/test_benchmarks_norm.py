"""Smoke runs (--quick) of the norm-family benchmarks, checking what their outputs say rather than how fast anything
ran: the whole-step scripts compare the same networks both ways and never keep more once converted; the per-pattern
script covers every pattern, and wherever our kernel ran, it moved exactly its ideal GM bytes."""

import argparse
import csv
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow  # each runs a script in a fresh interpreter
ROOT = Path(__file__).resolve().parents[1]


def run_quick(script: str, out: Path) -> tuple[list[dict], str]:
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick", "--out", str(out)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr}"
    name = script.removeprefix("bench_").removesuffix(".py")
    for suffix in ("csv", "md", "png"):
        assert (out / f"{name}.{suffix}").is_file(), f"{script} did not write {name}.{suffix}"
    with open(out / f"{name}.csv") as handle:
        return list(csv.DictReader(handle)), (out / f"{name}.md").read_text()


@pytest.mark.parametrize("script, runs", [
    ("bench_cyclegan_step.py", "G 9/9, D 3/3"),  # --quick: 2 residual blocks: 3 + 2 x 2 + 2 runs; PatchGAN 3
    ("bench_dcgan_step.py", "G 4/4, D 3/3"),
])
def test_step_benchmark_compares_both_models_and_converting_keeps_no_more(script, runs, tmp_path):
    rows, markdown = run_quick(script, tmp_path)
    assert [row["model"] for row in rows] == ["torch", "converted (reference)"]
    torch_row, converted = rows
    for column in ("g_step_saved", "d_step_saved"):
        assert 0 < int(converted[column]) <= int(torch_row[column]), column
    # measured by the --peaks-only child for both rows; a --quick step's peak is a few hundred KiB, within the heap's
    # slack from the step before, so its RSS growth may be 0 (it was, one run in four)
    assert all(int(row["peak_bytes"]) >= 0 for row in rows)
    assert converted["fused"] == runs
    # every norm -> LeakyReLU run of the discriminator keeps its output instead of the conv and norm outputs
    assert int(converted["d_step_saved"]) < int(torch_row["d_step_saved"])
    assert "target <= 0.7x" in markdown and "target <= 1.0x" in markdown
    if script == "bench_cyclegan_step.py":
        # the generator's folded pads and recomputed conv outputs
        assert int(converted["g_step_saved"]) < int(torch_row["g_step_saved"])
        assert_layer_budget_is_what_is_kept(int(torch_row["g_step_saved"]), int(converted["g_step_saved"]))


def assert_layer_budget_is_what_is_kept(torch_kept: int, converted_kept: int) -> None:
    """The per-layer budget docs/benchmarks.md reasons from, computed from the shapes by its rules, is what each side
    keeps but for the norms' statistics vectors and the loss's scalars (under 1% and 3% at the --quick size)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_cyclegan_step
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    args = argparse.Namespace(quick=True, batch=None, image_size=None, ngf=None, ndf=None, blocks=None)
    bench_cyclegan_step.build_case(args)  # sets the --quick sizes
    budget = bench_cyclegan_step.layer_budget(args)
    computed = sum(torch_bytes for _, torch_bytes, _, _ in budget)
    assert 0.99 * torch_kept <= computed <= torch_kept
    computed = sum(converted_bytes for _, _, converted_bytes, _ in budget)
    assert 0.97 * converted_kept <= computed <= converted_kept


def test_norm_activation_benchmark_covers_every_pattern_and_runs_kernels_at_the_ideal_traffic(tmp_path):
    rows, markdown = run_quick("bench_norm_activation.py", tmp_path)
    patterns = list(dict.fromkeys(row["pattern"] for row in rows))
    assert len(patterns) == 9
    for norm in ("BatchNorm2d", "BatchNorm1d(eps=0.8) (N, F)", "BatchNorm1d (N, C, L)", "BatchNorm1d (N, C, short L)",
                 "InstanceNorm2d", "GroupNorm"):
        assert any(norm in p for p in patterns), norm
    for pattern in patterns:
        cpu = {(row["impl"], row["phase"]) for row in rows if row["pattern"] == pattern and row["part"] == "cpu"}
        assert cpu == {(impl, phase) for impl in ("torch", "converted (reference)")
                       for phase in ("train forward", "train forward+backward")}, pattern
        traffic = [row for row in rows if row["pattern"] == pattern and row["part"] == "traffic"]
        assert {row["phase"] for row in traffic} == {"forward", "backward"}, pattern
        for row in traffic:
            if row["gm_bytes"]:  # ran: exactly x twice + y (dy and the kept tensor twice + dx) + the vectors
                assert int(row["gm_bytes"]) == int(row["ideal_bytes"]), (pattern, row["phase"])
            else:
                assert row["detail"].startswith("not run: "), (pattern, row["phase"])
    # the BatchNorm2d -> LeakyReLU kernels are on main: they must have run, and been modelled against CANN's way
    batch_norm = [row for row in rows if row["pattern"] == "Conv2d -> BatchNorm2d -> LeakyReLU(0.2)"]
    assert all(row["gm_bytes"] for row in batch_norm if row["part"] == "traffic")
    assert {row["phase"] for row in batch_norm if row["part"] == "model" and row["impl"] == "ours"} == \
        {"forward", "backward"}
    assert "fused" in {row["fused"] for row in rows if row["pattern"] == patterns[0] and row["impl"] != "torch"}


def test_norm_passes_benchmark_times_both_sides_and_checks_a_base_copy_bit_for_bit(capsys):
    """The developer benchmark of the reference's norm passes runs (in process: no step is timed that matters here),
    its --base copy (here the module itself) checked bit for bit against the current module."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_norm_passes
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    base = ROOT / "python/ascend_acts/ops/conv_bn_leaky_relu/reference_batch_norm.py"
    threads = torch.get_num_threads()
    try:
        bench_norm_passes.main(["--cases", "in_leaky_32", "bn_relu_8", "--rounds", "1", "--threads", "1",
                                "--base", str(base)])
    finally:
        torch.set_num_threads(threads)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[1:]] == [["in_leaky_32", "forward"], ["in_leaky_32", "backward"],
                                                        ["bn_relu_8", "forward"], ["bn_relu_8", "backward"]]
