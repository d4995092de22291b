"""Modules: drop-in subclasses of torch.nn's LeakyReLU, RReLU and Sequential, and the fused Conv+BN+LeakyReLU."""

from .activation import LeakyReLU, RReLU
from .conv_bn import ConvBNLeakyReLU2d
from .sequential import Sequential

__all__ = ["ConvBNLeakyReLU2d", "LeakyReLU", "RReLU", "Sequential"]
