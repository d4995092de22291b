"""Sequential: torch.nn.Sequential whose forward runs (pad ->) Conv2d, ConvTranspose2d -> BatchNorm2d, InstanceNorm2d,
GroupNorm and Conv1d/Linear -> BatchNorm1d (-> LeakyReLU or ReLU) runs of its children through the fused op where
that is exactly what the children would compute. A Conv2d -> BatchNorm2d followed by anything else (or by nothing)
fuses with no activation (slope 1: the identity), keeping the conv output for backward (what follows may change the
output in place).

`convert` gives a model's nn.Sequential containers this class in place (`__class__`, as torch's own
parametrize does for parametrized modules): the object, its children, their indices, state_dict keys,
hooks and Parameters stay as they were; only the forward differs, and only for runs of untouched plain
modules (nn/fusion.py decides at each call). Like ascend_acts.nn.LeakyReLU it keeps torch's class name, so
reprs and class-name checks (`weights_init`) see what they saw before.
"""

from __future__ import annotations

from contextlib import nullcontext

from torch import nn

from . import fusion

__all__ = ["Sequential"]


class Sequential(nn.Sequential):
    def forward(self, input):
        modules = list(self._modules.values())
        listener = fusion.listener
        i = 0
        while i < len(modules):
            decision = fusion.decide(modules, i, input)
            if listener is not None:
                listener.decided(self, i, decision)
            count = decision.length or 1
            with nullcontext() if listener is None else listener.running(self, i, count):
                if decision.length:
                    input = fusion.run_decided(modules, i, decision, input)
                else:
                    input = modules[i](input)
            i += count
        return input
