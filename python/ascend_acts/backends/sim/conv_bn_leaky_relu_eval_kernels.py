"""The eval kernel of the fused Conv2d + BatchNorm2d + LeakyReLU (op_kernel/ family "conv_bn_leaky_relu_eval":
the convolution on the cube, img2col by LoadData 3Dv2, with the BN-folded weights packed in CANN's FRACTAL_Z
order; bias and LeakyReLU on the vector unit; one MIX launch) on the emulator, and the eval ops built on it.

Grouped convolutions, layers the kernel has no tiling for (an output row of 16 channels must fit L0C, and a band
of input rows L1: e.g. a 1x1 convolution over rows wider than about 2000 positions) and the eval backward (needed
only to train through an eval-mode block) run the reference backend.
"""

from __future__ import annotations

import torch

from ...reference.conv_bn import output_shape
from .. import reference_conv_bn
from . import emulator

conv_bn_leaky_relu_eval_backward = reference_conv_bn.conv_bn_leaky_relu_eval_backward


def tiling(x_shape, weight_shape, stride, padding, dilation, element_size: int, negative_slope: float = 0.0,
           platform: str | None = None):
    """The op_host tiling (ascend_acts._sim.ConvBnLeakyReluEvalTiling); padding (top, bottom, left, right)."""
    return emulator.binding().conv_bn_leaky_relu_eval_tiling(
        list(x_shape), list(weight_shape), list(stride), list(padding), list(dilation), element_size,
        emulator.settings().platform if platform is None else platform, negative_slope)


def has_tiling(x_shape, weight_shape, stride, padding, dilation, element_size: int) -> bool:
    """Whether the kernel can run this layer (the op layer has checked the shapes: a refusal here is capacity)."""
    try:
        tiling(x_shape, weight_shape, stride, padding, dilation, element_size)
    except ValueError:
        return False
    return True


def pack_weight(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """W' (Cout, Cin, kh, kw) in the kernel's FRACTAL_Z layout (C1, kh, kw, M1, 16, C0), C0 = 32 bytes of `dtype`:
    element [c1][i][j][mi][r][c] = W'[mi*16 + r][c1*C0 + c][i][j], zero past Cout and Cin
    (op_kernel/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_tiling_data.h)."""
    c0 = 32 // torch.empty((), dtype=dtype).element_size()
    cout, cin, kh, kw = weight.shape
    m1, c1 = -(-cout // 16), -(-cin // c0)
    padded = torch.nn.functional.pad(weight.to(dtype), (0, 0, 0, 0, 0, c1 * c0 - cin, 0, m1 * 16 - cout))
    return padded.view(m1, 16, c1, c0, kh, kw).permute(2, 4, 5, 0, 1, 3).contiguous()


def eval_kernel(x, weight, bias, stride, padding, dilation, negative_slope: float) -> torch.Tensor:
    """leaky_relu(conv2d(x, weight) + bias) in one launch, weight and bias already BN-folded; groups = 1.
    `bias` is float32; x and weight share one dtype."""
    emulator.check_dtype(x)
    if weight.dtype != x.dtype:
        raise TypeError(f"weight must have the input's dtype {x.dtype}, got {weight.dtype}")
    if bias.dtype != torch.float32 or not bias.is_contiguous():
        raise TypeError(f"bias: the kernel takes a contiguous float32 bias, got {bias.dtype}")
    launch_tiling = tiling(x.shape, weight.shape, stride, padding, dilation, x.element_size(), negative_slope)
    y = torch.empty(output_shape(x.shape, weight.shape, stride, padding, dilation), dtype=x.dtype)
    emulator.launch("conv_bn_leaky_relu_eval", {"x": x, "weight": pack_weight(weight, x.dtype), "bias": bias, "y": y},
                    launch_tiling)
    return y


def conv_bn_leaky_relu_eval(input, weight, bias, stride, padding, dilation, groups, negative_slope):
    emulator.check_dtype(input)
    if groups != 1 or not has_tiling(input.shape, weight.shape, stride, padding, dilation, input.element_size()):
        return reference_conv_bn.conv_bn_leaky_relu_eval(input, weight, bias, stride, padding, dilation, groups,
                                                      negative_slope)
    shape = output_shape(input.shape, weight.shape, stride, padding, dilation)
    if 0 in shape:  # an empty batch: nothing to launch (the emulator, like the NPU, takes no empty grid)
        return torch.empty(shape, dtype=input.dtype)
    return eval_kernel(input.contiguous(), weight.detach().to(input.dtype).contiguous(),
                                   bias.detach().to(torch.float32).contiguous(), stride, padding, dilation,
                                   negative_slope)
