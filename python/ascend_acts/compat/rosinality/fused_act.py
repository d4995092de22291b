"""rosinality's `op.fused_act`: StyleGAN2's fused bias + LeakyReLU, on ascend_acts' op."""

from ascend_acts.functional import fused_bias_leaky_relu as fused_leaky_relu
from ascend_acts.nn import FusedLeakyReLU

__all__ = ["FusedLeakyReLU", "fused_leaky_relu"]
