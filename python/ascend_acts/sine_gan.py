"""A small GAN on 1-D sine signals: the CPU demo and the base of examples/ (slope sweep).

The discriminator uses ascend_acts' LeakyReLU(0.2) and RReLU, the generator plain ReLU/Tanh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from . import nn as acts_nn

SIGNAL_LENGTH = 64
LATENT_SIZE = 8


def real_signals(batch: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Sines with random amplitude in [0.4, 0.9], frequency in [1, 3] cycles and phase."""
    t = torch.linspace(0, 1, SIGNAL_LENGTH)
    amplitude = 0.4 + 0.5 * torch.rand(batch, 1, generator=generator)
    frequency = 1 + 2 * torch.rand(batch, 1, generator=generator)
    phase = 2 * math.pi * torch.rand(batch, 1, generator=generator)
    return amplitude * torch.sin(2 * math.pi * frequency * t + phase)


def make_generator() -> nn.Module:
    return nn.Sequential(
        nn.Linear(LATENT_SIZE, 128), nn.ReLU(),
        nn.Linear(128, 128), nn.ReLU(),
        nn.Linear(128, SIGNAL_LENGTH), nn.Tanh(),
    )


def make_discriminator(negative_slope: float = 0.2) -> nn.Module:
    return nn.Sequential(
        nn.Linear(SIGNAL_LENGTH, 128), acts_nn.LeakyReLU(negative_slope),
        nn.Linear(128, 64), acts_nn.RReLU(),
        nn.Linear(64, 1),
    )


def sliced_wasserstein(a: torch.Tensor, b: torch.Tensor, projections: int = 128, seed: int = 0) -> float:
    """Mean 1-D Wasserstein-1 distance over random projections (equal sample counts); lower is better."""
    directions = torch.randn(a.shape[1], projections, generator=torch.Generator().manual_seed(seed))
    directions /= directions.norm(dim=0, keepdim=True)
    pa, _ = torch.sort(a @ directions, dim=0)
    pb, _ = torch.sort(b @ directions, dim=0)
    return (pa - pb).abs().mean().item()


@dataclass
class History:
    d_loss: list[float] = field(default_factory=list)
    g_loss: list[float] = field(default_factory=list)


def train(steps: int = 3000, batch: int = 128, negative_slope: float = 0.2, seed: int = 0,
          progress: bool = True) -> tuple[nn.Module, nn.Module, History]:
    """Standard non-saturating GAN training with Adam; returns (generator, discriminator, history)."""
    from tqdm.auto import trange

    torch.manual_seed(seed)
    data_rng = torch.Generator().manual_seed(seed + 1)
    generator, discriminator = make_generator(), make_discriminator(negative_slope)
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    ones, zeros = torch.ones(batch, 1), torch.zeros(batch, 1)
    history = History()
    for _ in trange(steps, desc="sine GAN", disable=not progress, leave=False):
        real = real_signals(batch, data_rng)
        fake = generator(torch.randn(batch, LATENT_SIZE))
        d_loss = bce(discriminator(real), ones) + bce(discriminator(fake.detach()), zeros)
        opt_d.zero_grad(set_to_none=True)
        d_loss.backward()
        opt_d.step()

        g_loss = bce(discriminator(fake), ones)
        opt_g.zero_grad(set_to_none=True)
        g_loss.backward()
        opt_g.step()
        history.d_loss.append(d_loss.item())
        history.g_loss.append(g_loss.item())
    return generator, discriminator, history


@torch.no_grad()
def sample(generator: nn.Module, count: int, seed: int = 123) -> torch.Tensor:
    noise = torch.randn(count, LATENT_SIZE, generator=torch.Generator().manual_seed(seed))
    return generator(noise)


def plot(real: torch.Tensor, fake: torch.Tensor, history: History, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_signals, ax_loss) = plt.subplots(1, 2, figsize=(11, 4))
    t = torch.linspace(0, 1, SIGNAL_LENGTH)
    for i in range(min(6, len(real))):
        ax_signals.plot(t, real[i], color="0.6", lw=1, label="real" if i == 0 else None)
        ax_signals.plot(t, fake[i], color=f"C{i}", lw=1.5, label="generated" if i == 0 else None)
    ax_signals.set(title="Real (grey) vs generated signals", xlabel="t")
    ax_signals.legend(loc="upper right")
    ax_loss.plot(history.d_loss, label="discriminator", lw=0.8)
    ax_loss.plot(history.g_loss, label="generator", lw=0.8)
    ax_loss.set(title="Losses", xlabel="step")
    ax_loss.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_demo(out, steps: int = 3000, negative_slope: float = 0.2, seed: int = 0, batch: int = 128,
             progress: bool = True) -> float:
    """Train, plot real vs generated signals and the losses to `out`; returns the sliced Wasserstein
    distance between 512 generated and 512 real signals."""
    from pathlib import Path

    generator, _, history = train(steps=steps, batch=batch, negative_slope=negative_slope, seed=seed,
                                  progress=progress)
    real = real_signals(512, torch.Generator().manual_seed(7))
    fake = sample(generator, 512)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    plot(real, fake, history, out)
    return sliced_wasserstein(real, fake)
