"""The platform's convolution next to our kernels (torch_ops.conv_bn's, as torch_npu's is on the NPU), computed in
float32 and rounded to the input dtype once, as an NPU convolution returns it."""

from __future__ import annotations

import torch

from ..torch_ops import conv_bn as platform


def conv2d(input, weight, bias, stride, padding, dilation, groups) -> torch.Tensor:
    """conv2d(input, weight) + bias in float32, in the input's dtype."""
    f = torch.float32
    b = None if bias is None else bias.to(f)
    return platform.conv2d(input.to(f), weight.to(f), b, stride, padding, dilation, groups).to(input.dtype)


def conv2d_backward(grad_output, input, weight, stride, padding, dilation, groups):
    """Gradients of conv2d's input, weight and bias from float32 `grad_output`, in input's/weight's dtypes."""
    f = torch.float32
    grad_x, grad_w, grad_b = platform.conv2d_backward(grad_output.to(f), input.to(f), weight.to(f), stride, padding,
                                                      dilation, groups)
    return grad_x.to(input.dtype), grad_w.to(weight.dtype), grad_b.to(weight.dtype)
