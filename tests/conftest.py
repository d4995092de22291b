import os

import pytest
import torch

import ascend_acts
from ascend_acts import backends

ALL_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
# the AscendC kernels (and so the emulator) have no float64
SIM_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


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


def skip_unsupported(backend: str, dtype: torch.dtype) -> None:
    if backend == "sim" and dtype not in SIM_DTYPES:
        pytest.skip("the AscendC kernels have no float64")
