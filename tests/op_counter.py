"""Counts the ops a forward dispatches, to tell whether a Conv-BN-LeakyReLU run went through the fused op."""

from __future__ import annotations

import collections

from torch.utils._python_dispatch import TorchDispatchMode

FUSED_OPS = ("conv_bn_leaky_relu_train", "conv_bn_leaky_relu_eval")


class OpCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    @property
    def fused(self) -> int:
        """How many fused Conv-BN-LeakyReLU calls (training or eval) ran."""
        return sum(self.calls[name] for name in FUSED_OPS)
