"""The AscendC BatchNorm + LeakyReLU training kernels (op_kernel/batch_norm_leaky_relu*.cpp) on the
emulator, called directly (the kernel-level functions of the "sim" backend), against torch in float64; their
GM traffic and determinism from the emulator's counters."""

import math

import pytest
import torch
import torch.nn.functional as F

from ascend_acts import backends
from ascend_acts.ops.conv_bn_leaky_relu import kernels as conv_bn_sim
from markers import fast_only

pytestmark = pytest.mark.skipif(backends.unavailable_reason("sim") is not None, reason="emulator not built")

SLOPE = 0.2
EPS = 1e-5
MOMENTUM = 0.1
# float32: accumulation-order differences; half types: one rounding of the output (relative), plus
# for the backward the rounding of the saved output the BN output is recovered from.
TOLERANCES = {torch.float32: (2e-5, 2e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}
# odd planes, one channel, more channels than some cores, planes longer than one UB tile, small planes moved many
# per DMA (8x8: whole 32-byte blocks) in several groups, the last one short
SHAPES = [(2, 3, 5, 7), (1, 1, 4, 4), (3, 50, 3, 1), (2, 4, 33, 65), (1, 2, 131, 130), (150, 2, 8, 8)]


def sim():
    from ascend_acts.backends import sim as module

    return module


def bn_inputs(shape, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    n, c, h, w = shape
    # an offset mean far larger than the spread: the shifted-data sums must not cancel
    x = (torch.randn(shape, generator=generator, dtype=torch.float64) * 3 + 50).to(dtype)
    weight = torch.rand(c, generator=generator) + 0.5
    weight[::2] *= -1  # negative gamma: x_hat = (z - beta) / gamma keeps its sign right
    bias = torch.randn(c, generator=generator)
    return x, weight, bias


def run_forward(x, weight, bias, running_mean, running_var, update=True):
    return conv_bn_sim.batch_norm_leaky_relu(x, weight, bias, running_mean if update else None,
                                       running_var if update else None, SLOPE, EPS, MOMENTUM)


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("shape", fast_only(SHAPES, [(2, 3, 5, 7)]), ids=str)
def test_bn_forward_matches_torch(shape, dtype):
    x, weight, bias = bn_inputs(shape, dtype)
    running_mean, running_var = torch.rand(shape[1]), torch.rand(shape[1]) + 1
    expected_mean, expected_var = running_mean.double().clone(), running_var.double().clone()
    out, save_mean, save_invstd = run_forward(x, weight, bias, running_mean, running_var)

    x64 = x.double()
    z = F.batch_norm(x64, expected_mean, expected_var, weight.double(), bias.double(), True, MOMENTUM, EPS)
    rtol, atol = TOLERANCES[dtype]
    torch.testing.assert_close(out, F.leaky_relu(z, SLOPE).to(dtype), rtol=rtol, atol=atol)
    mean = x64.mean((0, 2, 3))
    invstd = (x64.var((0, 2, 3), unbiased=False) + EPS).rsqrt()
    torch.testing.assert_close(save_mean.double(), mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(save_invstd.double(), invstd, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(running_mean.double(), expected_mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(running_var.double(), expected_var, rtol=1e-4, atol=1e-6)


def test_bn_forward_without_running_stats_leaves_them():
    x, weight, bias = bn_inputs((2, 3, 4, 4), torch.float32)
    running_mean, running_var = torch.zeros(3), torch.ones(3)
    run_forward(x, weight, bias, running_mean, running_var, update=False)
    assert torch.equal(running_mean, torch.zeros(3)) and torch.equal(running_var, torch.ones(3))


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=str)
@pytest.mark.parametrize("shape", fast_only(SHAPES, [(2, 3, 5, 7)]), ids=str)
def test_bn_backward_from_output_matches_torch(shape, dtype):
    x, weight, bias = bn_inputs(shape, dtype)
    c = shape[1]
    out, _, save_invstd = run_forward(x, weight, bias, torch.zeros(c), torch.ones(c), update=False)
    grad_out = torch.randn(shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(dtype)
    grad_input, grad_weight, grad_bias = conv_bn_sim.batch_norm_leaky_relu_grad(grad_out, out, weight, bias,
                                                                                save_invstd, SLOPE)

    x64 = x.double().requires_grad_()
    w64, b64 = weight.double().requires_grad_(), bias.double().requires_grad_()
    y = F.leaky_relu(F.batch_norm(x64, None, None, w64, b64, True, 0.0, EPS), SLOPE)
    y.backward(grad_out.double())
    rtol, atol = TOLERANCES[dtype]
    # the half types recover z from a rounded output: error relative to the largest gradient
    scale = 1.0 if dtype == torch.float32 else float(x64.grad.abs().max())
    torch.testing.assert_close(grad_input.double(), x64.grad, rtol=rtol, atol=atol * scale)
    sums_scale = 1.0 if dtype == torch.float32 else float(w64.grad.abs().max() + b64.grad.abs().max())
    torch.testing.assert_close(grad_bias.double(), b64.grad, rtol=rtol, atol=atol * sums_scale)
    torch.testing.assert_close(grad_weight.double(), w64.grad, rtol=rtol, atol=atol * sums_scale)


def run_backward(grad_out, out, weight, bias, save_invstd):
    return conv_bn_sim.batch_norm_leaky_relu_grad(grad_out, out, weight, bias, save_invstd, SLOPE)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_traffic_two_passes_one_write(dtype):
    """Forward reads x twice and writes out once; backward reads dy and the output twice, writes dx once."""
    shape = (2, 5, 9, 11)
    x, weight, bias = bn_inputs(shape, dtype)
    nbytes = x.numel() * x.element_size()
    out, _, save_invstd = run_forward(x, weight, bias, torch.zeros(5), torch.ones(5))
    launch = sim().last_launch()
    assert launch.kernel == "acts_batch_norm_leaky_relu"
    assert launch.buffer_bytes_in["x"] == 2 * nbytes
    assert launch.buffer_bytes_out["y"] == nbytes and launch.buffer_bytes_in["y"] == 0
    assert launch.buffer_bytes_out["running_var"] == 5 * 4 and launch.buffer_bytes_out["save_mean"] == 5 * 4
    run_backward(torch.randn(shape).to(dtype), out, weight, bias, save_invstd)
    launch = sim().last_launch()
    assert launch.buffer_bytes_in["dy"] == 2 * nbytes and launch.buffer_bytes_in["saved"] == 2 * nbytes
    assert launch.buffer_bytes_out["dx"] == nbytes
    assert launch.block_dim == 5  # whole channels per core


@pytest.mark.parametrize("platform, cores", [("ascend910b1", 0), ("ascend910b1", 1), ("ascend910b1", 3),
                                             ("ascend910b3", 0), ("ascend910_93", 0)])
def test_results_do_not_depend_on_the_core_split(platform, cores):
    """Each channel is reduced by one core in a fixed order: bit-identical on any core count."""
    shape = (3, 50, 6, 5)
    x, weight, bias = bn_inputs(shape, torch.float32)
    grad_out = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    expected_out, _, invstd = run_forward(x, weight, bias, torch.zeros(50), torch.ones(50))
    expected_grads = run_backward(grad_out, expected_out, weight, bias, invstd)
    with sim().launch_settings(platform=platform, vector_cores=cores or None):
        out, _, invstd_here = run_forward(x, weight, bias, torch.zeros(50), torch.ones(50))
        grads = run_backward(grad_out, out, weight, bias, invstd_here)
        assert sim().last_launch().block_dim == min(50, cores or {"ascend910b1": 48, "ascend910b3": 40,
                                                                  "ascend910_93": 48}[platform])
    assert torch.equal(out, expected_out) and torch.equal(invstd_here, invstd)
    assert all(torch.equal(a, b) for a, b in zip(grads, expected_grads))


def test_backward_refuses_what_it_cannot_invert():
    x, weight, bias = bn_inputs((1, 2, 4, 4), torch.float32)
    out, _, invstd = run_forward(x, weight, bias, torch.zeros(2), torch.ones(2))
    with pytest.raises(ValueError, match="negative_slope"):
        conv_bn_sim.batch_norm_leaky_relu_grad(out, out, weight, bias, invstd, 0.0)
    with pytest.raises(ValueError, match="gamma"):
        conv_bn_sim.batch_norm_leaky_relu_grad(out, out, torch.tensor([1.0, 0.0]), bias, invstd, SLOPE)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_small_planes_move_many_per_copy(dtype):
    """300 planes of 8x8 per channel: a plane fills whole 32-byte blocks, so a tile holds up to 256 of them and
    one strided DataCopyPad moves as many as the tile holds (a few copies per channel and pass, not 300; the last
    group short); the traffic stays ideal."""
    shape = (300, 2, 8, 8)
    x, weight, bias = bn_inputs(shape, dtype)
    with sim().launch_settings(assumptions=sim().timeline.Assumptions()):  # the timeline counts the DMA instructions
        out, _, save_invstd = run_forward(x, weight, bias, torch.zeros(2), torch.ones(2))
    launch = sim().last_launch()
    tiles = math.ceil(300 / (launch.tile_length // 64))
    assert 1 < tiles < 10 and 300 % (launch.tile_length // 64) != 0
    # per core (one channel each): x read in each of the two passes and out written, `tiles` DMAs each (the
    # timeline's events are instructions), + 4 statistics copies in and 4 out
    for events in launch.timeline.events:
        assert events["MTE2"] == 2 * tiles + 4 and events["MTE3"] == tiles + 4
    assert launch.buffer_bytes_in["x"] == 2 * x.numel() * x.element_size()
    with sim().launch_settings(assumptions=sim().timeline.Assumptions()):
        run_backward(torch.randn(shape).to(dtype), out, weight, bias, save_invstd)
    assert all(events["MTE2"] < 300 for events in sim().last_launch().timeline.events)


def test_tiling_walks_long_planes_in_several_tiles():
    tiling = conv_bn_sim.batch_norm_leaky_relu_tiling("batch_norm_leaky_relu", (1, 2, 131, 130), 4)
    assert tiling.tile_length < 131 * 130 and tiling.tile_length % 64 == 0
    assert tiling.used_core_num == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_backward_leaves_select_its_ub_reserve(dtype):
    """Planes longer than one tile: the backward's largest tile stays below Select's temporary at 184 KiB
    of UB (the emulator's `ub_reserved` rule would stop it otherwise); the forward, without Select, may
    use more."""
    shape = (1, 2, 131, 130)
    x, weight, bias = bn_inputs(shape, dtype)
    out, _, invstd = run_forward(x, weight, bias, torch.zeros(2), torch.ones(2))
    forward = sim().last_launch()
    run_backward(torch.randn(shape).to(dtype), out, weight, bias, invstd)
    backward = sim().last_launch()
    assert backward.tile_length < 131 * 130 and backward.peak_ub_bytes <= 184 * 1024
    assert backward.peak_ub_bytes + 4 * 1024 > 184 * 1024  # the largest tile that leaves the reserve
    assert forward.peak_ub_bytes > 184 * 1024


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("padding", [(1, 1, 1, 1), (0, 1, 0, 1)], ids=["same", "asymmetric"])
def test_training_convolution_is_torchs_in_float32(dtype, padding):
    """The platform convolution of the fused training op, forward and backward, is torch's (oneDNN here, as
    torch_npu's on the NPU): computed in float32, rounded to the input dtype once; bit-identical."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 3, 9, 8, generator=g).to(dtype)
    weight, bias = torch.randn(5, 3, 3, 3, generator=g).to(dtype), torch.randn(5, generator=g).to(dtype)
    gamma, beta = torch.rand(5, generator=g) + 0.5, torch.randn(5, generator=g)
    geometry = ((2, 1), padding, (1, 1), 1)
    out, conv_out, mean, invstd = conv_bn_sim.conv_bn_leaky_relu_train(x, weight, bias, gamma, beta, None, None,
                                                                       *geometry, 0.1, EPS, SLOPE, False)
    top, bottom, left, right = padding
    x32 = F.pad(x.float(), (left, right, top, bottom)).requires_grad_()
    w32 = weight.float().requires_grad_()
    expected = F.conv2d(x32, w32, bias.float(), (2, 1))
    assert torch.equal(conv_out, expected.to(dtype))

    grad_out = torch.randn(out.shape, generator=g).to(dtype)
    grads = conv_bn_sim.conv_bn_leaky_relu_train_backward(grad_out, conv_out, False, x, weight, gamma, beta, mean,
                                                          invstd, *geometry, SLOPE)
    # the BN part's gradient of the conv output: the gradient kernel's, in the data dtype (as an NPU's conv backward
    # takes it), within one rounding of torch's float32 one
    y32 = conv_out.float().requires_grad_()
    z = F.batch_norm(y32, None, None, gamma, beta, True, 0.0, EPS)
    (torch_grad_y,) = torch.autograd.grad(F.leaky_relu(z, SLOPE), y32, grad_out.float())
    grad_y, _, _ = conv_bn_sim.batch_norm_leaky_relu_grad(grad_out, conv_out, gamma, beta, invstd, SLOPE,
                                                          save_mean=mean, saved_is_result=False)
    rounding = torch.finfo(dtype).eps
    torch.testing.assert_close(grad_y.float(), torch_grad_y, rtol=rounding, atol=1e-5 + rounding * 1e-2)
    # then torch's convolution backward of it in float32
    grad_x, grad_w = torch.autograd.grad(expected, (x32, w32), grad_y.float())
    torch.testing.assert_close(grads[0], grad_x[:, :, top:top + 9, left:left + 8].to(dtype), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grads[1], grad_w.to(dtype), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grads[2], grad_y.float().sum((0, 2, 3)).to(dtype), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("offset", [0.5, 50.0], ids=["centred", "offset"])
def test_float32_error_stays_within_twice_torchs(offset):
    """2^17 values per channel (GAN-sized: 32 x 64x64): the kernels' float32 error against float64 is at most twice
    torch's own float32 error, plus one float32 ulp of the largest value, for the output and the three gradients.
    Per-lane float32 sums over N*H*W values (the statistics, grad_beta, grad_gamma) grew their error with the count
    (ten times torch's and more here); the compensated sums keep it torch's."""
    shape = (32, 2, 64, 64)
    generator = torch.Generator().manual_seed(0)
    x = (torch.randn(shape, generator=generator, dtype=torch.float64) * 2 + offset).float()
    weight, bias = torch.rand(2, generator=generator) + 0.5, torch.randn(2, generator=generator)
    grad_out = torch.randn(shape, generator=generator, dtype=torch.float64).float()
    out, _, save_invstd = run_forward(x, weight, bias, None, None, update=False)
    grad_input, grad_weight, grad_bias = run_backward(grad_out, out, weight, bias, save_invstd)

    def torch_bn(dtype):
        leaves = [t.to(dtype).requires_grad_() for t in (x, weight, bias)]
        y = F.leaky_relu(F.batch_norm(leaves[0], None, None, leaves[1], leaves[2], True, 0.0, EPS), SLOPE)
        y.backward(grad_out.to(dtype))
        return [y.detach()] + [leaf.grad for leaf in leaves]

    exact, torchs = torch_bn(torch.float64), torch_bn(torch.float32)
    for name, ours, theirs, expected in zip(["y", "grad_input", "grad_weight", "grad_bias"],
                                            [out, grad_input, grad_weight, grad_bias], torchs, exact):
        error = float((ours.double() - expected).abs().max())
        torch_error = float((theirs.double() - expected).abs().max())
        floor = torch.finfo(torch.float32).eps * float(expected.abs().max())
        assert error <= 2 * torch_error + floor, f"{name}: {error:.2e} vs torch's {torch_error:.2e}"
