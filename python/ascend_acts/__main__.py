"""Command line: `python -m ascend_acts demo` (sine GAN on the CPU) and `python -m ascend_acts info`."""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def _demo(args) -> None:
    from . import sine_gan, use_backend

    use_backend(args.backend)
    start = time.perf_counter()
    distance = sine_gan.run_demo(args.out, steps=args.steps, seed=args.seed)
    print(f"trained {args.steps} steps on backend '{args.backend}' in {time.perf_counter() - start:.1f} s")
    print(f"sliced Wasserstein distance, generated vs real signals: {distance:.4f}")
    print(f"figure: {args.out.resolve()}")


def _info(args) -> None:
    from .info import report

    print(report())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ascend_acts")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="train a small GAN on sine signals on the CPU and plot it")
    demo.add_argument("--steps", type=int, default=3000)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--backend", default="reference", help="CPU backend: reference or sim")
    demo.add_argument("--out", type=Path, default=Path("outputs/sine_gan.png"))
    demo.set_defaults(run=_demo)
    info = sub.add_parser("info", help="versions and available backends")
    info.set_defaults(run=_info)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    main()
