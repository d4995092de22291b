"""LeakyReLU and RReLU modules: subclasses of the torch.nn ones (same attributes, repr, state,
pickling, isinstance) whose forward runs the ascend_acts ops; StyleGAN2's FusedLeakyReLU."""

from __future__ import annotations

import torch

from .. import functional as F

__all__ = ["FusedLeakyReLU", "LeakyReLU", "RReLU"]


class LeakyReLU(torch.nn.LeakyReLU):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)


class RReLU(torch.nn.RReLU):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)


class FusedLeakyReLU(torch.nn.Module):
    """StyleGAN2's bias + LeakyReLU * scale over dimension 1: rosinality's `op.FusedLeakyReLU` (same arguments,
    defaults, attributes and state_dict: a `bias` parameter of zeros(channel), or none with bias=False) and mmcv's
    `FusedBiasLeakyReLU(num_channels, negative_slope, scale)`.

    forward casts the bias to the input's dtype, as mmcv does, so a float32 module takes float16/bfloat16
    inputs (under torch.autocast, or a half input outside it); the bias gradient comes back to the float32
    parameter through that cast.
    """

    def __init__(self, channel: int, bias: bool = True, negative_slope: float = 0.2, scale: float = 2**0.5):
        super().__init__()
        if not isinstance(bias, bool):  # mmcv's FusedBiasLeakyReLU takes negative_slope second: not silently a bias
            raise TypeError(f"FusedLeakyReLU(): argument 'bias' must be a bool, got {type(bias).__name__} (mmcv's "
                            "FusedBiasLeakyReLU(num_channels, negative_slope, scale): pass them by keyword)")
        self.channel = channel
        self.bias = torch.nn.Parameter(torch.zeros(channel)) if bias else None
        self.negative_slope = negative_slope
        self.scale = scale

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        bias = self.bias
        if (bias is not None and isinstance(input, torch.Tensor) and input.is_floating_point()
                and bias.dtype != input.dtype):
            bias = bias.to(input.dtype)
        return F.fused_bias_leaky_relu(input, bias, self.negative_slope, self.scale)

    def extra_repr(self) -> str:
        return (f"{self.channel}, bias={self.bias is not None}, negative_slope={self.negative_slope}, "
                f"scale={self.scale}")
