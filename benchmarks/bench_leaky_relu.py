"""LeakyReLU(0.2), float32: ascend_acts (reference, sim) vs torch's native CPU op vs a copy ceiling.

    python benchmarks/bench_leaky_relu.py            # 64 Ki, 1 Mi, 16 Mi elements; a minute or two
    python benchmarks/bench_leaky_relu.py --quick    # smoke run
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

SLOPE = 0.2
OPS = {
    "torch": lambda x: F.leaky_relu(x, SLOPE),
    "reference": lambda x: ascend_acts.leaky_relu(x, SLOPE),
    "sim": lambda x: ascend_acts.leaky_relu(x, SLOPE),
}


def main(argv=None) -> None:
    args = base_parser(__doc__).parse_args(argv)
    rows, left_out = [], {}
    for size in resolve_sizes(args):
        impls, skipped = available_impls(size, args.sim_max_size)
        left_out.update({f"{impl} at {size:,}": why for impl, why in skipped.items()})
        for impl in impls:
            rows += measure_elementwise("leaky_relu", impl, size, OPS[impl], 4, args.repeats)
        rows += copy_rows("leaky_relu", size, 4, args.repeats)
    notes = ["times are medians; (x torch) is the ratio to torch.nn.functional.leaky_relu at the same size",
             "GB/s counts the minimal traffic: forward 8 B/element (read x, write y), backward 12 B/element",
             "ceilings: the time each phase would take at the bandwidth of Tensor.clone() (allocates, as the ops "
             "do) or Tensor.copy_ into a preallocated buffer, measured on the same bytes",
             "saved bytes: unique storages autograd keeps (saved_tensors_hooks); ours is the output, "
             "which the next layer keeps anyway, torch's the input"]
    notes += [f"not measured: {what}: {why}" for what, why in left_out.items()]
    report("leaky_relu", "LeakyReLU(0.2), float32", rows, comparison_table(rows), notes, args.out,
           lambda path: plot_phases(rows, "LeakyReLU(0.2), float32", path))


if __name__ == "__main__":
    main()
