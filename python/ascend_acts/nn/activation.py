"""LeakyReLU and RReLU modules: subclasses of the torch.nn ones (same attributes, repr, state,
pickling, isinstance) whose forward runs the ascend_acts ops."""

from __future__ import annotations

import torch

from .. import functional as F


class LeakyReLU(torch.nn.LeakyReLU):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)


class RReLU(torch.nn.RReLU):
    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)
