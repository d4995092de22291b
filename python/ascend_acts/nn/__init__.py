"""Modules: drop-in subclasses of torch.nn's LeakyReLU, RReLU and Sequential, the fused Conv+BN+LeakyReLU,
SyncBatchNorm (torch.nn.SyncBatchNorm's equivalent that also runs on the CPU under DDP) and StyleGAN2's
FusedLeakyReLU."""

from .activation import FusedLeakyReLU, LeakyReLU, RReLU
from .conv_bn import ConvBNLeakyReLU2d
from .sequential import Sequential
from .sync_batch_norm import SyncBatchNorm

__all__ = ["ConvBNLeakyReLU2d", "FusedLeakyReLU", "LeakyReLU", "RReLU", "Sequential", "SyncBatchNorm"]
