"""Run an elementwise body over cache-sized chunks of a flat range, on torch's intra-op threads.

NumPy releases the GIL inside ufuncs, so threads give real parallelism. Chunks of 128 Ki elements keep
a body's intermediate arrays near the core (a kernel of several NumPy passes costs little more than one
pass over memory) while amortising the Python work per chunk.

The number of threads follows `torch.get_num_threads()`, as torch's own CPU kernels do: a DataLoader
worker (torch sets it to 1 thread there) runs the chunks inline, and `torch.set_num_threads(n)` applies.
The pool is shared by every calling thread (each waits only for its own chunks) and is dropped in a
fork-started child, whose copy would have no threads behind it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import torch

CHUNK = 1 << 17
_CPUS = os.cpu_count() or 1
_pool: ThreadPoolExecutor | None = None


def _forget_pool() -> None:
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_forget_pool)


def _executor() -> ThreadPoolExecutor:
    global _pool
    pool = _pool
    if pool is None:
        pool = _pool = ThreadPoolExecutor(max_workers=_CPUS, thread_name_prefix="ascend_acts")
    return pool


def thread_count() -> int:
    """Threads a large body runs on: torch's intra-op thread count, at most the CPUs."""
    return max(1, min(torch.get_num_threads(), _CPUS))


def for_chunks(size: int, body: Callable[[int, int], None], chunk: int = CHUNK) -> None:
    """Calls body(start, stop) for consecutive chunks of `chunk` items covering range(size), in parallel
    when there are several chunks (`chunk` in other units than elements, e.g. rows: pass CHUNK // row length)."""
    def run(first: int, last: int) -> None:
        for start in range(first, last, chunk):
            body(start, min(start + chunk, last))

    chunks = -(-size // chunk)
    workers = min(thread_count(), chunks)
    if workers <= 1:
        run(0, size)
        return
    per_worker = -(-chunks // workers) * chunk
    spans = [(first, min(first + per_worker, size)) for first in range(0, size, per_worker)]
    pool = _executor()
    for future in [pool.submit(run, *span) for span in spans]:
        future.result()  # re-raises a worker's exception
