"""The pure C++ tilings of the fused Conv+BN+LeakyReLU kernels (op_host/batch_norm_leaky_relu/*_tiling.h,
op_host/conv_bn_leaky_relu_eval/*_tiling.h): coverage, capacities (UB, L1, L0A/L0B/L0C) and alignment over a grid of
shapes on every platform of the emulator's table (ascend_acts._sim.platforms(); and the UB size CANN's host reports
for the BN split; the backward leaves Select's 8 KiB reserve), checked by tests/tiling/conv_bn_tiling_check.cpp,
compiled here with the system C++ compiler."""

import shutil
import subprocess
from pathlib import Path

import pytest

from ascend_acts import _sim

SOURCE = Path(__file__).parent / "tiling" / "conv_bn_tiling_check.cpp"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_tiling_invariants(tmp_path):
    binary = tmp_path / "conv_bn_tiling_check"
    subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Werror", "-o", str(binary), str(SOURCE)], check=True)
    platforms = [":".join(str(v) for v in (p.name, p.cube_cores, p.vector_cores, p.ub_bytes, p.l1_bytes, p.l0a_bytes,
                                           p.l0b_bytes, p.l0c_bytes)) for p in _sim.platforms()]
    result = subprocess.run([str(binary), *platforms], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    assert result.stdout.strip().endswith("0 failures")
