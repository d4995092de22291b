"""The NPU runs the launch sequence the emulator runs (ops/<op>/kernels.py through backends/launch.py): driven here
without a device through the NPU branch of the launcher, whose private ops (ascend_acts_npu::<kernel>) a stand-in
runs on the emulator (tests/npu_stand_in.py). The values equal the emulator's bit for bit, each launch reaches its
private op with the table's arguments in order and its outputs preallocated contiguous, and the work only the
emulator needs (launches in pieces) is not done on the NPU branch."""

import pytest
import torch

from ascend_acts.backends import launch as launcher
from ascend_acts.op_table import kernel as table_kernel
from ascend_acts.ops._kernels import backend_functions
from ascend_acts.ops.conv_bn_leaky_relu import kernels as conv_bn
from ascend_acts.ops.leaky_relu import kernels as elementwise
from npu_stand_in import npu_branch, private_ops

sim = backend_functions("sim")
pytestmark = pytest.mark.skipif(launcher.emulator.unavailable_reason() is not None, reason="needs the emulator")


@pytest.fixture(scope="module")
def standing_in():
    with private_ops() as calls:
        yield calls


@pytest.fixture
def npu(standing_in, monkeypatch):
    """Launches take the NPU branch; yields the private-op calls made in the test."""
    standing_in.clear()
    npu_branch(monkeypatch)
    return standing_in


def _cases():
    g = torch.Generator().manual_seed(7)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype)

    x, grad = randn(2, 5, 6, 7), randn(2, 5, 6, 7)
    half = randn(3, 4, 33, dtype=torch.float16)
    seed = torch.tensor([12345])
    weight, gamma, beta = randn(6, 5, 3, 3), torch.rand(6, generator=g) + 0.5, randn(6)
    geometry = ([1, 2], [1, 0, 2, 1], [1, 1], 1)
    conv_out = conv_bn.platform_conv2d(x, weight, None, *geometry)
    return {
        "leaky_relu": ((x, 0.2), [("leaky_relu", {"negative_slope": 0.2})]),
        "leaky_relu_backward": ((grad, x, 0.2, False), [("leaky_relu_grad", {"negative_slope": 0.2})]),
        "rrelu": ((half, seed, 0.1, 0.3), [("rrelu", {"lower": 0.1, "upper": 0.3})]),
        "rrelu_backward": ((half, half.flip(0), seed, 0.1, 0.3, False), [("rrelu_grad", {"lower": 0.1, "upper": 0.3})]),
        "fused_bias_leaky_relu": ((half, randn(4, dtype=torch.float16), 0.2, 1.5, 0.5, True),
                                  [("fused_bias_leaky_relu", {"negative_slope": 0.2, "scale": 1.5, "clamp": 0.5,
                                                              "relu": True})]),
        "fused_bias_leaky_relu_backward": (
            (grad, x, None, 0.1, 2.0, False),
            [("fused_bias_leaky_relu_grad", {"negative_slope": 0.1, "scale": 2.0, "saved_is_result": False,
                                             "clamp": -1.0, "relu": False})]),
        "conv_bn_leaky_relu_train": (
            (x, weight, randn(6), gamma, beta, torch.zeros(6), torch.ones(6), *geometry, 0.1, 1e-5, 0.2, True),
            [("batch_norm_leaky_relu", {"negative_slope": 0.2, "eps": 1e-5, "momentum": 0.1,
                                        "update_running_stats": True, "relu": False, "norm_groups": 0})]),
        "conv_bn_leaky_relu_train_backward": (
            (randn(*conv_out.shape), conv_out.abs(), True, x, weight, gamma, beta, torch.zeros(6), torch.ones(6),
             *geometry, 0.2),
            [("batch_norm_leaky_relu_grad", {"negative_slope": 0.2, "saved_is_result": True, "relu": False,
                                             "norm_groups": 0})]),
    }


def _run(name, arguments):
    """The sim backend's function on copies of the arguments (the training updates its running statistics)."""
    copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in arguments]
    result = getattr(sim, name)(*copies)
    return (result,) if isinstance(result, torch.Tensor) else tuple(result), copies


def _bits_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def _check_calls(calls, expected):
    assert [base for base, _ in calls] == [base for base, _ in expected]
    for (base, arguments), (_, attrs) in zip(calls, expected):
        kernel = table_kernel(base)
        assert list(arguments) == [a.name for a in kernel.npu_arguments]  # the table's order, every argument
        assert {a.name: arguments[a.name] for a in kernel.attrs} == attrs


