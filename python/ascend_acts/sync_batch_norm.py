"""Synchronised BatchNorm inside the fused Conv2d or ConvTranspose2d + BatchNorm2d + LeakyReLU or ReLU block
(InPlace-ABN-Sync).

`sync_conv_bn_leaky_relu` is `conv_bn_activation` (conv_bn_leaky_relu, relu=True for torch's ReLU, transposed=True
with output_padding for conv_transpose2d) whose training-mode batch statistics are those of the batch of every
process of a torch.distributed process group, as torch.nn.SyncBatchNorm computes them, and whose autograd keeps
only the block's output where `conv_bn.output_determines_batch_norm` allows (InPlace-ABN; ReLU is not invertible:
the conv output is kept, as the unsynchronised op keeps it). Blocks whose BatchNorm is an nn.SyncBatchNorm
(nn/fusion.py) run through it.

Per layer and training step, two collectives of O(C) elements, as torch's SyncBatchNorm:
- forward: all_gather of each process's (count, mean, M2) per channel (2C + 1 numbers); every process
  merges them (Chan et al.'s pairwise update: no cancellation, uneven and empty batches weigh by count);
- backward: all_reduce (sum) of the two per-channel gradient sums, sum(dz) and sum(dz * x_hat).
An empty batch takes part in both with count 0 (as torch's). The parameter gradients returned are the
process's own (DistributedDataParallel sums/averages them, as for torch's SyncBatchNorm).

What runs where: the convolution and the BatchNorm statistics and affine are torch ops (our AscendC
BatchNorm kernels compute statistics and normalisation in one launch, with no place for the collective
between them); the LeakyReLU and its backward are our ops (ascend_acts::leaky_relu, _backward: NumPy
reference, AscendC kernels on the emulator or the NPU), the ReLU and its backward torch's.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.autograd.function import once_differentiable

from . import ops as _ops  # noqa: F401  (registers torch.ops.ascend_acts)
from .numerics.dtypes import compute_dtype
from .numerics.layout import channel_view
from .ops._validation import check_bool
from .ops.conv_bn_leaky_relu.function import conv_bn_activation, conv_bn_leaky_relu_tensor_momentum
from .ops.conv_bn_leaky_relu.semantics import output_determines_batch_norm
from .ops.conv_bn_leaky_relu.torch_ops import conv2d as platform_conv2d
from .ops.conv_bn_leaky_relu.validation import FN, check_arguments

ops = torch.ops.ascend_acts
F = torch.nn.functional


def synchronising_group(training: bool, process_group=None):
    """The process group to synchronise over, as torch's SyncBatchNorm.forward decides: only in training,
    with torch.distributed initialised and more than one process in the group (None: the default group);
    otherwise None (no collective)."""
    if not training or not dist.is_available() or not dist.is_initialized():
        return None
    group = process_group if process_group else dist.group.WORLD
    return group if dist.get_world_size(group) > 1 else None


def sync_conv_bn_leaky_relu(input, weight, bias=None, running_mean=None, running_var=None, bn_weight=None,
                            bn_bias=None, training=False, momentum=0.1, eps=1e-5, negative_slope=0.01, stride=1,
                            padding=0, dilation=1, groups=1, process_group=None, *, relu=False, transposed=False,
                            output_padding=0, keep_output=True):
    """conv_bn_activation (the same arguments: `relu` for torch's ReLU, `transposed` and `output_padding` for
    conv_transpose2d, `keep_output`) with the batch statistics of all processes of `process_group` (None: the
    default group) in training, as torch.nn.SyncBatchNorm. Eval, an uninitialised torch.distributed or a group of
    one process: exactly conv_bn_activation, no collective. Every process of the group must call it (the
    same layers in the same order), whatever its batch size, including 0.

    Every argument is checked before anything is computed, communicated or written (the batch size check
    of BatchNorm, "more than 1 value per channel", is made on the count over all processes)."""
    relu = check_bool(FN, "relu", relu)
    group = synchronising_group(training, process_group)
    tensor_momentum = isinstance(momentum, torch.Tensor)  # nn/fusion.py's momentum=None under torch.compile
    if group is None:
        fused = conv_bn_leaky_relu_tensor_momentum if tensor_momentum else conv_bn_activation
        return fused(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, training, momentum, eps,
                     negative_slope, stride, padding, dilation, groups, relu=relu, transposed=transposed,
                     output_padding=output_padding, keep_output=keep_output)
    # every check but the local batch size one, which the eval-mode validation leaves out
    stand_in = None if running_mean is not None else _per_output_channel(weight, groups, transposed)
    args = check_arguments(input, weight, bias, running_mean if stand_in is None else stand_in,
                           running_var if stand_in is None else stand_in, bn_weight, bn_bias, False,
                           0.0 if tensor_momentum else momentum, eps, negative_slope, stride, padding, dilation,
                           groups, transposed=transposed, output_padding=output_padding)
    if not args.eps > 0:
        raise ValueError(f"{FN}(): argument 'eps' must be positive during training, got {eps}")
    conv_out = platform_conv2d(input, weight, bias, *args.geometry)
    c_out = args.output_shape[1]
    gamma = bn_weight if bn_weight is not None else weight.new_ones(c_out)
    beta = bn_bias if bn_bias is not None else weight.new_zeros(c_out)
    save_output = keep_output and not relu and output_determines_batch_norm(gamma, beta, args.negative_slope,
                                                                              conv_out.dtype)
    return _SyncBatchNormLeakyReLU.apply(conv_out, gamma, beta, running_mean, running_var,
                                         momentum if tensor_momentum else args.momentum, args.eps,
                                         args.negative_slope, relu, group, save_output)


def _per_output_channel(weight, groups, transposed):
    """Zeros over the convolution's output channels (conv2d's weight is (C_out, ...), conv_transpose2d's
    (C_in, C_out / groups, ...)): stand-in running statistics for the eval-mode checks (None for a weight that is
    not a tensor: the checks say so)."""
    if not isinstance(weight, torch.Tensor):
        return None
    if transposed and weight.dim() > 1 and isinstance(groups, int):
        return weight.new_zeros(weight.shape[1] * groups)
    return weight.new_zeros(weight.shape[0] if weight.dim() > 0 else 0)


def sync_batch_norm(input, running_mean, running_var, weight, bias, momentum, eps, process_group):
    """torch.nn.SyncBatchNorm's synchronised training forward for `input` of two or more dimensions
    (N, C, ...): batch statistics over every process of `process_group` (a group, not None: see
    synchronising_group), running statistics (when given) updated with `momentum` (a number). Differentiable
    in input, weight and bias; the same collectives as the fused block. Checked before anything is
    communicated or written."""
    _check_batch_norm_arguments(input, running_mean, running_var, weight, bias)
    channels = input.shape[1]
    gamma = weight if weight is not None else input.new_ones(channels)
    beta = bias if bias is not None else input.new_zeros(channels)
    return _SyncBatchNormLeakyReLU.apply(input, gamma, beta, running_mean, running_var, float(momentum), float(eps),
                                         None, False, process_group, False)


def _check_batch_norm_arguments(input, running_mean, running_var, weight, bias) -> None:
    """F.batch_norm's CPU checks (its error types), made before the collective."""
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"sync_batch_norm(): argument 'input' must be a Tensor, got {type(input).__name__}")
    if not input.is_floating_point():
        raise NotImplementedError(f"sync_batch_norm(): argument 'input' must be a floating-point tensor, got "
                                  f"{input.dtype}")
    if input.dim() < 2:
        raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")
    if input.shape[1] == 0:
        raise ValueError("SyncBatchNorm number of input channels should be non-zero")
    reduced = input.dtype in (torch.float16, torch.bfloat16)
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is None:
            continue
        if t.shape != (input.shape[1],):
            raise RuntimeError(f"sync_batch_norm(): '{name}' must have shape ({input.shape[1]},) (the input's "
                               f"channels), got {tuple(t.shape)}")
        if t.dtype != input.dtype and not (reduced and t.dtype == torch.float32):
            raise RuntimeError(f"sync_batch_norm(): '{name}' must have the input's dtype {input.dtype} (or float32 "
                               f"for a half or bfloat16 input), got {t.dtype}")
        if t.device != input.device:
            raise RuntimeError(f"sync_batch_norm(): '{name}' must be on the input's device {input.device}, got "
                               f"{t.device}")


