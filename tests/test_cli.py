"""The README's main job (the sine-GAN demo) and `info` (backends, and what an NPU user has and needs next)."""

import importlib.util
import os
import subprocess
import sys

import torch

from ascend_acts import info, npu


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "ascend_acts", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, check=True)


def test_demo_trains_and_writes_png(tmp_path):
    out = tmp_path / "figure.png"
    result = run("demo", "--steps", "60", "--out", str(out), cwd=tmp_path)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    assert f"figure: {out}" in result.stdout
    distance = float(result.stdout.split("sliced Wasserstein distance, generated vs real signals: ")[1].split()[0])
    assert 0 < distance < 10


def test_info_lists_backends(tmp_path):
    stdout = run("info", cwd=tmp_path).stdout
    assert "reference  available" in stdout and "sim" in stdout and "torch 2." in stdout


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
    assert lines["kernels"].startswith(f"torch built-ins (ascend_acts.torch_kernels, same results) because "
                                       f"{npu.STATUS.detail}")


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