@pytest.mark.parametrize("name", list(_cases()))
def test_the_npu_branch_gives_the_emulators_values_bit_for_bit(name, standing_in, monkeypatch):
    arguments, expected_calls = _cases()[name]
    standing_in.clear()
    expected, expected_state = _run(name, arguments)
    assert standing_in == []  # the emulator branch never calls a private op
    npu_branch(monkeypatch)
    got, state = _run(name, arguments)
    _check_calls(standing_in, expected_calls)
    for ours, theirs in zip(got, expected):
        assert _bits_equal(ours, theirs)
    for ours, theirs in zip(state, expected_state):  # running statistics updated alike
        if isinstance(ours, torch.Tensor):
            assert _bits_equal(ours, theirs)


def test_outputs_are_allocated_by_the_sequence_and_mutable_inputs_passed_as_they_are(npu):
    x = torch.randn(2, 3, 4, 5)
    running_mean, running_var = torch.zeros(3), torch.ones(3)
    conv_bn.batch_norm_leaky_relu(x, torch.ones(3), torch.zeros(3), running_mean, running_var, 0.2, 1e-5, 0.1)
    ((_, arguments),) = npu
    assert arguments["running_mean"] is running_mean and arguments["running_var"] is running_var
    assert not running_mean.eq(0).all()  # updated in place through the private op
    for name in ("y", "save_mean", "save_invstd"):
        assert arguments[name].is_contiguous() and arguments[name].dtype == (x.dtype if name == "y" else torch.float32)


def test_statistics_not_updated_are_placeholders_for_the_required_inputs(npu):
    """The OpDef's running statistics are required inputs: on an NPU a forward that updates none passes
    placeholders (the emulator takes None, proving the kernel touches no byte of them)."""
    x = torch.randn(2, 3, 4, 5)
    expected = conv_bn.batch_norm_leaky_relu(x, torch.ones(3), torch.zeros(3), None, None, 0.2, 1e-5, 0.1)
    ((_, arguments),) = npu
    assert not arguments["update_running_stats"]
    assert all(isinstance(arguments[n], torch.Tensor) for n in ("running_mean", "running_var"))
    assert expected[0].isfinite().all()


def test_the_npu_launches_whole_tensors_the_emulator_in_pieces(npu, monkeypatch):
    monkeypatch.setattr(elementwise, "LAUNCH_BYTES", 4096)
    x = torch.randn(5000)
    y = elementwise.leaky_relu(x, 0.2)
    assert [base for base, _ in npu] == ["leaky_relu"] and npu[0][1]["x"].numel() == 5000
    assert torch.equal(y, torch.nn.functional.leaky_relu(x, 0.2))
    monkeypatch.setattr(launcher, "EMULATED_DEVICE_TYPE", "cpu")
    counted = []
    real_launch = launcher.emulator.launch
    monkeypatch.setattr(launcher.emulator, "launch", lambda *a: counted.append(a[0]) or real_launch(*a))
    assert torch.equal(elementwise.leaky_relu(x, 0.2), y) and len(counted) == 5


def _eval_arguments():
    g = torch.Generator().manual_seed(11)
    return (torch.randn(2, 8, 9, 9, generator=g), torch.randn(16, 8, 3, 3, generator=g), torch.randn(16, generator=g),
            [1, 1], [1, 1, 1, 1], [1, 1], 1, 0.2)


def test_the_npus_eval_is_the_platform_convolution_and_our_leaky_relu_by_default(npu, monkeypatch):
    monkeypatch.delenv(conv_bn.EVAL_KERNEL_ENV, raising=False)
    arguments = _eval_arguments()
    got = sim.conv_bn_leaky_relu_eval(*arguments)
    assert [base for base, _ in npu] == ["leaky_relu"]
    x, weight, bias, *geometry, slope = arguments
    expected = torch.nn.functional.leaky_relu(conv_bn.platform_conv2d(x, weight, bias, *geometry), slope)
    assert torch.equal(got, expected)


def test_the_fused_eval_kernel_runs_on_an_npu_only_on_request(npu, monkeypatch):
    arguments = _eval_arguments()
    monkeypatch.setattr(launcher, "EMULATED_DEVICE_TYPE", "cpu")
    expected = sim.conv_bn_leaky_relu_eval(*arguments)  # the emulator runs the fused kernel whatever is asked
    npu_branch(monkeypatch)
    monkeypatch.setenv(conv_bn.EVAL_KERNEL_ENV, "fused")
    got = sim.conv_bn_leaky_relu_eval(*arguments)
    _check_calls(npu, [("conv_bn_leaky_relu_eval", {"strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1],
                                                    "negative_slope": 0.2, "relu": False})])
    assert _bits_equal(got, expected)
    monkeypatch.setenv(conv_bn.EVAL_KERNEL_ENV, "fast")
    with pytest.raises(ValueError, match='ASCEND_ACTS_EVAL_KERNEL must be "aclnn" or "fused", got "fast"'):
        sim.conv_bn_leaky_relu_eval(*arguments)


