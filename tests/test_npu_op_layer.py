"""The NPU path goes through the op layer: the PrivateUse1 kernel of every public op validates the call as on the
CPU, runs the launch sequence the emulator runs (the "sim" backend's functions) on detached contiguous tensors,
runs `X_` as `X(..., out=self)` and gives the results the layout the fake kernels promise.

No NPU here, so the PrivateUse1 kernels run on CPU tensors: `redispatch` with the PrivateUse1 key calls the kernel
the op layer registered, the launcher sends the launches to the private ops (ascend_acts_npu::<kernel>) as it does
for NPU tensors, and a stand-in extension (tests/npu_stand_in.py: the private namespace, whose CPU kernels launch
on the emulator) plays the extension's part."""

import pytest
import torch

import ascend_acts  # noqa: F401  (registers the ops)
from ascend_acts.backends import npu
from ascend_acts.backends.sim import emulator
from ascend_acts.op_table import KERNELS, TORCH_OPS, torch_op
from ascend_acts.ops._kernels import backend_functions, npu_kernels
from npu_stand_in import npu_branch, private_ops

torch_ops, sim = backend_functions("torch"), backend_functions("sim")

ON_NPU = torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1)
FUNCTIONAL_OPS = [op for op in TORCH_OPS if not op.inplace]
pytestmark = pytest.mark.skipif(emulator.unavailable_reason() is not None, reason="the stand-in runs the emulator")


@pytest.fixture(scope="module")
def standing_in():
    with private_ops() as calls:
        yield calls


@pytest.fixture
def extension(standing_in, monkeypatch):
    """The process runs the stand-in extension: status() says so, as it would after loading it; launches take the
    NPU branch. Yields the private-op calls (kernel base, arguments by name)."""
    monkeypatch.setattr(npu, "_status", npu.Status("extension", "stand-in", ()))
    npu_branch(monkeypatch)
    standing_in.clear()
    return standing_in


def on_npu(name, *args):
    return getattr(torch.ops.ascend_acts, name).default.redispatch(ON_NPU, *args)


def test_the_stand_in_defines_what_status_looks_for(standing_in):
    assert all(npu.extension_has_kernel(k.base) for k in KERNELS)
    assert not npu.extension_has_kernel("no_such_kernel")


def test_npu_kernels_are_chosen_per_call(extension, monkeypatch):
    assert npu_kernels() is sim  # the emulator's launch sequence
    monkeypatch.setattr(npu, "_status", npu.Status("fallback", "not built", tuple(op.name for op in TORCH_OPS)))
    monkeypatch.setattr(npu, "_warned", True)
    assert npu_kernels() is torch_ops


def test_the_npu_functions_have_every_functional_op_and_out_where_the_op_has_an_in_place_variant(extension):
    x = torch.randn(5)
    for op in FUNCTIONAL_OPS:
        assert callable(getattr(npu_kernels(), op.name)), op.name
    out = torch.empty(5)
    assert npu_kernels().leaky_relu(x, 0.2, out=out) is out
    assert torch.equal(out, torch.nn.functional.leaky_relu(x, 0.2)) and extension[-1][0] == "leaky_relu"


def errors(call):
    try:
        call()
    except Exception as error:  # the type and message are compared
        return type(error), str(error)
    raise AssertionError("no error")


BAD_CALLS = {
    "leaky_relu on an integer tensor": ("leaky_relu", lambda: (torch.arange(4), 0.2)),
    "a result-based backward with a negative slope": (
        "leaky_relu_backward", lambda: (torch.randn(4), torch.randn(4), -0.2, True)),
    "grad_output of another shape": ("leaky_relu_backward", lambda: (torch.randn(3), torch.randn(4), 0.2, False)),
    "a two-element seed": ("rrelu", lambda: (torch.randn(4), torch.tensor([1, 2]), 0.1, 0.3)),
    "a bias of the wrong shape": ("fused_bias_leaky_relu", lambda: (torch.randn(2, 3, 4), torch.randn(4), 0.2, 2.0)),
    "saved_is_result with scale < 1": (
        "fused_bias_leaky_relu_backward", lambda: (torch.randn(2, 3), torch.randn(2, 3), None, 0.2, 0.5, True)),
    "running_mean without running_var": (
        "conv_bn_leaky_relu_train", lambda: (torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3), None, torch.ones(3),
                                             torch.zeros(3), torch.zeros(3), None, [1, 1], [1, 1, 1, 1], [1, 1], 1,
                                             0.1, 1e-5, 0.2, False)),
    "a conv weight of another dtype": (
        "conv_bn_leaky_relu_eval", lambda: (torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3, dtype=torch.float64),
                                            torch.zeros(3), [1, 1], [0, 0, 0, 0], [1, 1], 1, 0.2)),
}


@pytest.mark.parametrize("case", BAD_CALLS)
def test_a_bad_call_gives_the_cpus_error_and_reaches_no_kernel(extension, case):
    name, arguments = BAD_CALLS[case]
    expected = errors(lambda: getattr(torch.ops.ascend_acts, name)(*arguments()))
    assert errors(lambda: on_npu(name, *arguments())) == expected
    assert extension == []


