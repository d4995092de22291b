"""The AscendC fused bias + LeakyReLU kernels (op_kernel/fused_bias_leaky_relu/) on the emulator, called through
the sim backend's functions: y and dx bit for bit against the NumPy reference (which follows the kernels'
rounding order), grad_bias within the compensated float32 summation bound and, for long reductions, within
twice torch's own float32 error, GM traffic at the ideal, UB within the platform,
and the host tiling for sizes past 2^32 elements."""

import math

import numpy as np
import pytest
import torch

from ascend_acts.backends import sim
from ascend_acts.ops.fused_bias_leaky_relu import reference
from bias_gradient_cases import assert_same_bias_gradient, composite_bias_gradient, non_finite_bias_gradients
from markers import fast_only

pytestmark = pytest.mark.skipif(sim.unavailable_reason() is not None, reason=str(sim.unavailable_reason()))

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SQRT2 = math.sqrt(2.0)
ROWS, COLUMNS = 0, 1  # FusedBiasMode
CORES = {"ascend910b1": 48, "ascend910b3": 40, "ascend910_93": 48}
UB_BYTES = 192 * 1024
SELECT_TEMPORARY = 184 * 1024  # Select's temporary: the backward's buffers stay below it


def backend():
    from ascend_acts.ops.fused_bias_leaky_relu import kernels as module

    return module


def inputs(shape, dtype, seed=0, with_bias=True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g).to(dtype)
    x.view(-1)[::11] = 0.0  # the positive test is x + bias > 0: zeros and -0.0 take the slope
    x.view(-1)[5::13] = -0.0
    bias = torch.randn(shape[1], generator=g).to(dtype) if with_bias else None
    dy = torch.randn(shape, generator=g).to(dtype)
    return x, bias, dy


def as_float32(t):
    return None if t is None else t.float().numpy()


def expected_forward(x, bias, slope, scale, clamp=-1.0, relu=False):
    out = np.empty(x.shape, np.float32)
    reference.forward(as_float32(x), as_float32(bias), slope, scale, out, clamp, relu)
    return torch.from_numpy(out).to(x.dtype)  # one rounding to nearest even, as the kernel's CAST_RINT


def expected_backward(dy, saved, bias, slope, scale, saved_is_result, clamp=-1.0, relu=False):
    """(dx rounded to dy's dtype, grad_bias in float64 unrounded, sum over n and s of |dx| in float64)."""
    out = np.empty(dy.shape, np.float32)
    grad_bias = np.empty(dy.shape[1], np.float64)
    reference.backward(as_float32(dy), as_float32(saved), as_float32(bias), slope, scale, saved_is_result, out,
                       grad_bias, clamp, relu)
    dims = (0, *range(2, dy.dim()))
    magnitude = torch.from_numpy(np.abs(out.astype(np.float64))).sum(dims) if dy.numel() else torch.zeros(dy.shape[1])
    return torch.from_numpy(out).to(dy.dtype), torch.from_numpy(grad_bias), magnitude


def assert_grad_bias_close(grad_bias, exact, magnitude, terms, dtype):
    """The kernel sums the same float32 dx values as the reference, in float32, compensated (Kahan): within
    (2 + terms * 2^-24) * 2^-24 * sum |dx| of the exact sum (Kahan's bound, Higham 4.3; measured at most 1.7 *
    2^-24 * sum |dx| over these tests, the folds over rows and lanes included), whatever the number of terms;
    then one rounding to the dtype (half an ulp: 2^-24, 2^-11, 2^-8 relative)."""
    unit = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}[dtype]
    summation = (2 + terms * 2.0**-24) * 2.0**-24 * magnitude
    bound = summation + unit * (exact.abs() + summation) + 1e-30
    error = (grad_bias.double() - exact).abs()
    assert bool((error <= bound).all()), f"grad_bias off by {error.max():.3g} (bound {bound.min():.3g})"