def test_a_launch_names_every_tensor_and_attribute_of_its_kernel():
    x = torch.randn(4)
    with pytest.raises(ValueError, match=r"launch\('leaky_relu'\): expected the tensors \['x', 'y'\]"):
        launcher.launch("leaky_relu", {"x": x}, {"negative_slope": 0.2}, lambda: None)
    with pytest.raises(ValueError, match="the attributes"):
        launcher.launch("leaky_relu", {"x": x, "y": torch.empty(4)}, {"slope": 0.2}, lambda: None)


def test_float64_is_refused_before_any_launch_with_the_devices_message(npu):
    with pytest.raises(TypeError, match="the NPU kernels take float32, float16 or bfloat16 tensors, got torch.float64"):
        sim.leaky_relu(torch.randn(4, dtype=torch.float64), 0.2)
    assert npu == []


def test_an_empty_training_batch_is_refused_on_both_branches(npu, monkeypatch):
    x = torch.randn(0, 3, 4, 5)
    with pytest.raises(ValueError, match="training needs at least one value per channel"):
        conv_bn.batch_norm_leaky_relu(x, torch.ones(3), torch.zeros(3), None, None, 0.2, 1e-5, 0.1)
    assert npu == []
    monkeypatch.setattr(launcher, "EMULATED_DEVICE_TYPE", "cpu")
    with pytest.raises(ValueError, match="no tiling for batch_norm_leaky_relu"):
        conv_bn.batch_norm_leaky_relu(x, torch.ones(3), torch.zeros(3), None, None, 0.2, 1e-5, 0.1)


@pytest.mark.parametrize("x_shape, w_shape, padding", [
    ((2, 0, 7, 7), (6, 0, 3, 3), [1, 1, 1, 1]),   # no input channels: torch's convolution gives (2, 0, 7, 7)
    ((2, 4, 0, 7), (6, 4, 1, 1), [1, 1, 0, 0]),   # an empty input: torch's convolution refuses it
    ((1, 4, 1, 3000), (6, 4, 1, 1), [0, 0, 0, 0]),  # a layer the eval kernel's tiling cannot take
])
def test_the_fused_eval_on_an_npu_leaves_what_it_cannot_run_to_the_platform(npu, monkeypatch, x_shape, w_shape,
                                                                               padding):
    """Asked for the fused kernel, the NPU still runs empty inputs and untileable layers as torch's convolution (+ our
    LeakyReLU), never a launch that writes nothing or fails in the op package's tiling."""
    monkeypatch.setenv(conv_bn.EVAL_KERNEL_ENV, "fused")
    x, w, b = torch.randn(x_shape), torch.randn(w_shape), torch.randn(w_shape[0])
    geometry = ([1, 1], padding, [1, 1], 1)
    try:
        expected = torch.nn.functional.leaky_relu(conv_bn.platform_conv2d(x, w, b, *geometry), 0.2)
    except RuntimeError as error:
        with pytest.raises(RuntimeError, match=str(error).split("\n")[0][:40]):
            sim.conv_bn_leaky_relu_eval(x, w, b, *geometry, 0.2)
        return
    got = sim.conv_bn_leaky_relu_eval(x, w, b, *geometry, 0.2)
    assert "conv_bn_leaky_relu_eval" not in [base for base, _ in npu]
    assert got.shape == expected.shape and torch.equal(got, expected)


def test_training_without_running_stats_under_a_float64_default_dtype(npu, monkeypatch):
    """The placeholders the OpDef requires for statistics it does not update are float32 whatever the default dtype."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        x, w = torch.randn(2, 3, 6, 6, dtype=torch.float32), torch.randn(4, 3, 3, 3, dtype=torch.float32)
        gamma, beta = torch.ones(4, dtype=torch.float32), torch.zeros(4, dtype=torch.float32)
        got = sim.conv_bn_leaky_relu_train(x, w, None, gamma, beta, None, None, [1, 1], [1, 1, 1, 1], [1, 1], 1, 0.1,
                                           1e-5, 0.2, True)
    finally:
        torch.set_default_dtype(previous)
    assert [base for base, _ in npu] == ["batch_norm_leaky_relu"]  # the stand-in checked the OpDef's dtypes
    assert got[0].dtype == torch.float32
