"""Modules: drop-in subclasses of torch.nn's LeakyReLU, RReLU and Sequential, the fused Conv+BN+LeakyReLU, and
StyleGAN2's FusedLeakyReLU."""

from .activation import FusedLeakyReLU, LeakyReLU, RReLU
from .conv_bn import ConvBNLeakyReLU2d
from .sequential import Sequential

__all__ = ["ConvBNLeakyReLU2d", "FusedLeakyReLU", "LeakyReLU", "RReLU", "Sequential"]
