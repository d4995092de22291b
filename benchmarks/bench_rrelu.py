"""RReLU(1/8, 1/3) in training mode, float32: ascend_acts (reference, sim) vs torch vs a copy ceiling.

torch draws a noise tensor and keeps it with the input for the backward; ascend_acts keeps the output
and an 8-byte seed and regenerates the noise in the backward (docs/rng.md).

    python benchmarks/bench_rrelu.py            # 64 Ki, 1 Mi, 16 Mi elements; a minute or two
    python benchmarks/bench_rrelu.py --quick    # smoke run
"""

from __future__ import annotations

import torch.nn.functional as F

import ascend_acts
from common import CEILINGS_NOTE, run_elementwise

LOWER, UPPER = 1 / 8, 1 / 3
OPS = {
    "torch": lambda x: F.rrelu(x, LOWER, UPPER, training=True),
    "reference": lambda x: ascend_acts.rrelu(x, LOWER, UPPER, training=True),
    "sim": lambda x: ascend_acts.rrelu(x, LOWER, UPPER, training=True),
}
NOTES = ["training mode; times are medians; (x torch) is the ratio to torch.nn.functional.rrelu",
         "GB/s counts ascend_acts' minimal traffic: forward 8 B/element, backward 12 B/element "
         "(torch's backward also reads its 4 B/element noise tensor)",
         CEILINGS_NOTE,
         "saved bytes: unique storages autograd keeps (saved_tensors_hooks): ours output + 8-byte seed, "
         "torch's input + noise"]


def main(argv=None) -> None:
    run_elementwise(argv, __doc__, "rrelu", OPS, ("RReLU(1/8, 1/3) training, float32", "RReLU training, float32"),
                    NOTES)


if __name__ == "__main__":
    main()