def _reduced_dims(t: torch.Tensor) -> tuple[int, ...]:
    """Every dimension but the channels' (1)."""
    return (0, *range(2, t.dim()))


def _gather_moments(local: torch.Tensor, group) -> torch.Tensor:
    """(world size, 2C + 1): every process's (count, mean, M2)."""
    world = dist.get_world_size(group)
    if dist.get_backend(group) == "gloo":  # gloo has no all_gather_into_tensor
        parts = [torch.empty_like(local) for _ in range(world)]
        dist.all_gather(parts, local, group)
        return torch.stack(parts)
    gathered = local.new_empty(world * local.numel())
    dist.all_gather_into_tensor(gathered, local, group)
    return gathered.reshape(world, -1)


def merge_moments(gathered: torch.Tensor):
    """Global (count, mean, M2) per channel from rows of (count, mean, M2): Chan et al.'s merge,
    M2 = sum(M2_i + n_i (mean_i - mean)^2), which adds non-negative terms only. Rows of count 0 add nothing."""
    channels = (gathered.shape[1] - 1) // 2
    counts, means, m2s = gathered[:, :1], gathered[:, 1:1 + channels], gathered[:, 1 + channels:]
    total = counts.sum()
    mean = (counts * means).sum(0) / total.clamp(min=1)
    m2 = (m2s + counts * (means - mean) ** 2).sum(0)
    return total, mean, m2


