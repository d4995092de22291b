"""The reference backend's compiled float32 passes (ascend_acts._cpu): the norm + activation ones (cpu_batch_norm.py)
against the float64 oracle (the NumPy passes in float64) and the NumPy float32 passes they stand in for: errors no
larger, special values alike, the same bits on every build (AVX2, baseline) and thread count, and chosen where they
apply; LeakyReLU's against torch, bit for bit; the threads torch's OpenMP ones; the layout transpose exact."""

import copy
import os

import numpy as np
import pytest
import torch

from ascend_acts.numerics import compiled
from ascend_acts.ops.conv_bn_leaky_relu import cpu_batch_norm, reference, reference_batch_norm
from markers import slow

if compiled._cpu is None and os.environ.get("ASCEND_ACTS_REQUIRE_SIM") == "1":  # CI: built with the emulator
    raise RuntimeError("ascend_acts._cpu is not built, and ASCEND_ACTS_REQUIRE_SIM=1 requires the compiled modules")
pytestmark = pytest.mark.skipif(compiled.module() is None, reason="ascend_acts._cpu not built, or switched off")

SHAPES = [(4, 6, 5, 7), (2, 8, 33, 17), (1, 64, 32, 32), (3, 4, 1, 16), (5, 3, 300), (7, 2, 3, 3)]
# (relu, slope, saved_is_result): ReLU, LeakyReLU of several slopes, none; the output kept only for slope > 0
ACTIVATIONS = [(True, 0.0, False), (False, 0.2, False), (False, 0.2, True), (False, 1.0, False), (False, 1.0, True),
               (False, -0.5, False), (False, 1.5, False), (False, 1.5, True)]


KINDS = ("batch", "one", "two", "instance")  # of statistics: batch, GroupNorm of 1 and 2 groups, instance


def _groups(shape, kind):
    return {"batch": 0, "one": 1, "two": 2, "instance": shape[1]}[kind]


def _inputs(shape, seed, offset=5.0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    y = (rng.standard_normal(shape) * 3 + offset).astype(np.float32)
    grad = rng.standard_normal(shape).astype(np.float32)
    gamma = (rng.random(c) + 0.5).astype(np.float32)
    beta = rng.standard_normal(c).astype(np.float32)
    return y, grad, gamma, beta


def _run(passes, y, gamma, beta, relu, slope, groups, centre_on_mean):
    """The forward of `passes`: (output, (mean, invstd, variance))."""
    out = np.empty_like(y)
    statistics = passes.forward(y, gamma, beta, 1e-5, slope, out, relu, groups, centre_on_mean)
    return out, statistics


def _backward(passes, grad, saved, saved_is_result, gamma, beta, mean, invstd, slope, relu, groups):
    grad_y = np.empty_like(grad)
    grad_gamma, grad_beta = passes.backward(grad, saved, saved_is_result, gamma, beta, mean, invstd, slope, grad_y,
                                            relu, groups)
    return grad_y, grad_gamma, grad_beta


def _error(values, oracle):
    return float(np.max(np.abs(values.astype(np.float64) - oracle)) / max(np.max(np.abs(oracle)), 1e-30))


@pytest.mark.parametrize("shape, kind", [(shape, kind) for shape in SHAPES for kind in KINDS
                                         if kind == "batch" or shape[1] % _groups(shape, kind) == 0], ids=str)
@pytest.mark.parametrize("relu, slope, saved_is_result", ACTIVATIONS)
def test_compiled_passes_are_as_accurate_as_numpys_against_float64(shape, kind, relu, slope, saved_is_result):
    groups = _groups(shape, kind)
    y, grad, gamma, beta = _inputs(shape, seed=hash((shape, kind)) % 2**32)
    centre_on_mean = not saved_is_result
    oracle = [a.astype(np.float64) for a in (y, grad, gamma, beta)]
    out64, stats64 = _run(reference_batch_norm, oracle[0], oracle[2], oracle[3], relu, slope, groups,
                          centre_on_mean)
    results = {}
    for passes in (cpu_batch_norm, reference_batch_norm):
        out, stats = _run(passes, y, gamma, beta, relu, slope, groups, centre_on_mean)
        # both backwards from the same float32 kept tensor and statistics: the oracle's, rounded
        saved = out64.astype(np.float32) if saved_is_result else y
        mean, invstd = (s.astype(np.float32) for s in stats64[:2])
        grads = _backward(passes, grad, saved, saved_is_result, gamma, beta, mean, invstd, slope, relu, groups)
        grads64 = _backward(reference_batch_norm, oracle[1], saved.astype(np.float64), saved_is_result, oracle[2],
                            oracle[3], mean.astype(np.float64), invstd.astype(np.float64), slope, relu, groups)
        results[passes] = [_error(a, b) for a, b in zip((out, *stats, *grads), (out64, *stats64, *grads64))]
    compiled, numpy_passes = results[cpu_batch_norm], results[reference_batch_norm]
    # float32 rounding of results that are O(1): a few units of 6e-8, never more than NumPy's own error's double
    assert all(c <= max(2 * n, 2e-6) for c, n in zip(compiled, numpy_passes)), (compiled, numpy_passes)


@pytest.mark.parametrize("special", ["nan", "inf", "-inf", "-0", "huge"])
@pytest.mark.parametrize("kind", ["batch", "instance"])
@pytest.mark.parametrize("relu, slope, saved_is_result", ACTIVATIONS[:3])
def test_special_values_give_what_numpys_passes_give(special, kind, relu, slope, saved_is_result):
    shape = (3, 4, 5, 6)
    groups = _groups(shape, kind)
    y, grad, gamma, beta = _inputs(shape, seed=7)
    value = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "-0": -0.0, "huge": 1e30}[special]
    y[1, 2, 3, :2] = value
    # channel 0 constant (x-hat exactly 0) with a negative weight and a -0 bias: z = (+0 * -1.5) + -0 = -0, kept by
    # ReLU and LeakyReLU
    y[:, 0], gamma[0], beta[0] = 5.0, -1.5, -0.0
    if special in ("nan", "-0"):  # an infinite gradient's NaN/inf pattern follows the rounding of sums near 0
        grad[0, 1, 1, 1] = value
    beta[3] = -0.0
    runs = []
    for passes in (cpu_batch_norm, reference_batch_norm):
        out, stats = _run(passes, y, gamma, beta, relu, slope, groups, not saved_is_result)
        runs.append([out, *stats, *_backward(passes, grad, out if saved_is_result else y, saved_is_result, gamma,
                                              beta, stats[0], stats[1], slope, relu, groups)])
    for ours, numpy_passes in zip(*runs):
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(numpy_passes))
        np.testing.assert_array_equal(np.isinf(ours), np.isinf(numpy_passes))
        finite = np.isfinite(numpy_passes)
        np.testing.assert_allclose(ours[finite], numpy_passes[finite], rtol=2e-5, atol=2e-6)
        # zeros of either sign as NumPy's (ReLU keeps -0, the activation's zeros are torch's)
        zeros = (numpy_passes == 0) & (ours == 0)
        np.testing.assert_array_equal(np.signbit(ours[zeros]), np.signbit(numpy_passes[zeros]))


