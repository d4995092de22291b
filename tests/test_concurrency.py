"""Threads and fork: ops called from several threads at once give the single-thread results on every
backend; a `with use_backend(...)` block selects for its own thread only; fork-started children
(DataLoader workers) run the ops after the parent used the reference backend's thread pool.

Scenarios that crashed (segfault) or hung on the old code run in a subprocess with a timeout.
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import ascend_acts
from ascend_acts import backends

# Inputs and ops shared by the subprocess scripts: every op family, forward and backward.
OPS = textwrap.dedent("""
    import torch, ascend_acts

    def inputs(seed):
        g = torch.Generator().manual_seed(seed)
        return {
            "x32": torch.randn(1 << 16, generator=g),
            "x16": torch.randn(3, 5, 4099, generator=g).half(),
            "xbf": torch.randn(1 << 15, generator=g).bfloat16(),
            "image": torch.randn(4, 8, 10, 10, generator=g),
            "weight": torch.randn(16, 8, 3, 3, generator=g) * 0.2,
            "gamma": torch.rand(16, generator=g) + 0.5,
            "beta": torch.randn(16, generator=g) * 0.1,
            "seed": seed,
        }

    def run_ops(t):
        # every result and gradient as a list of tensors
        results = []
        for name in ("x32", "x16", "xbf"):
            x = t[name].clone().requires_grad_()
            y = ascend_acts.leaky_relu(x, 0.2)
            r = ascend_acts.rrelu(x, 0.1, 0.3, training=True, generator=torch.Generator().manual_seed(t["seed"]))
            (y.float().sum() + (r.float() * 1.5).sum()).backward()
            results += [y.detach(), r.detach(), x.grad]
        x = t["image"].clone().requires_grad_()
        w, gamma, beta = (t[k].clone().requires_grad_() for k in ("weight", "gamma", "beta"))
        mean, var = torch.zeros(16), torch.ones(16)
        y = ascend_acts.conv_bn_leaky_relu(x, w, None, mean, var, gamma, beta, training=True, negative_slope=0.2,
                                           padding=1)
        y.square().sum().backward()
        evaluated = ascend_acts.conv_bn_leaky_relu(t["image"], t["weight"], None, mean, var, t["gamma"], t["beta"],
                                                   training=False, negative_slope=0.2, padding=1)
        return results + [y.detach(), x.grad, w.grad, gamma.grad, beta.grad, mean, var, evaluated]
""")

THREADS_SCRIPT = OPS + textwrap.dedent("""
    import sys, threading
    ascend_acts.use_backend(sys.argv[1])
    threads, rounds = 4, 3
    data = [inputs(seed) for seed in range(threads)]
    expected = [run_ops(t) for t in data]  # one thread
    failures, errors = [], []
    start = threading.Barrier(threads)

    def work(index):
        try:
            start.wait()
            for _ in range(rounds):
                got = run_ops(data[index])
                # bit-identical: same dtype, shape and bytes (NaN-free inputs, so torch.equal is exact)
                if not all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(got, expected[index])):
                    failures.append(index)
        except BaseException as exc:
            errors.append(repr(exc))

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print("errors", errors, "mismatching threads", sorted(set(failures)))
    sys.exit(1 if errors or failures else 0)
""")


def run_script(script: str, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Runs `python -c script args` in its own process group, all of which is killed if it hangs (a
    hung fork child would otherwise outlive the test)."""
    process = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"hung: no result within {timeout} s")
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def require(backend: str) -> None:
    reason = backends.unavailable_reason(backend)
    if reason is not None:
        pytest.skip(f"backend {backend!r} unavailable: {reason}")


@pytest.mark.slow
@pytest.mark.parametrize("backend", backends.known_backends())
def test_ops_from_several_threads_match_one_thread(backend):
    """4 threads x 3 rounds of LeakyReLU/RReLU (float32, float16, bfloat16) and the fused op (training and
    eval), forward and backward, each bit-identical to the same calls made from one thread."""
    require(backend)
    result = run_script(THREADS_SCRIPT, backend)
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stdout}\n{result.stderr[-3000:]}"


def _in_thread(function):
    """Runs function() in a new thread; returns its result or re-raises its exception."""
    box = {}

    def target():
        try:
            box["result"] = function()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive()
    if "error" in box:
        raise box["error"]
    return box["result"]


def test_a_with_block_selects_for_its_own_thread_only():
    """While thread A is inside `with use_backend("sim")`, thread B (and a thread started inside A's
    block) still runs the process-wide default; A runs sim. float64 tells them apart: the sim kernels
    refuse it, the reference computes it."""
    require("sim")
    assert backends.current_backend_name() == "reference"
    x = torch.tensor([-2.0, 3.0], dtype=torch.float64)
    inside, leave = threading.Event(), threading.Event()
    seen_in_a = {}

    def thread_a():
        with ascend_acts.use_backend("sim"):
            seen_in_a["name"] = backends.current_backend_name()
            seen_in_a["started_inside"] = _in_thread(backends.current_backend_name)
            with pytest.raises(TypeError, match="no float64"):
                ascend_acts.leaky_relu(x, 0.5)
            inside.set()
            assert leave.wait(timeout=60)
        seen_in_a["after"] = backends.current_backend_name()

    a = threading.Thread(target=thread_a)
    a.start()
    try:
        assert inside.wait(timeout=60)
        assert _in_thread(backends.current_backend_name) == "reference"
        assert backends.current_backend_name() == "reference"
        assert torch.equal(_in_thread(lambda: ascend_acts.leaky_relu(x, 0.5)), torch.tensor([-1.0, 3.0],
                                                                                            dtype=torch.float64))
    finally:
        leave.set()
        a.join(timeout=60)
    assert seen_in_a == {"name": "sim", "started_inside": "reference", "after": "reference"}


