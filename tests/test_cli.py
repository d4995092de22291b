"""The README's main job (the sine-GAN demo) and `info`, as a user runs them."""

import subprocess
import sys


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
