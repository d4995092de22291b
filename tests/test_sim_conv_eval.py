"""The eval kernel of the fused Conv2d + BatchNorm2d + LeakyReLU (op_kernel/conv_bn_leaky_relu_eval/: img2col by
LoadData 3Dv2 into L0A, W' packed in CANN's FRACTAL_Z order into L0B, Mmad in float32, Fixpipe to a GM ring, bias +
LeakyReLU or ReLU on the vector cores) on the emulator: against torch's float64 composite, bit for bit against a
float32 oracle that accumulates in the kernel's K order, its GM traffic and cube work against the design, and the
hazard checker catching a missing cross-core flag in this kernel."""

import pytest
import torch
import torch.nn.functional as F

import ascend_acts
from ascend_acts import backends
from ascend_acts.ops.conv_bn_leaky_relu import kernels as conv_bn_sim
from markers import fast_only

pytestmark = pytest.mark.skipif(backends.unavailable_reason("sim") is not None, reason="emulator not built")

SLOPE = 0.2
EPS = 1e-5
# Against the float64 composite. float32: the float32 sum of K <= 4096 rounded products (order (c1, kh, kw, c0))
# drifts like a random walk, ~sqrt(K) * 2^-24 * sum |w x| (45 * 6e-8 * ~10 for K = 2048 here): atol 5e-5.
# float16 / bfloat16: x and W' are
# each rounded once to the dtype (relative 2^-11 / 2^-8 per factor, accumulating like a random walk over K) and the
# output once (2^-11 / 2^-8 relative); the float32 accumulation adds nothing visible at these tolerances.
TOLERANCES = {torch.float32: (1e-5, 5e-5), torch.float16: (2e-3, 8e-3), torch.bfloat16: (1.6e-2, 6.4e-2)}
DCGAN = {
    # (N, C_in, H, W), C_out, kernel, stride, padding (top, bottom, left, right), dilation
    "dcgan_d2": ((2, 64, 32, 32), 128, 4, 2, (1, 1, 1, 1), 1),   # two Cout blocks, tiles of output rows
    "dcgan_d3": ((2, 128, 16, 16), 256, 4, 2, (1, 1, 1, 1), 1),  # a whole image per tile
    "dcgan_d4": ((3, 256, 8, 8), 512, 4, 2, (1, 1, 1, 1), 1),    # core ranges cross Cout blocks
}
ODD = {
    "rgb_to_21": ((1, 3, 9, 7), 21, 3, 1, (1, 1, 1, 1), 1),       # Cin < C0, Cout not a multiple of 16, batch 1
    "asymmetric_pad": ((1, 3, 8, 9), 6, 2, 1, (0, 1, 0, 1), 1),
    "asymmetric_pad_stride2": ((2, 5, 10, 11), 17, 3, 2, (2, 0, 1, 2), 1),
    "dilated": ((2, 4, 11, 13), 8, 3, 1, (2, 2, 2, 2), 2),
    "1x1_40_to_130": ((1, 40, 6, 6), 130, 1, 1, (0, 0, 0, 0), 1),  # two Cout blocks, the last 2 rows
    "stride3_no_pad": ((1, 2, 10, 10), 3, 2, 3, (0, 0, 0, 0), 1),
    "several_tiles_per_image": ((1, 3, 24, 20), 5, 3, 1, (1, 1, 1, 1), 1),
    "more_items_than_cores": ((30, 8, 6, 6), 16, 3, 1, (1, 1, 1, 1), 1),
    "multi_image_items": ((97, 16, 4, 4), 64, 4, 2, (1, 1, 1, 1), 1),  # several images per item, the last fewer
    # float32: W' (K = 8192) does not fit L1 even 16 rows at a time, so its K slices stream (16-bit: resident)
    "streamed_weights": ((2, 512, 8, 8), 32, 4, 2, (1, 1, 1, 1), 1),
}
CASES = {**DCGAN, **ODD}
PLATFORMS = ("ascend910b1", "ascend910b3", "ascend910_93")


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


def run(x, weight, bias, geometry, shape, relu=False):
    out = conv_bn_sim.eval_kernel(x, weight, bias, *geometry, SLOPE, relu)
    assert out.shape == shape
    tiling = conv_bn_sim.conv_bn_leaky_relu_eval_tiling(x.shape, weight.shape, *geometry, x.element_size(), SLOPE,
                                                        relu=relu)
    assert tiling.relu == relu
    return out, tiling, sim().last_launch()