def _bits(results):
    return [np.asarray(a).view(np.uint64 if np.asarray(a).dtype == np.float64 else np.uint32).copy() for a in results]


def _forward_backward(y, grad, gamma, beta, groups):
    out, stats = _run(cpu_batch_norm, y, gamma, beta, False, 0.2, groups, True)
    return _bits([out, *stats, *_backward(cpu_batch_norm, grad, y, False, gamma, beta, stats[0], stats[1], 0.2, False,
                                          groups)])


@pytest.mark.parametrize("shape, groups", [((3, 8, 13, 11), 0), ((2, 6, 37), 3), ((1, 16, 64, 64), 16)])
def test_the_avx2_and_baseline_builds_give_the_same_bits(shape, groups):
    from ascend_acts import _cpu

    if _cpu.isa() != "avx2":
        pytest.skip("this CPU has no AVX2: only the baseline build runs")
    y, grad, gamma, beta = _inputs(shape, seed=3)
    try:
        avx2 = _forward_backward(y, grad, gamma, beta, groups)
        _cpu.use_isa("baseline")
        baseline = _forward_backward(y, grad, gamma, beta, groups)
    finally:
        _cpu.use_isa("avx2")
    assert all(np.array_equal(a, b) for a, b in zip(avx2, baseline))


@pytest.mark.parametrize("groups", [0, 4])
def test_threads_change_no_bit(groups):
    """A call of 2^17 values is shared out over torch's threads (cpu_kernel/module.cpp): the same bits as on one."""
    y, grad, gamma, beta = _inputs((4, 8, 64, 64), seed=5)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _forward_backward(y, grad, gamma, beta, groups)
        torch.set_num_threads(3)  # more than the sets of a thread's share divide evenly
        threaded = _forward_backward(y, grad, gamma, beta, groups)
    finally:
        torch.set_num_threads(threads)
    assert all(np.array_equal(a, b) for a, b in zip(one, threaded))


