import os

import pytest
import torch

import ascend_acts
from ascend_acts import backends, op_table

# Under pytest-xdist (pyproject's addopts: a worker per CPU) each worker gets its share of the CPUs: torch's OpenMP
# threads spinning against another worker's on the same core make the whole run several times slower. Tests that
# need several threads (tests/test_concurrency.py, test_reference_conv_speed_path.py) set them themselves. The
# interpreters tests start (examples, benchmarks, the selftest, multi-process runs) inherit the share through
# OMP_NUM_THREADS, torch's default thread count: with torch's own default a quick benchmark run beside a busy worker
# took 4x the CPU time.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _threads = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    torch.set_num_threads(_threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(_threads))


@pytest.fixture(scope="module")
def one_torch_thread():
    """A module of tiny models on one torch thread: more threads only contend (on 2 shared cores, 0.2 s for a step
    that takes 5 ms on one). Use with `pytestmark = pytest.mark.usefixtures("one_torch_thread")`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=backends.known_backends())
def backend(request):
    """Runs the test once per CPU backend. CI sets ASCEND_ACTS_REQUIRE_SIM=1 so a missing emulator
    library fails instead of skipping."""
    reason = backends.unavailable_reason(request.param)
    if reason is not None:
        if os.environ.get("ASCEND_ACTS_REQUIRE_SIM") == "1":
            pytest.fail(f"backend {request.param!r} is required but unavailable: {reason}")
        pytest.skip(f"backend {request.param!r} unavailable: {reason}")
    with ascend_acts.use_backend(request.param):
        yield request.param


def backend_dtypes(op: str, dtypes: list[torch.dtype] | None = None):
    """Parametrizes a test over the (backend, dtype) pairs that run op `op` (op_table.valid_backend_dtypes: no
    pair a backend cannot run, e.g. sim and float64, is generated), optionally only those with a dtype of
    `dtypes`; the `backend` fixture selects the backend."""
    pairs = [(name, getattr(torch, dtype)) for name, dtype in op_table.valid_backend_dtypes(op_table.torch_op(op))]
    pairs = [(name, dtype) for name, dtype in pairs if dtypes is None or dtype in dtypes]
    return pytest.mark.parametrize("backend, dtype", pairs, indirect=["backend"],
                                   ids=[f"{name}-{str(dtype).removeprefix('torch.')}" for name, dtype in pairs])
