"""The NPU fallback (the "torch" backend: torch ops only) agrees bit for bit with the NumPy reference, on the CPU;
the fallback warns once (saying why), or refuses in strict mode; the op layer's NPU kernels run our kernels' launch
sequence (through the extension's private ops) or the fallback as backends/npu.py finds them. Tests that need an
NPU are marked `npu`."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import ascend_acts
from ascend_acts.backends import npu
from ascend_acts.op_table import KERNELS, TORCH_OPS, torch_op
from ascend_acts.ops._kernels import backend_functions, device_kernel, npu_kernels
from ascend_acts.ops._semantics import SEMANTICS
from ascend_acts.ops.rrelu import rng
from ascend_acts.ops.rrelu import torch_ops as rrelu_torch_ops

torch_ops, reference_backend = backend_functions("torch"), backend_functions("reference")

ALL_OPS = [op.name for op in TORCH_OPS]

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


def bits(t):
    return t.view(torch.int16 if t.element_size() == 2 else torch.int32 if t.element_size() == 4 else torch.int64)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 7, 1000, pytest.param(65537, marks=pytest.mark.slow)])
def test_kernels_bit_identical_to_reference(dtype, n):
    torch.manual_seed(n)
    x = torch.randn(n, dtype=torch.float64).to(dtype)
    grad = torch.randn(n, dtype=torch.float64).to(dtype)
    seed = torch.tensor(2**62 + 12345)
    arguments = {
        "leaky_relu": (x, 0.2),
        "leaky_relu_backward": (grad, x, -0.3, False),
        "rrelu": (x, seed, 0.1, 0.3),
        "rrelu_backward": (grad, x, seed, 0.1, 0.3, False),
    }
    for name, args in arguments.items():
        ours, expected = getattr(torch_ops, name)(*args), getattr(reference_backend, name)(*args)
        assert torch.equal(bits(ours), bits(expected)), name
    out = torch.empty_like(x)
    assert torch_ops.rrelu(x, seed, 0.1, 0.3, out=out) is out
    assert torch.equal(bits(out), bits(reference_backend.rrelu(x, seed, 0.1, 0.3)))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(3, 1), (2, 7, 5), (4, 3, 2, 9), (0, 3, 2)])
@pytest.mark.parametrize("slope, scale, saved_is_result", [(0.2, 2**0.5, True), (-0.3, 2.0, False)])
def test_fused_bias_kernels_match_reference(dtype, shape, slope, scale, saved_is_result):
    """Values and grad_input bit for bit; grad_bias (accumulated in float32 here, float64 there) within rounding."""
    g = torch.Generator().manual_seed(5)
    x, grad = (torch.randn(shape, generator=g, dtype=torch.float64).to(dtype) for _ in range(2))
    bias = torch.randn(shape[1], generator=g, dtype=torch.float64).to(dtype)
    backends = (torch_ops, reference_backend)
    ours, expected = (backend.fused_bias_leaky_relu(x, bias, slope, scale) for backend in backends)
    assert torch.equal(bits(ours), bits(expected))
    saved = ours if saved_is_result else x
    ours, expected = (backend.fused_bias_leaky_relu_backward(grad, saved, bias, slope, scale, saved_is_result)
                      for backend in backends)
    assert torch.equal(bits(ours[0]), bits(expected[0]))
    assert ours[1].dtype == expected[1].dtype == dtype and ours[1].shape == (shape[1],)
    tolerance = {torch.float64: 1e-12, torch.float32: 1e-5}.get(dtype, torch.finfo(dtype).eps)
    torch.testing.assert_close(ours[1], expected[1], rtol=tolerance, atol=tolerance)


def test_noise_across_the_2_to_32_boundary():
    base = 2**32 - 100
    ours = rrelu_torch_ops.noise(torch.tensor(77), 300, 0.1, 0.3, torch.float32, index_base=base)
    expected = rng.noise(77, np.arange(base, base + 300, dtype=np.uint64), 0.1, 0.3)
    assert np.array_equal(ours.numpy(), expected)


def fallback_kernel(name):
    """The PrivateUse1 kernel the op layer registers for op `name`, to run on CPU tensors (here, without the
    extension: the fallback)."""
    return device_kernel(torch_op(name), SEMANTICS[name], npu_kernels)


def test_fallback_warns_once_and_strict_mode_refuses(monkeypatch):
    monkeypatch.setattr(npu, "_warned", False)
    x = torch.randn(5)
    with pytest.warns(RuntimeWarning, match="custom op package is not available"):
        y = fallback_kernel("leaky_relu")(x, 0.1)
    assert torch.equal(y, torch.nn.functional.leaky_relu(x, 0.1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fallback_kernel("leaky_relu")(x, 0.1)  # no second warning
    monkeypatch.setenv(npu.STRICT_ENV, "1")
    before = x.clone()
    with pytest.raises(RuntimeError, match="ASCEND_ACTS_NPU_STRICT"):
        fallback_kernel("leaky_relu_")(x, 0.1)
    assert torch.equal(x, before)


def test_fallback_runs_the_ops_checks_and_in_place_rules(monkeypatch):
    monkeypatch.setattr(npu, "_warned", True)
    x = -torch.rand(8, 6)
    view, expected = x.t(), torch.nn.functional.leaky_relu(x.t(), 0.3)
    fallback_kernel("leaky_relu_")(view, 0.3)  # a strided view: written through
    assert torch.equal(view, expected)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        fallback_kernel("leaky_relu_")(torch.zeros(3).expand(2, 3), 0.3)
    with pytest.raises(RuntimeError, match="please call out-of-place version"):
        fallback_kernel("leaky_relu_backward")(x, x, -0.3, True)
    with pytest.raises(ValueError, match="seed must be a one-element int64 tensor"):
        fallback_kernel("rrelu")(x, torch.tensor([1, 2]), 0.1, 0.3)


def test_importing_ascend_acts_did_not_import_torch_npu():
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


# --- what the NPU kernels run: our kernels through the extension's private ops, or the fallback -----------------
# Runs in a fresh interpreter: an import hook serves ascend_acts._npu_ops in place of the compiled extension,
# which cannot be built here; MODE says what importing it does (which private ops, one per kernel, it defines).
SELECTION = textwrap.dedent('''
    import importlib.abc, importlib.machinery, json, os, sys
    import torch

    MODE = os.environ["MODE"]

    class StandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name == "ascend_acts._npu_ops" and MODE != "absent":
                return importlib.machinery.ModuleSpec(name, self, origin="/stand-in/_npu_ops.so")

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            os.environ["STAND_IN_IMPORTED"] = "1"
            if MODE == "broken":
                raise OSError("libhccl.so: cannot open shared object file")
            module.lib = torch.library.Library("ascend_acts_npu", "DEF")
            for name, schema in json.loads(os.environ["SCHEMAS"]).items():
                if MODE == "partial" and name != "leaky_relu":
                    continue
                if MODE == "stale" and name == "leaky_relu":  # the previous design's private op
                    schema = "(Tensor self, float negative_slope) -> Tensor"
                module.lib.define(name + schema)
                module.lib.impl(name, lambda *args: "stand-in", "PrivateUse1")

    sys.meta_path.insert(0, StandIn())
    import ascend_acts
    from ascend_acts.backends import npu
    from ascend_acts.ops._kernels import npu_kernels
    status = npu.status()
    print(json.dumps({"source": status.source, "detail": status.detail, "fallback": list(status.fallback_ops),
                      "imported": os.environ.get("STAND_IN_IMPORTED") == "1", "torch_npu": "torch_npu" in sys.modules,
                      "kernels": all(npu.has_npu_kernel(op) for op in json.loads(os.environ["OPS"])),
                      "runs": getattr(npu_kernels(), "__name__")}))
''')


def select(mode, tmp_path, package=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND")}
    opp = tmp_path / "opp"
    schemas = {k.base: k.npu_schema for k in KERNELS}
    env.update(MODE=mode, OPS=json.dumps(ALL_OPS), SCHEMAS=json.dumps(schemas), ASCEND_OPP_PATH=str(opp))
    if package:
        (opp / "vendors/ascend_acts/op_api/lib").mkdir(parents=True, exist_ok=True)
        (opp / "vendors/ascend_acts/op_api/lib/libcust_opapi.so").write_bytes(b"")
    result = subprocess.run([sys.executable, "-c", SELECTION], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.slow
def test_fallback_when_the_extension_is_not_built(tmp_path):
    chosen = select("absent", tmp_path, package=True)
    assert chosen["source"] == "fallback" and chosen["detail"] == "the torch_npu extension is not built"
    assert chosen["fallback"] == ALL_OPS and chosen["kernels"] and not chosen["torch_npu"]
    assert chosen["runs"] == torch_ops.__name__


@pytest.mark.slow
def test_fallback_without_the_op_package_does_not_load_the_extension(tmp_path):
    chosen = select("complete", tmp_path)
    assert chosen["source"] == "fallback" and not chosen["imported"]
    assert chosen["detail"] == f"the op package is not installed (looked in: {tmp_path / 'opp/vendors/ascend_acts'})"
    assert chosen["fallback"] == ALL_OPS


@pytest.mark.slow
def test_the_extension_replaces_the_fallback(tmp_path):
    chosen = select("complete", tmp_path, package=True)
    assert chosen["source"] == "extension" and chosen["imported"] and chosen["fallback"] == []
    assert chosen["detail"] == f"/stand-in/_npu_ops.so, op package {tmp_path / 'opp/vendors/ascend_acts'}"
    assert chosen["kernels"] and chosen["runs"] == backend_functions("sim").__name__


@pytest.mark.slow
def test_an_extension_that_fails_to_load_falls_back(tmp_path):
    chosen = select("broken", tmp_path, package=True)
    assert chosen["source"] == "fallback" and chosen["imported"] and chosen["fallback"] == ALL_OPS
    assert chosen["detail"] == ("the extension /stand-in/_npu_ops.so failed to load: "
                                "libhccl.so: cannot open shared object file")
    assert chosen["kernels"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["partial", "stale"])
def test_a_stale_extension_falls_back_for_every_op(tmp_path, mode):
    """An extension without every private op, or with another schema than the table's, runs nothing: the launch
    sequences pass the current schema's arguments."""
    chosen = select(mode, tmp_path, package=True)
    missing = [k.base for k in KERNELS if k.base != "leaky_relu"] if mode == "partial" else ["leaky_relu"]
    assert chosen["source"] == "fallback" and chosen["fallback"] == ALL_OPS and chosen["kernels"]
    assert f"has no NPU kernel with the current schema for {', '.join(missing)} (stale build" in chosen["detail"]
    assert chosen["runs"] == torch_ops.__name__


