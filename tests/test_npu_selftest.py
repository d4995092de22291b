"""scripts/npu_selftest.sh cannot run here (no NPU): its argument handling, its ordered step list and its refusal
to run anything without an NPU are tested, and the hardware checks of scripts/npu_selftest.py are run on the CPU
reference backend, where they must pass, and with a wrong oracle, where they must fail.

`python -m ascend_acts selftest` (the first-run report) runs here with `--device cpu`: every section and every
op x dtype x layout row, passing on the CPU reference, the JSON with the markdown's content, FAIL and exit status 1
against a wrong reference, and the usage errors refused before any check runs."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from ascend_acts import __main__ as cli
from ascend_acts import op_table
from ascend_acts import selftest as report_module
from ascend_acts.ops.leaky_relu import reference
from markers import slow
from real_toolchain import ROOT

STEPS = ["1 build", "2 install", "3 extension", "4 wraparound", "5 index 2**24", "6 index 2**31", "7 eval kernel",
         "8 npu tests", "9 timings", "10 report"]


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


# --- python -m ascend_acts selftest ----------------------------------------------------------------------------
SECTIONS = ["1. Environment", "2. Values vs the CPU reference", "3. RNG past 2**24 and 2**31",
            "4. Timing vs the path each kernel replaces, and the model's prediction"]


def run_cli(*argv):
    """(exit status, stdout, stderr) of the CLI run in-process."""
    with pytest.raises(SystemExit) as exited:
        cli.main(["selftest", *argv])
    return exited.value.code


def markdown_tables(text: str) -> dict[str, list[list[str]]]:
    """section title -> its table's rows (header first), parsed as a markdown renderer would: a header row, a
    delimiter row, then rows of the same number of cells."""
    tables, title, lines = {}, None, text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("## "):
            title = line[3:]
        elif line.startswith("| ") and title not in tables:
            header = split_row(line)
            assert lines[i + 1] == "|" + "---|" * len(header), (title, lines[i + 1])
            rows = [header]
            for row in lines[i + 2:]:
                if not row.startswith("| "):
                    break
                rows.append(split_row(row))
                assert len(rows[-1]) == len(header), row
            tables[title] = rows
    return tables


def split_row(line: str) -> list[str]:
    cells, cell, i = [], "", 2
    while i < len(line) - 2:
        if line[i:i + 2] == "\\|":
            cell, i = cell + "|", i + 2
        elif line[i:i + 3] == " | ":
            cells, cell, i = cells + [cell], "", i + 3
        else:
            cell, i = cell + line[i], i + 1
    return cells + [cell]


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("selftest") / "report"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report_module, "npu_available", lambda: (False, "no NPU in the tests"))
        status = run_cli("--quick", "--out", str(out))
    return status, (out / "selftest.md").read_text(), json.loads((out / "selftest.json").read_text())


def test_the_quick_cpu_report_has_every_section_and_passes(quick_report):
    status, text, data = quick_report
    assert status == 0 and text.startswith("# ascend-acts self-test: PASS")
    tables = markdown_tables(text)
    assert list(tables) == SECTIONS and [s["title"] for s in data["sections"]] == SECTIONS
    assert data["status"] == "pass" and data["device"] == "cpu" and data["quick"] is True
    env = dict(row for row in tables[SECTIONS[0]][1:])
    assert env["ascend_acts"] and env["torch"] == torch.__version__ and "backend of leaky_relu_" in env
    assert all(env[f"backend of {op.name}"] == "cpu: reference" for op in op_table.TORCH_OPS)
    rng = {row[0]: row[-1] for row in tables[SECTIONS[2]][1:]}
    assert rng == {"wraparound": "pass", "noise-past-2**24": "pass", "noise-past-2**31": "skip"}
    timing = tables[SECTIONS[3]][1:]
    assert {row[0] for row in timing} == {kernel for kernel, _ in report_module.model_cases(quick=True)}
    assert all(row[-1] == "info" and float(row[5]) > 0 for row in timing)
    assert all(float(row[3]) > 0 for row in timing if "our op - torch's" not in row[10])  # a difference may not be


def test_the_values_section_has_every_op_dtype_and_layout_passing(quick_report):
    _, text, _ = quick_report
    header, *rows = markdown_tables(text)[SECTIONS[1]]
    assert header[:3] == ["op", "dtype", "layout"] and header[-1] == "result"
    want = {(op.name, dtype, layout) for op in op_table.functional_ops() for dtype in ("float32", "float16", "bfloat16")
            for layout in ("contiguous", "channels_last")}
    assert {tuple(row[:3]) for row in rows} == want and len(rows) == len(want)
    assert all(row[-1] == "pass" for row in rows), [row for row in rows if row[-1] != "pass"]
    bit_exact = [row for row in rows if row[0] in ("leaky_relu", "rrelu_backward")]
    assert all(": bit-exact" in row[7] for row in bit_exact)


def test_the_json_holds_the_markdowns_content(quick_report):
    _, text, data = quick_report
    tables = markdown_tables(text)
    for section in data["sections"]:
        assert [section["columns"], *section["rows"]] == tables[section["title"]]
        assert section["meaning"] in text
    assert data["counts"] == {"pass": 62, "FAIL": 0, "skip": 1}
    assert f"{data['counts']['pass']} pass, 0 FAIL, 1 skip" in text and data["command"] in text


def test_a_wrong_reference_makes_the_report_fail_with_status_1(tmp_path, monkeypatch, capsys):
    """The float64 oracle off by 1 at one element: the float64 comparison catches it, and the CLI exits 1."""
    true_leaky_relu = reference.leaky_relu

    def wrong(self, negative_slope, *, out=None):
        result = true_leaky_relu(self, negative_slope, out=out)
        if result.dtype == torch.float64:
            result.view(-1)[3] += 1.0
        return result

    monkeypatch.setattr(reference, "leaky_relu", wrong)
    monkeypatch.setattr(op_table, "functional_ops", lambda: (op_table.torch_op("leaky_relu"),))  # fast: one op
    monkeypatch.setattr(report_module, "timings",
                        lambda device, quick: report_module.Section("4. Timing", "", ["kernel"]))
    monkeypatch.setattr(report_module, "npu_available", lambda: (False, "no NPU in the tests"))
    assert run_cli("--quick", "--out", str(tmp_path)) == 1
    text = (tmp_path / "selftest.md").read_text()
    assert text.startswith("# ascend-acts self-test: FAIL")
    rows = markdown_tables(text)[SECTIONS[1]][1:]
    assert len(rows) == 6 and all(row[-1] == "FAIL" and float(row[4].split()[0]) > 0.9 for row in rows)
    data = json.loads((tmp_path / "selftest.json").read_text())
    assert data["status"] == "FAIL" and data["counts"]["FAIL"] == 6
    assert "selftest on cpu: FAIL (2 pass, 6 FAIL, 1 skip)" in capsys.readouterr().out


def test_a_check_that_raises_is_a_failed_row():
    row = report_module._guard(["op"], 4, lambda: 1 / 0)
    assert row == ["op", "ZeroDivisionError: division by zero", "", "FAIL"]


@pytest.fixture
def no_work(monkeypatch):
    """A usage error must be refused before any check runs."""
    def run(*args, **kwargs):
        raise AssertionError("the self-test started despite a usage error")

    monkeypatch.setattr(report_module, "run", run)
    monkeypatch.setattr(report_module, "npu_available", lambda: (False, "torch_npu sees no NPU device"))


def usage_error(capsys, *argv) -> str:
    assert run_cli(*argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("usage: python -m ascend_acts selftest")
    return captured.err


def test_out_refusals_before_any_work(no_work, capsys, tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("")
    assert f"argument --out: {a_file} is not a directory" in usage_error(capsys, "--out", str(a_file))
    err = usage_error(capsys, "--out", str(a_file / "sub"))
    assert f"argument --out: cannot create {a_file / 'sub'}: {a_file} is not a directory" in err
    (tmp_path / "taken" / "selftest.json").mkdir(parents=True)
    err = usage_error(capsys, "--out", str(tmp_path / "taken"))
    assert f"cannot write {tmp_path / 'taken' / 'selftest.json'}: it is a directory" in err
    assert "argument --out: expected a directory, got ''" in usage_error(capsys, "--out", "")
    assert not (tmp_path / "file.txt" / "sub").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_out_refusal_of_a_read_only_directory(no_work, capsys, tmp_path):
    tmp_path.chmod(0o500)
    try:
        assert f"argument --out: cannot write into {tmp_path}" in usage_error(capsys, "--out", str(tmp_path / "new"))
    finally:
        tmp_path.chmod(0o700)


def test_device_npu_without_an_npu_is_a_usage_error(no_work, capsys):
    err = usage_error(capsys, "--device", "npu")
    assert "argument --device: no NPU here: torch_npu sees no NPU device" in err
    assert "invalid choice: 'gpu'" in usage_error(capsys, "--device", "gpu")


def test_the_default_device_is_the_cpu_without_an_npu(monkeypatch, tmp_path):
    seen = {}

    def run(device, quick, command, progress):
        seen.update(device=device, quick=quick, command=command)
        return report_module.Report(command, device, quick, "now")

    monkeypatch.setattr(report_module, "run", run)
    monkeypatch.setattr(report_module, "npu_available", lambda: (False, "none"))
    assert run_cli("--out", str(tmp_path)) == 0
    assert seen == {"device": "cpu", "quick": False,
                    "command": f"python -m ascend_acts selftest --device cpu --out {tmp_path}"}
    assert (tmp_path / "selftest.md").is_file() and (tmp_path / "selftest.json").is_file()


def test_the_npu_timings_find_the_models_predictions_for_their_shapes():
    """Each timed case is perf_model.py's, spelled as its CSV spells it, so an NPU run shows the prediction."""
    path, _ = report_module.find_predictions()
    assert path == ROOT / "benchmarks/results/perf_model.csv"
    predictions = report_module.load_predictions(path)
    assert all(predictions[kernel]["case"] == case for kernel, case in report_module.model_cases(quick=False))
    covered = {kernel.split()[0] for kernel, _ in report_module.model_cases(quick=False)}
    assert covered == {k.base for k in op_table.KERNELS}


