"""Sequential: torch.nn.Sequential whose forward runs Conv2d -> BatchNorm2d (-> LeakyReLU or ReLU) runs of its
children through the fused op where that is exactly what the children would compute. A Conv2d -> BatchNorm2d
followed by anything else (or by nothing) fuses with no activation (slope 1: the identity).

`convert` gives a model's nn.Sequential containers this class in place (`__class__`, as torch's own
parametrize does for parametrized modules): the object, its children, their indices, state_dict keys,
hooks and Parameters stay as they were; only the forward differs, and only for runs of untouched plain
modules (nn/fusion.py decides at each call). Like ascend_acts.nn.LeakyReLU it keeps torch's class name, so
reprs and class-name checks (`weights_init`) see what they saw before.
"""

from __future__ import annotations

from torch import nn

from .fusion import (
    IDENTITY_SLOPE,
    activation_of,
    conv_bn_leaky_relu_modules,
    fused_device,
    no_global_hooks,
    plain_conv_bn,
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
            if hook_free and len(run) >= 2 and _fusable_conv_bn(run[0], run[1], input):
                activation = activation_of(run[2] if len(run) == 3 else None, run[1])
                slope, relu = activation or (IDENTITY_SLOPE, False)
                if readable_numbers(run[1], slope, input):
                    input = conv_bn_leaky_relu_modules(run[0], run[1], slope, input, relu)
                    i += 2 if activation is None else 3
                    continue
            input = modules[i](input)
            i += 1
        return input


def _fusable_conv_bn(conv, bn, input) -> bool:
    # a 3-D (unbatched) input runs the modules: torch's Conv2d takes it and its BatchNorm2d raises
    return plain_conv_bn(conv, bn) and fused_device(input) and input.dim() == 4
