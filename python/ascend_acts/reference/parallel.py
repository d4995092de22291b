"""Run an elementwise body over cache-sized chunks of a flat range, on all cores.

NumPy releases the GIL inside ufuncs, so threads give real parallelism. Chunks of 128 Ki elements keep
a body's intermediate arrays near the core (a kernel of several NumPy passes costs little more than one
pass over memory) while amortising the Python work per chunk.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

CHUNK = 1 << 17
_WORKERS = os.cpu_count() or 1
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="ascend_acts")
    return _pool


def for_chunks(size: int, body: Callable[[int, int], None]) -> None:
    """Calls body(start, stop) for consecutive chunks covering range(size), in parallel when large."""
    def run(first: int, last: int) -> None:
        for start in range(first, last, CHUNK):
            body(start, min(start + CHUNK, last))

    chunks = -(-size // CHUNK)
    workers = min(_WORKERS, chunks)
    if workers <= 1:
        run(0, size)
        return
    per_worker = -(-chunks // workers) * CHUNK
    spans = [(first, min(first + per_worker, size)) for first in range(0, size, per_worker)]
    for future in [_executor().submit(run, *span) for span in spans]:
        future.result()  # re-raises a worker's exception
