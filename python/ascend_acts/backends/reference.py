"""The default CPU backend: the NumPy reference kernels."""

from ..reference.activations import leaky_relu, leaky_relu_backward, rrelu, rrelu_backward  # noqa: F401


def unavailable_reason() -> str | None:
    return None