def test_chosen_for_float32_and_numpy_otherwise(monkeypatch):
    values = np.zeros((2, 3, 4, 4), np.float32)
    assert reference._passes(values, 0) is cpu_batch_norm
    assert reference._passes(values.astype(np.float64), 0) is reference_batch_norm  # the oracle's dtype
    assert reference._passes(np.zeros((2, 3, 4), np.float32), 0) is reference_batch_norm  # short batch planes
    assert reference._passes(np.zeros((2, 3, 4), np.float32), 3) is cpu_batch_norm
    assert reference._passes(np.zeros((0, 3, 4, 4), np.float32), 0) is reference_batch_norm
    assert reference._passes(values.transpose(0, 1, 3, 2), 0) is reference_batch_norm  # not C-contiguous
    monkeypatch.setenv(compiled.NUMPY_PASSES, "1")
    assert reference._passes(values, 0) is reference_batch_norm


@pytest.mark.parametrize("numpy_passes", ["0", "1"])
@pytest.mark.parametrize("norm", ["batch", "instance", "group"])
def test_a_converted_block_trains_as_torch_with_either_passes(monkeypatch, numpy_passes, norm):
    import ascend_acts

    monkeypatch.setenv(compiled.NUMPY_PASSES, numpy_passes)
    torch.manual_seed(0)
    layer = {"batch": torch.nn.BatchNorm2d(6), "instance": torch.nn.InstanceNorm2d(6, affine=True),
             "group": torch.nn.GroupNorm(3, 6)}[norm]
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), layer, torch.nn.LeakyReLU(0.2))
    reference_model = copy.deepcopy(model).double()
    converted = ascend_acts.convert(model)
    x = torch.randn(4, 3, 9, 7, requires_grad=True)
    x64 = x.detach().double().requires_grad_()
    with ascend_acts.use_backend("reference"):
        out = converted(x)
        out.square().sum().backward()
    expected = reference_model(x64)
    expected.square().sum().backward()
    torch.testing.assert_close(out, expected.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.grad, x64.grad.float(), rtol=1e-4, atol=1e-4)
    for ours, theirs in zip(converted.parameters(), reference_model.parameters()):
        torch.testing.assert_close(ours.grad, theirs.grad.float(), rtol=1e-4, atol=1e-4)



@pytest.mark.parametrize("isa", ["avx2", "baseline"])
@pytest.mark.parametrize("slope", [0.2, 0.0, -0.0, -0.5, 1.0, 1.5, 1e-30])
def test_compiled_leaky_relu_is_torchs_bit_for_bit_on_either_build(isa, slope):
    from ascend_acts import _cpu
    from ascend_acts.ops.leaky_relu import reference as leaky_relu_reference

    if isa == "avx2" and _cpu.isa() != "avx2":
        pytest.skip("this CPU has no AVX2")
    rng = np.random.default_rng(11)
    x = rng.standard_normal(1003).astype(np.float32)  # not a multiple of the 8 lanes
    x[:8] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, -1e-45, 3e38]
    grad = rng.standard_normal(1003).astype(np.float32)
    grad[8:12] = [np.nan, -0.0, np.inf, -np.inf]
    before = _cpu.isa()
    try:
        _cpu.use_isa(isa)
        out, grad_x = np.empty_like(x), np.empty_like(x)
        leaky_relu_reference.forward(x, slope, out)
        leaky_relu_reference.backward(grad, x, slope, grad_x)
    finally:
        _cpu.use_isa(before)
    tx = torch.from_numpy(x).requires_grad_()
    expected = torch.nn.functional.leaky_relu(tx, slope)
    (expected_grad,) = torch.autograd.grad(expected, tx, torch.from_numpy(grad))
    for ours, theirs in ((out, expected), (grad_x, expected_grad)):
        assert np.array_equal(ours.view(np.uint32), theirs.detach().numpy().view(np.uint32))


@pytest.mark.parametrize("slope", [0.2, -0.5])
def test_leaky_relu_shared_over_threads_changes_no_bit(slope):
    """2^17 + 5 values (more than a call runs on one thread; not a multiple of a thread's share of whole lines)."""
    from ascend_acts.ops.leaky_relu import reference as leaky_relu_reference

    rng = np.random.default_rng(12)
    x, grad = (rng.standard_normal((1 << 17) + 5).astype(np.float32) for _ in range(2))
    results = []
    threads = torch.get_num_threads()
    try:
        for count in (1, 3):
            torch.set_num_threads(count)
            out, grad_x = np.empty_like(x), np.empty_like(x)
            leaky_relu_reference.forward(x, slope, out)
            leaky_relu_reference.backward(grad, x, slope, grad_x)
            results.append((out, grad_x))
    finally:
        torch.set_num_threads(threads)
    tx = torch.from_numpy(x).requires_grad_()
    expected = torch.nn.functional.leaky_relu(tx, slope)
    (expected_grad,) = torch.autograd.grad(expected, tx, torch.from_numpy(grad))
    for out, grad_x in results:
        assert np.array_equal(out.view(np.uint32), expected.detach().numpy().view(np.uint32))
        assert np.array_equal(grad_x.view(np.uint32), expected_grad.numpy().view(np.uint32))


