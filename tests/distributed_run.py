"""Runs scenario functions in several gloo processes on 127.0.0.1 and collects what each rank returns.

Each worker runs its scenarios in order (all ranks the same list), each scenario's result or error is
recorded, and the whole run has a deadline: a worker still running at it (a collective one rank never
joined) is killed and the run fails, instead of hanging CI. The gloo group's own timeout makes a rank
waiting in such a collective raise first, so the other ranks' results still arrive.
"""

from __future__ import annotations

import datetime
import importlib
import multiprocessing
import os
import tempfile
import time
import traceback
from pathlib import Path

import torch

COLLECTIVE_TIMEOUT = datetime.timedelta(seconds=30)


class WorkerError(RuntimeError):
    pass


def _worker(rank: int, world_size: int, store_path: str, module: str, scenarios, result_path: str) -> None:
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"  # gloo's connections on 127.0.0.1 only
    import torch.distributed as dist

    results = {}
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world_size,
                            timeout=COLLECTIVE_TIMEOUT)
    try:
        functions = importlib.import_module(module)
        for name, (function, kwargs) in scenarios.items():
            try:
                results[name] = getattr(functions, function)(rank, world_size, **kwargs)
            except Exception as error:  # recorded; the ranks are out of step now, so stop here
                results[name] = WorkerError(f"rank {rank}, {name}: {type(error).__name__}: {error}\n"
                                            f"{traceback.format_exc()}")
                break
    finally:
        torch.save(results, result_path)
        dist.destroy_process_group()


def run(world_size: int, module: str, scenarios: dict[str, tuple[str, dict]], deadline: float = 300.0):
    """{scenario name: [rank 0 result, rank 1 result, ...]} (a result may be a WorkerError);
    `scenarios` maps a name to (function name in `module`, keyword arguments)."""
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as directory:
        store = str(Path(directory) / "store")
        paths = [str(Path(directory) / f"rank{rank}.pt") for rank in range(world_size)]
        workers = [context.Process(target=_worker, args=(rank, world_size, store, module, scenarios, paths[rank]),
                                   daemon=True) for rank in range(world_size)]
        for worker in workers:
            worker.start()
        end = time.monotonic() + deadline
        for worker in workers:
            worker.join(max(0.0, end - time.monotonic()))
        hung = [rank for rank, worker in enumerate(workers) if worker.is_alive()]
        for rank in hung:
            workers[rank].kill()
            workers[rank].join()
        if hung:
            raise TimeoutError(f"ranks {hung} of {world_size} still running after {deadline} s")
        missing = [rank for rank, path in enumerate(paths) if not Path(path).exists()]
        if missing:
            codes = [workers[rank].exitcode for rank in missing]
            raise RuntimeError(f"ranks {missing} wrote no results (exit codes {codes})")
        per_rank = [torch.load(path, weights_only=False) for path in paths]
    return {name: [results.get(name, WorkerError(f"rank {rank}: not run")) for rank, results in enumerate(per_rank)]
            for name in scenarios}
