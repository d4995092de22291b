"""The models, data and per-rank scenarios of test_sync_batch_norm.py (run in gloo workers by distributed_run).

One model, two Conv2d -> BatchNorm2d -> LeakyReLU blocks: the first with momentum=None (cumulative running
averages) and slope 0.2 (keeps only its output, InPlace-ABN), the second strided without conv bias and with
slope 0.0 (not invertible: keeps the conv output). Every variant holds the same Parameters and buffers in the
same order, so results compare by position.
"""

from __future__ import annotations

import contextlib
from collections import Counter

import torch
import torch.distributed as dist
from torch import nn

import ascend_acts

IN_CHANNELS = 2
LEARNING_RATE = 0.5
COLLECTIVES = ("all_gather", "all_gather_into_tensor", "all_reduce")


def plain_model(dtype: torch.dtype, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(IN_CHANNELS, 4, 3, padding=1), nn.BatchNorm2d(4, momentum=None), nn.LeakyReLU(0.2),
        nn.Conv2d(4, 3, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(3), nn.LeakyReLU(0.0))
    with torch.no_grad():
        for bn in (model[1], model[4]):
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    return model.to(dtype)


def model_variant(order: str, dtype: torch.dtype) -> nn.Module:
    """`order`: plain (torch modules), convert_first (ascend_acts.convert, then convert_sync_batchnorm),
    sync_first (the reverse), direct (ascend_acts.nn.ConvBNLeakyReLU2d(..., sync=True))."""
    model = plain_model(dtype)
    if order == "plain":
        return model
    if order == "convert_first":
        return nn.SyncBatchNorm.convert_sync_batchnorm(ascend_acts.convert(model))
    if order == "sync_first":
        return ascend_acts.convert(nn.SyncBatchNorm.convert_sync_batchnorm(model))
    if order == "direct":
        direct = nn.Sequential(
            ascend_acts.nn.ConvBNLeakyReLU2d(IN_CHANNELS, 4, 3, padding=1, bias=True, momentum=None,
                                             negative_slope=0.2, sync=True),
            ascend_acts.nn.ConvBNLeakyReLU2d(4, 3, 3, 2, 1, negative_slope=0.0, sync=True)).to(dtype)
        with torch.no_grad():
            for mine, theirs in zip([*direct.parameters(), *direct.buffers()], [*model.parameters(), *model.buffers()]):
                mine.copy_(theirs)
        return direct
    raise ValueError(f"unknown order {order!r}")


def data(sizes: list[int], dtype: torch.dtype, spatial: int, seed: int = 1):
    """The whole batch and a gradient for the model's output over it."""
    generator = torch.Generator().manual_seed(seed)
    total = sum(sizes)
    out_spatial = (spatial - 1) // 2 + 1
    x = torch.randn(total, IN_CHANNELS, spatial, spatial, generator=generator, dtype=torch.float64) * 2 + 0.5
    grad = torch.randn(total, 3, out_spatial, out_spatial, generator=generator, dtype=torch.float64)
    return x.to(dtype), grad.to(dtype)


def rank_slice(t: torch.Tensor, sizes: list[int], rank: int) -> torch.Tensor:
    start = sum(sizes[:rank])
    return t[start:start + sizes[rank]]


@contextlib.contextmanager
def counted_collectives():
    """Counts the torch.distributed collectives called (name -> calls; name + '_numel' -> elements sent)."""
    counts = Counter()
    originals = {name: getattr(dist, name) for name in COLLECTIVES}

    def counting(name):
        def collective(*args, **kwargs):
            counts[name] += 1
            sent = args[1] if name.startswith("all_gather") else args[0]
            counts[name + "_numel"] += sent.numel()
            return originals[name](*args, **kwargs)
        return collective

    for name in COLLECTIVES:
        setattr(dist, name, counting(name))
    try:
        yield counts
    finally:
        for name, function in originals.items():
            setattr(dist, name, function)


def train(model: nn.Module, x: torch.Tensor, grad: torch.Tensor, steps: int, reduce_grads, forward=None):
    """`steps` SGD steps of the loss sum(model(x) * grad); returns the last output and the collectives per step."""
    forward = forward or model
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    x = x.clone().requires_grad_()
    per_step = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        x.grad = None
        with counted_collectives() as counts:
            out = forward(x)
            out.backward(grad)
        per_step.append(dict(counts))
        reduce_grads(model)
        optimizer.step()
    return out.detach(), x.grad, per_step


def all_reduce_grads(model: nn.Module) -> None:
    for p in model.parameters():
        dist.all_reduce(p.grad)


def state(model: nn.Module) -> dict:
    return {"params": [p.detach().clone() for p in model.parameters()],
            "grads": [p.grad.clone() for p in model.parameters()],
            "buffers": [b.clone() for b in model.buffers()]}


# --- scenarios (rank, world_size, **kwargs) -> dict ------------------------------------------------
def steps(rank, world_size, order, sizes, dtype, spatial=5, backend="reference", steps=2, ddp=False,
          compile_mode=None):
    """Training steps (optionally under DDP / torch.compile), then an eval forward."""
    ascend_acts.use_backend(backend)
    model = model_variant(order, dtype)
    x, grad = (rank_slice(t, sizes, rank) for t in data(sizes, dtype, spatial))
    forward = model
    if ddp:
        forward = nn.parallel.DistributedDataParallel(model)
        grad = grad * world_size  # DDP averages the gradients; the oracle's loss is the sum over all ranks
    if compile_mode is not None:
        forward = torch.compile(forward, fullgraph=compile_mode == "fullgraph")
    out, grad_input, collectives = train(model, x, grad, steps, (lambda m: None) if ddp else all_reduce_grads,
                                         forward)
    model.eval()
    with counted_collectives() as eval_counts, torch.no_grad():
        eval_out = forward(x)
    return {"out": out, "grad_input": grad_input, "collectives": collectives, "eval_out": eval_out,
            "eval_collectives": dict(eval_counts), **state(model)}


def global_count_one(rank, world_size, sizes):
    """One value per channel over all ranks: BatchNorm2d's ValueError on every rank, nothing changed."""
    model = model_variant("convert_first", torch.float64)
    before = [b.clone() for b in model.buffers()]
    x, _ = data(sizes, torch.float64, spatial=1)
    try:
        model(rank_slice(x, sizes, rank))
    except ValueError as error:
        message = str(error)
    else:
        message = None
    unchanged = all(torch.equal(a, b) for a, b in zip(before, model.buffers()))
    return {"message": message, "unchanged": unchanged}


def saved_tensors(rank, world_size, negative_slope, dtype=torch.float64):
    """What autograd keeps for one synchronised block: (numel, is the output, is the input) per saved tensor."""
    block = ascend_acts.nn.ConvBNLeakyReLU2d(IN_CHANNELS, 4, 3, padding=1, negative_slope=negative_slope,
                                             sync=True).to(dtype)
    x = torch.randn(3, IN_CHANNELS, 6, 6, dtype=dtype, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        out = block(x)
    out.sum().backward()  # the backward's collective, so that the ranks stay in step
    return {"saved": [(t.numel(), t.data_ptr() == out.data_ptr(), t.data_ptr() == x.data_ptr()) for t in saved],
            "out_numel": out.numel(), "input_numel": x.numel()}
