"""The emulator module `ascend_acts._sim` as the sim backend uses it: availability, the launch settings and
the latest launch of the calling context, one `launch` through the binding's launch entry.

The binding runs one launch at a time (the emulator's launch context is global) with the GIL released,
and renews its lock in a forked child; launch settings and `last_launch()` belong to the calling context
(thread or asyncio task).
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

import torch

from .timeline import Assumptions

try:
    from ... import _sim
except ImportError as exc:  # not built (or built for another Python)
    _sim = None
    _IMPORT_ERROR = f"ascend_acts._sim is not built: reinstall with `pip install -e .` (needs cmake, g++ and " \
                    f"pybind11) ({exc})"
else:
    _IMPORT_ERROR = None

if _sim is not None:
    EmulatorError = _sim.EmulatorError
    Rule = _sim.Rule
    Launch = _sim.Launch
else:
    class EmulatorError(RuntimeError):
        """A kernel broke an emulator rule (the emulator is not built here)."""

    Rule = Launch = None

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def unavailable_reason() -> str | None:
    return _IMPORT_ERROR


def binding():
    """The `ascend_acts._sim` module; RuntimeError saying why when it is not built."""
    if _sim is None:
        raise RuntimeError(_IMPORT_ERROR)
    return _sim


def platforms() -> list[str]:
    return [p.name for p in binding().platforms()]


@dataclass(frozen=True)
class _Settings:
    """Launch settings tests and benchmarks may change: platform, cores to tile for (0 = all), and the performance
    model's assumptions (timeline.Assumptions) each launch's pipe timeline is scheduled with. The timeline is
    opt-in (None: not scheduled): it costs about half of a launch's time and only the performance model reads it."""
    platform: str = "ascend910b1"
    vector_cores: int = 0
    assumptions: Assumptions | None = None


_settings_var: contextvars.ContextVar[_Settings] = contextvars.ContextVar("ascend_acts_sim_settings",
                                                                         default=_Settings())  # noqa: B039 (frozen)
_last_var: contextvars.ContextVar = contextvars.ContextVar("ascend_acts_sim_last", default=None)


def settings() -> _Settings:
    return _settings_var.get()


@contextlib.contextmanager
def launch_settings(platform: str | None = None, vector_cores: int | None = None,
                    assumptions: Assumptions | None = None):
    """Run launches on another platform (see platforms()), tiled for fewer cores, or scheduled on the pipe
    timeline with `assumptions` (e.g. `timeline.Assumptions()`; `launch.timeline` is None without), inside a
    `with` block (this context only)."""
    current = settings()
    if platform is not None and platform not in platforms():
        raise ValueError(f"launch_settings(): platform must be one of {platforms()}, got {platform!r}")
    if assumptions is not None and not isinstance(assumptions, Assumptions):
        raise TypeError(f"launch_settings(): assumptions must be a timeline.Assumptions, got "
                        f"{type(assumptions).__name__}")
    token = _settings_var.set(_Settings(current.platform if platform is None else platform,
                                        current.vector_cores if vector_cores is None else vector_cores,
                                        current.assumptions if assumptions is None else assumptions))
    try:
        yield
    finally:
        _settings_var.reset(token)


def last_launch():
    """Counters (ascend_acts._sim.Launch) of the latest launch made in this context (thread); its `.timeline`
    is the pipe schedule (`timeline.model_time(last_launch())` the modelled time)."""
    return _last_var.get()


def launch(kernel: str, buffers: dict, tiling):
    """Launches `kernel` (its op-table base name) on this context's platform, scheduled on the pipe timeline when
    this context has assumptions, and records its counters."""
    current = settings()
    costs = None if current.assumptions is None else current.assumptions.to_costs()
    counters = binding().launch(kernel, buffers, tiling, platform=current.platform, costs=costs)
    _last_var.set(counters)
    return counters


def check_dtype(tensor: torch.Tensor) -> None:
    """The kernels' data types; float64 has a message of its own."""
    if tensor.dtype == torch.float64:
        raise TypeError("the sim backend runs the NPU kernels, which have no float64 (the 910B vector unit has "
                        "none); use the reference backend for float64")
    if tensor.dtype not in FLOAT_DTYPES:
        raise TypeError(f"the sim backend runs the NPU kernels, which take float32, float16 or bfloat16, got "
                        f"{tensor.dtype}")
