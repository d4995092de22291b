"""GM traffic of our elementwise kernels on the emulator, and a modelled 910B time, next to the
traffic of the CANN composites that do the same job.

    python benchmarks/sim_traffic.py [--elements N] [--quick]

Model: the kernels are memory-bound, so time = GM bytes / HBM bandwidth. Assumed bandwidth
1.6 TB/s for 910B (commonly quoted; no official figure found: treat as +-30%). Launch overhead and
the vector work (about 60 instructions per tile for the RReLU hash) are not modelled.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from ascend_acts.backends import sim

HBM_BYTES_PER_S = 1.6e12
RESULTS = Path(__file__).resolve().parent / "results"


def composite_bytes(op: str, n: int, s: int) -> tuple[int, str]:
    """GM bytes of the CANN way, each step reading its inputs and writing its output."""
    if op == "leaky_relu":
        return 2 * n * s, "aclnnLeakyRelu: read x, write y"
    if op == "leaky_relu_backward":
        return 3 * n * s, "aclnnLeakyReluBackward: read dy and x (or y), write dx"
    if op == "rrelu":
        # aclnnRReluWithNoise = uniform noise (write n*s) + Less(x, 0) (read n*s, write n bool)
        # + Mul(x, noise) (read 2n*s, write n*s) + Select (read n bool + 2n*s, write n*s); noise kept for backward
        return n * s + (n * s + n) + 3 * n * s + (n + 3 * n * s), "uniform + Less + Mul + Select, noise tensor kept"
    return 3 * n * s, "Mul(dy, noise): read dy and noise, write dx"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--elements", type=int, default=10**6)
    parser.add_argument("--quick", action="store_true", help="10^5 elements")
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory for sim_traffic.md")
    args = parser.parse_args()
    n = 10**5 if args.quick else args.elements
    x = torch.from_numpy(np.random.default_rng(0).standard_normal(n).astype(np.float32))
    grad, seed = torch.ones_like(x), torch.tensor([1234])
    runs = {
        "leaky_relu": lambda: sim.leaky_relu(x, 0.2),
        "leaky_relu_backward": lambda: sim.leaky_relu_backward(grad, x, 0.2, False),
        "rrelu": lambda: sim.rrelu_with_seed(x, seed, 1 / 8, 1 / 3),
        "rrelu_backward": lambda: sim.rrelu_with_seed_backward(grad, x, seed, 1 / 8, 1 / 3, False),
    }
    lines = [f"### Elementwise kernels on the emulator: {n:,} float32 elements, ascend910b1 (48 vector cores)", "",
             "| kernel | GM in | GM out | DataCopy | vector instr. | peak UB | emulator s | modelled 910B us "
             "| CANN composite GM bytes | ours / composite |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for op, run in runs.items():
        start = time.perf_counter()
        run()
        seconds = time.perf_counter() - start
        launch = sim.last_launch()
        ours = launch.gm_bytes_in + launch.gm_bytes_out
        theirs, how = composite_bytes(op, n, 4)
        lines.append(f"| {launch.kernel} | {launch.gm_bytes_in:,} | {launch.gm_bytes_out:,} | {launch.datacopy_calls} "
                     f"| {launch.vector_instructions} | {launch.peak_ub_bytes:,} | {seconds:.3f} "
                     f"| {ours / HBM_BYTES_PER_S * 1e6:.2f} | {theirs:,} ({how}) | {ours / theirs:.2f} |")
    lines += ["", f"Modelled time = GM bytes / {HBM_BYTES_PER_S / 1e12:.1f} TB/s (assumed 910B HBM bandwidth, +-30%); "
              "launch overhead and vector compute not modelled. The seed is read once per block (8 bytes)."]
    table = "\n".join(lines)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sim_traffic.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
