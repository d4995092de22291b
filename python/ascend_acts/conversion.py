"""`convert(model)`: run a model's LeakyReLU/RReLU modules and its Conv -> Norm (-> LeakyReLU/ReLU) runs
on the ascend_acts ops, changing nothing a user can observe but the kernels that run (and, for
torch.nn.SyncBatchNorm, the class, so that DistributedDataParallel accepts it on the CPU)."""

from __future__ import annotations

from torch import nn

from . import nn as acts_nn

# exact types: a user's own subclass may change behaviour, so it is left alone
_ACTIVATIONS = {nn.LeakyReLU: acts_nn.LeakyReLU, nn.RReLU: acts_nn.RReLU}
_CONTAINERS = {nn.Sequential: acts_nn.Sequential}
# not a subclass (DDP refuses torch's in a CPU module); same attributes and state, so swapped in place too
_SYNC_BATCH_NORMS = {nn.SyncBatchNorm: acts_nn.SyncBatchNorm}


def convert(model: nn.Module, fuse: bool = True) -> nn.Module:
    """Give every torch.nn.LeakyReLU / RReLU in `model` the ascend_acts subclass, and (with `fuse`) every
    torch.nn.Sequential ascend_acts.nn.Sequential, whose forward runs Conv2d / ConvTranspose2d -> BatchNorm2d and
    Conv1d / Linear -> BatchNorm1d (-> LeakyReLU / ReLU or no activation) runs of plain, hook-free children as one
    fused op (see nn/fusion.py; `ascend_acts.explain` tells which runs fuse and why the others do not). Returns
    `model` itself.

    Each module keeps its identity: only its `__class__` changes, to a subclass that adds no state and
    keeps the class name. So the module tree, child indices, state_dict keys (checkpoints load both ways,
    strict), Parameters (optimizers built before keep working), hooks and their handles, and what `apply`
    sees are unchanged; a module that is not an exact torch.nn.Sequential (a user's own nn.Module, a
    subclass of Sequential) keeps its class and forward, only the modules inside it are converted.

    Every exact torch.nn.SyncBatchNorm (in a fused run or not) becomes an ascend_acts.nn.SyncBatchNorm in place,
    keeping its process_group, Parameters, buffers and hooks: the same results, but it also runs on the CPU and
    DistributedDataParallel accepts it there. It is not a torch.nn.SyncBatchNorm subclass (DDP's CPU check is an
    isinstance test), so `isinstance(m, nn.SyncBatchNorm)` turns False. A model converted before
    `nn.SyncBatchNorm.convert_sync_batchnorm` holds torch's again: convert it once more (convert is idempotent).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"convert(): argument 'model' must be a torch.nn.Module, got {type(model).__name__}")
    swaps = {**_ACTIVATIONS, **_SYNC_BATCH_NORMS, **(_CONTAINERS if fuse else {})}
    for module in model.modules():
        subclass = swaps.get(type(module))
        if subclass is not None:
            module.__class__ = subclass
    return model
