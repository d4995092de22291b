"""RReLU(1/8, 1/3) in training mode, float32: ascend_acts (reference, sim) vs torch vs a copy ceiling.

torch draws a noise tensor and keeps it with the input for the backward; ascend_acts keeps the output
and an 8-byte seed and regenerates the noise in the backward (docs/rng.md).

    python benchmarks/bench_rrelu.py            # 64 Ki, 1 Mi, 16 Mi elements; a minute or two
    python benchmarks/bench_rrelu.py --quick    # smoke run
"""

from __future__ import annotations

import torch.nn.functional as F

import ascend_acts
from common import (
    available_impls,
    base_parser,
    comparison_table,
    copy_rows,
    measure_elementwise,
    plot_phases,
    report,
    resolve_sizes,
)

LOWER, UPPER = 1 / 8, 1 / 3
OPS = {
    "torch": lambda x: F.rrelu(x, LOWER, UPPER, training=True),
    "reference": lambda x: ascend_acts.rrelu(x, LOWER, UPPER, training=True),
    "sim": lambda x: ascend_acts.rrelu(x, LOWER, UPPER, training=True),
}


def main(argv=None) -> None:
    args = base_parser(__doc__).parse_args(argv)
    rows, left_out = [], {}
    for size in resolve_sizes(args):
        impls, skipped = available_impls(size, args.sim_max_size)
        left_out.update({f"{impl} at {size:,}": why for impl, why in skipped.items()})
        for impl in impls:
            rows += measure_elementwise("rrelu", impl, size, OPS[impl], 4, args.repeats)
        rows += copy_rows("rrelu", size, 4, args.repeats)
    notes = ["training mode; times are medians; (x torch) is the ratio to torch.nn.functional.rrelu",
             "GB/s counts ascend_acts' minimal traffic: forward 8 B/element, backward 12 B/element "
             "(torch's backward also reads its 4 B/element noise tensor)",
             "ceilings: the time each phase would take at the bandwidth of Tensor.clone() (allocates, as the ops "
             "do) or Tensor.copy_ into a preallocated buffer, measured on the same bytes",
             "saved bytes: unique storages autograd keeps (saved_tensors_hooks): ours output + 8-byte seed, "
             "torch's input + noise"]
    notes += [f"not measured: {what}: {why}" for what, why in left_out.items()]
    report("rrelu", "RReLU(1/8, 1/3) training, float32", rows, comparison_table(rows), notes, args.out,
           lambda path: plot_phases(rows, "RReLU training, float32", path))


if __name__ == "__main__":
    main()
