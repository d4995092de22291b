"""How the discriminator's LeakyReLU slope affects sample quality, on the sine-signal GAN.

Trains `ascend_acts.sine_gan` with negative_slope in {0.01, 0.05, 0.1, 0.2, 0.3} over several seeds and
scores the generated signals against held-out real ones with two metrics that need no downloaded
weights: the sliced Wasserstein distance and the RBF-kernel MMD^2 (both: lower is better). Writes a CSV
of every run and a PNG of mean +- std over seeds against the slope.

    python examples/slope_sweep.py                  # 5 slopes x 3 seeds x 1500 steps, a few minutes
    python examples/slope_sweep.py --quick          # 5 slopes x 1 seed x 20 steps
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

import torch

import ascend_acts
from ascend_acts import sine_gan

SLOPES = (0.01, 0.05, 0.1, 0.2, 0.3)
EVAL_SAMPLES = 512
METRICS = ("sliced_wasserstein", "mmd2")


def mmd2(a: torch.Tensor, b: torch.Tensor) -> float:
    """Biased MMD^2 with a Gaussian kernel whose bandwidth is the median pairwise distance of the pool."""
    pool = torch.cat([a, b])
    distances = torch.cdist(pool, pool).pow(2)
    bandwidth = distances.median().clamp_min(1e-12)
    kernel = torch.exp(-distances / bandwidth)
    n = len(a)
    return (kernel[:n, :n].mean() + kernel[n:, n:].mean() - 2 * kernel[:n, n:].mean()).item()


def score(slope: float, seed: int, steps: int) -> dict:
    generator, _, _ = sine_gan.train(steps=steps, negative_slope=slope, seed=seed, progress=False)
    real = sine_gan.real_signals(EVAL_SAMPLES, torch.Generator().manual_seed(10_000 + seed))
    fake = sine_gan.sample(generator, EVAL_SAMPLES, seed=20_000 + seed)
    return {"slope": slope, "seed": seed, "steps": steps,
            "sliced_wasserstein": sine_gan.sliced_wasserstein(real, fake), "mmd2": mmd2(real, fake)}


def summarise(runs: list[dict]) -> list[dict]:
    summary = []
    for slope in dict.fromkeys(run["slope"] for run in runs):
        row = {"slope": slope}
        for metric in METRICS:
            values = [run[metric] for run in runs if run["slope"] == slope]
            row[f"{metric}_mean"] = statistics.fmean(values)
            row[f"{metric}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
        summary.append(row)
    return summary


def plot(summary: list[dict], seeds: int, steps: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(METRICS), figsize=(5 * len(METRICS), 3.6))
    slopes = [row["slope"] for row in summary]
    for ax, metric in zip(axes, METRICS):
        ax.errorbar(slopes, [row[f"{metric}_mean"] for row in summary],
                    yerr=[row[f"{metric}_std"] for row in summary], fmt="-o", capsize=4)
        ax.set(xlabel="discriminator LeakyReLU negative_slope", ylabel=f"{metric} (lower is better)",
               title=f"{metric}: mean +- std over {seeds} seed(s)")
    fig.suptitle(f"sine GAN, {steps} steps per run")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_csv(rows: list[dict], path: Path) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main(argv=None) -> None:
    from tqdm.auto import tqdm

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--slopes", type=float, nargs="+", default=list(SLOPES))
    parser.add_argument("--backend", choices=["reference", "sim", "torch"], default="reference")
    parser.add_argument("--out", type=Path, default=Path("outputs/slope_sweep"))
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 seed, 20 steps")
    args = parser.parse_args(argv)
    steps, seeds = (20, 1) if args.quick else (args.steps, args.seeds)

    ascend_acts.use_backend(args.backend)
    jobs = [(slope, seed) for slope in args.slopes for seed in range(seeds)]
    runs = [score(slope, seed, steps) for slope, seed in tqdm(jobs, desc="slope sweep", disable=args.quick)]
    summary = summarise(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(runs, args.out / "slope_sweep_runs.csv")
    write_csv(summary, args.out / "slope_sweep.csv")
    plot(summary, seeds, steps, args.out / "slope_sweep.png")
    for row in summary:
        print(f"slope {row['slope']:<5} sliced Wasserstein {row['sliced_wasserstein_mean']:.4f} "
              f"+- {row['sliced_wasserstein_std']:.4f}   MMD^2 {row['mmd2_mean']:.4f} +- {row['mmd2_std']:.4f}")
    print(f"outputs: {args.out.resolve()}")


if __name__ == "__main__":
    main()
