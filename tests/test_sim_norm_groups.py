"""The BatchNorm + activation training kernels with `norm_groups` (GroupNorm; InstanceNorm for G == C) and the
backward from the conv output (saved_is_result=False), on the emulator, called directly (the kernel wrappers of
ops/conv_bn_leaky_relu/kernels.py), against torch in float64 (F.group_norm / instance_norm / batch_norm + the
activation, torch.autograd for the gradients); their independence of the core count and their GM traffic from the
emulator's counters. Also the op table's attribute type "int" that carries norm_groups."""

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from ascend_acts import backends, op_table
from ascend_acts.ops.conv_bn_leaky_relu import kernels
from markers import fast_only, slow

pytestmark = pytest.mark.skipif(backends.unavailable_reason("sim") is not None, reason="emulator not built")

ROOT = Path(__file__).resolve().parents[1]
EPS, MOMENTUM = 1e-5, 0.1
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (N, C, H, W, G): odd planes with two channels per group; N = 1 instance norm; planes of whole 32-byte blocks moved
# several per copy (four channels per group); a unit longer than one tile; a single group; more groups (64) than the
# 48 cores
GROUPED = [(2, 6, 5, 7, 3), (1, 4, 3, 3, 4), (3, 8, 8, 8, 2), (2, 4, 131, 130, 2), (2, 6, 4, 4, 1),
           (2, 64, 3, 5, 64)]


def cases(values, fast):
    """Each value with each dtype; only the (value, dtype) pairs of `fast` in the fast subset (its 30 s budget)."""
    return fast_only([(value, dtype) for value in values for dtype in DTYPES], fast, unpack=True)


def sim():
    from ascend_acts.backends import sim as module

    return module


def inputs(shape, dtype, seed=0):
    """x with a mean far larger than its spread (the shifted-data sums must not cancel), per-channel weight with both
    signs and bias, and an upstream gradient."""
    generator = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=generator, dtype=torch.float64) * 3 + 50).to(dtype)
    c = shape[1]
    weight = torch.rand(c, generator=generator) + 0.5
    weight[::2] *= -1
    bias = torch.randn(c, generator=generator)
    grad = torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)
    return x, weight, bias, grad


def activation(z, slope, relu):
    return torch.relu(z) if relu else F.leaky_relu(z, slope)


def torch_norm(x, weight, bias, groups, slope, relu, grad=None, dtype=None):
    """torch's forward (and gradients of x, weight, bias for `grad`) in `dtype` (float64: the oracle)."""
    dtype = dtype or torch.float64
    leaves = [t.detach().to(dtype).requires_grad_() for t in (x, weight, bias)]
    if groups:
        z = F.group_norm(leaves[0], groups, leaves[1], leaves[2], EPS)
    else:
        z = F.batch_norm(leaves[0], None, None, leaves[1], leaves[2], True, 0.0, EPS)
    y = activation(z, slope, relu)
    if grad is None:
        return [y.detach()]
    y.backward(grad.to(dtype))
    return [y.detach()] + [leaf.grad for leaf in leaves]


def assert_within_torch(ours, x, weight, bias, groups, slope, relu, grad=None, floors=None):
    """The tolerance rule: each result's error against float64 at most twice torch's own same-dtype error, or one
    rounding of the result's dtype (relative to its largest value; `floors` scale that per result)."""
    exact = torch_norm(x, weight, bias, groups, slope, relu, grad)
    theirs = torch_norm(x, weight, bias, groups, slope, relu, grad, dtype=x.dtype)
    names = ["y", "grad_input", "grad_weight", "grad_bias"]
    for name, mine, their, expected in zip(names, ours, theirs, exact):
        error = float((mine.double() - expected).abs().max())
        torch_error = float((their.double() - expected).abs().max())
        floor = torch.finfo(mine.dtype).eps * float(expected.abs().max()) * (floors or {}).get(name, 1.0)
        assert error <= 2 * torch_error + floor, f"{name}: {error:.3e} vs torch's {torch_error:.3e} (floor {floor:.2e})"


def group_statistics(x, groups):
    """Per (sample, group) mean and 1 / sqrt(biased var + eps) in float64, (N, G)."""
    values = x.double().reshape(x.shape[0], groups, -1)
    return values.mean(-1), (values.var(-1, unbiased=False) + EPS).rsqrt()


# --- the attribute type "int" ----------------------------------------------------------------------------------

