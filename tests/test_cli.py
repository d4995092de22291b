"""The README's main job (the sine-GAN demo) and `info` (backends, and what an NPU user has and needs next)."""

import importlib.util
import os
import subprocess
import sys

import pytest
import torch

from ascend_acts import __main__ as cli
from ascend_acts import backends, info, sine_gan
from ascend_acts.backends import npu


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "ascend_acts", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, check=True)


@pytest.mark.slow
def test_demo_trains_and_writes_png(tmp_path):
    out = tmp_path / "figure.png"
    result = run("demo", "--steps", "60", "--out", str(out), cwd=tmp_path)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    assert f"figure: {out}" in result.stdout
    distance = float(result.stdout.split("sliced Wasserstein distance, generated vs real signals: ")[1].split()[0])
    assert 0 < distance < 10


@pytest.fixture
def no_training(monkeypatch):
    """The demo's training fails the test if reached: a bad option must be refused before it."""
    def run_demo(*args, **kwargs):
        raise AssertionError("training started despite a bad option")

    monkeypatch.setattr(sine_gan, "run_demo", run_demo)


def usage_error(capsys, *argv) -> str:
    """Runs the CLI in-process; it must exit with argparse's usage-error status 2. Returns stderr."""
    with pytest.raises(SystemExit) as exited:
        cli.main(["demo", *argv])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("usage: python -m ascend_acts demo")
    return captured.err


@pytest.mark.parametrize("steps, message", [
    ("0", "argument --steps: must be a positive integer of at most 1000000000, got 0"),
    ("-5", "argument --steps: must be a positive integer of at most 1000000000, got -5"),
    ("1" * 25, f"argument --steps: must be a positive integer of at most 1000000000, got {'1' * 25}"),
    ("1e3", "argument --steps: expected an integer, got '1e3'"),
])
def test_demo_refuses_steps_out_of_range(no_training, capsys, steps, message):
    assert message in usage_error(capsys, "--steps", steps)


def test_demo_refuses_a_seed_torch_cannot_take(no_training, capsys):
    assert "argument --seed: must be in -2**63 .. 2**64 - 2" in usage_error(capsys, "--seed", str(2**64 - 1))


def test_demo_refuses_an_unknown_backend_naming_the_known_ones(no_training, capsys):
    err = usage_error(capsys, "--backend", "npu")
    assert "argument --backend: invalid choice: 'npu' (choose from " in err
    assert all(repr(name) in err for name in backends.known_backends())


def test_demo_refuses_an_unavailable_backend_saying_why(no_training, capsys, monkeypatch):
    real = backends.unavailable_reason
    monkeypatch.setattr(backends, "unavailable_reason",
                        lambda name: "_sim.so is not built" if name == "sim" else real(name))
    err = usage_error(capsys, "--backend", "sim")
    assert "argument --backend: 'sim' is not available here: _sim.so is not built" in err


def test_demo_refuses_an_unwritable_out_before_training(no_training, capsys, tmp_path):
    a_file = tmp_path / "file.txt"
    a_file.write_text("")
    err = usage_error(capsys, "--out", str(a_file / "sub" / "figure.png"))
    assert f"argument --out: cannot create {a_file / 'sub' / 'figure.png'}: {a_file} is not a directory" in err
    assert f"argument --out: {tmp_path} is a directory" in usage_error(capsys, "--out", str(tmp_path))
    (tmp_path / "figure.png").mkdir()  # matplotlib would write "figure" to figure.png
    assert f"{tmp_path / 'figure.png'} is a directory" in usage_error(capsys, "--out", str(tmp_path / "figure"))
    assert "argument --out: matplotlib cannot write '.txt' files (supported: " in usage_error(
        capsys, "--out", str(tmp_path / "figure.txt"))
    assert not (tmp_path / "figure.txt").exists() and a_file.read_text() == ""


@pytest.mark.parametrize("out", ["", ".", "/"])
def test_demo_refuses_an_out_without_a_file_name(no_training, capsys, out):
    assert f"argument --out: expected a file name, got '{out}'" in usage_error(capsys, "--out", out)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc, which refuses new files")
