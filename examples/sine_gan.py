"""The sine-signal GAN demo (`ascend_acts.sine_gan`) with its knobs exposed.

    python examples/sine_gan.py --steps 3000 --slope 0.2 --backend reference --out outputs/sine_gan.png
    python examples/sine_gan.py --quick
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import ascend_acts
from ascend_acts import sine_gan


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--slope", type=float, default=0.2, help="the discriminator's LeakyReLU negative_slope")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=["reference", "sim", "torch"], default="reference")
    parser.add_argument("--out", type=Path, default=Path("outputs/sine_gan.png"), help="figure path")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20 steps")
    args = parser.parse_args(argv)
    steps = 20 if args.quick else args.steps

    ascend_acts.use_backend(args.backend)
    start = time.perf_counter()
    distance = sine_gan.run_demo(args.out, steps=steps, negative_slope=args.slope, seed=args.seed, batch=args.batch,
                                 progress=not args.quick)
    print(f"{steps} steps, slope {args.slope}, backend {args.backend}: {time.perf_counter() - start:.1f} s")
    print(f"sliced Wasserstein distance, generated vs real: {distance:.4f}")
    print(f"figure: {args.out.resolve()}")


if __name__ == "__main__":
    main()