def test_norm_groups_is_an_int_attribute_of_both_kernels():
    for base, index in (("batch_norm_leaky_relu", 5), ("batch_norm_leaky_relu_grad", 3)):
        kernel = op_table.kernel(base)
        attr = kernel.attrs[index]
        assert (attr.name, attr.type, attr.default) == ("norm_groups", "int", 0)
        assert "int norm_groups" in kernel.npu_schema
        opdef = (ROOT / "op_host" / kernel.family / f"{base}.cpp").read_text()
        assert 'this->Attr("norm_groups").AttrType(OPTIONAL).Int(0);' in opdef
        assert "AttrKind::Int" in opdef
        (entry,) = json.loads((ROOT / "op_host" / kernel.family / f"{base}.json").read_text())
        assert {"name": "norm_groups", "param_type": "optional", "type": "int", "default_value": 0} in entry["attr"]


def test_the_binding_takes_an_int_attribute_as_an_int_only():
    from ascend_acts import _sim

    attrs = {"negative_slope": 0.1, "eps": 1e-5, "momentum": 0.1, "update_running_stats": False, "relu": False}
    shapes = [(2, 6, 4, 4), *[(6,)] * 4]
    tiling = _sim.batch_norm_leaky_relu_tiling("batch_norm_leaky_relu", shapes, 4, attrs | {"norm_groups": 3})
    assert (tiling.norm_groups, tiling.channels_per_group, tiling.used_core_num) == (3, 2, 3)
    for wrong in (3.0, True, "3"):
        with pytest.raises(TypeError, match=r"attribute 'norm_groups' must be an int, got"):
            _sim.batch_norm_leaky_relu_tiling("batch_norm_leaky_relu", shapes, 4, attrs | {"norm_groups": wrong})


def test_the_tiling_refuses_what_grouped_statistics_cannot_do():
    def tiling(shape, **attrs):
        return kernels.batch_norm_leaky_relu_tiling("batch_norm_leaky_relu", shape, 4, **attrs)

    with pytest.raises(ValueError, match="norm_groups 4 must be 0 or divide the channels"):
        tiling((2, 6, 4, 4), norm_groups=4)
    with pytest.raises(ValueError, match=r"only for norm_groups == C \(instance norm\)"):
        tiling((2, 6, 4, 4), norm_groups=3, update_running_stats=True)
    assert tiling((2, 6, 4, 4), norm_groups=6, update_running_stats=True).unbias_factor == pytest.approx(16 / 15)
    with pytest.raises(ValueError, match="save_mean missing"):
        kernels.emulator.binding().batch_norm_leaky_relu_tiling(
            "batch_norm_leaky_relu_grad", [(2, 6, 4, 4), (2, 6, 4, 4), (6,), (6,), None, (6,)], 4,
            {"negative_slope": 0.2, "saved_is_result": False, "relu": False, "norm_groups": 0})
    with pytest.raises(ValueError, match="only LeakyReLU with a slope > 0 is invertible"):
        kernels.batch_norm_leaky_relu_tiling("batch_norm_leaky_relu_grad", (2, 6, 4, 4), 4, relu=True)


