"""StyleGAN2's upfirdn2d (upsample, FIR filter, downsample) on torch's own ops: zero insertion by F.pad, padding
and cropping, a depthwise conv2d with the flipped kernel, downsampling as the conv's stride. On the NPU it runs
the platform's convolution; autograd differentiates it to any order."""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F


def _xy(value, name: str) -> tuple[int, int]:
    if isinstance(value, Iterable) and not isinstance(value, torch.Tensor):
        value = tuple(int(v) for v in value)
        if len(value) != 2:
            raise ValueError(f"upfirdn2d(): {name} must be an int or a pair (x, y), got {value!r}")
    else:
        value = (int(value), int(value))
    if min(value) < 1:
        raise ValueError(f"upfirdn2d(): {name} factors must be >= 1, got {value!r}")
    return value


def upfirdn2d(input: torch.Tensor, kernel: torch.Tensor, up=1, down=1, pad=(0, 0)) -> torch.Tensor:
    """rosinality's `op.upfirdn2d`: for input (N, C, H, W) and a 2-D FIR kernel (kh, kw), each channel

    1. upsampled by inserting `up - 1` zeros after every sample (H * up_y, W * up_x),
    2. padded with zeros, `pad` = (pad_x0, pad_x1, pad_y0, pad_y1) before/after along W and H, or (pad0, pad1)
       for both axes; a negative pad crops,
    3. convolved with `kernel` (a true convolution: cross-correlation with the kernel flipped in both axes),
       keeping only the fully overlapping outputs,
    4. downsampled by keeping every `down`-th sample from the first.

    `up` and `down` are ints or pairs (x, y). Output (N, C, (H * up_y + pad_y0 + pad_y1 - kh + down_y) // down_y,
    (W * up_x + pad_x0 + pad_x1 - kw + down_x) // down_x). The kernel is taken in the input's dtype and device.
    """
    up_x, up_y = _xy(up, "up")
    down_x, down_y = _xy(down, "down")
    pad = tuple(int(p) for p in pad)
    if len(pad) == 2:
        pad = (pad[0], pad[1], pad[0], pad[1])
    if len(pad) != 4:
        raise ValueError(f"upfirdn2d(): pad must be (pad0, pad1) or (pad_x0, pad_x1, pad_y0, pad_y1), got {pad!r}")
    pad_x0, pad_x1, pad_y0, pad_y1 = pad
    if input.ndim != 4:
        raise ValueError(f"upfirdn2d(): input must be (N, C, H, W), got shape {tuple(input.shape)}")
    if kernel.ndim != 2:
        raise ValueError(f"upfirdn2d(): kernel must be 2-D (kh, kw), got shape {tuple(kernel.shape)}")
    batch, channels, height, width = input.shape
    kernel_h, kernel_w = kernel.shape

    out = input
    if up_x > 1 or up_y > 1:  # each sample followed by up - 1 zeros, along each axis
        out = out.reshape(batch, channels, height, 1, width, 1)
        out = F.pad(out, [0, up_x - 1, 0, 0, 0, up_y - 1])
        out = out.reshape(batch, channels, height * up_y, width * up_x)
    if max(pad) > 0:
        out = F.pad(out, [max(pad_x0, 0), max(pad_x1, 0), max(pad_y0, 0), max(pad_y1, 0)])
    if min(pad) < 0:
        out = out[:, :, max(-pad_y0, 0):out.shape[2] - max(-pad_y1, 0),
                  max(-pad_x0, 0):out.shape[3] - max(-pad_x1, 0)]
    weight = kernel.to(device=input.device, dtype=input.dtype).flip([0, 1])
    weight = weight.view(1, 1, kernel_h, kernel_w).expand(channels, 1, kernel_h, kernel_w).contiguous()
    return F.conv2d(out, weight, stride=(down_y, down_x), groups=channels)
