"""ConvBNLeakyReLU2d: nn.Sequential(Conv2d, BatchNorm2d, LeakyReLU) as one fused module."""

from __future__ import annotations

import torch
from torch import nn

from ..conv_bn import conv_bn_leaky_relu, fold_batch_norm


class ConvBNLeakyReLU2d(nn.Module):
    """Behaves like nn.Sequential(conv, bn, nn.LeakyReLU(negative_slope)) in train and eval.

    The conv and BN are kept as submodules "0" and "1", so state_dicts of that Sequential load as
    they are (and ours load into it). In eval under torch.no_grad the BN-folded weight and bias are
    cached and refreshed when any parameter or buffer changes (tensor version counters).
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=False, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, negative_slope=0.01):
        super().__init__()
        self.add_module("0", nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                                       bias))
        self.add_module("1", nn.BatchNorm2d(out_channels, eps, momentum, affine, track_running_stats))
        self.negative_slope = negative_slope
        self._folded = None

    @classmethod
    def from_modules(cls, conv: nn.Conv2d, bn: nn.BatchNorm2d, act: nn.LeakyReLU) -> "ConvBNLeakyReLU2d":
        """Fuse existing modules, keeping their Parameter and buffer objects (optimizers keep working)."""
        if type(conv) is not nn.Conv2d or conv.padding_mode != "zeros":
            raise TypeError("from_modules(): 'conv' must be an nn.Conv2d with padding_mode='zeros'")
        if type(bn) is not nn.BatchNorm2d or bn.num_features != conv.out_channels:
            raise TypeError("from_modules(): 'bn' must be an nn.BatchNorm2d over the conv's output channels")
        if not isinstance(act, nn.LeakyReLU):
            raise TypeError("from_modules(): 'act' must be an nn.LeakyReLU")
        fused = cls.__new__(cls)
        nn.Module.__init__(fused)
        fused.add_module("0", conv)
        fused.add_module("1", bn)
        fused.negative_slope = act.negative_slope
        fused._folded = None
        fused.train(conv.training)
        return fused

    @property
    def conv(self) -> nn.Conv2d:
        return self._modules["0"]

    @property
    def bn(self) -> nn.BatchNorm2d:
        return self._modules["1"]

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"

    def _sources(self):
        conv, bn = self.conv, self.bn
        return (conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.weight, bn.bias)

    def _cached_fold(self):
        key = tuple((id(t), t._version) if t is not None else None for t in self._sources())
        if self._folded is None or self._folded[0] != key:
            self._folded = (key, fold_batch_norm(*self._sources(), self.bn.eps))
        return self._folded[1]

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        conv, bn = self.conv, self.bn
        factor = 0.0 if bn.momentum is None else bn.momentum
        if self.training and bn.track_running_stats and bn.num_batches_tracked is not None:
            bn.num_batches_tracked.add_(1)
            factor = 1.0 / float(bn.num_batches_tracked) if bn.momentum is None else bn.momentum
        batch_stats = self.training or bn.running_mean is None
        update = not self.training or bn.track_running_stats
        running_mean = bn.running_mean if update else None
        running_var = bn.running_var if update else None
        if not batch_stats and not torch.is_grad_enabled() and not torch.compiler.is_compiling():
            weight, bias = self._cached_fold()
            return torch.ops.ascend_acts.conv_bias_leaky_relu(
                input, weight, bias, list(conv.stride), _padding(conv, weight), list(conv.dilation), conv.groups,
                float(self.negative_slope))
        return conv_bn_leaky_relu(input, conv.weight, conv.bias, running_mean, running_var, bn.weight, bn.bias,
                                  batch_stats, factor, bn.eps, self.negative_slope, conv.stride, conv.padding,
                                  conv.dilation, conv.groups)


def _padding(conv: nn.Conv2d, weight: torch.Tensor) -> list[int]:
    from ..conv_bn import resolve_padding

    return resolve_padding(conv.padding, weight, list(conv.stride), list(conv.dilation))
