"""The DCGAN discriminator's Conv+BN+LeakyReLU eval layers (D2 64->128 @32, D3 128->256 @16, D4 256->512 @8,
k4 s2 p1, float16, batch 64) through the performance model: the fused eval kernel run on the emulator at the
real batch, its modelled time (pipe timeline and floors, plus its weight packing) next to the way CANN runs the
layer (TransData x, aclnnConvolution on the BN-folded W' at max(its traffic, its compute), TransData y back,
LeakyReLU), every term and assumption shown. benchmarks/perf_model.py's conv section under this name.

    python benchmarks/fused_traffic.py            # batch 64
    python benchmarks/fused_traffic.py --quick    # smoke run: two small layers at batch 2
"""

from __future__ import annotations

import sys

import perf_model


def main(argv=None) -> None:
    perf_model.main(["--section", "conv", "--name", "fused_traffic", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
