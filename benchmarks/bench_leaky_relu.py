"""LeakyReLU(0.2), float32: ascend_acts (reference, sim) vs torch's native CPU op vs a copy ceiling.

    python benchmarks/bench_leaky_relu.py            # 64 Ki, 1 Mi, 16 Mi elements; a minute or two
    python benchmarks/bench_leaky_relu.py --quick    # smoke run
"""

from __future__ import annotations

import torch.nn.functional as F

import ascend_acts
from common import CEILINGS_NOTE, run_elementwise

SLOPE = 0.2
OPS = {
    "torch": lambda x: F.leaky_relu(x, SLOPE),
    "reference": lambda x: ascend_acts.leaky_relu(x, SLOPE),
    "sim": lambda x: ascend_acts.leaky_relu(x, SLOPE),
}
NOTES = ["times are medians; (x torch) is the ratio to torch.nn.functional.leaky_relu at the same size",
         "GB/s counts the minimal traffic: forward 8 B/element (read x, write y), backward 12 B/element",
         CEILINGS_NOTE,
         "saved bytes: unique storages autograd keeps (saved_tensors_hooks); ours is the output, "
         "which the next layer keeps anyway, torch's the input"]


def main(argv=None) -> None:
    title = "LeakyReLU(0.2), float32"
    run_elementwise(argv, __doc__, "leaky_relu", OPS, (title, title), NOTES)


if __name__ == "__main__":
    main()
