"""The hardware checks of scripts/npu_selftest.sh, one per call: exit status 0 pass, 1 fail, with one line saying
what was compared. Each runs our ops on `--device` (npu; cpu runs the same comparison on the CPU reference,
which is how the test suite checks the checks) against the float64/NumPy reference of docs/rng.md.

Usage: python scripts/npu_selftest.py CHECK [--device npu|cpu]
CHECK: wraparound | noise-past-2**24 | noise-past-2**31 | eval-kernel | timings
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

import ascend_acts
from ascend_acts.reference import rng

SEED, LOWER, UPPER = 0x5EED1234, 0.125, 1 / 3


def noise_on_device(numel: int, device: str) -> torch.Tensor:
    """-rrelu(-1) = the slope of every flat element (exact in float32: -1 * slope)."""
    x = torch.full((numel,), -1.0, dtype=torch.float32, device=device)
    seed = torch.tensor(SEED, dtype=torch.int64, device=device)
    return -torch.ops.ascend_acts.rrelu_with_seed(x, seed, LOWER, UPPER)


def compare_noise(numel: int, windows: list[tuple[int, int]], device: str) -> tuple[bool, str]:
    slopes = noise_on_device(numel, device)
    for start, stop in windows:
        got = slopes[start:stop].cpu().numpy()
        want = rng.noise(SEED, np.arange(start, stop, dtype=np.uint64), LOWER, UPPER)
        wrong = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
        if wrong.size:
            i = start + int(wrong[0])
            return False, (f"noise differs from the reference at flat index {i} ({wrong.size} of {stop - start} in "
                           f"[{start}, {stop})): {got[wrong[0]]!r} vs {want[wrong[0]]!r}")
    return True, "noise bit-identical to the reference in " + ", ".join(f"[{a}, {b})" for a, b in windows)


def check_wraparound(device):
    """The RNG's int32 multiply-low/add must wrap on overflow (D12): every hash round overflows for most
    indices, so any other overflow behaviour changes the noise of the first million elements."""
    return compare_noise(1 << 20, [(0, 1 << 20)], device)


def check_noise_past_2_24(device):
    """Flat indices past 2**24, where a float32 index (CreateVecIndex's 8.x first block, D4) is no longer exact."""
    edge = 1 << 24
    return compare_noise(edge + (1 << 16), [(edge - (1 << 16), edge + (1 << 16))], device)


def check_noise_past_2_31(device):
    """Flat indices past 2**31, beyond int32 (8 GiB of float32 in, 8 GiB out)."""
    edge = 1 << 31
    return compare_noise(edge + (1 << 16), [(0, 1 << 12), (edge - (1 << 16), edge + (1 << 16))], device)


def check_eval_kernel(device):
    """Both eval paths (D3) finish and match the CPU: the default (torch_npu's convolution + our LeakyReLU
    kernel) and the one-launch kernel asked for by ASCEND_ACTS_EVAL_KERNEL=fused (cube-side img2col); the
    shell's timeout turns a hang into a failure. Also prints each path's median time at batch 64: the
    measurement that decides whether the fused kernel should become the default (it is only modelled faster,
    or level on D4)."""
    torch.manual_seed(0)
    block = ascend_acts.nn.ConvBNLeakyReLU2d(64, 128, 4, 2, 1, negative_slope=0.2).eval()
    x = torch.randn(16, 64, 32, 32)
    want = block(x)
    block = block.to(device)
    batch = torch.randn(64, 64, 32, 32).to(device)
    errors, times = {}, {}
    for path in ("aclnn", "fused"):
        os.environ["ASCEND_ACTS_EVAL_KERNEL"] = path  # read by the extension at each call
        try:
            got = block(x.to(device))
            if device == "npu":
                torch.npu.synchronize()
            times[path] = median_ms(lambda: block(batch), device)
        finally:
            os.environ.pop("ASCEND_ACTS_EVAL_KERNEL")
        errors[path] = (got.cpu().double() - want.double()).abs().max().item()
    tolerance = 2e-4 * max(1.0, want.abs().max().item())
    return max(errors.values()) <= tolerance, "eval paths finished; max |error| " + ", ".join(
        f"{path} {error:.3g}" for path, error in errors.items()) + "; median ms at batch 64 " + ", ".join(
        f"{path} {ms:.3f}" for path, ms in times.items())


def median_ms(fn, device):
    """Milliseconds per call: the median of 20 after 3 warm-ups."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(20):
        if device == "npu":
            torch.npu.synchronize()
        start = time.perf_counter()
        fn()
        if device == "npu":
            torch.npu.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def check_timings(device):
    """Milliseconds per call (median of 20 after 3 warm-ups), ours vs torch's built-in, for the report."""
    x = torch.randn(1 << 24, device=device)
    rows = [("leaky_relu 16M", lambda: ascend_acts.leaky_relu(x, 0.2),
             lambda: torch.nn.functional.leaky_relu(x, 0.2)),
            ("rrelu training 16M", lambda: ascend_acts.rrelu(x, training=True),
             lambda: torch.nn.functional.rrelu(x, training=True))]
    return True, "; ".join(f"{name}: {median_ms(ours, device):.3f} ms (torch {median_ms(theirs, device):.3f} ms)"
                           for name, ours, theirs in rows)


CHECKS = {"wraparound": check_wraparound, "noise-past-2**24": check_noise_past_2_24,
          "noise-past-2**31": check_noise_past_2_31, "eval-kernel": check_eval_kernel, "timings": check_timings}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("check", choices=CHECKS)
    parser.add_argument("--device", choices=["npu", "cpu"], default="npu")
    args = parser.parse_args()
    if args.device == "npu":
        import torch_npu  # noqa: F401  (the NPU device; only here, on an Ascend machine)
    ok, detail = CHECKS[args.check](args.device)
    print(f"{args.check}: {'pass' if ok else 'FAIL'}: {detail}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