def test_an_in_place_call_on_an_overlapping_target_writes_nothing(extension):
    target = torch.zeros(3).expand(2, 3)
    cpu_error = errors(lambda: torch.ops.ascend_acts.leaky_relu_(target, 0.2))
    assert errors(lambda: on_npu("leaky_relu_", target, 0.2)) == cpu_error
    assert extension == [] and not target.any()


def test_in_place_runs_the_functional_private_op_into_the_target(extension):
    x = -torch.rand(6, 8)
    view, expected = x.t(), torch.nn.functional.leaky_relu(x.t(), 0.3)
    assert on_npu("leaky_relu_", view, 0.3) is None
    assert torch.equal(view, expected)  # a strided view: written through
    ((name, args),) = extension
    assert name == "leaky_relu" and args["x"].is_contiguous() and args["y"].is_contiguous()


def meta(t):
    return t.to("meta") if isinstance(t, torch.Tensor) else t


def channels_last_calls():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 4, 5, 6, generator=g).to(memory_format=torch.channels_last)
    grad = torch.randn(2, 4, 5, 6, generator=g).to(memory_format=torch.channels_last)
    weight, bias = torch.randn(3, 4, 3, 3, generator=g), torch.randn(3, generator=g)
    geometry = ([1, 1], [1, 1, 1, 1], [1, 1], 1)
    return {
        "leaky_relu": (x, 0.2),
        "leaky_relu_backward": (grad, x, 0.2, False),
        "fused_bias_leaky_relu": (x, torch.randn(4, generator=g), 0.2, 2**0.5),
        "fused_bias_leaky_relu_backward": (grad, x, torch.randn(4, generator=g), 0.2, 2**0.5, False),
        "conv_bn_leaky_relu_eval": (x, weight, bias, *geometry, 0.2),
        "conv_bn_leaky_relu_train": (x, weight, None, torch.rand(3, generator=g) + 0.5, torch.randn(3, generator=g),
                                     None, None, *geometry, 0.1, 1e-5, 0.2, False),
    }


@pytest.mark.parametrize("name", list(channels_last_calls()))
def test_results_have_the_layout_the_fake_kernel_promises(extension, name):
    """channels_last in, channels_last out (the launch sequences allocate contiguous outputs), with the CPU's
    values; one launch, of the op's first NPU kernel (the eval's default: our LeakyReLU after the platform's
    convolution)."""
    arguments = channels_last_calls()[name]
    got, promised = on_npu(name, *arguments), getattr(torch.ops.ascend_acts, name)(*map(meta, arguments))
    expected = getattr(torch.ops.ascend_acts, name)(*arguments)
    got, promised, expected = ((t,) if isinstance(t, torch.Tensor) else t for t in (got, promised, expected))
    assert any(t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) for t in got)
    assert [t.stride() for t in got] == [t.stride() for t in promised]
    for ours, cpu in zip(got, expected):
        torch.testing.assert_close(ours, cpu, rtol=1e-5, atol=1e-5)
    ((called, args),) = extension
    assert called == torch_op(name).npu_kernels[0]
    assert all(a.is_contiguous() for a in args.values() if isinstance(a, torch.Tensor))


def transposed_calls():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 4, 5, 6, generator=g).to(memory_format=torch.channels_last)
    weight, bias = torch.randn(4, 3, 3, 3, generator=g), torch.randn(6, generator=g)  # groups 2: 6 output channels
    geometry = ([2, 2], [1, 1, 1, 1], [1, 1], 2)
    transposition = (True, [1, 0])  # transposed, output_padding
    return {
        "conv_bn_leaky_relu_eval": (x, weight, bias, *geometry, 0.2, False, *transposition),
        "conv_bn_leaky_relu_train": (x, weight, None, torch.rand(6, generator=g) + 0.5, torch.randn(6, generator=g),
                                     None, None, *geometry, 0.1, 1e-5, 0.2, False, False, *transposition),
    }


@pytest.mark.parametrize("name", list(transposed_calls()))
def test_transposed_runs_the_platforms_conv_transpose_then_our_kernel(extension, name):
    """A transposed call: the CPU's values and the fake kernel's layout, one launch of the op's first NPU kernel
    after the platform's conv_transpose2d (eval: no fused eval kernel for it)."""
    arguments = transposed_calls()[name]
    got, promised = on_npu(name, *arguments), getattr(torch.ops.ascend_acts, name)(*map(meta, arguments))
    expected = getattr(torch.ops.ascend_acts, name)(*arguments)
    got, promised, expected = ((t,) if isinstance(t, torch.Tensor) else t for t in (got, promised, expected))
    assert got[0].shape == (2, 6, 10, 11) and got[0].is_contiguous(memory_format=torch.channels_last)
    assert [t.stride() for t in got] == [t.stride() for t in promised]
    for ours, cpu in zip(got, expected):
        torch.testing.assert_close(ours, cpu, rtol=1e-5, atol=1e-5)
    ((called, _),) = extension
    assert called == torch_op(name).npu_kernels[0]
