"""ConvBNLeakyReLU2d: nn.Sequential(Conv2d, BatchNorm2d, LeakyReLU) as one fused module."""

from __future__ import annotations

import torch
from torch import nn

from .. import functional
from .fusion import conv_bn_leaky_relu_modules, fused_device, no_global_hooks, plain_conv_bn, readable_numbers
from .sync_batch_norm import SyncBatchNorm

__all__ = ["ConvBNLeakyReLU2d"]


class ConvBNLeakyReLU2d(nn.Module):
    """Behaves like nn.Sequential(conv, bn, nn.LeakyReLU(negative_slope)) in train and eval.

    The conv and BN are kept as submodules "0" and "1", so state_dicts of that Sequential load as
    they are (and ours load into it). The fused op runs when the conv and BN are plain (see nn/fusion.py);
    with a hook, spectral_norm or a parametrization on either, they run one after the other.
    `sync=True` makes the BN an ascend_acts.nn.SyncBatchNorm over `process_group` (None: the default group),
    torch.nn.SyncBatchNorm's equivalent that DistributedDataParallel accepts on the CPU too: training
    synchronises the batch statistics across the processes (docs/usage.md, "Multi-process training").
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=False, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, negative_slope=0.01,
                 sync=False, process_group=None):
        super().__init__()
        self.add_module("0", nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                                       bias))
        if sync:
            bn = SyncBatchNorm(out_channels, eps, momentum, affine, track_running_stats, process_group)
        elif process_group is not None:
            raise ValueError("ConvBNLeakyReLU2d(): 'process_group' needs sync=True")
        else:
            bn = nn.BatchNorm2d(out_channels, eps, momentum, affine, track_running_stats)
        self.add_module("1", bn)
        self.negative_slope = negative_slope

    @classmethod
    def from_modules(cls, conv: nn.Conv2d, bn: nn.BatchNorm2d, act: nn.LeakyReLU) -> "ConvBNLeakyReLU2d":
        """Fuse existing modules, keeping their Parameter and buffer objects (optimizers keep working)."""
        if type(conv) is not nn.Conv2d or conv.padding_mode != "zeros":
            raise TypeError("from_modules(): 'conv' must be an nn.Conv2d with padding_mode='zeros'")
        if type(bn) not in (nn.BatchNorm2d, nn.SyncBatchNorm, SyncBatchNorm) or bn.num_features != conv.out_channels:
            raise TypeError("from_modules(): 'bn' must be an nn.BatchNorm2d, nn.SyncBatchNorm or "
                            "ascend_acts.nn.SyncBatchNorm over the conv's output channels")
        if not isinstance(act, nn.LeakyReLU):
            raise TypeError("from_modules(): 'act' must be an nn.LeakyReLU")
        fused = cls.__new__(cls)
        nn.Module.__init__(fused)
        fused.add_module("0", conv)
        fused.add_module("1", bn)
        fused.negative_slope = act.negative_slope
        fused.training = bn.training
        return fused

    @property
    def conv(self) -> nn.Conv2d:
        return self._modules["0"]

    @property
    def bn(self) -> nn.BatchNorm2d | nn.SyncBatchNorm | SyncBatchNorm:
        return self._modules["1"]

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        conv, bn = self.conv, self.bn
        if plain_conv_bn(conv, bn) and fused_device(input) and no_global_hooks() and \
                readable_numbers(bn, self.negative_slope, input):
            return conv_bn_leaky_relu_modules(conv, bn, self.negative_slope, input)
        return functional.leaky_relu(bn(conv(input)), self.negative_slope)
