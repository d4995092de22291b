"""ascend-acts: LeakyReLU, RReLU, fused Conv+BN+LeakyReLU and StyleGAN2's fused bias + LeakyReLU (and NVlabs'
bias_act) for Ascend NPUs, with CPU backends."""

from . import functional, nn, ops  # noqa: F401  (ops: registers the torch.library ops, NPU kernels included)
from .backends import available_backends, use_backend
from .bias_activation import bias_act
from .conversion import convert
from .explanation import explain
from .functional import *  # noqa: F403  (the public functions, functional.__all__)

__version__ = "0.2.0"

__all__ = ["available_backends", "bias_act", "convert", "explain", *functional.__all__, "nn", "use_backend",
           "__version__"]
