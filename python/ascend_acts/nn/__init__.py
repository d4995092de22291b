"""Modules: drop-in replacements for torch.nn activations and the fused Conv+BN+LeakyReLU."""

from .activation import LeakyReLU, RReLU
from .conv_bn import ConvBNLeakyReLU2d

__all__ = ["ConvBNLeakyReLU2d", "LeakyReLU", "RReLU"]
