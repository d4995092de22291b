"""The models, data and per-rank scenarios of test_sync_batch_norm.py (run in gloo workers by distributed_run).

"blocks": two Conv2d -> BatchNorm2d -> LeakyReLU blocks, the first with momentum=None (cumulative running
averages) and slope 0.2 (keeps only its output, InPlace-ABN), the second strided without conv bias and with
slope 0.0 (not invertible: keeps the conv output). "discriminator": a small DCGAN discriminator (conv +
LeakyReLU, two fused blocks, a BN followed by ReLU and a BatchNorm1d after a Linear, which stay standalone
SyncBatchNorms) for DistributedDataParallel training. "generator": a DCGAN-generator-like stack, ConvTranspose2d ->
BatchNorm2d(momentum=None) -> ReLU, ConvTranspose2d (output_padding, bias) -> BatchNorm2d -> LeakyReLU, Conv2d ->
BatchNorm2d -> ReLU, run synchronised through sync_batch_norm.sync_conv_bn_leaky_relu (order "sync_op"). Every
variant holds the same Parameters and buffers in the same order, so results compare by position.
"""

from __future__ import annotations

import contextlib
from collections import Counter

import torch
import torch.distributed as dist
from torch import nn

import ascend_acts
from ascend_acts.sync_batch_norm import sync_conv_bn_leaky_relu

IN_CHANNELS = 2
DISCRIMINATOR_SPATIAL = 8
LEARNING_RATE = 0.5
COLLECTIVES = ("all_gather", "all_gather_into_tensor", "all_reduce")


