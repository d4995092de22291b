"""When a Conv2d -> BatchNorm2d (-> LeakyReLU, ReLU or nothing) run of modules may execute as the fused op, and
running it.

Decided at every call from the modules as they are then, so that whatever a user does to a module after `convert` (a
hook, spectral_norm, a parametrization, a new padding_mode, eval() on the BN alone) is seen: only exact nn.Conv2d /
nn.BatchNorm2d (or a synchronised BN: ascend_acts.nn.SyncBatchNorm or nn.SyncBatchNorm, sync_batch_norm.py) /
LeakyReLU modules with no hooks of any kind (their own or the global module hooks), no instance-level forward and
zero padding fuse; anything else runs module by module, which is torch's behaviour by definition. The fused call
reproduces nn.BatchNorm2d.forward's bookkeeping (momentum=None, num_batches_tracked, track_running_stats,
affine=False, eval with or without running statistics).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.modules import module as _module_globals

from ..ops._library import values_unknown
from ..ops.conv_bn_leaky_relu.function import conv_bn_activation, conv_bn_leaky_relu_tensor_momentum
from ..sync_batch_norm import sync_conv_bn_leaky_relu
from .activation import LeakyReLU
from .sync_batch_norm import RECOMPUTATION_STOPPED, SyncBatchNorm

_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
_GLOBAL_HOOK_DICTS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                      "_global_backward_pre_hooks")
_ACTIVATIONS = (nn.LeakyReLU, LeakyReLU)  # exact types: a user's subclass may change the forward
# both run the synchronised op (sync_batch_norm.py); torch's is accepted for a model converted before
# convert_sync_batchnorm put it in (DDP refuses it on the CPU until a second `convert` swaps in ours)
_SYNC_BATCH_NORMS = (SyncBatchNorm, nn.SyncBatchNorm)
_BATCH_NORMS = (nn.BatchNorm2d, *_SYNC_BATCH_NORMS)


def _untouched(module: nn.Module) -> bool:
    """No hooks on the module and no forward assigned to the instance: its forward is its class's."""
    return not any(getattr(module, name) for name in _HOOK_DICTS) and "forward" not in module.__dict__


def no_global_hooks() -> bool:
    return not any(getattr(_module_globals, name) for name in _GLOBAL_HOOK_DICTS)


def plain_conv_bn(conv: nn.Module, bn: nn.Module) -> bool:
    """`bn(conv(x))` is exactly what conv_bn_leaky_relu computes before its activation."""
    return (type(conv) is nn.Conv2d and type(bn) in _BATCH_NORMS and conv.padding_mode == "zeros"
            and bn.num_features == conv.out_channels and (bn.running_mean is None) == (bn.running_var is None)
            and _untouched(conv) and _untouched(bn))


def plain_leaky_relu(act: nn.Module) -> bool:
    return type(act) in _ACTIVATIONS and _untouched(act)


def plain_relu(act: nn.Module) -> bool:
    """An exact nn.ReLU (in place or not: the fused op's output is a new tensor that nothing else sees)."""
    return type(act) is nn.ReLU and _untouched(act)


IDENTITY_SLOPE = 1.0  # no activation: LeakyReLU with slope 1 is z * 1 = z exactly, and invertible (InPlace-ABN)


def activation_of(act: nn.Module | None, bn: nn.Module) -> tuple[float, bool] | None:
    """(negative_slope, relu) of the fused op that computes `act` after `bn`, or None if it cannot: an untouched
    LeakyReLU or ReLU (a synchronised BN has no ReLU mode: its ReLU runs as a module after the fused run)."""
    if act is not None and plain_leaky_relu(act):
        return act.negative_slope, False
    if act is not None and plain_relu(act) and type(bn) not in _SYNC_BATCH_NORMS:
        return 0.0, True
    return None


def readable_numbers(bn: nn.Module, negative_slope, input: torch.Tensor) -> bool:
    """bn.eps, bn.momentum and the slope may be tensors (torch's functionals read them as numbers): the fused op
    takes their values, which a graph or fake tensors cannot read; there the modules run, as torch's do."""
    tensors = [v for v in (bn.eps, bn.momentum, negative_slope) if isinstance(v, torch.Tensor)]
    if any(t.dim() != 0 or t.requires_grad for t in tensors):  # what torch refuses for a number: its modules raise it
        return False
    return not tensors or not values_unknown(input)


def _number(value):
    """A tensor attribute's value, as torch's argument parser reads a tensor given for a float."""
    return value.item() if isinstance(value, torch.Tensor) else value


def fused_device(input) -> bool:
    """Devices with kernels for the fused op (CPU backends, the NPU); others (CUDA, meta) run the modules."""
    return isinstance(input, torch.Tensor) and input.device.type in ("cpu", torch._C._get_privateuse1_backend_name())


def conv_bn_leaky_relu_modules(conv: nn.Conv2d, bn: nn.BatchNorm2d, negative_slope: float,
                               input: torch.Tensor, relu: bool = False) -> torch.Tensor:
    """leaky_relu(bn(conv(input)), negative_slope) (relu: torch's relu) through the fused op, with nn.BatchNorm2d.forward's
    bookkeeping. num_batches_tracked is counted before the op runs, as torch counts it before F.batch_norm:
    a torch.utils.checkpoint recomputation stops inside the op (after its running-statistics update) and
    counts the batch again, as torch's does. A call that fails otherwise (a bad argument, caught before the
    op writes anything) takes the count back: it changes nothing."""
    counts = bn.training and bn.track_running_stats and bn.num_batches_tracked is not None
    if counts:
        bn.num_batches_tracked.add_(1)
    momentum, eps, negative_slope = _number(bn.momentum), _number(bn.eps), _number(negative_slope)
    factor = 0.0 if momentum is None else momentum
    statistics = not bn.training or bn.track_running_stats
    if type(bn) in _SYNC_BATCH_NORMS:
        assert not relu, "a synchronised BN has no ReLU mode (activation_of)"
        fused, options = sync_conv_bn_leaky_relu, {"process_group": bn.process_group}
    else:
        fused, options = conv_bn_activation, {"relu": relu}
    if counts and momentum is None:
        if torch.compiler.is_compiling() and statistics and bn.running_mean is not None:
            # float() of a buffer is data-dependent (a graph break, as in torch's BatchNorm2d): a tensor factor
            factor = 1.0 / bn.num_batches_tracked.to(torch.float64)
            if fused is conv_bn_activation:
                fused = conv_bn_leaky_relu_tensor_momentum
        else:
            factor = 1.0 / float(bn.num_batches_tracked)
    try:
        return fused(input, conv.weight, conv.bias, bn.running_mean if statistics else None,
                     bn.running_var if statistics else None, bn.weight, bn.bias, bn.training, factor,
                     eps, negative_slope, conv.stride, conv.padding, conv.dilation, conv.groups, **options)
    except Exception as error:
        if counts and not isinstance(error, RECOMPUTATION_STOPPED):
            bn.num_batches_tracked.sub_(1)
        raise
