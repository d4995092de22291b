"""The hardware checks of scripts/npu_selftest.sh, one per call: exit status 0 pass, 1 fail, with one line saying
what was compared. Each runs our ops on `--device` (npu; cpu runs the same comparison on the CPU reference,
which is how the test suite checks the checks) against the float64/NumPy reference of docs/rng.md.

A thin wrapper: the checks are `ascend_acts.selftest.CHECKS`, which `python -m ascend_acts selftest` runs too (all of
them, into one report: docs/npu.md, "First run on an NPU").

Usage: python scripts/npu_selftest.py CHECK [--device npu|cpu]
CHECK: wraparound | noise-past-2**24 | noise-past-2**31 | eval-kernel | timings
"""

import argparse
import sys

from ascend_acts.ops.rrelu import rng  # noqa: F401  (the oracle the checks read: tests patch checks.rng.noise)
from ascend_acts.selftest import (  # noqa: F401
    CHECKS,
    check_eval_kernel,
    check_noise_past_2_24,
    check_noise_past_2_31,
    check_timings,
    check_wraparound,
    compare_noise,
)


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
