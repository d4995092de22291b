"""The NPU fallback kernels (torch ops only) agree bit for bit with the NumPy reference, on the CPU;
and the fallback warns once, or refuses in strict mode. Tests that need an NPU are marked `npu`."""

import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

import ascend_acts
from ascend_acts import npu, torch_kernels
from ascend_acts.reference import activations as reference
from ascend_acts.reference import rng

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


def to_numpy(t):
    return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16) if t.dtype == torch.bfloat16 else t.numpy()


def bits(t):
    return t.view(torch.int16 if t.element_size() == 2 else torch.int32 if t.element_size() == 4 else torch.int64)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 7, 1000, 65537])
def test_kernels_bit_identical_to_reference(dtype, n):
    torch.manual_seed(n)
    x = torch.randn(n, dtype=torch.float64).to(dtype)
    grad = torch.randn(n, dtype=torch.float64).to(dtype)
    seed = torch.tensor(2**62 + 12345)
    cases = {
        "leaky_relu": (torch_kernels.leaky_relu(x, 0.2), lambda out: reference.leaky_relu(to_numpy(x), 0.2, out)),
        "leaky_relu_backward": (torch_kernels.leaky_relu_backward(grad, x, -0.3),
                                lambda out: reference.leaky_relu_backward(to_numpy(grad), to_numpy(x), -0.3, out)),
        "rrelu": (torch_kernels.rrelu(x, 0.1, 0.3, seed),
                  lambda out: reference.rrelu(to_numpy(x), 0.1, 0.3, int(seed), out)),
        "rrelu_backward": (torch_kernels.rrelu_backward(grad, x, 0.1, 0.3, seed),
                           lambda out: reference.rrelu_backward(to_numpy(grad), to_numpy(x), 0.1, 0.3, int(seed), out)),
    }
    for name, (ours, run_reference) in cases.items():
        expected = torch.empty_like(x)
        run_reference(to_numpy(expected))
        assert torch.equal(bits(ours), bits(expected)), name


def test_noise_across_the_2_to_32_boundary():
    base = 2**32 - 100
    ours = torch_kernels.noise(torch.tensor(77), 300, 0.1, 0.3, torch.float32, index_base=base)
    expected = rng.noise(77, np.arange(base, base + 300, dtype=np.uint64), 0.1, 0.3)
    assert np.array_equal(ours.numpy(), expected)


def test_fallback_warns_once_and_strict_mode_refuses(monkeypatch):
    monkeypatch.setattr(npu, "_warned", False)
    x = torch.randn(5)
    with pytest.warns(RuntimeWarning, match="custom op package is not available"):
        y = npu.KERNELS["leaky_relu"](x, 0.1)
    assert torch.equal(y, torch.nn.functional.leaky_relu(x, 0.1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        npu.KERNELS["leaky_relu"](x, 0.1)  # no second warning
    monkeypatch.setenv(npu.STRICT_ENV, "1")
    before = x.clone()
    with pytest.raises(RuntimeError, match="ASCEND_ACTS_NPU_STRICT"):
        npu.KERNELS["leaky_relu_"](x, 0.1)
    assert torch.equal(x, before)


def test_importing_ascend_acts_did_not_import_torch_npu():
    import sys

    assert "torch_npu" not in sys.modules


def _npu_available():
    try:
        import torch_npu  # noqa: F401
    except Exception:  # absent, or present without CANN (ImportError/OSError)
        return False
    return torch.npu.is_available()


@pytest.mark.npu
@pytest.mark.skipif(not _npu_available(), reason="needs an Ascend NPU with torch_npu and CANN")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_on_npu_matches_cpu(dtype):
    x = torch.randn(4097, dtype=torch.float32).to(dtype).requires_grad_()
    xn = x.detach().to("npu").requires_grad_()
    for fn in (lambda t: ascend_acts.leaky_relu(t, 0.2), lambda t: ascend_acts.rrelu(t, training=False)):
        y, yn = fn(x), fn(xn)
        assert torch.equal(yn.cpu(), y)
        (g,), (gn,) = torch.autograd.grad(y.sum(), x), torch.autograd.grad(yn.sum(), xn)
        assert torch.equal(gn.cpu(), g)