# --- forward ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, dtype", cases(GROUPED, [((2, 6, 5, 7, 3), torch.float32)]), ids=str)
def test_grouped_forward_matches_group_norm(shape, dtype):
    *size, groups = shape
    x, weight, bias, _ = inputs(size, dtype)
    relu = groups % 2 == 1  # both activations over the shapes
    y, save_mean, save_invstd = kernels.batch_norm_leaky_relu(x, weight, bias, None, None, 0.2, EPS, MOMENTUM,
                                                              relu=relu, norm_groups=groups)
    assert save_mean.shape == save_invstd.shape == (size[0], groups)
    mean, invstd = group_statistics(x, groups)
    torch.testing.assert_close(save_mean.double(), mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(save_invstd.double(), invstd, rtol=1e-4, atol=1e-6)
    assert_within_torch([y], x, weight, bias, groups, 0.2, relu)


@pytest.mark.parametrize("shape", fast_only([(2, 5, 3, 7), (3, 8, 8, 8)], [(2, 5, 3, 7)]), ids=str)
def test_instance_norm_updates_running_statistics_as_torch(shape):
    """G == C with track_running_stats: running = (1 - momentum) * running + momentum * the mean over n of each
    instance's mean and unbiased variance, as F.instance_norm."""
    x, weight, bias, _ = inputs(shape, torch.float32)
    c = shape[1]
    running_mean, running_var = torch.rand(c), torch.rand(c) + 1
    expected_mean, expected_var = running_mean.double(), running_var.double()
    y, _, _ = kernels.batch_norm_leaky_relu(x, weight, bias, running_mean, running_var, 0.2, EPS, MOMENTUM,
                                            norm_groups=c)
    z = F.instance_norm(x.double(), expected_mean, expected_var, weight.double(), bias.double(), True, MOMENTUM, EPS)
    torch.testing.assert_close(y.double(), F.leaky_relu(z, 0.2), rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(running_mean.double(), expected_mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(running_var.double(), expected_var, rtol=1e-5, atol=1e-6)


# --- backward ---------------------------------------------------------------------------------------------------

def backward(x, weight, bias, grad, groups, slope, relu, from_output):
    y, mean, invstd = kernels.batch_norm_leaky_relu(x, weight, bias, None, None, slope, EPS, MOMENTUM, relu=relu,
                                                    norm_groups=groups)
    if from_output:
        return y, kernels.batch_norm_leaky_relu_grad(grad, y, weight, bias, invstd, slope, norm_groups=groups)
    return y, kernels.batch_norm_leaky_relu_grad(grad, x, weight, bias, invstd, slope, save_mean=mean,
                                                 saved_is_result=False, relu=relu, norm_groups=groups)


# the half types' output-based backward recovers the BN output from the rounded output y: its one rounding, amplified
# by 1 / |gamma| (up to 2 here), enters every gradient
OUTPUT_FLOORS = {torch.float32: None, torch.float16: dict.fromkeys(["grad_input", "grad_weight", "grad_bias"], 8.0),
                 torch.bfloat16: dict.fromkeys(["grad_input", "grad_weight", "grad_bias"], 8.0)}


@pytest.mark.parametrize("shape, dtype", cases(GROUPED, [((2, 6, 5, 7, 3), torch.float16)]), ids=str)
def test_grouped_backward_from_output_matches_autograd(shape, dtype):
    *size, groups = shape
    x, weight, bias, grad = inputs(size, dtype)
    y, grads = backward(x, weight, bias, grad, groups, 0.2, False, from_output=True)
    assert_within_torch([y, *grads], x, weight, bias, groups, 0.2, False, grad, floors=OUTPUT_FLOORS[dtype])


# BatchNorm (G = 0) and grouped; ReLU, a negative and a zero slope: the activations the output cannot invert
FROM_INPUT = [(2, 6, 5, 7, 0, "relu"), (2, 6, 5, 7, 3, "relu"), (1, 4, 3, 3, 4, -0.3), (3, 8, 8, 8, 2, 0.0),
              (3, 5, 8, 8, 0, 0.2), (2, 4, 131, 130, 2, 0.2), (2, 3, 131, 130, 0, "relu"), (2, 64, 3, 5, 64, 0.1),
              (150, 2, 8, 8, 0, -0.1)]


@pytest.mark.parametrize("case, dtype", cases(FROM_INPUT, [((2, 6, 5, 7, 0, "relu"), torch.float32),
                                                          ((2, 6, 5, 7, 3, "relu"), torch.bfloat16)]), ids=str)
def test_backward_from_conv_output_matches_autograd(case, dtype):
    *size, groups, activation_name = case
    relu = activation_name == "relu"
    slope = 0.0 if relu else activation_name
    x, weight, bias, grad = inputs(size, dtype)
    y, grads = backward(x, weight, bias, grad, groups, slope, relu, from_output=False)
    assert_within_torch([y, *grads], x, weight, bias, groups, slope, relu, grad)


def test_relu_backward_passes_dy_where_the_pre_activation_is_nan():
    """torch's threshold_backward: dz = z <= 0 ? 0 : dy, so where a NaN in x makes every z of its channel NaN, dz is
    dy (grad_bias the sum of dy, finite, as torch's) and grad_x NaN; the other channel is untouched."""
    x, weight, bias, grad = inputs((1, 2, 4, 4), torch.float32)
    x[0, 0, 1, 1] = float("nan")
    _, (dx, grad_weight, grad_bias) = backward(x, weight, bias, grad, 0, 0.0, True, from_output=False)
    expected = torch_norm(x, weight, bias, 0, 0.0, True, grad)
    assert torch.equal(dx.isnan(), expected[1].isnan()) and bool(dx[0, 0].isnan().all())
    torch.testing.assert_close(grad_bias.double(), expected[3], rtol=1e-6, atol=1e-6)
    assert float(grad_bias[0]) == pytest.approx(float(grad[0, 0].double().sum()), rel=1e-6)
    torch.testing.assert_close(dx[0, 1].double(), expected[1][0, 1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad_weight[1].double(), expected[2][1], rtol=1e-5, atol=1e-5)


# --- the core split and GM traffic ----------------------------------------------------------------------------

@pytest.mark.parametrize("groups, from_output", fast_only([(3, True), (3, False), (0, False), (12, True)],
                                                          [(3, False)], unpack=True))
def test_results_do_not_depend_on_the_core_count(groups, from_output):
    """Cores own whole groups and sum over n themselves: bit-identical on 1, 5 or all cores."""
    x, weight, bias, grad = inputs((3, 12, 5, 6), torch.float32)
    results = []
    for cores in (1, 5, None):
        with sim().launch_settings(vector_cores=cores):
            y, grads = backward(x, weight, bias, grad, groups, 0.2, False, from_output)
            assert sim().last_launch().block_dim == min(groups or 12, cores or 48)
        results.append([y, *grads])
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other))


@pytest.mark.parametrize("groups, from_output", fast_only([(0, False), (4, True), (4, False), (8, False)],
                                                          [(4, False)], unpack=True))
def test_traffic_is_ideal(groups, from_output):
    """Forward: x read twice, y written once; backward: dy and the saved tensor read twice, dx written once; the
    statistics O(N * G) floats."""
    shape = (3, 8, 6, 10)
    x, weight, bias, grad = inputs(shape, torch.float16)
    nbytes = x.numel() * x.element_size()
    y, mean, invstd = kernels.batch_norm_leaky_relu(x, weight, bias, None, None, 0.2, EPS, MOMENTUM,
                                                    norm_groups=groups)
    forward = sim().last_launch()
    assert forward.buffer_bytes_in["x"] == 2 * nbytes and forward.buffer_bytes_out["y"] == nbytes
    assert forward.buffer_bytes_out["save_mean"] == mean.numel() * 4 == (3 * groups if groups else 8) * 4
    saved = y if from_output else x
    kernels.batch_norm_leaky_relu_grad(grad, saved, weight, bias, invstd, 0.2, save_mean=None if from_output else mean,
                                       saved_is_result=from_output, norm_groups=groups)
    launch = sim().last_launch()
    assert launch.buffer_bytes_in["dy"] == 2 * nbytes and launch.buffer_bytes_in["saved"] == 2 * nbytes
    assert launch.buffer_bytes_out["dx"] == nbytes and launch.buffer_bytes_out["grad_weight"] == 8 * 4
    assert launch.buffer_bytes_in["save_invstd"] == invstd.numel() * 4
    assert launch.buffer_bytes_in.get("save_mean", 0) == (0 if from_output else mean.numel() * 4)


@slow
def test_float32_grouped_error_stays_within_twice_torchs():
    """2^15 values per unit over 16 samples (a GAN-sized instance norm): the compensated and pairwise sums keep the
    output and the three gradients within twice torch's float32 error, both backward paths."""
    shape = (16, 4, 128, 64)
    x, weight, bias, grad = inputs(shape, torch.float32)
    for from_output in (True, False):
        y, grads = backward(x, weight, bias, grad, 4, 0.2, False, from_output)
        assert_within_torch([y, *grads], x, weight, bias, 4, 0.2, False, grad)


@pytest.mark.parametrize("from_output", [True, False])
def test_the_npu_branch_passes_norm_groups_and_the_optional_save_mean(from_output, monkeypatch):
    """The private ops (ascend_acts_npu::<kernel>, stood in for on the emulator) take norm_groups as an int and
    save_mean only from the conv output; values bit for bit the emulator's."""
    from npu_stand_in import npu_branch, private_ops

    x, weight, bias, grad = inputs((2, 6, 5, 7), torch.float32)
    expected = backward(x, weight, bias, grad, 3, 0.2, False, from_output)
    with private_ops() as calls:
        npu_branch(monkeypatch)
        got = backward(x, weight, bias, grad, 3, 0.2, False, from_output)
    assert [base for base, _ in calls] == ["batch_norm_leaky_relu", "batch_norm_leaky_relu_grad"]
    assert calls[0][1]["norm_groups"] == calls[1][1]["norm_groups"] == 3
    assert (calls[1][1]["save_mean"] is None) == from_output
    assert torch.equal(got[0], expected[0]) and all(torch.equal(a, b) for a, b in zip(got[1], expected[1]))
