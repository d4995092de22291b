"""Sequential: torch.nn.Sequential whose forward runs Conv2d -> BatchNorm2d -> LeakyReLU runs of its
children through the fused op where that is exactly what the children would compute.

`convert` gives a model's nn.Sequential containers this class in place (`__class__`, as torch's own
parametrize does for parametrized modules): the object, its children, their indices, state_dict keys,
hooks and Parameters stay as they were; only the forward differs, and only for runs of untouched plain
modules (nn/fusion.py decides at each call). Like ascend_acts.nn.LeakyReLU it keeps torch's class name, so
reprs and class-name checks (`weights_init`) see what they saw before.
"""

from __future__ import annotations

from torch import nn

from .fusion import (
    conv_bn_leaky_relu_modules,
    fused_device,
    no_global_hooks,
    plain_conv_bn,
    plain_leaky_relu,
    readable_numbers,
)

__all__ = ["Sequential"]


class Sequential(nn.Sequential):
    def forward(self, input):
        modules = list(self._modules.values())
        hook_free = no_global_hooks()
        i = 0
        while i < len(modules):
            run = modules[i:i + 3]
            if hook_free and len(run) == 3 and _fusable(*run, input):
                input = conv_bn_leaky_relu_modules(run[0], run[1], run[2].negative_slope, input)
                i += 3
            else:
                input = modules[i](input)
                i += 1
        return input


def _fusable(conv, bn, act, input) -> bool:
    # a 3-D (unbatched) input runs the modules: torch's Conv2d takes it and its BatchNorm2d raises
    return (plain_conv_bn(conv, bn) and plain_leaky_relu(act) and fused_device(input) and input.dim() == 4
            and readable_numbers(bn, act.negative_slope, input))
