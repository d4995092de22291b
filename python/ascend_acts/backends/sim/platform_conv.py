"""The platform's convolution next to our kernels: torch's (oneDNN on the CPU), as torch_npu's is on the NPU.

Computed in float32 and rounded to the input dtype once, as an NPU convolution returns it. Padding is
(top, bottom, left, right); an asymmetric one pads the input explicitly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _symmetric(padding) -> tuple[int, int] | None:
    top, bottom, left, right = padding
    return (top, left) if top == bottom and left == right else None


def conv2d(input, weight, bias, stride, padding, dilation, groups) -> torch.Tensor:
    """conv2d(input, weight) + bias in float32, in the input's dtype."""
    f = torch.float32
    x, w = input.to(f), weight.to(f)
    b = None if bias is None else bias.to(f)
    same = _symmetric(padding)
    if same is None:
        top, bottom, left, right = padding
        x, same = F.pad(x, (left, right, top, bottom)), (0, 0)
    return F.conv2d(x, w, b, tuple(stride), same, tuple(dilation), groups).to(input.dtype)


def conv2d_backward(grad_output, input, weight, stride, padding, dilation, groups):
    """Gradients of conv2d's input, weight and bias from float32 `grad_output`, in input's/weight's dtypes."""
    f = torch.float32
    x, w, g = input.to(f), weight.to(f), grad_output.to(f)
    same = _symmetric(padding)
    if same is None:
        top, bottom, left, right = padding
        x, same = F.pad(x, (left, right, top, bottom)), (0, 0)
    grad_x, grad_w, grad_b = torch.ops.aten.convolution_backward(
        g, x, w, [w.shape[0]], list(stride), list(same), list(dilation), False, [0, 0], groups, [True, True, True])
    if _symmetric(padding) is None:
        top, _, left, _ = padding
        grad_x = grad_x[:, :, top:top + input.shape[2], left:left + input.shape[3]]
    return grad_x.to(input.dtype), grad_w.to(weight.dtype), grad_b.to(weight.dtype)