def test_fallback_warning_says_why(monkeypatch):
    monkeypatch.setattr(npu, "_warned", False)
    with pytest.warns(RuntimeWarning) as record:
        npu.check_fallback_allowed()
    assert f"({npu.status().detail})" in str(record[0].message)


def test_op_package_lookup(tmp_path):
    def package(root):
        (root / "op_api/lib").mkdir(parents=True)
        (root / "op_api/lib/libcust_opapi.so").write_bytes(b"")
        return root

    cann = tmp_path / "cann"
    default = package(cann / "opp/vendors/ascend_acts")
    custom = package(tmp_path / "custom/vendors/ascend_acts")
    other = package(tmp_path / "other/vendors/someone_else")
    assert npu.find_op_package({}) is None
    assert npu.find_op_package({"ASCEND_HOME_PATH": str(cann)}) == default
    assert npu.find_op_package({"ASCEND_CANN_PACKAGE_PATH": str(cann), "ASCEND_HOME_PATH": "/x"}) == default
    assert npu.find_op_package({"ASCEND_OPP_PATH": str(tmp_path / "nothing"), "ASCEND_HOME_PATH": str(cann)}) is None
    assert npu.find_op_package({"ASCEND_CUSTOM_OPP_PATH": f"{other}:{custom}", "ASCEND_HOME_PATH": str(cann)}) == custom
    assert npu.find_op_package({"ASCEND_CUSTOM_OPP_PATH": str(other)}) is None
    (default / "op_api/lib/libcust_opapi.so").unlink()  # a vendor directory without the aclnn library
    assert npu.find_op_package({"ASCEND_HOME_PATH": str(cann)}) is None