def test_demo_refuses_a_directory_the_file_system_refuses_even_to_root(no_training, capsys):
    err = usage_error(capsys, "--out", "/proc/figure.png")  # os.access says yes to root here; creating fails
    assert "argument --out: cannot create /proc/figure.png: /proc is not writable" in err


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may write anywhere")
def test_demo_refuses_a_read_only_directory_before_training(no_training, capsys, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        err = usage_error(capsys, "--out", str(locked / "new" / "figure.png"))
    finally:
        locked.chmod(0o700)
    assert f"cannot create {locked / 'new' / 'figure.png'}: {locked} is not writable" in err


@pytest.mark.slow
def test_demo_prints_the_path_it_wrote(tmp_path):
    """matplotlib writes a name without an extension as name.png: that is the path printed."""
    stdout = run("demo", "--steps", "2", "--out", "plots/figure", cwd=tmp_path).stdout
    assert [p.name for p in (tmp_path / "plots").iterdir()] == ["figure.png"]
    assert f"figure: {(tmp_path / 'plots' / 'figure.png').resolve()}\n" in stdout


@pytest.mark.slow
def test_info_lists_backends(tmp_path):
    stdout = run("info", cwd=tmp_path).stdout
    assert "reference  available" in stdout and "sim" in stdout and "torch 2." in stdout


@pytest.mark.slow
def test_info_cli_has_the_npu_section(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND")}
    result = subprocess.run([sys.executable, "-m", "ascend_acts", "info"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=300, check=True, env=env)
    npu_lines = result.stdout.split("\nNPU:\n")[1].splitlines()
    assert [line.split()[0] for line in npu_lines] == ["CANN", "torch_npu", "op", "extension", "kernels"]


def report_lines(env):
    return {line[:12].strip(): line[12:] for line in info.npu_report(env)}


def test_info_gives_the_next_step_for_each_missing_npu_piece(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "torch_npu" else real_find_spec(name, *args))
    lines = report_lines({})
    assert lines["CANN"].startswith("not found ($ASCEND_CANN_PACKAGE_PATH and $ASCEND_HOME_PATH unset); next: ")
    assert "source <CANN>/set_env.sh" in lines["CANN"]
    assert lines["torch_npu"] == (f"not installed; next: pip install the torch-npu release made for torch "
                                  f"{torch.__version__.split('+')[0]} (docs/npu.md)")
    assert lines["op package"] == ("not installed (no CANN or $ASCEND_OPP_PATH to look under); next: "
                                   "scripts/build_npu.sh, then scripts/install_npu.sh")
    assert lines["extension"].startswith("not built; next: pip install --no-build-isolation -e .")
    assert lines["kernels"].startswith(f"torch built-ins (ascend_acts.ops.<op>.torch_ops, same results) because "
                                       f"{npu.status().detail}")


def test_info_reports_an_installed_setup_without_importing_torch_npu(tmp_path, monkeypatch):
    cann = tmp_path / "cann"
    (cann / "include/acl").mkdir(parents=True)
    (cann / "include/acl/acl.h").write_text("")
    vendor = cann / "opp/vendors/ascend_acts"
    (vendor / "op_api/lib").mkdir(parents=True)
    (vendor / "op_api/lib/libcust_opapi.so").write_bytes(b"")
    site = tmp_path / "site"
    (site / "torch_npu").mkdir(parents=True)
    (site / "torch_npu/__init__.py").write_text("raise AssertionError('info must not import torch_npu')\n")
    (site / "torch_npu-2.13.0.dist-info").mkdir()
    metadata = "Metadata-Version: 2.1\nName: torch_npu\nVersion: 2.13.0\n"
    (site / "torch_npu-2.13.0.dist-info/METADATA").write_text(metadata)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(npu, "extension_path", lambda: "/somewhere/_npu_ops.so")
    lines = report_lines({"ASCEND_HOME_PATH": str(cann)})
    assert lines["CANN"] == f"found at {cann} ($ASCEND_HOME_PATH)"
    assert lines["torch_npu"] == "installed (2.13.0)"
    assert lines["op package"] == f"installed at {vendor}"
    assert lines["extension"] == "built: /somewhere/_npu_ops.so"
    assert "torch_npu" not in sys.modules

    lines = report_lines({"ASCEND_HOME_PATH": str(tmp_path)})  # not a toolkit, and no package under it
    assert lines["CANN"].startswith(f"$ASCEND_HOME_PATH={tmp_path} is not a CANN toolkit (no include/acl/acl.h)")
    assert lines["op package"].startswith(f"not installed (no op_api/lib/libcust_opapi.so under "
                                          f"{tmp_path / 'opp/vendors/ascend_acts'}); next: ")
    custom = {"ASCEND_CUSTOM_OPP_PATH": str(vendor)}  # installed with --install-path, no CANN variable
    assert report_lines(custom)["op package"] == f"installed at {vendor}"


def test_demo_without_its_extra_says_what_to_install(no_training, monkeypatch):
    """matplotlib and tqdm are the demo extra's, not the library's dependencies."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    with pytest.raises(SystemExit, match=r"the demo needs matplotlib: pip install 'ascend-acts\[demo\]'"):
        cli.main(["demo"])


@pytest.mark.slow
def test_the_library_imports_without_the_demo_packages(tmp_path):
    """`import ascend_acts` and an op work where matplotlib and tqdm are not installed."""
    code = ("import sys; sys.modules['matplotlib'] = None; sys.modules['tqdm'] = None\n"
            "import torch, ascend_acts\n"
            "assert torch.equal(ascend_acts.leaky_relu(torch.tensor([-2.0, 3.0]), 0.5), torch.tensor([-1.0, 3.0]))\n")
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=120)