def float32_oracle(x, weight, bias, geometry, shape, relu=False):
    """The kernel's arithmetic, independently: products of the dtype's values in float32, summed one at a time
    from +0 in K order (c1, kh, kw, c0), + b', LeakyReLU (or torch's relu) in float32, one rounding to the dtype."""
    stride, (top, bottom, left, right), dilation = geometry
    c0 = 32 // x.element_size()
    cout, cin, kh, kw = weight.shape
    columns = F.unfold(F.pad(x.float(), (left, right, top, bottom)), (kh, kw), dilation=dilation, stride=stride)
    columns = columns.view(x.shape[0], cin, kh * kw, -1)
    w = weight.float().view(cout, cin, kh * kw)
    acc = torch.zeros(x.shape[0], cout, columns.shape[-1])
    for group in range(0, cin, c0):
        for tap in range(kh * kw):
            for c in range(group, min(group + c0, cin)):
                acc = acc + w[None, :, c, tap, None] * columns[:, None, c, tap, :]
    acc = acc + bias[None, :, None]
    out = torch.relu(acc) if relu else torch.where(acc > 0, acc, acc * torch.tensor(SLOPE, dtype=torch.float32))
    return out.to(x.dtype).view(shape)


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("case", fast_only(CASES, ["rgb_to_21", "asymmetric_pad_stride2", "dilated"]))
def test_matches_the_float64_composite(case, dtype):
    x, weight, bias, geometry, expected = case_inputs(case, dtype)
    out, _, _ = run(x, weight, bias, geometry, expected.shape)
    rtol, atol = TOLERANCES[dtype]
    torch.testing.assert_close(out.double(), expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("case", fast_only(["dcgan_d3", "rgb_to_21", "1x1_40_to_130", "several_tiles_per_image",
                                            "multi_image_items", "streamed_weights"],
                                           ["rgb_to_21", "several_tiles_per_image", "multi_image_items"]))
def test_bit_identical_to_the_float32_oracle(case, dtype):
    x, weight, bias, geometry, expected = case_inputs(case, dtype)
    out, _, _ = run(x, weight, bias, geometry, expected.shape)
    assert torch.equal(out, float32_oracle(x, weight, bias, geometry, expected.shape))


def same_bits(a, b):
    """Equal values, NaN where NaN and the same sign of zero (torch.equal takes -0.0 for +0.0 and NaN for nothing; a
    NaN's sign is no value's)."""
    numbers = ~a.isnan()
    return a.dtype == b.dtype and torch.equal(a.isnan(), b.isnan()) and torch.equal(a[numbers], b[numbers]) and \
        torch.equal(a[numbers].signbit(), b[numbers].signbit())


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("case", fast_only(["rgb_to_21", "1x1_40_to_130", "several_tiles_per_image",
                                            "multi_image_items", "streamed_weights"], ["rgb_to_21"]))
def test_relu_bit_identical_to_the_float32_oracle(case, dtype):
    """The relu mode: torch's relu of the kernel's float32 sum, rounded once; the composite within TOLERANCES."""
    x, weight, bias, geometry, expected = case_inputs(case, dtype)
    out, _, _ = run(x, weight, bias, geometry, expected.shape, relu=True)
    assert same_bits(out, float32_oracle(x, weight, bias, geometry, expected.shape, relu=True))
    rtol, atol = TOLERANCES[dtype]  # relu(leaky_relu(z)) is relu(z): the composite's sign is kept
    torch.testing.assert_close(out.double(), F.relu(expected), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
def test_relu_special_values_as_torch(dtype):
    """z < 0 ? +0 : z as torch's relu: a negative z gives +0 (LeakyRelu with slope 0 would give -0), -inf gives +0
    (slope 0: NaN), +inf and NaN stay; -0.0 in the input and the bias; against F.relu(F.conv2d) in float64 with the
    special values exactly where torch has them, and bit for bit against the float32 oracle."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 5, 7, 6, generator=g, dtype=torch.float64)
    x[0, :, :2] = -0.0
    x[1, 2, 3, 3] = float("nan")
    weight = torch.randn(20, 5, 3, 3, generator=g, dtype=torch.float64) / 6
    bias = torch.randn(20, generator=g, dtype=torch.float64)
    bias[:6] = torch.tensor([float("-inf"), float("inf"), float("nan"), -0.0, -1e30, 1e-30])
    x, weight = x.to(dtype), weight.to(dtype)
    geometry = ((1, 1), (1, 1, 1, 1), (1, 1))
    expected = F.relu(F.conv2d(x.double(), weight.double(), bias, padding=1))
    out, _, _ = run(x, weight, bias.float(), geometry, expected.shape, relu=True)
    assert same_bits(out, float32_oracle(x, weight, bias.float(), geometry, expected.shape, relu=True))
    assert torch.equal(out.isnan(), expected.isnan()) and torch.equal(out.isposinf(), expected.isposinf())
    assert (out[0, 0] == 0).all() and not out[~out.isnan()].signbit().any()  # -inf and every negative z: +0
    rtol, atol = TOLERANCES[dtype]
    finite = expected.isfinite()
    torch.testing.assert_close(out.double()[finite], expected[finite], rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", fast_only(["dcgan_d2", "several_tiles_per_image", "streamed_weights"],
                                           ["several_tiles_per_image"]))
def test_relu_traffic_is_the_leaky_kernels(case):
    """The relu mode moves the same GM bytes as LeakyReLU (the design's, test_traffic) and the same cube work."""
    x, weight, bias, geometry, expected = case_inputs(case, torch.float16)
    _, _, leaky = run(x, weight, bias, geometry, expected.shape)
    _, tiling, relu = run(x, weight, bias, geometry, expected.shape, relu=True)
    assert relu.buffer_bytes_in == leaky.buffer_bytes_in and relu.buffer_bytes_out == leaky.buffer_bytes_out
    assert relu.buffer_bytes_in["x"] == design_traffic(tiling, x, weight.shape)["x"]
    assert (relu.cube_macs, relu.cube_iterations) == (leaky.cube_macs, leaky.cube_iterations)


def test_relu_leaves_selects_ub_and_falls_back_where_that_does_not_fit():
    """Select's temporary takes the top 8 KiB of UB: a 1x1 layer over rows of 768 float32 positions fills half of
    the 192 KiB with one prologue row, so it tiles for LeakyReLU and not for ReLU; the op then runs the reference
    (as for any layer without a tiling), still torch's relu."""
    shapes = ((1, 3, 2, 768), (8, 3, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 4)
    assert conv_bn_sim.conv_bn_leaky_relu_eval_has_tiling(*shapes)
    assert not conv_bn_sim.conv_bn_leaky_relu_eval_has_tiling(*shapes, relu=True)
    x, weight, bias = torch.randn(shapes[0]), torch.randn(shapes[1]), torch.randn(8)
    assert conv_bn_sim.eval_path(x, weight, *shapes[2:5], 1, relu=True) == "reference"
    out = conv_bn_sim.conv_bn_leaky_relu_eval(x, weight, bias, *shapes[2:5], 1, 0.2, True)
    torch.testing.assert_close(out, F.relu(F.conv2d(x, weight, bias)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("platform", fast_only(PLATFORMS, ["ascend910b3"]))  # 910B3: fewer cores than the others
def test_platforms(platform):
    x, weight, bias, geometry, expected = case_inputs("dcgan_d4", torch.float16)
    with sim().launch_settings(platform=platform):
        out = conv_bn_sim.eval_kernel(x, weight, bias, *geometry, SLOPE)
        assert sim().last_launch().block_dim == 3 * {"ascend910b3": 20}.get(platform, 24)  # AIC + 2 AIVs each
    torch.testing.assert_close(out.double(), expected, rtol=2e-3, atol=8e-3)


def design_traffic(tiling, x, weight_shape):
    """GM bytes and cube MACs the design moves for this tiling, item by item (AI core ranges, bands, blocks)."""
    g = tiling.conv
    size = x.element_size()

    def rows_of(block):
        return min(tiling.block_rows, g.out_channels - block * tiling.block_rows)

    k_padded = tiling.k_fractals * tiling.c0
    totals = dict(x=0, weight=0, bias=0, ws_out=0, ws_in=0, macs=0, mmads=0)

    def block_bytes(block):
        return -(-rows_of(block) // 16) * 16 * k_padded * size

    for core in range(tiling.block_dim):
        base, extra = divmod(tiling.work_items, tiling.block_dim)
        first = core * base + min(core, extra)
        blocks = []
        for item in range(first, first + base + (core < extra)):
            block, rest = divmod(item, -(-g.batch // tiling.images_per_item) * tiling.tiles_per_image)
            image = rest // tiling.tiles_per_image * tiling.images_per_item
            images = min(tiling.images_per_item, g.batch - image)
            out_row = rest % tiling.tiles_per_image * tiling.tile_rows
            out_rows = min(tiling.tile_rows, g.out_height - out_row)
            top = out_row * g.stride_h - g.pad_top
            bottom = top + (out_rows - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h
            band = min(bottom, g.height - 1) - max(top, 0) + 1
            npad = -(-out_rows * g.out_width // 16) * 16
            rows16 = -(-rows_of(block) // 16) * 16
            slot_in = images * tiling.channel_groups * tiling.c0 * band * g.width * size
            totals["x"] += images * g.in_channels * band * g.width * size
            totals["ws_out"] += slot_in + rows16 * images * npad * 4
            totals["ws_in"] += slot_in + rows_of(block) * images * npad * 4
            totals["macs"] += rows16 * images * npad * k_padded
            totals["mmads"] += -(-k_padded // tiling.k_chunk)  # one Mmad per K chunk for all the images
            if tiling.weight_streamed:  # the block's slices pass through L1 for every item
                totals["weight"] += block_bytes(block)
            if not blocks or blocks[-1] != block:
                blocks.append(block)
        for block in blocks:
            if not tiling.weight_streamed:  # resident: loaded when the range enters the block
                totals["weight"] += block_bytes(block)
            totals["bias"] += rows_of(block) * 4
    return totals


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("case", fast_only(CASES, ["1x1_40_to_130", "several_tiles_per_image", "multi_image_items"]))
def test_traffic(case, dtype):
    """y written exactly once; x read once per (Cout block, item) band; each resident W' block read once per AI
    core range that enters it, a streamed one once per item; the rings written and read as the design says; the
    cube's MACs the padded Mb x Npad x K work, one Mmad per K chunk."""
    x, weight, bias, geometry, expected = case_inputs(case, dtype)
    out, tiling, launch = run(x, weight, bias, geometry, expected.shape)
    design = design_traffic(tiling, x, weight.shape)
    out_bytes = out.numel() * out.element_size()
    assert launch.buffer_bytes_out["y"] == out_bytes and launch.buffer_bytes_in["y"] == 0
    assert launch.buffer_bytes_in["x"] == design["x"]
    halo = tiling.tiles_per_image * tiling.band_rows / x.shape[2]
    assert launch.buffer_bytes_in["x"] <= tiling.cout_blocks * max(1.0, halo) * x.numel() * x.element_size()
    assert launch.buffer_bytes_in["weight"] == design["weight"]
    assert launch.buffer_bytes_in["bias"] == design["bias"]
    assert launch.buffer_bytes_out["workspace"] == design["ws_out"]
    assert launch.buffer_bytes_in["workspace"] == design["ws_in"]
    assert launch.cube_macs == design["macs"] and launch.cube_iterations == design["mmads"]


def test_dcgan_tiling_at_batch_64():
    """The design's choices for the DCGAN discriminator layers at batch 64 in float16 on 910B1 (24 AI cores): the
    cheapest shape by the tiling's estimate, every one weight-stationary and within the platform's buffers."""
    expected = {  # (C_in, C_out, H): (Mb, tile rows, kc, images per item, items)
        (64, 128, 32): (64, 8, 128, 1, 256), (128, 256, 16): (64, 8, 256, 1, 256), (256, 512, 8): (32, 4, 256, 4, 256)}
    for (cin, cout, h), (mb, rows, kc, images, items) in expected.items():
        t = conv_bn_sim.conv_bn_leaky_relu_eval_tiling((64, cin, h, h), (cout, cin, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1),
                                                       2)
        assert (t.block_rows, t.tile_rows, t.k_chunk, t.images_per_item, t.work_items, t.block_dim) == (
            mb, rows, kc, images, items, 24)
        assert t.item_positions == images * t.tile_positions and not t.weight_streamed
        weights = mb * t.weight_slices * t.weight_slice_k * 2
        assert weights == mb * cin * 16 * 2  # the whole W' block stays in L1
        assert weights + 2 * images * t.channel_groups * t.c0 * t.band_rows * h * 2 <= 512 * 1024
        # L0A: the item's img2col chunk, L0B: the W' chunk, both double-buffered; L0C: the result
        assert 2 * t.item_positions * kc * 2 <= 64 * 1024 and 2 * kc * mb * 2 <= 64 * 1024
        assert t.l0c_buffers * mb * t.item_positions * 4 <= 128 * 1024


def test_streamed_weights():
    """A W' block that does not fit L1 even at 16 rows (K = 8192 in float32) streams through two L1 slice
    buffers; the same layer in float16 keeps it resident. Correctness: the composite, oracle and traffic tests."""
    x_shape, weight_shape = (2, 512, 8, 8), (32, 512, 4, 4)
    wide = conv_bn_sim.conv_bn_leaky_relu_eval_tiling(x_shape, weight_shape, (2, 2), (1, 1, 1, 1), (1, 1), 4)
    narrow = conv_bn_sim.conv_bn_leaky_relu_eval_tiling(x_shape, weight_shape, (2, 2), (1, 1, 1, 1), (1, 1), 2)
    assert wide.weight_streamed and wide.weight_slices >= 2 and not narrow.weight_streamed
    slices = 2 * wide.block_rows * wide.weight_slice_k * 4
    assert wide.block_rows * 512 * 16 * 4 >= 512 * 1024  # the block alone fills L1: no room for a band
    assert slices + 2 * wide.channel_groups * wide.c0 * wide.band_rows * 8 * 4 * wide.images_per_item <= 512 * 1024


def test_multi_image_items():
    """97 images, several per item, the last item short; every image right (test_bit_identical_to_the_float32_oracle
    and test_traffic run the same case)."""
    x, weight, bias, geometry, expected = case_inputs("multi_image_items", torch.float32)
    out, tiling, launch = run(x, weight, bias, geometry, expected.shape)
    assert tiling.images_per_item > 1 and tiling.tiles_per_image == 1
    assert x.shape[0] % tiling.images_per_item != 0
    assert tiling.work_items == tiling.cout_blocks * -(-x.shape[0] // tiling.images_per_item)
    torch.testing.assert_close(out.double(), expected, rtol=TOLERANCES[torch.float32][0],
                               atol=TOLERANCES[torch.float32][1])
    small = conv_bn_sim.conv_bn_leaky_relu_eval_tiling((2, 8, 6, 6), (16, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4)
    assert small.images_per_item == 1  # never more images than every core's share allows


def test_fewer_items_than_cores():
    x, weight, bias, geometry, expected = case_inputs("rgb_to_21", torch.float32)
    out, tiling, launch = run(x, weight, bias, geometry, expected.shape)
    assert tiling.work_items < 24 and tiling.block_dim == tiling.work_items and launch.block_dim == 3 * tiling.block_dim


def test_pack_weight_layout():
    """CANN's FRACTAL_Z order: element [c1][i][j][mi][r][c] = W'[mi*16 + r][c1*C0 + c][i][j], zero past C_out and
    C_in."""
    from ascend_acts.ops.conv_bn_leaky_relu.kernels import pack_weight

    weight = torch.arange(21 * 3 * 2 * 3, dtype=torch.float32).view(21, 3, 2, 3) + 1
    packed = pack_weight(weight, torch.float16)
    assert packed.shape == (1, 2, 3, 2, 16, 16) and packed.dtype == torch.float16
    for mi, c1, i, j, r, c in [(0, 0, 0, 0, 0, 0), (1, 0, 1, 2, 4, 2), (0, 0, 1, 0, 15, 1)]:
        assert packed[c1, i, j, mi, r, c] == weight[mi * 16 + r, c1 * 16 + c, i, j]
    assert packed[:, :, :, 1, 5:].abs().sum() == 0 and packed[..., 3:].abs().sum() == 0


BROKEN = [("conv_eval_no_input_ready_wait", "cross_core_hazard"), ("conv_eval_no_input_free", "cross_core_deadlock")]


@pytest.mark.parametrize("kernel, rule", BROKEN)
def test_hazard_checker_catches_a_missing_flag(kernel, rule):
    """The product kernel class with one cross-core flag left out (tests/sim_kernels/conv_eval_broken_kernels.cpp):
    120 images of 32 x 32 positions on 24 AI cores, at least five items each, so every ring slot (kRingSlots = 4)
    is reused."""
    from ascend_acts import _sim_tests
    from ascend_acts.ops.conv_bn_leaky_relu.kernels import pack_weight

    x = torch.randn(120, 3, 32, 32)
    weight = torch.randn(16, 3, 1, 1)
    geometry = ((1, 1), (0, 0, 0, 0), (1, 1))
    tiling = conv_bn_sim.conv_bn_leaky_relu_eval_tiling(x.shape, weight.shape, *geometry, 4, SLOPE)
    assert tiling.block_dim == 24 and tiling.work_items >= 5 * 24
    bias = torch.randn(16)
    control = conv_bn_sim.eval_kernel(x, weight, bias, *geometry, SLOPE)  # the product kernel: no error
    torch.testing.assert_close(control, F.leaky_relu(F.conv2d(x, weight, bias), SLOPE), rtol=1e-5, atol=1e-5)
    buffers = {"x": x, "weight": pack_weight(weight, torch.float32), "bias": bias, "y": torch.empty(120, 16, 32, 32)}
    with pytest.raises(sim().EmulatorError) as caught:
        _sim_tests.launch(kernel, buffers, tiling)
    assert caught.value.rule == sim().Rule[rule]


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
