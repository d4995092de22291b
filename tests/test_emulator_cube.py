"""The emulator's cube core and MIX launches (ascendc_sim/include/sim/cube.h, src/mix_runtime.cpp): a
small convolution through L1 -> LoadData 3Dv2 img2col -> Mmad -> Fixpipe -> GM -> vector core agrees with
torch's float64 convolution, and one deliberately broken kernel per cube/cross-core rule raises it."""

import numpy as np
import pytest
import torch

from ascend_acts.backends import sim

pytestmark = pytest.mark.skipif(sim.unavailable_reason() is not None, reason=str(sim.unavailable_reason()))

C0, COUT = 8, 16


def out_side(size, kernel, stride, pad, dilation):
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def pack_weight_zz(weight: np.ndarray) -> np.ndarray:
    """16 x K weights (K ordered (kh, kw, c0) for one C1) in the L0A ZZ fractal layout, float (C0 = 8)."""
    rows, k = weight.shape
    packed = np.zeros(rows * k, np.float32)
    for m in range(rows):
        for j in range(k):
            packed[((m // 16) * (k // C0) + j // C0) * 16 * C0 + (m % 16) * C0 + j % C0] = weight[m, j]
    return packed


def run_cube(name, height=6, width=5, kernel=3, stride=1, pad=1, dilation=1, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, C0, height, width)).astype(np.float32)
    w = rng.standard_normal((COUT, C0, kernel, kernel)).astype(np.float32)
    ho, wo = out_side(height, kernel, stride, pad, dilation), out_side(width, kernel, stride, pad, dilation)
    x_l1 = np.ascontiguousarray(x[0].transpose(1, 2, 0))              # [H][W][C0]
    w_matrix = w.transpose(0, 2, 3, 1).reshape(COUT, -1)               # K = (kh, kw, c0)
    w_packed = pack_weight_zz(w_matrix)
    out = np.zeros(COUT * ho * wo, np.float32)
    geometry = np.array([height, width, kernel, stride, pad, dilation], np.uint32)
    from ascend_acts import _sim_tests

    launch = _sim_tests.launch(name, {"x": x_l1, "w": w_packed, "y": out}, geometry, block_dim=1)
    expected = 2 * torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                                              stride=stride, padding=pad, dilation=dilation)
    return out.reshape(COUT, ho * wo), expected[0].reshape(COUT, -1).numpy(), launch


@pytest.mark.parametrize("geometry", [
    dict(), dict(kernel=4, stride=2, pad=1, height=8, width=8), dict(dilation=2, pad=2, height=7, width=6),
    dict(kernel=1, pad=0), dict(kernel=3, stride=2, pad=0, height=9, width=7)])
def test_cube_convolution_matches_torch(geometry):
    got, expected, launch = run_cube("cube_correct", **geometry)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert launch.cube_iterations == 1 and launch.block_dim == 3  # AIC + 2 AIVs counted per core


# (test kernel of tests/sim_kernels/cube_kernels.cpp, the rule it breaks, the block named)
BROKEN_CUBE_KERNELS = [
    ("cube_missing_flag", "cross_core_hazard", 0),      # AIV 0 reads the ring before AIC 0 flagged it
    ("cube_wrong_position", "cube_position", 0),
    ("cube_unaligned_l0", "cube_alignment", 0),
    ("cube_l1_overflow", "cube_buffer_overflow", 0),
    ("cube_l0c_overflow", "cube_buffer_overflow", 0),
    ("cube_bad_channel_size", "load3d_params", 0),
    ("cube_fixpipe_quant", "fixpipe_params", 0),
    ("cube_api_on_vector", "wrong_core", 0),
    ("cube_deadlock", "cross_core_deadlock", None),
    ("cube_overwrite_before_release", "cross_core_hazard", 0),  # AIC 0 rewrites the ring the AIVs read after flag 2
    ("cube_load_past_l0", "cube_out_of_bounds", 0),     # LoadData 2D one fractal past the L0A buffer
    ("cube_copy_past_l1", "cube_out_of_bounds", 0),     # DataCopy GM -> L1 one block past the weights' buffer
    ("cube_mmad_zero_m", "mmad_params", 0),
    ("cube_mmad_winograd", "cube_params", 0),
    ("cube_flag_id_past_15", "cross_core_flag", 0),
]


@pytest.mark.parametrize("kernel, rule, block", BROKEN_CUBE_KERNELS)
def test_broken_cube_kernel_raises_its_rule(kernel, rule, block):
    with pytest.raises(sim.EmulatorError) as caught:
        run_cube(kernel)
    assert (caught.value.kernel, caught.value.rule, caught.value.block) == (kernel, sim.Rule[rule], block)