def fake_cases(device, quick):
    return [report_module.TimingCase(kernel, case, lambda: None, "nothing", lambda: None)
            for kernel, case in report_module.model_cases(quick=False)]


def test_the_timing_rows_show_the_prediction_or_say_why_not(monkeypatch):
    monkeypatch.setattr(report_module, "timing_cases", fake_cases)
    monkeypatch.setattr(report_module, "median_ms", lambda fn, device, warmups, repeats: 0.5)
    rows = {row[0]: row for row in report_module.timings("cpu", quick=True).rows}
    assert rows["fused_bias_leaky_relu"][7:10] == ["13.69", "42.78", "3.13"]  # benchmarks/results/perf_model.md
    monkeypatch.setattr(report_module, "find_predictions", lambda: (None, [ROOT / "a", ROOT / "b"]))
    section = report_module.timings("cpu", quick=True)
    assert all(row[7:10] == ["no prediction"] * 3 for row in section.rows)
    assert "predictions: none found" in section.notes[0]


@slow
@pytest.mark.parametrize("backend", ["reference", "sim", "torch"])
def test_the_full_cpu_report_passes_on_every_backend(backend, tmp_path):
    """The tolerances and the bit-exact promises hold for every CPU backend at the full shapes."""
    env = {**os.environ, "ASCEND_ACTS_BACKEND": backend}
    result = subprocess.run([sys.executable, "-m", "ascend_acts", "selftest", "--device", "cpu", "--out",
                             str(tmp_path)], capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "selftest on cpu: PASS (62 pass, 0 FAIL, 1 skip)" in result.stdout
    text = (tmp_path / "selftest.md").read_text()
    rows = markdown_tables(text)[SECTIONS[1]][1:]
    assert {row[3] for row in rows} == {f"cpu: {backend}"}