def plain_model(dtype: torch.dtype, first_momentum: float | None = None, seed: int = 0,
                architecture: str = "blocks") -> nn.Sequential:
    torch.manual_seed(seed)
    if architecture == "blocks":
        model = nn.Sequential(
            nn.Conv2d(IN_CHANNELS, 4, 3, padding=1), nn.BatchNorm2d(4, momentum=first_momentum), nn.LeakyReLU(0.2),
            nn.Conv2d(4, 3, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(3), nn.LeakyReLU(0.0))
    elif architecture == "discriminator":  # no conv/linear bias before a BN: its gradient would be rounding noise
        model = nn.Sequential(
            nn.Conv2d(IN_CHANNELS, 4, 3, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(4, 6, 3, 1, 1, bias=False), nn.BatchNorm2d(6, momentum=first_momentum), nn.LeakyReLU(0.2),
            nn.Conv2d(6, 4, 3, 2, 1, bias=False), nn.BatchNorm2d(4), nn.LeakyReLU(0.2),
            nn.Conv2d(4, 4, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
            nn.Flatten(), nn.Linear(4 * (DISCRIMINATOR_SPATIAL // 4) ** 2, 5, bias=False), nn.BatchNorm1d(5),
            nn.ReLU(), nn.Linear(5, 1))
    elif architecture == "generator":
        model = nn.Sequential(
            nn.ConvTranspose2d(IN_CHANNELS, 4, 4, 2, 1, bias=False), nn.BatchNorm2d(4, momentum=first_momentum),
            nn.ReLU(),
            nn.ConvTranspose2d(4, 3, 3, 2, 1, output_padding=1), nn.BatchNorm2d(3), nn.LeakyReLU(0.2),
            nn.Conv2d(3, 3, 3, 1, 1, bias=False), nn.BatchNorm2d(3), nn.ReLU(inplace=True))
    else:
        raise ValueError(f"unknown architecture {architecture!r}")
    with torch.no_grad():
        for bn in (m for m in model if isinstance(m, nn.modules.batchnorm._BatchNorm)):
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    return model.to(dtype)


def model_variant(order: str, dtype: torch.dtype, first_momentum: float | None = None, process_group=None,
                  architecture: str = "blocks") -> nn.Module:
    """`order`: plain (torch modules), convert_first (ascend_acts.convert, then convert_sync_batchnorm: torch's
    SyncBatchNorm in our blocks), convert_twice (convert_first, then convert again: ours), sync_first (the
    reverse: ours), direct (ascend_acts.nn.ConvBNLeakyReLU2d(..., sync=True))."""
    model = plain_model(dtype, first_momentum, architecture=architecture)
    if order == "plain":
        return model
    if order == "convert_first":
        return nn.SyncBatchNorm.convert_sync_batchnorm(ascend_acts.convert(model), process_group)
    if order == "convert_twice":
        return ascend_acts.convert(nn.SyncBatchNorm.convert_sync_batchnorm(ascend_acts.convert(model), process_group))
    if order == "sync_first":
        return ascend_acts.convert(nn.SyncBatchNorm.convert_sync_batchnorm(model, process_group))
    if order == "direct":
        direct = nn.Sequential(
            ascend_acts.nn.ConvBNLeakyReLU2d(IN_CHANNELS, 4, 3, padding=1, bias=True, momentum=first_momentum,
                                             negative_slope=0.2, sync=True),
            ascend_acts.nn.ConvBNLeakyReLU2d(4, 3, 3, 2, 1, negative_slope=0.0, sync=True)).to(dtype)
        with torch.no_grad():
            for mine, theirs in zip([*direct.parameters(), *direct.buffers()], [*model.parameters(), *model.buffers()]):
                mine.copy_(theirs)
        return direct
    if order == "sync_op":
        synced = ascend_acts.convert(nn.SyncBatchNorm.convert_sync_batchnorm(model, process_group))
        return nn.Sequential(*(SyncOpBlock(*synced[i:i + 3]) for i in range(0, len(synced), 3)))
    raise ValueError(f"unknown order {order!r}")


class SyncOpBlock(nn.Module):
    """conv -> ascend_acts.nn.SyncBatchNorm -> LeakyReLU or ReLU as one sync_conv_bn_leaky_relu call (relu, transposed
    and output_padding passed through), with nn.BatchNorm2d.forward's bookkeeping (num_batches_tracked, momentum=None):
    what nn/fusion.py runs for such a block once its rules let ReLU and ConvTranspose2d fuse with a synchronised BN."""

    def __init__(self, conv: nn.Module, bn: nn.Module, act: nn.Module) -> None:
        super().__init__()
        self.conv, self.bn, self.act = conv, bn, act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv, bn = self.conv, self.bn
        momentum = bn.momentum if bn.momentum is not None else 0.0
        if bn.training:
            bn.num_batches_tracked.add_(1)
            if bn.momentum is None:  # cumulative moving average
                momentum = 1.0 / float(bn.num_batches_tracked)
        transposed = type(conv) is nn.ConvTranspose2d
        relu = type(self.act) is nn.ReLU
        return sync_conv_bn_leaky_relu(x, conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.weight, bn.bias,
                                       bn.training, momentum, bn.eps, 0.0 if relu else self.act.negative_slope,
                                       conv.stride, conv.padding, conv.dilation, conv.groups, bn.process_group,
                                       relu=relu, transposed=transposed,
                                       output_padding=conv.output_padding if transposed else 0)


def data(sizes: list[int], dtype: torch.dtype, spatial: int, seed: int = 1, architecture: str = "blocks"):
    """The whole batch and a gradient for the model's output over it."""
    generator = torch.Generator().manual_seed(seed)
    total = sum(sizes)
    if architecture == "discriminator":
        spatial, out_sample = DISCRIMINATOR_SPATIAL, (1,)
    elif architecture == "generator":  # x2 (kernel 4, stride 2, padding 1), x2 (output_padding 1), same
        out_sample = (3, 4 * spatial, 4 * spatial)
    else:
        out_spatial = (spatial - 1) // 2 + 1
        out_sample = (3, out_spatial, out_spatial)
    x = torch.randn(total, IN_CHANNELS, spatial, spatial, generator=generator, dtype=torch.float64) * 2 + 0.5
    grad = torch.randn(total, *out_sample, generator=generator, dtype=torch.float64)
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


def train(model: nn.Module, x: torch.Tensor, grad: torch.Tensor, steps: int, reduce_grads, forward=None,
          count=True, optimizer="sgd"):
    """`steps` SGD (or Adam) steps of the loss sum(model(x) * grad); returns the last output and the collectives
    per step."""
    forward = forward or model
    if optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=0.05, betas=(0.5, 0.999))
    x = x.clone().requires_grad_()
    per_step = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        x.grad = None
        with counted_collectives() if count else contextlib.nullcontext({}) as counts:
            out = forward(x)
            out.backward(grad)
        per_step.append(dict(counts))
        reduce_grads(model)
        optimizer.step()
    return out.detach(), x.grad, per_step


def ddp_refuses_cpu(rank, world_size):
    """torch's own DDP check on a CPU module holding torch's SyncBatchNorm: a model converted before
    convert_sync_batchnorm, not converted again."""
    try:
        nn.parallel.DistributedDataParallel(model_variant("convert_first", torch.float64))
    except ValueError as error:
        return {"message": str(error)}
    return {"message": None}


def all_reduce_grads(model: nn.Module, group=None) -> None:
    for p in model.parameters():
        dist.all_reduce(p.grad, group=group)


def state(model: nn.Module) -> dict:
    return {"params": [p.detach().clone() for p in model.parameters()],
            "grads": [p.grad.clone() for p in model.parameters()],
            "buffers": [b.clone() for b in model.buffers()]}


# --- scenarios (rank, world_size, **kwargs) -> dict ------------------------------------------------
def steps(rank, world_size, order, sizes, dtype, spatial=5, backend="reference", steps=2, ddp=False,
          compile_backend=None, first_momentum=None, subgroups=None, architecture="blocks", optimizer="sgd"):
    """Training steps (optionally under DistributedDataParallel / torch.compile(fullgraph=True) / in the process
    group of `subgroups` holding this rank), then an eval forward."""
    ascend_acts.use_backend(backend)
    group = None
    if subgroups is not None:  # every rank creates every group, in the same order
        groups = [dist.new_group(ranks) for ranks in subgroups]
        group = next(g for g, ranks in zip(groups, subgroups) if rank in ranks)
    model = model_variant(order, dtype, first_momentum, group, architecture)
    x, grad = (rank_slice(t, sizes, rank) for t in data(sizes, dtype, spatial, architecture=architecture))
    forward = model
    if ddp:
        forward = nn.parallel.DistributedDataParallel(model)
        grad = grad * world_size  # DDP averages the gradients; the oracle's loss is the sum over all ranks
    if compile_backend is not None:
        forward = torch.compile(forward, fullgraph=True, backend=compile_backend)
    reduce = (lambda m: None) if ddp else (lambda m: all_reduce_grads(m, group))
    counting = compile_backend is None  # a compiled graph calls the collectives it traced, not these functions
    out, grad_input, collectives = train(model, x, grad, steps, reduce, forward, counting, optimizer)
    model.eval()
    with counted_collectives() if counting else contextlib.nullcontext({}) as eval_counts, torch.no_grad():
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


def saved_tensors_relu(rank, world_size, transposed, dtype=torch.float64):
    """saved_tensors for one synchronised block with torch's ReLU (through sync_conv_bn_leaky_relu): a Conv2d or a
    ConvTranspose2d (output_padding 1)."""
    conv = (nn.ConvTranspose2d(IN_CHANNELS, 4, 3, 2, 1, output_padding=1) if transposed
            else nn.Conv2d(IN_CHANNELS, 4, 3, padding=1)).to(dtype)
    bn = nn.BatchNorm2d(4).to(dtype)
    x = torch.randn(3, IN_CHANNELS, 6, 6, dtype=dtype, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        out = sync_conv_bn_leaky_relu(x, conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.weight, bn.bias,
                                      True, 0.1, 1e-5, 0.0, conv.stride, conv.padding, conv.dilation, conv.groups,
                                      relu=True, transposed=transposed,
                                      output_padding=conv.output_padding if transposed else 0)
    out.sum().backward()  # the backward's collective, so that the ranks stay in step
    return {"saved": [(t.numel(), t.data_ptr() == out.data_ptr(), t.data_ptr() == x.data_ptr()) for t in saved],
            "out_numel": out.numel(), "input_numel": x.numel()}
