"""The platform's transposed convolution on the CPU, run through channels_last where that is measured faster.

torch's oneDNN computes a float32 transposed convolution in channels_last and, for NCHW tensors, copies its result
back with a transposing copy that reads one value per cache line: for the upsampling ConvTranspose2d of a ResNet or
U-Net generator (k 3, stride 2, 128 -> 64 channels, 1 x 128 x 128 in) that copy is about half the call's time.
Here the weight goes in as channels_last (so oneDNN's output stays channels_last) and the result is brought to NCHW
by cpu_kernel/layout.cpp's tiled transpose. That took a quarter to two fifths less time for upsamplings (stride >= 2)
to planes of 128 x 128 and more, and gave torch's values bit for bit (tests/test_channels_last_conv.py; dilated and
grouped ones, and those from fewer than 6 channels, did not: oneDNN's summation order differs there). Smaller
planes, e.g. a DCGAN generator's (64 of 32 x 32), were as fast or slower that way, so they keep torch's path; so do
stride 1, dilation, groups, few channels, other CPUs (measured on x86-64 only), dtypes, devices, and any call
something records (see `applies`). The forward's convolution and the backward's recomputation of it take the same
route, so they agree.
"""

from __future__ import annotations

import math
import platform

import torch
import torch.nn.functional as F
from torch._C._functorch import is_functorch_wrapped_tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from ...numerics import compiled
from ...numerics.layout import convolution_output_shape

# output planes of at least this many values (128 x 128) take the channels_last route (see above)
MIN_PLANE = 128 * 128
# and inputs of at least this many channels: with 1-5, oneDNN's channels_last kernel gave other bits (6 and more
# matched; generators upsample 32 channels and more)
MIN_CHANNELS = 8
_MEASURED_CPU = platform.machine().lower() in ("x86_64", "amd64")


def applies(input, weight, bias, stride, padding, output_padding, groups, dilation) -> bool:
    """Whether conv_transpose2d below runs this call: an ungrouped, undilated upsampling of plain float32 CPU tensors
    of 8 channels or more to large planes, which nothing records. The transpose is opaque to autograd, autocast,
    tracers, compilers, functorch and Python modes (a traced graph would keep the empty output), so it runs only where
    none of them is active (conv2d's callers, an op's kernel or our backward, guarantee most of that already)."""
    tensors = (input, weight) if bias is None else (input, weight, bias)
    if not (_MEASURED_CPU and compiled.module() is not None and groups == 1
            and min(stride) >= 2 and tuple(dilation) == (1, 1)
            and all(type(t) is torch.Tensor and t.device.type == "cpu" and t.dtype == torch.float32
                    and not is_functorch_wrapped_tensor(t) for t in tensors)
            and input.dim() == 4 and input.numel() > 0 and input.shape[1] >= MIN_CHANNELS and _nothing_records()):
        return False
    output = convolution_output_shape(input.shape, weight.shape, stride, (padding[0],) * 2 + (padding[1],) * 2,
                                      dilation, groups, True, output_padding)
    return math.prod(output[2:]) >= MIN_PLANE


def _nothing_records() -> bool:
    """No autograd, autocast, compiler, tracer or Python mode (a default-device context is a torch function mode)
    sees this thread's torch calls."""
    autocast = (torch.is_autocast_enabled("cpu")
                and not torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.AutocastCPU))
    return not (torch.is_grad_enabled() or autocast or torch.compiler.is_compiling() or torch.jit.is_tracing()
                or _get_current_dispatch_mode_stack() or torch._C._len_torch_function_stack())


def conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation) -> torch.Tensor:
    """F.conv_transpose2d's result as a contiguous (NCHW) tensor, computed in channels_last."""
    z = F.conv_transpose2d(input, weight.contiguous(memory_format=torch.channels_last), bias, stride, padding,
                           output_padding, groups, dilation)
    if (z.dtype != torch.float32 or z.device.type != "cpu" or z.is_contiguous()
            or not z.is_contiguous(memory_format=torch.channels_last)):
        return z.contiguous()  # the layouts coincide (C or H * W of 1), or oneDNN chose another
    out = torch.empty_like(z, memory_format=torch.contiguous_format)
    n, c, h, w = z.shape
    compiled.module().transpose(z.data_ptr(), out.data_ptr(), n, h * w, c)
    return out
