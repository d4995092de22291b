"""ascend-acts: LeakyReLU, RReLU, fused Conv+BN+LeakyReLU and StyleGAN2's fused bias + LeakyReLU (and NVlabs'
bias_act) for Ascend NPUs, with CPU backends."""

from . import nn, ops  # noqa: F401  (ops: registers the torch.library ops, NPU kernels included)
from .backends import available_backends, use_backend
from .bias_activation import bias_act
from .conversion import convert
from .functional import fused_bias_leaky_relu, leaky_relu, rrelu
from .ops.conv_bn_leaky_relu.function import conv_bn_leaky_relu

__version__ = "0.2.0"

__all__ = ["available_backends", "bias_act", "conv_bn_leaky_relu", "convert", "fused_bias_leaky_relu", "leaky_relu",
           "nn", "rrelu", "use_backend", "__version__"]
