"""The "torch" backend: every op written with torch tensor ops only, so it runs on any device.

On the NPU it is the fallback (torch_npu's built-ins) until the AscendC op package and the torch_npu extension
are installed; on the CPU it is a third implementation the whole CPU op test suite runs against, next to the
NumPy reference and the emulator. Same results as the reference: bit-identical for the elementwise ops (RReLU
noise included), the fused ops with torch's convolution.
"""

from .activations import leaky_relu, leaky_relu_backward, rrelu, rrelu_backward  # noqa: F401
from .conv_bn import (  # noqa: F401
    conv_bn_leaky_relu_eval,
    conv_bn_leaky_relu_eval_backward,
    conv_bn_leaky_relu_train,
    conv_bn_leaky_relu_train_backward,
)
from .fused_bias import fused_bias_leaky_relu, fused_bias_leaky_relu_backward  # noqa: F401


def unavailable_reason() -> str | None:
    return None
