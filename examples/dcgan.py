"""DCGAN on scikit-learn's bundled 8x8 handwritten digits (no download), upscaled to 16x16.

The discriminator is built from ascend_acts: LeakyReLU(0.2) after the first convolution and a fused
Conv2d + BatchNorm2d + LeakyReLU block after the second. The generator is written with the usual torch layers and
converted (ascend_acts.convert): its ConvTranspose2d -> BatchNorm2d -> ReLU runs are fused ops.
Writes image grids, loss curves and checkpoints into --out.

    python examples/dcgan.py                              # CPU, NumPy reference kernels, ~4 minutes
    python examples/dcgan.py --backend sim --steps 50      # CPU, the AscendC kernels in the emulator
    python examples/dcgan.py --device npu                  # Ascend NPU (torch_npu + custom op package)
    python examples/dcgan.py --nproc 2                     # 2 processes (gloo on 127.0.0.1), synchronised BN
    torchrun --nproc-per-node 2 examples/dcgan.py --device npu   # one NPU per process, HCCL

Several processes (--nproc N spawns them; or torchrun) split each batch of --batch images between them;
the discriminator's fused block then synchronises its BatchNorm statistics over all of them
(ConvBNLeakyReLU2d(..., sync=True): an ascend_acts.nn.SyncBatchNorm, which DistributedDataParallel accepts on
the CPU too), and both models are wrapped in DistributedDataParallel, which averages the gradients, so every
process holds the same models. The generator's BatchNorms stay per-process (as in a plain DDP DCGAN). Rank 0
writes the outputs.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import ascend_acts

IMAGE_SIZE = 16
LATENT_SIZE = 32
SLOPE = 0.2


def load_digits_tensor() -> torch.Tensor:
    """All 1797 digits as (N, 1, 16, 16) floats in [-1, 1] (the generator ends in tanh)."""
    from sklearn.datasets import load_digits

    images = torch.tensor(load_digits().images, dtype=torch.float32).unsqueeze(1) / 16.0
    images = F.interpolate(images, size=IMAGE_SIZE, mode="bilinear", align_corners=False)
    return images.clamp(0, 1) * 2 - 1


def make_generator() -> nn.Module:
    """latent (N, 32, 1, 1) -> 4x4 -> 8x8 -> 16x16 image; converted, so each ConvTranspose2d -> BatchNorm2d -> ReLU
    runs as one fused op."""
    return ascend_acts.convert(nn.Sequential(
        nn.ConvTranspose2d(LATENT_SIZE, 128, 4, 1, 0, bias=False), nn.BatchNorm2d(128), nn.ReLU(True),
        nn.ConvTranspose2d(128, 64, 4, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(True),
        nn.ConvTranspose2d(64, 1, 4, 2, 1), nn.Tanh(),
    ))


def make_discriminator(sync: bool = False) -> nn.Module:
    """16x16 image -> 8x8 -> 4x4 -> one logit. No BatchNorm on the first layer, as in DCGAN. `sync`: the
    block's BatchNorm is an ascend_acts.nn.SyncBatchNorm (statistics over all processes)."""
    return nn.Sequential(
        nn.Conv2d(1, 64, 4, 2, 1), ascend_acts.nn.LeakyReLU(SLOPE),
        ascend_acts.nn.ConvBNLeakyReLU2d(64, 128, 4, 2, 1, negative_slope=SLOPE, sync=sync),
        nn.Conv2d(128, 1, 4, 1, 0), nn.Flatten(),
    )


def init_weights(module: nn.Module) -> None:
    """DCGAN's initialisation: N(0, 0.02) convolutions, N(1, 0.02) BatchNorm scales."""
    if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(module.weight, 0.0, 0.02)
    elif isinstance(module, (nn.BatchNorm2d, nn.SyncBatchNorm, ascend_acts.nn.SyncBatchNorm)):
        nn.init.normal_(module.weight, 1.0, 0.02)
        nn.init.zeros_(module.bias)


def pick_device(name: str, backend: str, rank: int = 0) -> torch.device:
    if name == "npu":
        try:
            import torch_npu  # noqa: F401  (registers the "npu" device)
        except ImportError as exc:
            raise SystemExit(f"--device npu needs torch_npu and CANN (see docs/npu.md): {exc}") from exc
        torch.npu.set_device(rank)
        return torch.device("npu", rank)
    ascend_acts.use_backend(backend)
    return torch.device("cpu")


