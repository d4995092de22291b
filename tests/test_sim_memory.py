"""Peak memory of an elementwise op on a large tensor: at most 1.5x its input + output bytes.

Measured in a fresh process on 2^25 float16 elements (64 MiB per tensor): the resident size before the
input exists, then its peak after the op (VmHWM, reset before the input by /proc/self/clear_refs; not
ru_maxrss, which also holds the peak of the process that started this one, e.g. a large pytest run).
The emulator keeps 2 bytes of bookkeeping per output byte of a launch, which the sim backend bounds by
launching large tensors in pieces (ops/leaky_relu/kernels.py, LAUNCH_BYTES).
"""

import subprocess
import sys
import textwrap

import pytest

from ascend_acts import backends

ELEMENTS = 1 << 25

SCRIPT = textwrap.dedent("""
    import sys
    import torch, ascend_acts

    backend, inplace, elements = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
    ascend_acts.use_backend(backend)
    ascend_acts.leaky_relu(torch.randn(1 << 18, dtype=torch.float16), 0.2)  # load the library, start threads

    def status_bytes(field):
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith(field + ":"))  # kB

    try:  # reset the peak to the current resident size (Linux >= 4.0): earlier peaks do not count
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError as exc:
        print(f"skip: cannot reset the peak resident size: {exc}")
        sys.exit(0)
    before = status_bytes("VmRSS")
    x = torch.empty(elements, dtype=torch.float16).uniform_(-1, 1)
    expected = torch.nn.functional.leaky_relu(x[-4096:], 0.2)
    y = ascend_acts.leaky_relu(x, 0.2, inplace=inplace)
    assert torch.equal(y[-4096:], expected)
    peak = status_bytes("VmHWM")
    print((peak - before) / (x.nbytes * (1 if inplace else 2)), before, peak)
""")


def peak_over_tensor_bytes(backend: str, inplace: bool) -> float:
    result = subprocess.run([sys.executable, "-c", SCRIPT, backend, str(int(inplace)), str(ELEMENTS)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    if result.stdout.startswith("skip:"):
        pytest.skip(result.stdout)
    ratio, before, peak = result.stdout.split()
    print(f"{backend}, inplace={inplace}: resident {int(before) >> 20} MiB before the input, peak {int(peak) >> 20} "
          f"MiB: {float(ratio):.3f} x the tensors' bytes")
    return float(ratio)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("backend, inplace", [("sim", False), ("sim", True), ("reference", False)])
def test_peak_memory_of_a_large_elementwise_op(backend, inplace):
    """Out of place: peak <= 1.5 x (input + output); in place, where both are one tensor: 1.5 x that
    tensor (a launch writes an aliased output through a temporary of one launch's size)."""
    reason = backends.unavailable_reason(backend)
    if reason is not None:
        pytest.skip(reason)
    assert peak_over_tensor_bytes(backend, inplace) <= 1.5


@pytest.mark.parametrize("dtype", [pytest.param("float32", marks=pytest.mark.slow),
                                   pytest.param("float16", marks=pytest.mark.slow), "bfloat16"])
@pytest.mark.parametrize("inplace", [False, True])
def test_pieces_give_the_one_launch_results(monkeypatch, dtype, inplace):
    """A tensor over LAUNCH_BYTES runs as several launches, each with the flat index of its first element
    as indexBase: bit-identical to the reference, RReLU noise included, in place too."""
    reason = backends.unavailable_reason("sim")
    if reason is not None:
        pytest.skip(reason)
    import ml_dtypes
    import numpy as np
    import torch

    from ascend_acts.backends import sim
    from ascend_acts.ops.leaky_relu import kernels as leaky_relu_sim
    from ascend_acts.ops.leaky_relu import reference as leaky_relu_oracle
    from ascend_acts.ops.rrelu import kernels as rrelu_sim
    from ascend_acts.ops.rrelu import reference as rrelu_oracle

    def tensor(a):  # shares a's memory; bfloat16 through its bits
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if a.dtype == ml_dtypes.bfloat16 else \
            torch.from_numpy(a)

    numpy_dtype = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    monkeypatch.setattr(leaky_relu_sim, "LAUNCH_BYTES", 4096)  # the elementwise family's
    n = 10 * 4096 // numpy_dtype.itemsize + 77  # ten whole pieces and a short one
    rs = np.random.default_rng(3)
    x = rs.standard_normal(n).astype(np.float32).astype(numpy_dtype).reshape(1, n, 1)
    grad = rs.standard_normal(n).astype(np.float32).astype(numpy_dtype).reshape(1, n, 1)
    seed = torch.tensor([1234])
    expected_by = {
        "leaky_relu": lambda out: leaky_relu_oracle.forward(x, 0.2, out),
        "leaky_relu_backward": lambda out: leaky_relu_oracle.backward(grad, x, 0.2, out),
        "rrelu": lambda out: rrelu_oracle.forward(x, 0.1, 0.3, 1234, out),
        "rrelu_backward": lambda out: rrelu_oracle.backward(grad, x, 0.1, 0.3, 1234, out),
    }
    calls = {
        "leaky_relu": lambda a, out=None: leaky_relu_sim.leaky_relu(a, 0.2, out=out),
        "leaky_relu_backward": lambda a, out=None: leaky_relu_sim.leaky_relu_backward(tensor(grad), a, 0.2, False),
        "rrelu": lambda a, out=None: rrelu_sim.rrelu(a, seed, 0.1, 0.3, out=out),
        "rrelu_backward": lambda a, out=None: rrelu_sim.rrelu_backward(tensor(grad), a, seed, 0.1, 0.3, False),
    }
    before = x.copy()
    for name, call in calls.items():
        expected = np.empty_like(x)
        expected_by[name](expected)
        if inplace and name in ("leaky_relu", "rrelu"):  # the in-place ops: out is the input
            got = tensor(x.copy())
            assert call(got, out=got) is got
        else:
            got = call(tensor(x))
        assert np.array_equal(got.view(torch.uint8).numpy(), expected.view(np.uint8)), name
        assert np.array_equal(x.view(np.uint8), before.view(np.uint8)), f"{name}: input changed"
        assert sim.last_launch().gm_bytes_out == 77 * numpy_dtype.itemsize  # the last piece


def test_an_output_overlapping_the_input_at_an_offset_is_written_after_every_piece_read(monkeypatch):
    reason = backends.unavailable_reason("sim")
    if reason is not None:
        pytest.skip(reason)
    import numpy as np
    import torch

    from ascend_acts.ops.leaky_relu import kernels as leaky_relu_sim
    from ascend_acts.ops.rrelu import kernels as rrelu_sim
    from ascend_acts.ops.rrelu import reference as rrelu_oracle

    monkeypatch.setattr(leaky_relu_sim, "LAUNCH_BYTES", 4096)  # the elementwise family's
    buffer = -torch.arange(1, 5002, dtype=torch.float32)
    expected = np.empty(5000, dtype=np.float32)
    rrelu_oracle.forward(buffer[:5000].numpy().copy(), 0.1, 0.3, 9, expected)
    rrelu_sim.rrelu(buffer[:5000], torch.tensor([9]), 0.1, 0.3, out=buffer[1:])  # the output starts one later
    assert np.array_equal(buffer[1:].numpy(), expected)
