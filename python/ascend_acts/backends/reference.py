"""The default CPU backend: the NumPy reference kernels."""

from ..reference.activations import leaky_relu, leaky_relu_backward, rrelu, rrelu_backward  # noqa: F401
from .reference_conv_bn import (  # noqa: F401
    conv_bias_leaky_relu, conv_bias_leaky_relu_backward, conv_bn_leaky_relu_train, conv_bn_leaky_relu_train_backward)


def unavailable_reason() -> str | None:
    return None
