"""The forward/backward tests on NPU tensors: the shapes and dtypes of the CPU tests, each op on device
"npu" against the same op on the CPU (NumPy reference) -- bit-identical for the elementwise ops and the
RReLU noise, within the fused-op tolerances for Conv+BN+LeakyReLU. Marked `npu`: they need an Ascend NPU
with torch_npu and CANN (select with `pytest -m npu`) and are skipped with the reason elsewhere."""

import copy

import pytest
import torch
from torch import nn

import ascend_acts
from shapes import CASES, make


def _npu_available() -> bool:
    try:
        import torch_npu  # noqa: F401
    except Exception:  # absent, or present without CANN (ImportError/OSError)
        return False
    return torch.npu.is_available()


pytestmark = [pytest.mark.npu, pytest.mark.skipif(not _npu_available(),
                                                  reason="needs an Ascend NPU with torch_npu and CANN")]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]  # the AscendC kernels have no float64


def on_both(fn, x):
    """fn's output and input gradient for x on the CPU and on the NPU (moved back)."""
    results = []
    for device in ("cpu", "npu"):
        t = x.detach().to(device).requires_grad_()
        y = fn(t)
        grad = torch.linspace(-1, 1, y.numel(), dtype=torch.float64).reshape(y.shape).to(y.dtype).to(device)
        (g,) = torch.autograd.grad(y, t, grad) if y.numel() else (torch.zeros_like(t),)
        results.append((y.detach().cpu(), g.cpu()))
    return results


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("op", ["leaky_relu", "rrelu_eval", "rrelu_train"])
def test_elementwise_on_npu_bit_identical_to_cpu(op, case, dtype):
    x = make(case, dtype)

    def fn(t):
        if op == "leaky_relu":
            return ascend_acts.leaky_relu(t, 0.2)
        if op == "rrelu_eval":
            return ascend_acts.rrelu(t, 0.1, 0.3, training=False)
        # one seed on both devices (the default generators differ): the counter-hash noise must agree
        return torch.ops.ascend_acts.rrelu(t, torch.tensor(1234, device=t.device), 0.1, 0.3)

    (y_cpu, g_cpu), (y_npu, g_npu) = on_both(fn, x)
    assert torch.equal(y_npu, y_cpu) and torch.equal(g_npu, g_cpu)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("training", [True, False])
def test_conv_bn_leaky_relu_on_npu_matches_cpu(training, dtype):
    torch.manual_seed(0)
    cpu = ascend_acts.nn.ConvBNLeakyReLU2d(8, 16, 4, 2, 1, negative_slope=0.2).to(dtype).train(training)
    npu = copy.deepcopy(cpu).to("npu")
    x = torch.randn(4, 8, 16, 16).to(dtype)
    (y_cpu, g_cpu), (y_npu, g_npu) = on_both(lambda t: (npu if t.device.type == "npu" else cpu)(t), x)
    tolerance = {torch.float32: 2e-4, torch.float16: 3e-2, torch.bfloat16: 1.5e-1}[dtype]
    torch.testing.assert_close(y_npu.double(), y_cpu.double(), rtol=tolerance, atol=tolerance)
    torch.testing.assert_close(g_npu.double(), g_cpu.double(), rtol=tolerance, atol=tolerance)
    if training:
        torch.testing.assert_close(npu.bn.running_var.cpu().double(), cpu.bn.running_var.double(), rtol=tolerance,
                                   atol=tolerance)


def test_results_keep_the_inputs_memory_format_on_npu():
    """The op layer gives the extension's contiguous results the layout the fake kernels promise."""
    x = torch.randn(2, 4, 5, 6).to(memory_format=torch.channels_last)
    bias = torch.randn(4)
    for device in ("cpu", "npu"):
        t, b = x.to(device), bias.to(device)
        for y in (ascend_acts.leaky_relu(t, 0.2), torch.ops.ascend_acts.fused_bias_leaky_relu(t, b, 0.2, 2.0)):
            assert y.is_contiguous(memory_format=torch.channels_last), device


def test_a_bad_call_fails_on_npu_as_on_the_cpu():
    errors = []
    for device in ("cpu", "npu"):
        x, bias = torch.randn(2, 3, 4, device=device), torch.randn(4, device=device)
        with pytest.raises(RuntimeError) as error:
            torch.ops.ascend_acts.fused_bias_leaky_relu(x, bias, 0.2, 2.0)
        errors.append(str(error.value))
    assert errors[0] == errors[1]


def test_converted_discriminator_trains_on_npu():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 16, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(16, 32, 4, 2, 1, bias=False),
                          nn.BatchNorm2d(32), nn.LeakyReLU(0.2), nn.Flatten(), nn.Linear(32 * 4 * 4, 1))
    model = ascend_acts.convert(model).to("npu")
    loss = model(torch.randn(8, 1, 16, 16, device="npu")).square().mean()
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