def _affine(centred: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (centred * channel_view(scale, centred.dim()) + channel_view(shift, centred.dim())).to(dtype)


def _check_more_than_one_value(total: torch.Tensor) -> None:
    """torch's BatchNorm2d raises this for the whole batch; every process sees the same total, so all raise
    (before anything is written). A compiled graph asserts it on the device instead, with a RuntimeError."""
    if torch.compiler.is_compiling():
        torch._assert_async(total != 1, "Expected more than 1 value per channel when training")
    elif int(total) == 1:
        raise ValueError("Expected more than 1 value per channel when training, got input size 1 over all processes")


class _SyncBatchNormLeakyReLU(torch.autograd.Function):
    """leaky_relu(batch_norm(conv_out)) (relu: torch's relu) with batch statistics over the process group;
    negative_slope None: batch_norm(conv_out) alone (no activation, the input kept for backward)."""

    @staticmethod
    def forward(ctx, conv_out, gamma, beta, running_mean, running_var, momentum, eps, negative_slope, relu, group,
                save_output):
        c = compute_dtype(conv_out.dtype)
        y = conv_out.to(c)
        count = conv_out.numel() // conv_out.shape[1]
        if count:
            variance, local_mean = torch.var_mean(y, _reduced_dims(y), correction=0)
            local = torch.cat([y.new_full((1,), count), local_mean, variance * count])
        else:  # an empty batch still takes part in the collective, weighing nothing
            local = y.new_zeros(2 * conv_out.shape[1] + 1)
        total, mean, m2 = merge_moments(_gather_moments(local, group))
        _check_more_than_one_value(total)
        counted = total.clamp(min=1)  # all batches empty: an empty output, the running statistics kept
        invstd = torch.rsqrt(m2 / counted + eps)
        if running_mean is not None:  # torch's update: momentum, unbiased variance, global count
            factor = momentum * (total > 0).to(mean.dtype)
            with torch.no_grad():
                running_mean.mul_(1 - factor.to(running_mean.dtype)).add_((mean * factor).to(running_mean.dtype))
                unbiased = m2 / (counted - 1).clamp(min=1)
                running_var.mul_(1 - factor.to(running_var.dtype)).add_((unbiased * factor).to(running_var.dtype))
        z = _affine(y - channel_view(mean, y.dim()), gamma.to(c) * invstd, beta.to(c), conv_out.dtype)
        out = F.relu(z) if relu else z if negative_slope is None else ops.leaky_relu(z, negative_slope)
        ctx.negative_slope, ctx.relu, ctx.group, ctx.save_output = negative_slope, relu, group, save_output
        if save_output:  # InPlace-ABN: x_hat is rebuilt from the output
            ctx.save_for_backward(out, gamma, beta, invstd, counted)
        else:
            ctx.save_for_backward(conv_out, gamma, beta, invstd, counted, mean)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        slope = ctx.negative_slope
        if ctx.save_output:
            out, gamma, beta, invstd, counted = ctx.saved_tensors
            c = compute_dtype(out.dtype)
            grad_z = ops.leaky_relu_backward(grad_out.contiguous(), out, slope, True).to(c)
            outc = out.to(c)
            z = torch.where(outc >= 0, outc, outc / slope)
            x_hat = (z - channel_view(beta.to(c), z.dim())) / channel_view(gamma.to(c), z.dim())
        else:
            conv_out, gamma, beta, invstd, counted, mean = ctx.saved_tensors
            c = compute_dtype(conv_out.dtype)
            centred = conv_out.to(c) - channel_view(mean, conv_out.dim())
            x_hat = centred * channel_view(invstd, centred.dim())
            if slope is None and not ctx.relu:
                grad_z = grad_out.to(c)
            else:
                z = _affine(centred, gamma.to(c) * invstd, beta.to(c), conv_out.dtype)  # the forward's z, bit for bit
                if ctx.relu:  # torch's relu backward: 0 where z <= 0
                    grad_z = torch.ops.aten.threshold_backward(grad_out, z, 0).to(c)
                else:
                    grad_z = ops.leaky_relu_backward(grad_out.contiguous(), z, slope, False).to(c)
        dims = _reduced_dims(grad_z)
        sum_grad = grad_z.sum(dims)
        sum_grad_x_hat = (grad_z * x_hat).sum(dims)
        grad_conv_out = None
        if ctx.needs_input_grad[0]:
            # the second collective; like torch's SyncBatchNorm, only when the input gradient is needed
            global_sums = torch.cat([sum_grad, sum_grad_x_hat])
            dist.all_reduce(global_sums, dist.ReduceOp.SUM, ctx.group)
            mean_grad, mean_grad_x_hat = (global_sums / counted).chunk(2)
            grad_conv_out = ((grad_z - channel_view(mean_grad, grad_z.dim())
                              - x_hat * channel_view(mean_grad_x_hat, x_hat.dim()))
                             * channel_view(gamma.to(c) * invstd, grad_z.dim())).to(grad_out.dtype)
        # this process's parameter gradients: DistributedDataParallel reduces them
        grad_gamma = sum_grad_x_hat.to(gamma.dtype) if ctx.needs_input_grad[1] else None
        grad_beta = sum_grad.to(beta.dtype) if ctx.needs_input_grad[2] else None
        return grad_conv_out, grad_gamma, grad_beta, None, None, None, None, None, None, None, None