@slow  # a subprocess
@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps (Linux)")
def test_the_module_runs_on_torchs_openmp_runtime_not_a_second_one():
    """cpu_kernel/module.cpp's threads are torch's OpenMP team only if the process maps one libgomp: a second copy
    would keep a second set of threads competing with torch's for the cores."""
    import subprocess
    import sys

    script = ("import numpy as np, ascend_acts\n"
              "from ascend_acts.ops.leaky_relu import reference\n"
              "x = np.ones(1 << 20, np.float32); reference.forward(x, 0.1, x)\n"
              "print(sorted({line.split()[-1] for line in open('/proc/self/maps') if 'gomp' in line}))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    mapped = eval(result.stdout.strip().splitlines()[-1])
    assert len(mapped) == 1 and "torch" in mapped[0], mapped


@pytest.mark.parametrize("shape", [(1, 3, 5), (2, 17, 33), (3, 1030, 20), (1, 64, 4097), (2, 20, 1)])
def test_the_layout_transpose_moves_every_value_unchanged(shape):
    from ascend_acts import _cpu

    batches, rows, cols = shape
    src = np.random.default_rng(13).standard_normal(shape).astype(np.float32)
    src.reshape(-1)[:3] = [np.nan, -0.0, np.inf]
    dst = np.full((batches, cols, rows), 7.0, np.float32)
    _cpu.transpose(compiled.address(src), compiled.address(dst), batches, rows, cols)
    assert np.array_equal(dst.view(np.uint32), src.transpose(0, 2, 1).view(np.uint32))


@pytest.mark.parametrize("numpy_passes", ["0", "1"])
@pytest.mark.parametrize("plane", [(4, 4), (8, 8), (1, 40)])
@pytest.mark.parametrize("scale", [5e18, 3e18])
def test_squares_whose_float32_sum_overflows_give_torchs_inf_variance(monkeypatch, numpy_passes, plane, scale):
    """Values near 1e19: the variance is finite in float64, but where the float32 sum of a channel's squares overflows
    torch's is inf (5e18: every channel; 3e18: some), whatever the layout (the compiled passes' lanes each hold a few
    of the squares and alone would not overflow)."""
    import ascend_acts

    monkeypatch.setenv(compiled.NUMPY_PASSES, numpy_passes)
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(4, 4, 1, bias=False)
    with torch.no_grad():
        conv.weight.copy_(torch.eye(4).reshape(4, 4, 1, 1))
    model = torch.nn.Sequential(conv, torch.nn.BatchNorm2d(4), torch.nn.LeakyReLU(0.2))
    reference_model = copy.deepcopy(model)
    x = torch.randn(2, 4, *plane) * scale
    with ascend_acts.use_backend("reference"):
        out = ascend_acts.convert(model)(x)
    expected = reference_model(x)
    assert torch.isinf(reference_model[1].running_var).any()
    torch.testing.assert_close(model[1].running_var, reference_model[1].running_var)
    torch.testing.assert_close(out, expected, equal_nan=True)


def test_a_sum_of_squares_within_half_a_unit_of_float32s_max_is_finite_as_torchs():
    """Squares summing (exactly) to FLT_MAX + 2^102, less than half a unit above it: torch's float32 sum rounds to
    FLT_MAX, a finite variance; the compiled passes decide on their sum rounded to float32 alike. (The NumPy passes'
    float32 row sums overflow on the way there: inf, within 2^-25 of the boundary.)"""
    import ascend_acts

    a, b = 2.0**62 - 2.0**38, 2.0**62  # float32 a * a rounds to 2^124 - 2^101, b * b is 2^124
    x = torch.tensor([a, -a] * 3 + [b, -b] * 5).reshape(1, 1, 4, 4)
    conv = torch.nn.Conv2d(1, 1, 1, bias=False)
    with torch.no_grad():
        conv.weight.fill_(1.0)
    model = torch.nn.Sequential(conv, torch.nn.BatchNorm2d(1), torch.nn.LeakyReLU(0.2))
    reference_model = copy.deepcopy(model)
    with ascend_acts.use_backend("reference"):
        out = ascend_acts.convert(model)(x)
    expected = reference_model(x)
    assert torch.isfinite(reference_model[1].running_var).all()
    torch.testing.assert_close(model[1].running_var, reference_model[1].running_var)
    torch.testing.assert_close(out, expected)