def test_a_plain_call_sets_the_default_of_every_thread():
    """`use_backend(name)` as a statement is process-wide: other threads, new and running, see it; a
    `with` block in another thread still wins inside that block."""
    require("sim")
    assert backends.current_backend_name() == "reference"
    try:
        ascend_acts.use_backend("sim")
        assert backends.current_backend_name() == "sim"
        assert _in_thread(backends.current_backend_name) == "sim"

        def scoped():
            with ascend_acts.use_backend("reference"):
                return backends.current_backend_name()
        assert _in_thread(scoped) == "reference"
        assert backends.current_backend_name() == "sim"
    finally:
        ascend_acts.use_backend("reference")
    assert _in_thread(backends.current_backend_name) == "reference"


FORK_SCRIPT = OPS + textwrap.dedent("""
    import os, sys
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset

    ascend_acts.use_backend(sys.argv[1])
    large = torch.randn(1 << 22)
    with ascend_acts.use_backend("reference"):  # the parent runs a large tensor through the reference pool
        expected_large = ascend_acts.leaky_relu(large, 0.1).numpy()

    # A plain fork child keeps torch's thread count (2 here), so the pool runs there: a new one. Only our
    # ops and NumPy run in it: torch's own OpenMP regions are not fork-safe once the parent used them.
    pid = os.fork()
    if pid == 0:
        with ascend_acts.use_backend("reference"):
            same = np.array_equal(ascend_acts.leaky_relu(large, 0.1).numpy(), expected_large)
        os._exit(0 if same else 1)
    assert os.waitpid(pid, 0)[1] == 0, "the plain fork child's results differ"

    data = [inputs(seed) for seed in range(4)]
    expected = [run_ops(t) for t in data]

    class Calls(Dataset):
        def __len__(self):
            return len(data)

        def __getitem__(self, index):  # in a worker process, which torch runs with one thread
            same = all(torch.equal(a, b) for a, b in zip(run_ops(data[index]), expected[index]))
            with ascend_acts.use_backend("reference"):
                large_same = np.array_equal(ascend_acts.leaky_relu(large, 0.1).numpy(), expected_large)
            return torch.tensor(same and large_same)

    loader = DataLoader(Calls(), batch_size=None, num_workers=2, multiprocessing_context="fork")
    assert [bool(b) for b in loader] == [True] * len(data), "a DataLoader worker's results differ"
    print("ok")
""")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
@pytest.mark.parametrize("backend", backends.known_backends())
def test_ops_in_fork_started_workers_after_the_parent_used_the_pool(backend):
    """After the parent ran a large tensor through the reference backend's pool: a plain os.fork child, and
    DataLoader(num_workers=2, multiprocessing_context="fork") workers calling every op family."""
    require(backend)
    result = run_script(FORK_SCRIPT, backend, timeout=180)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


def test_sim_launch_settings_and_last_launch_belong_to_the_calling_thread():
    """Thread A tiles for 3 cores inside launch_settings; thread B, launching meanwhile, still tiles for
    all 48 and sees its own launch in last_launch(), and A still sees its own afterwards."""
    require("sim")
    from ascend_acts.backends import sim
    from ascend_acts.ops.leaky_relu import kernels as leaky_relu_sim

    x = torch.linspace(-1, 1, 4096)
    a_launched, b_launched = threading.Event(), threading.Event()
    seen = {}

    def thread_a():
        with sim.launch_settings(vector_cores=3):
            leaky_relu_sim.leaky_relu(x, 0.2)
            a_launched.set()
            assert b_launched.wait(timeout=60)
            seen["a"] = sim.last_launch()

    a = threading.Thread(target=thread_a)
    a.start()
    try:
        assert a_launched.wait(timeout=60)

        def thread_b():
            leaky_relu_sim.leaky_relu_backward(x, x, 0.2, False)
            return sim.last_launch()
        seen["b"] = _in_thread(thread_b)
    finally:
        b_launched.set()
        a.join(timeout=60)
    assert (seen["a"].kernel, seen["a"].block_dim) == ("acts_leaky_relu", 3)
    assert (seen["b"].kernel, seen["b"].block_dim) == ("acts_leaky_relu_grad", 48)


def test_the_reference_backend_uses_torchs_intra_op_thread_count():
    """With torch.set_num_threads(1) (as torch sets it in DataLoader workers) a large body runs inline, in
    the calling thread; with more, on the pool's threads."""
    from ascend_acts.numerics import parallel

    def threads_used(size):
        names = set()
        parallel.for_chunks(size, lambda start, stop: names.add(threading.current_thread().name))
        return names

    size = 8 * parallel.CHUNK
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert threads_used(size) == {threading.current_thread().name}
        if (os.cpu_count() or 1) >= 2:
            torch.set_num_threads(2)
            used = threads_used(size)
            assert used and all(name.startswith("ascend_acts") for name in used)
    finally:
        torch.set_num_threads(previous)
