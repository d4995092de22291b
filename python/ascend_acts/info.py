"""`python -m ascend_acts info`: versions, and which backends run here (and why not)."""

from __future__ import annotations

import platform

from . import __version__, backends


def report() -> str:
    import numpy
    import torch

    lines = [
        f"ascend-acts {__version__}",
        f"python {platform.python_version()}, torch {torch.__version__}, numpy {numpy.__version__}",
        "CPU backends:",
    ]
    for name in backends.known_backends():
        reason = backends.unavailable_reason(name)
        lines.append(f"  {name:10s} {'available' if reason is None else 'unavailable: ' + reason}")
    lines.append(f"selected: {backends.current_backend_name()}")
    return "\n".join(lines)