def save_grid(images: torch.Tensor, path: Path, columns: int = 8) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = -(-len(images) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(columns * 0.9, rows * 0.9))
    for ax, image in zip(axes.flat, images.cpu()):
        ax.imshow(image[0], cmap="gray_r", vmin=-1, vmax=1)
    for ax in axes.flat:
        ax.axis("off")
    fig.tight_layout(pad=0.2)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def save_losses(d_losses: list[float], g_losses: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(d_losses, lw=0.7, label="discriminator")
    ax.plot(g_losses, lw=0.7, label="generator")
    ax.set(title="DCGAN losses", xlabel="step", ylabel="BCE")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def train(args) -> None:
    from tqdm.auto import tqdm

    rank, world_size = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    torch.manual_seed(args.seed)  # the same initial models in every process
    device = pick_device(args.device, args.backend, int(os.environ.get("LOCAL_RANK", rank)))
    data = load_digits_tensor().to(device)
    generator, discriminator = make_generator().to(device), make_discriminator(world_size > 1).to(device)
    generator.apply(init_weights)
    discriminator.apply(init_weights)
    # training runs the DDP wrappers (gradients averaged in backward); sampling and saving the modules themselves
    train_g, train_d = generator, discriminator
    if world_size > 1:
        train_g, train_d = nn.parallel.DistributedDataParallel(generator), nn.parallel.DistributedDataParallel(
            discriminator)
    order_generator = torch.Generator().manual_seed(args.seed)  # the same batches in every process
    torch.manual_seed(args.seed + rank)  # each process its own noise
    opt_g = torch.optim.Adam(generator.parameters(), lr=args.lr, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=args.lr, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    fixed_noise = torch.randn(64, LATENT_SIZE, 1, 1, device=device)
    steps_per_epoch = len(data) // args.batch
    total_steps = args.steps or args.epochs * steps_per_epoch
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
    d_losses, g_losses = [], []
    start = time.perf_counter()
    progress = tqdm(range(total_steps), desc=f"DCGAN ({args.device}/{args.backend})",
                    disable=args.quiet or rank != 0)
    for step in progress:
        if step % steps_per_epoch == 0:
            order = torch.randperm(len(data), generator=order_generator).to(device)
        batch_index = order[(step % steps_per_epoch) * args.batch:][: args.batch]
        real = data[batch_index[rank::world_size]]  # this process's share of the batch
        fake = train_g(torch.randn(len(real), LATENT_SIZE, 1, 1, device=device))
        ones = torch.ones(len(real), 1, device=device)
        zeros = torch.zeros(len(real), 1, device=device)

        d_loss = bce(train_d(real), ones) + bce(train_d(fake.detach()), zeros)
        opt_d.zero_grad(set_to_none=True)
        d_loss.backward()
        opt_d.step()

        g_loss = bce(train_d(fake), ones)
        opt_g.zero_grad(set_to_none=True)
        g_loss.backward()
        opt_g.step()

        d_losses.append(d_loss.item())
        g_losses.append(g_loss.item())
        progress.set_postfix(d=f"{d_losses[-1]:.3f}", g=f"{g_losses[-1]:.3f}")
        if rank == 0 and ((step + 1) % args.sample_every == 0 or step + 1 == total_steps):
            generator.eval()
            with torch.no_grad():
                save_grid(generator(fixed_noise), args.out / f"samples_step{step + 1:05d}.png")
            generator.train()
    if rank != 0:
        return
    save_grid(generator.eval()(fixed_noise).detach(), args.out / "samples_final.png")
    save_grid(data[:64], args.out / "real.png")
    save_losses(d_losses, g_losses, args.out / "losses.png")
    torch.save({"generator": generator.state_dict(), "discriminator": discriminator.state_dict(),
                "opt_g": opt_g.state_dict(), "opt_d": opt_d.state_dict(), "steps": total_steps,
                "args": vars(args)}, args.out / "checkpoint.pt")
    print(f"{total_steps} steps in {time.perf_counter() - start:.1f} s on {world_size} process(es); "
          f"outputs in {args.out.resolve()}")


def distributed_worker(rank: int, args) -> None:
    """One of --nproc processes: gloo on the CPU, HCCL on the NPU, rendezvous on 127.0.0.1."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("hccl" if args.device == "npu" else "gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                            rank=rank, world_size=args.nproc)
    try:
        train(args)
    finally:
        dist.destroy_process_group()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "npu"], default="cpu")
    parser.add_argument("--backend", choices=["reference", "sim", "torch"], default="reference",
                        help="CPU kernels: NumPy reference or the AscendC kernels in the emulator")
    parser.add_argument("--epochs", type=int, default=30, help="passes over the 1797 digits")
    parser.add_argument("--steps", type=int, default=0, help="train this many steps instead of --epochs")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sample-every", type=int, default=200, help="write an image grid every N steps")
    parser.add_argument("--out", type=Path, default=Path("outputs/dcgan"))
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 steps")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--nproc", type=int, default=1,
                        help="processes (gloo on the CPU, HCCL with --device npu: one NPU each); each takes "
                             "--batch / nproc images of every batch")
    parser.add_argument("--port", type=int, default=29517, help="rendezvous port on 127.0.0.1 for --nproc")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps = 3
    if args.nproc < 1 or args.batch < args.nproc:
        parser.error("--nproc must be at least 1 and at most --batch")
    if "WORLD_SIZE" in os.environ:  # started by torchrun: one process of its group
        dist.init_process_group("hccl" if args.device == "npu" else "gloo")
        try:
            train(args)
        finally:
            dist.destroy_process_group()
    elif args.nproc > 1:
        torch.multiprocessing.spawn(distributed_worker, args=(args,), nprocs=args.nproc)
    else:
        train(args)


if __name__ == "__main__":
    main()
