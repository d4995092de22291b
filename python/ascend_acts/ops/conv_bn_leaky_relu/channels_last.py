"""The platform's transposed convolution on the CPU, run through channels_last where that is measured faster.

torch's oneDNN computes a float32 transposed convolution in channels_last and, for NCHW tensors, copies its result
back with a transposing copy that reads one value per cache line: for the upsampling ConvTranspose2d of a ResNet or
U-Net generator (k 3, stride 2, 128 -> 64 channels, 1 x 128 x 128 in) that copy is about half the call's time.
Here the weight goes in as channels_last (so oneDNN's output stays channels_last) and the result is brought to NCHW
by cpu_kernel/layout.cpp's tiled transpose. That was about half the time for upsamplings (stride >= 2) to planes of
128 x 128 and more, and gave torch's values bit for bit (tests/test_channels_last_conv.py; dilated ones did not:
oneDNN's summation order differs there). Smaller planes, e.g. a DCGAN generator's (64 of 32 x 32), were as fast
or slower that way, so they keep torch's path; so do stride 1, dilation, other CPUs (measured on x86-64 only),
dtypes, devices, and calls that autograd records (the transpose is not differentiable). The forward's convolution
and the backward's recomputation of it take the same route, so they agree.
"""

from __future__ import annotations

import platform

import torch
import torch.nn.functional as F

from ...numerics import compiled

# output planes of at least this many values (128 x 128) take the channels_last route (see above)
MIN_PLANE = 128 * 128
_MEASURED_CPU = platform.machine().lower() in ("x86_64", "amd64")


def _output_plane(input, weight, stride, padding, output_padding, dilation) -> int:
    plane = 1
    for d in range(2):
        plane *= ((input.shape[2 + d] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (weight.shape[2 + d] - 1)
                  + output_padding[d] + 1)
    return plane


def applies(input, weight, bias, stride, padding, output_padding, dilation) -> bool:
    """Whether conv_transpose2d below runs this call (an undilated upsampling of float32 CPU tensors to large planes,
    without autograd)."""
    tensors = (input, weight) if bias is None else (input, weight, bias)
    return (_MEASURED_CPU and compiled.module() is not None
            and all(type(t) is torch.Tensor and t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)
            and input.dim() == 4 and input.numel() > 0 and min(stride) >= 2 and tuple(dilation) == (1, 1)
            and not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))
            and _output_plane(input, weight, stride, padding, output_padding, dilation) >= MIN_PLANE)


def conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation) -> torch.Tensor:
    """F.conv_transpose2d's result as a contiguous (NCHW) tensor, computed in channels_last."""
    z = F.conv_transpose2d(input, weight.contiguous(memory_format=torch.channels_last), bias, stride, padding,
                           output_padding, groups, dilation)
    if z.is_contiguous() or not z.is_contiguous(memory_format=torch.channels_last):
        return z.contiguous()  # the layouts coincide (C or H * W of 1), or oneDNN chose another
    out = torch.empty(z.shape, dtype=z.dtype)
    n, c, h, w = z.shape
    compiled.module().transpose(z.data_ptr(), out.data_ptr(), n, h * w, c)
    return out
