"""The eval kernel of the fused Conv2d + BatchNorm2d + LeakyReLU (op_kernel/conv_bn_leaky_relu_eval.cpp:
conv as a GEMM on the cube with the BN-folded weights, bias + LeakyReLU on the vector unit, one launch)
on the emulator: against torch's float64 composite, and its GM traffic from the emulator's counters."""

import math

import pytest
import torch
import torch.nn.functional as F

import ascend_acts
from ascend_acts import backends
from markers import fast_only

pytestmark = pytest.mark.skipif(backends.unavailable_reason("sim") is not None, reason="emulator not built")

SLOPE = 0.2
EPS = 1e-5
# float32: accumulation order; half types: one rounding of x and W' each, and of the output
TOLERANCES = {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 8e-3), torch.bfloat16: (1.6e-2, 6.4e-2)}
CASES = {
    # (N, C_in, H, W), C_out, kernel, stride, padding (top, bottom, left, right), dilation
    "dcgan_down": ((2, 3, 16, 16), 16, 4, 2, (1, 1, 1, 1), 1),
    "3x3_same": ((1, 5, 9, 7), 21, 3, 1, (1, 1, 1, 1), 1),
    "even_same": ((1, 3, 8, 9), 6, 2, 1, (0, 1, 0, 1), 1),
    "dilated": ((2, 4, 11, 13), 8, 3, 1, (2, 2, 2, 2), 2),
    "1x1_many_channels": ((1, 40, 6, 6), 130, 1, 1, (0, 0, 0, 0), 1),
    "stride3_no_pad": ((1, 2, 10, 10), 3, 2, 3, (0, 0, 0, 0), 1),
    "several_column_tiles": ((1, 3, 24, 20), 5, 3, 1, (1, 1, 1, 1), 1),
}


def sim():
    from ascend_acts.backends import sim as module

    return module


def case_inputs(case, dtype):
    """x, W' and b' (BN folded in float64), and the float64 oracle leaky_relu(bn(conv(x)))."""
    (n, cin, h, w), cout, k, stride, padding, dilation = CASES[case]
    g = torch.Generator().manual_seed(3)
    x = torch.randn(n, cin, h, w, generator=g, dtype=torch.float64)
    weight = torch.randn(cout, cin, k, k, generator=g, dtype=torch.float64) / (cin * k * k) ** 0.5
    conv_bias, gamma, beta, mean = (torch.randn(cout, generator=g, dtype=torch.float64) for _ in range(4))
    var = torch.rand(cout, generator=g, dtype=torch.float64) + 0.5
    scale = gamma / (var + EPS).sqrt()
    folded_weight = weight * scale[:, None, None, None]
    folded_bias = (conv_bias - mean) * scale + beta
    top, bottom, left, right = padding
    padded = F.pad(x, (left, right, top, bottom))
    y = F.conv2d(padded, weight, conv_bias, stride, 0, dilation)
    expected = F.leaky_relu(F.batch_norm(y, mean, var, gamma, beta, False, 0.0, EPS), SLOPE)
    geometry = ((stride, stride), padding, (dilation, dilation))
    return x.to(dtype), folded_weight.to(dtype), folded_bias.float(), geometry, expected


def run(x, weight, bias, geometry, shape):
    out = sim().conv_bn_leaky_relu_eval(x, weight, bias, *geometry, SLOPE)
    assert out.shape == shape
    tiling = sim().conv_bn_leaky_relu_eval_tiling(x.shape, weight.shape, *geometry, x.element_size(), SLOPE)
    return out, tiling, sim().last_launch()


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("case", fast_only(CASES, ["dilated"]))
def test_matches_the_float64_composite(case, dtype):
    x, weight, bias, geometry, expected = case_inputs(case, dtype)
    out, _, _ = run(x, weight, bias, geometry, expected.shape)
    rtol, atol = TOLERANCES[dtype]
    torch.testing.assert_close(out.double(), expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", CASES)
def test_traffic(case):
    """The output is written exactly once; W' read once per work item (its A blocks), the im2col slab
    written and read once per work item; x read at most the band overlap of neighbouring tiles."""
    x, weight, bias, geometry, expected = case_inputs(case, torch.float16)
    out, tiling, launch = run(x, weight, bias, geometry, expected.shape)
    out_bytes = out.numel() * out.element_size()
    assert launch.buffer_bytes_out["y"] == out_bytes and launch.buffer_bytes_in["y"] == 0
    assert launch.buffer_bytes_in["weight"] == tiling.work_items * weight.numel() * weight.element_size()
    slab_bytes = tiling.work_items * tiling.workspace_slab * 2
    assert launch.buffer_bytes_out["workspace"] == slab_bytes == launch.buffer_bytes_in["workspace"]
    assert launch.buffer_bytes_in["bias"] == tiling.used_core_num * bias.numel() * 4
    height = x.shape[2]
    bound = tiling.tiles_per_image * min(tiling.band_rows, height) / height
    assert launch.buffer_bytes_in["x"] <= bound * x.numel() * x.element_size()
    if tiling.tiles_per_image == 1:
        assert launch.buffer_bytes_in["x"] <= x.numel() * x.element_size()
    assert launch.cube_iterations == tiling.work_items * math.ceil(weight.shape[0] / tiling.cube.baseM)
    assert launch.cube_macs == tiling.work_items * weight.shape[0] * tiling.column_tile * tiling.reduction


def test_tiling_respects_the_cube_memories():
    tiling = sim().conv_bn_leaky_relu_eval_tiling((64, 128, 16, 16), (256, 128, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1), 2)
    cube = tiling.cube
    assert cube.baseM % 16 == cube.baseN % 16 == cube.baseK % 16 == 0
    assert cube.baseM * cube.baseK * 2 * 2 <= 64 * 1024 and cube.baseM * cube.baseN * 4 * 2 <= 128 * 1024
    assert tiling.used_core_num <= 48 and tiling.block_dim * 2 >= tiling.used_core_num


def test_module_in_eval_runs_the_kernel_on_sim():
    torch.manual_seed(0)
    seq = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 4, 2, 1), torch.nn.BatchNorm2d(8), torch.nn.LeakyReLU(0.2))
    with torch.no_grad():
        seq[1].running_mean.uniform_(-1, 1), seq[1].running_var.uniform_(0.5, 2)
    fused = ascend_acts.nn.ConvBNLeakyReLU2d.from_modules(*seq).eval()
    seq.eval()
    x = torch.randn(2, 3, 16, 16)
    with ascend_acts.use_backend("sim"), torch.no_grad():
        out = fused(x)
        assert sim().last_launch().kernel == "acts_conv_bn_leaky_relu_eval"
    torch.testing.assert_close(out, seq(x), rtol=1e-5, atol=1e-5)
