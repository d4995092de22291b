"""The channel layout: per-channel vectors over dimension 1 (N, C, ...), as BatchNorm and a conv bias apply; a
convolution's output shape."""

from __future__ import annotations

import math


def channel_view(values, rank: int = 4):
    """A (C,) tensor or array shaped (1, C, 1, ...) to broadcast over dimension 1 of a rank-`rank` one (a view)."""
    return values.reshape(1, -1, *([1] * (rank - 2)))


def batch_channels_spatial(shape) -> tuple[int, int, int]:
    """N, C and the product of the remaining sizes of a shape of rank >= 2: how the kernels see an (N, C, ...)
    tensor."""
    return shape[0], shape[1], math.prod(shape[2:])


def convolution_output_shape(input_shape, weight_shape, stride, padding, dilation, groups=1, transposed=False,
                             output_padding=(0, 0)) -> list:
    """NCHW shape of the convolution's output (or of the transposed convolution's: weight (C_in, C_out/groups, kh,
    kw)); padding is (top, bottom, left, right)."""
    sizes = []
    for axis in range(2):
        pads, kernel_extent = padding[2 * axis] + padding[2 * axis + 1], dilation[axis] * (weight_shape[2 + axis] - 1)
        if transposed:
            sizes.append((input_shape[2 + axis] - 1) * stride[axis] - pads + kernel_extent + output_padding[axis] + 1)
        else:
            sizes.append((input_shape[2 + axis] + pads - kernel_extent - 1) // stride[axis] + 1)
    return [input_shape[0], weight_shape[1] * groups if transposed else weight_shape[0], *sizes]