def run_both(shape, dtype, slope=0.2, scale=SQRT2, with_bias=True, saved_is_result=True, seed=0, clamp=-1.0,
             relu=False):
    x, bias, dy = inputs(shape, dtype, seed, with_bias)
    m = backend()
    y = m.fused_bias_leaky_relu(x, bias, slope, scale, clamp, relu)
    forward = sim.last_launch()
    assert torch.equal(y, expected_forward(x, bias, slope, scale, clamp, relu))
    saved = y if saved_is_result else x
    dx, grad_bias = m.fused_bias_leaky_relu_backward(dy, saved, bias, slope, scale, saved_is_result, clamp, relu)
    backward = sim.last_launch()
    want_dx, exact, magnitude = expected_backward(dy, saved, bias, slope, scale, saved_is_result, clamp, relu)
    assert torch.equal(dx, want_dx)
    assert grad_bias.dtype == dtype and grad_bias.shape == (shape[1],)
    assert_grad_bias_close(grad_bias, exact, magnitude, x.numel() // max(shape[1], 1), dtype)
    return forward, backward


# Long all-positive reductions (no cancellation: the relative error is the summation's): Rows with many tiles
# of whole rows and with chunks of one row, Columns with one and several channels.
LONG_REDUCTIONS = [(4, 1, 256, 256), (2, 3, 512, 512), (3, 2, 300000), (262144, 2), (1048576, 1)]


@pytest.mark.parametrize("shape", LONG_REDUCTIONS, ids=str)
def test_long_reductions_are_within_twice_torchs_float32_error(shape):
    """grad_bias's error against float64 is at most twice that of torch's float32 composite (autograd of
    leaky_relu(x + bias) * scale, which sums pairwise), however many tiles a channel's reduction spans."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(shape, generator=g) + 0.5
    bias = torch.rand(shape[1], generator=g)
    dy = torch.rand(shape, generator=g) + 1.0

    def torch_grad_bias(dtype):
        b = bias.to(dtype).requires_grad_()
        y = torch.nn.functional.leaky_relu(x.to(dtype) + b.view(1, -1, *[1] * (x.dim() - 2)), 0.2) * SQRT2
        return torch.autograd.grad(y, b, dy.to(dtype))[0]

    exact = torch_grad_bias(torch.float64)

    def relative_error(grad_bias):
        return ((grad_bias.double() - exact).abs() / exact.abs()).max().item()

    _, grad_bias = backend().fused_bias_leaky_relu_backward(dy, x, bias, 0.2, SQRT2, False)
    assert relative_error(grad_bias) <= 2 * relative_error(torch_grad_bias(torch.float32))


# Sums that are not finite in each stage of the kernel's reduction: over many tiles of K rows (Columns, Rows),
# over chunks of one row, only in the folds of the lanes (one term a lane), only on the scalar unit (8 lanes),
# Columns chunks of more than one repeat of channels.
NON_FINITE_SHAPES = [(5000, 8), (1000, 8, 17), (2, 8, 9000), (1, 8, 1024), (1, 8, 8), (40, 4000)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", fast_only(NON_FINITE_SHAPES, [(1000, 8, 17), (1, 8, 8)]), ids=str)
def test_non_finite_grad_bias_is_torchs(shape, dtype):
    """Partial sums overflowing to +-inf, +inf and -inf terms (NaN), a NaN term: grad_bias is torch's composite's
    (+-inf, not the NaN that inf - inf in the Kahan compensation gives), the finite channels still within its
    bound; dx is the reference's (both saved tensors)."""
    x, dy = non_finite_bias_gradients(shape, dtype, torch.Generator().manual_seed(5))
    want = composite_bias_gradient(x, dy)
    assert want[0::8].isposinf().all() and want[1::8].isneginf().all() and want[3::8].isnan().all()
    for saved_is_result in (False, True):
        saved = x * SQRT2 if saved_is_result else x  # the forward's output for a zero bias
        dx, grad_bias = backend().fused_bias_leaky_relu_backward(dy, saved, None, 0.2, SQRT2, saved_is_result)
        want_dx = expected_backward(dy, saved, None, 0.2, SQRT2, saved_is_result)[0]
        torch.testing.assert_close(dx, want_dx, rtol=0, atol=0, equal_nan=True)
        assert_same_bias_gradient(grad_bias, want, dtype)
        # the channels (Rows) or chunks (Columns) whose sum is not finite read dy and saved again, dx once
        launch, data = sim.last_launch(), dy.numel() * dy.element_size()
        assert data < launch.buffer_bytes_in["dy"] == launch.buffer_bytes_in["saved"] <= 2 * data
        assert launch.buffer_bytes_out["dx"] == data


# odd channels (1, 3, 7, 65), rank 2 (Columns mode), spatial 1x1, S not a multiple of 8/16, N = 1, rank 5,
# N past one tile's rows (1000 and 5000 > rowsPerTile), rows longer than the UB (chunks of one row)
SHAPES = [(2, 3, 5, 7), (4, 65), (3, 7, 1, 1), (1, 1, 9), (2, 3, 2, 3, 5), (1, 65, 3, 3), (1000, 2, 17),
          (5000, 3), (2, 1, 300, 301)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", fast_only(SHAPES, [(2, 3, 5, 7)]), ids=str)
def test_forward_and_backward_match_the_reference(shape, dtype):
    run_both(shape, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_columns_mode_matches_the_reference(dtype):
    run_both((6, 65), dtype)


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(1000, 2, 17), (5000, 3)], ids=str)
def test_those_shapes_span_several_tiles_of_rows(shape):
    """The shapes above that claim to span the K-row batching do."""
    t = backend().tiling("fused_bias_leaky_relu_grad", shape, 4)
    assert t.batch > t.rows_per_tile > 1
    assert t.mode == (COLUMNS if len(shape) == 2 else ROWS)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("past", [0, 1], ids=["whole", "one_more"])
def test_rows_at_the_ub_boundary(dtype, past):
    """S = the longest row chunk the backward's UB holds (one whole row per tile), and one more element (the row
    in chunks, the last of one element)."""
    size = torch.tensor([], dtype=dtype).element_size()
    grad_tiling = backend().tiling
    longest = grad_tiling("fused_bias_leaky_relu_grad", (1, 2, 1 << 20), size, saved_is_result=False).tile_width
    shape = (2, 2, longest + past)
    tiling = grad_tiling("fused_bias_leaky_relu_grad", shape, size, saved_is_result=False)
    assert (tiling.tile_width == shape[2]) == (past == 0)
    run_both(shape, dtype, saved_is_result=False)


def test_row_chunks_are_whole_repeats():
    t = backend().tiling("fused_bias_leaky_relu", (2, 1, 300, 301), 4)
    assert t.mode == ROWS and t.rows_per_tile == 1 and t.tile_width < 300 * 301 and t.tile_width % 64 == 0


# slopes and scales: the output gives pre > 0 only for slope >= 0 and scale >= 1 (a tiny positive pre times a
# scale < 1 may round to 0); otherwise the input is saved
ATTRS = [(0.2, SQRT2, True), (0.0, SQRT2, True), (1.5, 1.0, True), (1.5, 0.5, False), (0.2, SQRT2, False),
         (-0.5, SQRT2, False), (1.5, -1.0, False), (0.0, 0.5, False)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("slope, scale, saved_is_result", fast_only(ATTRS, [(0.2, SQRT2, False)], unpack=True))
def test_slopes_scales_and_saved_tensor(slope, scale, saved_is_result, dtype):
    run_both((3, 7, 2, 5), dtype, slope, scale, saved_is_result=saved_is_result)
    run_both((9, 7), dtype, slope, scale, saved_is_result=saved_is_result)


# NVlabs bias_act's modes (clamp, relu): a clamp keeps the input; 0.7 cuts some of these outputs, 0 all of them
MODES = [(-1.0, True), (0.7, False), (0.7, True), (0.0, False)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("clamp, relu", fast_only(MODES, [(0.7, True)], unpack=True))
def test_clamp_and_relu_modes_match_the_reference(clamp, relu, dtype):
    for slope, scale in ((0.2, SQRT2), (1.0, 1.0), (0.0, 0.5)):
        saved_is_result = clamp < 0 and scale >= 1
        for shape in ((3, 7, 2, 5), (9, 7)):
            run_both(shape, dtype, slope, scale, saved_is_result=saved_is_result, clamp=clamp, relu=relu)
    x, bias, _ = inputs((4, 6, 3), torch.float32)
    y = backend().fused_bias_leaky_relu(x * 3, bias, 0.2, SQRT2, 0.7, relu)
    assert ((y == 0.7).any() and (y == -0.7).any()) if not relu else (y == 0.7).any()  # the clamp cut some


def test_a_clamp_needs_the_input_saved():
    with pytest.raises(ValueError, match="no tiling"):
        backend().tiling("fused_bias_leaky_relu_grad", (2, 3, 3), 4, saved_is_result=True, clamp=1.0)
    assert backend().tiling("fused_bias_leaky_relu_grad", (2, 3, 3), 4, saved_is_result=False, clamp=1.0).clamp == 1.0


@pytest.mark.parametrize("shape", [(3, 5, 4, 3), (8, 5)], ids=["rows", "columns"])
@pytest.mark.parametrize("saved_is_result", [True, False])
def test_without_bias(shape, saved_is_result):
    forward, backward = run_both(shape, torch.float16, with_bias=False, saved_is_result=saved_is_result)
    assert forward.buffer_bytes_in.get("bias", 0) == 0 and backward.buffer_bytes_in.get("bias", 0) == 0


@pytest.mark.parametrize("shape", [(2, 5, 9, 11), (33, 70)], ids=["rows", "columns"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("saved_is_result, clamp, relu",  # a clamp keeps the input: no saved result with it
                         [(saved, *mode) for saved in (True, False) for mode in [(-1.0, False), *MODES]
                          if not (saved and mode[0] >= 0)], ids=str)
def test_gm_traffic_is_the_ideal(shape, dtype, saved_is_result, clamp, relu):
    """Every mode (LeakyReLU or relu, clamp or none). Forward: x read once and the C biases, y written once.
    Backward: dy and saved read once (and the C biases when saved is the input, always with a clamp), dx written
    once and the C grad_bias entries. Exactly: nothing else moves (the tiling struct the kernels read word by word
    with scalar loads is not GM traffic the emulator counts)."""
    forward, backward = run_both(shape, dtype, saved_is_result=saved_is_result, clamp=clamp, relu=relu)
    channels = shape[1]
    data = math.prod(shape) * torch.tensor([], dtype=dtype).element_size()
    biases = channels * torch.tensor([], dtype=dtype).element_size()
    assert forward.buffer_bytes_in == {"x": data, "bias": biases, "y": 0, "tiling": 0}
    assert forward.buffer_bytes_out == {"x": 0, "bias": 0, "y": data, "tiling": 0}
    assert (forward.gm_bytes_in, forward.gm_bytes_out) == (data + biases, data)
    read_biases = 0 if saved_is_result else biases
    assert backward.buffer_bytes_in == {"dy": data, "saved": data, "bias": read_biases, "dx": 0, "grad_bias": 0,
                                        "tiling": 0}
    assert backward.gm_bytes_in == 2 * data + read_biases
    assert backward.buffer_bytes_out["dx"] == data and backward.buffer_bytes_out["grad_bias"] == biases
    assert backward.gm_bytes_out == data + biases
    assert forward.block_dim == backward.block_dim == min(channels, 48)  # whole channels per core


@pytest.mark.parametrize("platform, cores", fast_only([("ascend910b1", 0), ("ascend910b1", 1), ("ascend910b1", 3),
                                                       ("ascend910b3", 0), ("ascend910_93", 0)],
                                                      [("ascend910b1", 3)], unpack=True))
@pytest.mark.parametrize("shape", [(3, 50, 6, 5), (20, 50)], ids=["rows", "columns"])
def test_platforms_and_core_counts(platform, cores, shape):
    """One and many cores, each platform's tiling: results equal the reference, one block per channel up to the
    cores, peak UB within the platform (the backward below Select's temporary). In Rows mode the tiles do not
    depend on the core split, so grad_bias is bit-identical across core counts too."""
    x, bias, dy = inputs(shape, torch.float32)
    m = backend()
    base_dx, base_grad_bias = m.fused_bias_leaky_relu_backward(dy, x, bias, 0.2, SQRT2, False)
    with sim.launch_settings(platform=platform, vector_cores=cores or None):
        forward, backward = run_both(shape, torch.float32, saved_is_result=False)
        dx, grad_bias = m.fused_bias_leaky_relu_backward(dy, x, bias, 0.2, SQRT2, False)
    assert forward.block_dim == backward.block_dim == min(shape[1], cores or CORES[platform])
    assert forward.peak_ub_bytes <= UB_BYTES and backward.peak_ub_bytes <= SELECT_TEMPORARY
    assert torch.equal(dx, base_dx)
    if len(shape) > 2:
        assert torch.equal(grad_bias, base_grad_bias)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_large_tiles_fill_the_ub(dtype):
    """Tiles are sized from the UB: the biggest ones come close to the platform's (the forward) and to Select's
    temporary (the backward) without passing them."""
    forward, backward = run_both((400, 1, 8, 8), dtype)
    assert UB_BYTES - 8 * 1024 < forward.peak_ub_bytes <= UB_BYTES
    assert SELECT_TEMPORARY - 8 * 1024 < backward.peak_ub_bytes <= SELECT_TEMPORARY
    # relu and clamp Select in the forward too, and the clamped backward holds the unclamped output as well
    forward, backward = run_both((400, 1, 8, 8), dtype, saved_is_result=False, clamp=1.0, relu=True)
    assert SELECT_TEMPORARY - 8 * 1024 < forward.peak_ub_bytes <= SELECT_TEMPORARY
    assert SELECT_TEMPORARY - 8 * 1024 < backward.peak_ub_bytes <= SELECT_TEMPORARY


def test_pieces_of_whole_channels_equal_one_launch(monkeypatch):
    """Over LAUNCH_BYTES the backend launches per channel range on copies: y, dx and (Rows mode: the same tiles)
    grad_bias are bit-identical to one launch, and the pieces together move exactly one launch's bytes."""
    m = backend()
    module = m
    shape = (3, 10, 5, 7)
    x, bias, dy = inputs(shape, torch.float16)
    whole = (m.fused_bias_leaky_relu(x, bias, 0.2, SQRT2),
             *m.fused_bias_leaky_relu_backward(dy, x, bias, 0.2, SQRT2, False))
    launches = []
    real_launch = module.emulator.launch
    monkeypatch.setattr(module, "LAUNCH_BYTES", 3 * 5 * 7 * 2 * 3)  # three channels per piece
    monkeypatch.setattr(module.emulator, "launch", lambda *a: launches.append(real_launch(*a)) or launches[-1])
    pieces = (m.fused_bias_leaky_relu(x, bias, 0.2, SQRT2),
              *m.fused_bias_leaky_relu_backward(dy, x, bias, 0.2, SQRT2, False))
    assert len(launches) == 8  # channels 0-2, 3-5, 6-8, 9 in each direction
    assert all(torch.equal(a, b) for a, b in zip(pieces, whole))
    data = x.numel() * 2
    assert sum(launch.gm_bytes_in for launch in launches[:4]) == data + 10 * 2
    assert sum(launch.gm_bytes_in for launch in launches[4:]) == 2 * data + 10 * 2


def test_empty_batch_gives_a_zero_grad_bias():
    m = backend()
    x = torch.empty(0, 4, 3)
    assert m.fused_bias_leaky_relu(x, torch.ones(4), 0.2, SQRT2).shape == (0, 4, 3)
    dx, grad_bias = m.fused_bias_leaky_relu_backward(x, x, torch.ones(4), 0.2, SQRT2, True)
    assert dx.shape == (0, 4, 3) and torch.equal(grad_bias, torch.zeros(4))
    dx, grad_bias = m.fused_bias_leaky_relu_backward(torch.empty(2, 0), torch.empty(2, 0), None, 0.2, SQRT2, True)
    assert dx.shape == (2, 0) and grad_bias.shape == (0,)


def test_bad_arguments_are_named():
    m = backend()
    x = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="input: expected a tensor of rank >= 2"):
        m.fused_bias_leaky_relu(torch.randn(3), None, 0.2, SQRT2)
    with pytest.raises(ValueError, match="bias: expected a vector of the 3 channels"):
        m.fused_bias_leaky_relu(x, torch.randn(4), 0.2, SQRT2)
    with pytest.raises(ValueError, match="bias: .*torch.float32"):
        m.fused_bias_leaky_relu(x, torch.randn(3, dtype=torch.float16), 0.2, SQRT2)
    with pytest.raises(TypeError, match="float64"):
        m.fused_bias_leaky_relu(x.double(), None, 0.2, SQRT2)
    with pytest.raises(ValueError, match="saved: expected grad_output's shape"):
        m.fused_bias_leaky_relu_backward(x, x[:1], None, 0.2, SQRT2, False)
    with pytest.raises(ValueError, match="saved_is_result"):
        m.fused_bias_leaky_relu_backward(x, x, None, -0.5, SQRT2, True)
    with pytest.raises(ValueError, match="saved_is_result"):
        m.fused_bias_leaky_relu_backward(x, x, None, 0.2, -1.0, True)


# --- the host tiling alone (64-bit sizes: no kernel run) ------------------------------------------------------
@pytest.mark.parametrize("kernel", ["fused_bias_leaky_relu", "fused_bias_leaky_relu_grad"])
def test_tiling_keeps_64_bit_sizes(kernel):
    """N * C * S = 2^37 elements: the sizes arrive whole, the rows stay one strided DataCopyPad (the GM gap
    between a channel's rows, (C - 1) * S * 2 bytes, fits its uint32 stride)."""
    t = backend().tiling(kernel, (1 << 20, 64, 1 << 11), 2)
    assert (t.batch, t.channels, t.spatial) == (1 << 20, 64, 1 << 11)
    assert t.batch * t.channels * t.spatial > 1 << 32
    assert t.mode == ROWS and t.used_core_num == 48 and t.channels_per_core == 1 and t.big_core_count == 16
    assert t.tile_width == 1 << 11 and 1 < t.rows_per_tile <= 4095


@pytest.mark.parametrize("shape, element_size, mode", [((4, 1 << 21, 1 << 10), 4, ROWS),
                                                       ((8, (1 << 31) + 3), 2, COLUMNS)], ids=["rows", "columns"])
def test_tiling_falls_back_to_one_row_per_copy_past_a_uint32_gap(shape, element_size, mode):
    """A GM gap between rows past DataCopyExtParams' uint32 byte stride: one row per DataCopyPad."""
    t = backend().tiling("fused_bias_leaky_relu_grad", shape, element_size)
    assert t.mode == mode and t.rows_per_tile == 1
    assert t.channels == shape[1] and t.channels_per_core * t.used_core_num + t.big_core_count == shape[1]


def test_tiling_columns_chunk_of_a_cores_channels():
    """Columns: a core's channels in chunks (the biases replicated over the tile's rows), at least 8 rows a tile
    when N has them; within DataCopyPad's 4095 blocks."""
    t = backend().tiling("fused_bias_leaky_relu", (100000, 1 << 20), 4)
    assert t.mode == COLUMNS and t.tile_width == t.channel_block and 8 <= t.rows_per_tile <= 4095
    assert t.tile_width < t.channels_per_core
    small = backend().tiling("fused_bias_leaky_relu", (100000, 96), 4)
    assert small.tile_width == 2 and 8 < small.rows_per_tile <= 4095


def test_tiling_refuses_what_it_cannot_tile():
    with pytest.raises(ValueError, match="no tiling"):
        backend().tiling("fused_bias_leaky_relu", (2, 0, 3), 4)
    with pytest.raises(ValueError, match="kernel must be one of"):
        backend().tiling("leaky_relu", (2, 3, 3), 4)