@pytest.mark.npu
@pytest.mark.skipif(not _npu_available(), reason="needs an Ascend NPU with torch_npu and CANN")
def test_on_npu_the_extension_runs_the_kernels():
    assert npu.status().source == "extension", npu.status().detail
    assert npu_kernels() is backend_functions("sim")


# --- the fused Conv+BN+LeakyReLU ops: torch-op kernels for NPU tensors, checked on the CPU ---------
def fused_cases():
    torch.manual_seed(5)
    x, w = torch.randn(2, 4, 9, 8, dtype=torch.float64), torch.randn(6, 2, 3, 3, dtype=torch.float64)
    bias, gamma, beta = torch.randn(6, dtype=torch.float64), torch.rand(6, dtype=torch.float64) + 0.5, \
        torch.randn(6, dtype=torch.float64)
    geometry = ([2, 1], [1, 0, 2, 1], [1, 2], 2)  # strided, asymmetric padding, dilated, grouped
    return x, w, bias, gamma, beta, geometry


@pytest.mark.parametrize("save_output", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_fused_torch_kernels_match_the_reference(save_output):
    ours, oracle = torch_ops, reference_backend

    x, w, bias, gamma, beta, geometry = fused_cases()
    running = (torch.rand(6, dtype=torch.float64), torch.rand(6, dtype=torch.float64) + 1)
    statistics = {name: tuple(t.clone() for t in running) for name in ("ours", "oracle")}
    got = ours.conv_bn_leaky_relu_train(x, w, bias, gamma, beta, *statistics["ours"], *geometry, 0.3, 1e-5, 0.2,
                                        save_output)
    expected = oracle.conv_bn_leaky_relu_train(x, w, bias, gamma, beta, *statistics["oracle"], *geometry, 0.3, 1e-5,
                                               0.2, save_output)
    for a, b in zip((*got, *statistics["ours"]), (*expected, *statistics["oracle"])):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    out, kept, mean, invstd = expected
    grad = torch.randn_like(out)
    saved = out if save_output else kept
    args = (grad, saved, save_output, x, w, gamma, beta, mean, invstd, *geometry, 0.2)
    for a, b in zip(ours.conv_bn_leaky_relu_train_backward(*args), oracle.conv_bn_leaky_relu_train_backward(*args)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ours.conv_bn_leaky_relu_eval(x, w, bias, *geometry, 0.2),
                               oracle.conv_bn_leaky_relu_eval(x, w, bias, *geometry, 0.2), rtol=1e-12, atol=1e-12)
    for a, b in zip(ours.conv_bn_leaky_relu_eval_backward(grad, x, w, bias, *geometry, 0.2),
                    oracle.conv_bn_leaky_relu_eval_backward(grad, x, w, bias, *geometry, 0.2)):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_fused_ops_have_npu_kernels_behind_the_warning(monkeypatch):
    assert all(npu.has_npu_kernel(name) for name in ALL_OPS)
    x, w, bias, _, _, geometry = fused_cases()
    kernel = fallback_kernel("conv_bn_leaky_relu_eval")
    monkeypatch.setenv(npu.STRICT_ENV, "1")
    with pytest.raises(RuntimeError, match="custom op package is not available"):
        kernel(x, w, bias, *geometry, 0.2)
    monkeypatch.delenv(npu.STRICT_ENV)
    monkeypatch.setattr(npu, "_warned", False)
    with pytest.warns(RuntimeWarning, match="torch_npu built-ins"):
        out = kernel(x, w, bias, *geometry, 0.2)
    assert torch.equal(out, torch_ops.conv_bn_leaky_relu_eval(x, w, bias, *geometry, 0.2))
