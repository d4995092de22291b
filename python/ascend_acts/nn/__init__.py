"""Modules: drop-in subclasses of torch.nn's LeakyReLU, RReLU and Sequential, the fused Conv+BN+LeakyReLU,
SyncBatchNorm (torch.nn.SyncBatchNorm's equivalent that also runs on the CPU under DDP) and StyleGAN2's
FusedLeakyReLU."""

from . import activation, conv_bn, sequential, sync_batch_norm
from .activation import *  # noqa: F403  (each module's __all__: a new module is added to its file only)
from .conv_bn import *  # noqa: F403
from .sequential import *  # noqa: F403
from .sync_batch_norm import *  # noqa: F403

__all__ = [*activation.__all__, *conv_bn.__all__, *sequential.__all__, *sync_batch_norm.__all__]
