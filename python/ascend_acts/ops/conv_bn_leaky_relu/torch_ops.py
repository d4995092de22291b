"""The fused Conv2d + BatchNorm2d + LeakyReLU ops written with torch tensor ops only, so they run on any device
(the "torch" backend; the protocol of `ascend_acts.backends`): the mathematics of the NumPy reference
(this folder's reference.py), statistics and the BN + LeakyReLU part in float32 (float64 stays float64), the
convolution in the input dtype as the device runs it (torch's oneDNN on the CPU, torch_npu's on the NPU).
Also the platform's convolution every backend of these ops runs (`conv2d`, `conv2d_backward`), torch's update
of the running statistics and the statistics' shapes: per channel (C,) for BatchNorm (norm_groups 0), per sample and
group of C/G channels (N, G) for norm_groups G >= 1 (InstanceNorm G == C, GroupNorm).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...numerics.dtypes import compute_dtype
from ...numerics.layout import channel_view as channel
from . import channels_last
from .folding import eval_op_backward, eval_pre_activation


def _symmetric(padding) -> tuple[int, int] | None:
    top, bottom, left, right = padding
    return (top, left) if top == bottom and left == right else None


def pad(input: torch.Tensor, padding, padding_mode: str = "zeros") -> torch.Tensor:
    """input padded by (top, bottom, left, right) with zeros or F.pad's `padding_mode`."""
    top, bottom, left, right = padding
    if padding_mode == "zeros":
        return F.pad(input, (left, right, top, bottom))
    return F.pad(input, (left, right, top, bottom), mode=padding_mode)


# torch's Conv2d padding modes; "zeros" is the convolution's own padding, the others F.pad's modes
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def check_padding_mode(where: str, padding_mode, transposed: bool = False) -> None:
    """A ValueError for a mode torch's Conv2d does not have, and for a transposed convolution with any but "zeros"
    (torch's ConvTranspose2d refuses it)."""
    if padding_mode not in PADDING_MODES:
        raise ValueError(f"{where}: 'padding_mode' must be one of {', '.join(map(repr, PADDING_MODES))}, got "
                         f"{padding_mode!r}")
    if transposed and padding_mode != "zeros":
        raise ValueError(f"{where}: a transposed convolution takes only padding_mode='zeros' (as torch's "
                         f"ConvTranspose2d), got {padding_mode!r}")


def check_pad(input: torch.Tensor, padding, padding_mode: str) -> None:
    """torch's own error (F.pad's, on a meta tensor of the input's shape: nothing is computed) for a pad its mode
    cannot make, e.g. a reflect pad as large as the input. A pad that passed is remembered by its shape, dtype,
    padding and mode (the meta F.pad costs some 20 us, every fused op's call checks it, the forward's and the
    backward's): an error is raised again each time."""
    if padding_mode == "zeros":
        return
    key = (tuple(input.shape), input.dtype, tuple(padding), padding_mode)
    concrete = all(type(size) is int for size in key[0] + key[2])  # not a traced (symbolic) shape
    if concrete and key in _PADS_CHECKED:
        return
    pad(torch.empty(input.shape, dtype=input.dtype, device="meta"), padding, padding_mode)
    if concrete:
        if len(_PADS_CHECKED) >= _PADS_CHECKED_SIZE:  # a bound for shapes that keep changing
            _PADS_CHECKED.clear()
        _PADS_CHECKED.add(key)


_PADS_CHECKED: set = set()
_PADS_CHECKED_SIZE = 4096


def _fold_circular(grad: torch.Tensor, before: int, after: int, dim: int) -> torch.Tensor:
    """The gradient of x from that of its circular pad along `dim` (`before` and `after` wrapped entries): each
    wrapped border slice adds to the entries it copied; differentiable."""
    size = grad.shape[dim] - before - after
    folded = grad.narrow(dim, before, size)
    if before:  # copies of x's last `before` entries
        folded = folded + _placed(grad.narrow(dim, 0, before), size - before, 0, dim)
    if after:  # copies of x's first `after` entries
        folded = folded + _placed(grad.narrow(dim, before + size, after), 0, size - after, dim)
    return folded


def _placed(t: torch.Tensor, zeros_before: int, zeros_after: int, dim: int) -> torch.Tensor:
    widths = [0, 0] * (t.dim() - 1 - dim) + [zeros_before, zeros_after]
    return F.pad(t, widths)


def unpad_gradient(grad: torch.Tensor, input: torch.Tensor, padding, padding_mode: str) -> torch.Tensor:
    """The gradient of `input` from that of its pad (`pad(input, padding, padding_mode)`), as torch's pad backward
    folds it (aten's reflection_pad2d_backward / replication_pad2d_backward; circular: the wrapped slices added back);
    differentiable."""
    top, bottom, left, right = padding
    if padding_mode == "zeros":
        return grad[:, :, top: top + input.shape[2], left: left + input.shape[3]]
    if padding_mode == "circular":
        return _fold_circular(_fold_circular(grad, left, right, 3), top, bottom, 2)
    backward = (torch.ops.aten.reflection_pad2d_backward if padding_mode == "reflect"
                else torch.ops.aten.replication_pad2d_backward)
    return backward(grad, input, [left, right, top, bottom])


def output_channels(weight: torch.Tensor, groups: int, transposed: bool) -> int:
    """The convolution's output channels: weight (C_out, C_in/groups, kh, kw), or transposed (C_in, C_out/groups,
    kh, kw)."""
    return weight.shape[1] * groups if transposed else weight.shape[0]


def conv2d(input, weight, bias, stride, padding, dilation, groups, transposed=False, output_padding=(0, 0),
           padding_mode="zeros", *, layout_route=False) -> torch.Tensor:
    """The platform's convolution (every backend's: ours never implement one), in the tensors' dtype and
    differentiable; padding is (top, bottom, left, right), an asymmetric one applied by F.pad, as is any but the
    "zeros" `padding_mode` (torch's Conv2d's: the convolution then runs unpadded). `transposed`: conv_transpose2d
    (aten::convolution's argument; its padding is always symmetric). A Linear seen as a convolution (_is_linear) runs
    as torch's Linear: oneDNN's 1x1 convolution over N rows is some 4x slower than the matrix product; so does a
    transposed one from 1x1 planes (_is_projection). `layout_route`: the caller computes a value no tracer or autograd
    sees (an op's kernel, or the backward's recomputation of one), so a large float32 upsampling on the CPU may run
    through channels_last (this folder's channels_last.py, whose `applies` checks the rest)."""
    if _is_linear(input, weight, padding, groups, transposed):
        return F.linear(input.flatten(1), weight.flatten(1), bias).reshape(input.shape[0], weight.shape[0], 1, 1)
    if _is_projection(input, weight, padding, dilation, groups, transposed, output_padding) and _as_torch_takes(
            input, weight, bias):
        out = _positive_zeros(torch.mm(input.flatten(1), weight.flatten(1))).reshape(input.shape[0], *weight.shape[1:])
        return out if bias is None else out + bias.reshape(1, -1, 1, 1)
    symmetric = _symmetric(padding)
    if transposed:
        check_padding_mode("conv2d", padding_mode, transposed)
        if layout_route and channels_last.applies(input, weight, bias, stride, symmetric, output_padding, groups,
                                                  dilation):
            return channels_last.conv_transpose2d(input, weight, bias, stride, symmetric, output_padding, groups,
                                                  dilation)
        return F.conv_transpose2d(input, weight, bias, stride, symmetric, output_padding, groups, dilation)
    if symmetric is None or padding_mode != "zeros":
        input, symmetric = pad(input, padding, padding_mode), (0, 0)
    return F.conv2d(input, weight, bias, stride, symmetric, dilation, groups)


ALL_GRADIENTS = (True, True, True)  # the backward ops' default output_mask: grad_input, grad_weight, grad_bias


def conv2d_backward(grad, input, weight, stride, padding, dilation, groups, transposed=False, output_padding=(0, 0),
                    padding_mode="zeros", output_mask=ALL_GRADIENTS):
    """(grad_input, grad_weight, grad_bias) of conv2d (or its transposed) from one aten::convolution_backward, with
    grad in the input's dtype. A pad F.pad makes is made again here (a transient copy: the forward kept `input`),
    and the padded input's gradient folded back onto `input` as torch's pad backward does. `output_mask`, as aten's,
    says which to compute (each costs a convolution, the bias's a reduction); one not computed is empty (numel 0, in
    the dtype of input, weight and grad respectively)."""
    mask = tuple(bool(m) for m in output_mask)
    if not any(mask):
        return input.new_empty(0), weight.new_empty(0), grad.new_empty(0)
    if _is_linear(input, weight, padding, groups, transposed):
        return _linear_backward(grad, input, weight, mask)
    if _is_projection(input, weight, padding, dilation, groups, transposed, output_padding) and _as_torch_takes(
            input, weight, None) and _nchw_strides(grad) and grad.dtype == input.dtype:
        return _projection_backward(grad, input, weight, mask)
    symmetric = _symmetric(padding)
    if transposed:
        check_padding_mode("conv2d_backward", padding_mode, transposed)
    padded_by_f_pad = not transposed and (symmetric is None or padding_mode != "zeros")
    padded = pad(input, padding, padding_mode) if padded_by_f_pad else input
    grad_input, grad_weight, grad_bias = torch.ops.aten.convolution_backward(
        grad, padded, weight, [output_channels(weight, groups, transposed)], stride,
        (0, 0) if padded_by_f_pad else symmetric, dilation, transposed, output_padding if transposed else (0, 0),
        groups, mask)
    # aten may compute more than it was asked for (oneDNN's weight gradient comes with the bias's): only those asked
    wants_input, wants_weight, wants_bias = mask
    if not wants_input:
        grad_input = input.new_empty(0)
    elif padded_by_f_pad:
        grad_input = unpad_gradient(grad_input, input, padding, padding_mode).contiguous()
    else:
        grad_input = grad_input.contiguous()
    return (grad_input, grad_weight if wants_weight else weight.new_empty(0),
            grad_bias if wants_bias else grad.new_empty(0))


def _is_linear(input, weight, padding, groups, transposed) -> bool:
    """Whether the convolution is a Linear seen as one (what convert passes for nn.Linear -> BatchNorm1d): a 1x1
    kernel over 1x1 planes, unpadded and ungrouped, so each output is one dot product over the channels."""
    return (not transposed and groups == 1 and not any(padding) and tuple(weight.shape[2:]) == (1, 1)
            and tuple(input.shape[2:]) == (1, 1))


def _is_projection(input, weight, padding, dilation, groups, transposed, output_padding) -> bool:
    """Whether the convolution is a transposed one over 1x1 planes that makes each output plane the kernel's size
    (unpadded, undilated, ungrouped): a DCGAN generator's first layer, ConvTranspose2d(nz, C, k, 1, 0) on the latent
    vector. Each output value is then one dot product over the input channels, out[n, o, i, j] = sum_c x[n, c]
    w[c, o, i, j] (the stride never applies), a matrix product: about 5x faster than oneDNN's transposed convolution
    forward and 10x backward at batch 32 (100 -> 512 channels, k 4)."""
    return (transposed and groups == 1 and not any(padding) and not any(output_padding)
            and tuple(dilation) == (1, 1) and tuple(input.shape[2:]) == (1, 1))


def _as_torch_takes(input, weight, bias) -> bool:
    """Whether torch's convolution would take these as they are and give an NCHW result the matrix product matches
    bit for bit: float32 or float64 (oneDNN rounds a 16-bit one once, after its bias), one dtype and device, input
    channels that match (at least one), a bias of the output channels, and NCHW strides (torch's result follows a
    channels_last input or weight). Anything else goes to torch's convolution, for its result or its error."""
    tensors = (input, weight) if bias is None else (input, weight, bias)
    return (input.dtype in (torch.float32, torch.float64)
            and all(t.dtype == input.dtype and t.device == input.device for t in tensors)
            and input.dim() == weight.dim() == 4 and 0 < weight.shape[0] == input.shape[1]
            and (bias is None or tuple(bias.shape) == (weight.shape[1],))
            and all(_nchw_strides(t) for t in (input, weight)))


def _nchw_strides(tensor: torch.Tensor) -> bool:
    """The strides torch.empty gives its shape (is_contiguous alone lets size-1 dimensions have any)."""
    expected, step = [], 1
    for size in reversed(tensor.shape):
        expected.append(step)
        step *= max(size, 1)
    return tuple(tensor.stride()) == tuple(reversed(expected))


def _projection_backward(grad, input, weight, mask):
    """conv2d_backward of a projection (_is_projection): two matrix products and the bias gradient as a sum over the
    batch and the kernel's positions, with oneDNN's signed zeros."""
    wants_input, wants_weight, wants_bias = mask
    rows, matrix, features = grad.flatten(1), weight.flatten(1), input.flatten(1)
    return (_positive_zeros(torch.mm(rows, matrix.t())).reshape(input.shape) if wants_input
            else input.new_empty(0),
            _positive_zeros(torch.mm(features.t(), rows)).reshape(weight.shape) if wants_weight
            else weight.new_empty(0),
            grad.sum((0, 2, 3)) if wants_bias else grad.new_empty(0))


def _positive_zeros(products: torch.Tensor) -> torch.Tensor:
    """A matrix product's sums with oneDNN's signed zeros: its convolutions add to a +0 accumulator, so a sum of -0
    products is +0 there where a matrix product keeps -0 (x + 0.0 changes nothing else)."""
    return products + 0.0


def _linear_backward(grad, input, weight, mask):
    """conv2d_backward of a Linear seen as a convolution (_is_linear), as torch's Linear (addmm) computes it: two
    matrix products and the bias gradient as torch's sum over the batch. aten::convolution_backward's float32 bias
    gradient on the CPU accumulates the N rows one after another (its error grows with N: some 100x torch's sum at
    N = 4097), and its weight gradient is less accurate than a matrix product too."""
    wants_input, wants_weight, wants_bias = mask
    rows, matrix, features = grad.flatten(1), weight.flatten(1), input.flatten(1)
    return (torch.mm(rows, matrix).reshape(input.shape) if wants_input else input.new_empty(0),
            torch.mm(rows.t(), features).reshape(weight.shape) if wants_weight else weight.new_empty(0),
            rows.sum(0) if wants_bias else grad.new_empty(0))


def update_running_statistics(running_mean, running_var, mean, variance, shape, momentum: float) -> None:
    """torch's update of the running statistics, in place (when given): running = (1 - momentum) * running
    + momentum * batch value, the variance unbiased; `mean` and `variance` (biased) are the statistics of the
    (N, C, *spatial) `shape`: per channel, or per instance (N, C) as F.instance_norm updates them (the batch value
    is then the mean over the samples of each instance's value). Computed in mean's dtype (float32, or float64),
    rounded once to the buffers' dtype, with the version counters as torch's (running_statistics_written). An empty
    batch leaves them, as torch's batch_norm does; one value per channel (instance) gives NaN variance, as torch."""
    per_instance = mean.dim() == 2
    count = math.prod(shape[2:]) if per_instance else math.prod(shape) // max(shape[1], 1)
    if running_mean is None or count == 0 or shape[0] == 0:
        return
    unbiased = variance * (count / (count - 1) if count > 1 else float("inf"))
    if per_instance:
        mean, unbiased = mean.mean(0), unbiased.mean(0)
    # written through .data, which has a version counter of its own: running_statistics_written makes torch's bumps
    buffers = [running_mean.data, running_var.data]
    with torch.no_grad():
        if running_mean.dtype == running_var.dtype == mean.dtype:
            # buffers in the computing dtype (the usual case): the same three roundings in place, both at once (the
            # op layer's per-call cost: these run once per fused block and step)
            torch._foreach_mul_(buffers, 1 - momentum)
            torch._foreach_add_(buffers, torch._foreach_mul([mean, unbiased], momentum))
        else:
            for running, batch in zip(buffers, (mean, unbiased)):
                running.copy_(running.to(batch.dtype) * (1 - momentum) + batch * momentum)
    running_statistics_written(running_mean, running_var, per_instance)


def running_statistics_written(running_mean, running_var, per_instance: bool) -> None:
    """The version bumps torch's norms give the running statistics they update, for an update written without any
    (through `.data`, or by a kernel): none from batch_norm, whose kernel writes them, one each from instance_norm,
    which copies its update in (torch 2.13 on the CPU, any dtype and layout). Code that watches the buffers, and
    autograd's check of a saved buffer, then see what they see with torch's modules."""
    if per_instance:
        torch.autograd.graph.increment_version([running_mean, running_var])


def activation(z: torch.Tensor, negative_slope: float, relu: bool) -> torch.Tensor:
    """The ops' activation: torch's relu (z < 0 ? +0 : z) or leaky_relu (slope 0 gives -0.0 for a negative z)."""
    return F.relu(z) if relu else F.leaky_relu(z, negative_slope)


def activation_gradient(z: torch.Tensor, grad: torch.Tensor, negative_slope: float, relu: bool) -> torch.Tensor:
    """The gradient through `activation` at z, as torch's relu backward (0 where z <= 0, NaN passes the gradient) or
    leaky_relu backward (grad * slope where not z > 0); differentiable."""
    if relu:
        return torch.where(z <= 0, grad.new_zeros(()), grad)
    return torch.where(z > 0, grad, grad * negative_slope)


def _grouped(t: torch.Tensor, norm_groups: int) -> torch.Tensor:
    """(N, C, *spatial) seen as (N, G, C/G * prod(spatial)): the values of each group's statistics in a row."""
    return t.reshape(t.shape[0], norm_groups, math.prod(t.shape[1:]) // norm_groups)


def statistics_sum(t: torch.Tensor, norm_groups: int = 0) -> torch.Tensor:
    """The sum of t (N, C, H, W) over the values that share statistics, (C,) or (N, G), in t's dtype. Groups
    (contiguous values) by the platform's reduction. BatchNorm's planes too, then their N sums by _compensated_sum:
    torch's sum over dims (0, 2, 3) on the CPU adds short planes one after another, so BatchNorm1d's weight and bias
    gradients over (512, C, 7) were 35-58x torch's error (its CPU norms accumulate in float64, which the NPU has
    little of). Differentiable."""
    if norm_groups:
        return _grouped(t, norm_groups).sum(2)
    return _compensated_sum(t.sum((2, 3)))


def _compensated_sum(rows: torch.Tensor) -> torch.Tensor:
    """rows (M, C) summed over M with an error that does not grow with M: zero rows appended up to a power of two,
    then halves added, the rounding error of every addition (Knuth's TwoSum, exact in float arithmetic) summed
    alongside and added once at the end (8 elementwise operations on ever halving rows per halving); only the
    platform's sums of short blocks (and planes) round. A total that is not finite is the plain sum's (the errors of
    infinite terms are NaN)."""
    count = rows.shape[0]
    if count > _BLOCK * _BLOCK:  # blocks of rows first, as short planes are: the halvings' cost then about a sum's
        rows = F.pad(rows, (0, 0, 0, -count % _BLOCK)).reshape(-1, _BLOCK, rows.shape[1]).sum(1)
        count = rows.shape[0]
    if count <= 1:
        return rows.sum(0)
    rows = F.pad(rows, (0, 0, 0, (1 << (count - 1).bit_length()) - count))
    error = None
    while rows.shape[0] > 1:
        half = rows.shape[0] // 2
        first, second = rows[:half], rows[half:]
        rows = first + second
        second_part = rows - first
        rounding = (first - (rows - second_part)) + (second - second_part)
        error = rounding if error is None else error[:half] + error[half:] + rounding
    total = rows[0]
    return torch.where(total.isfinite(), total + error[0], total)


_BLOCK = 8  # rows summed by the platform before the compensated halvings, in a batch of more than _BLOCK ** 2


def _values_per_statistic(t: torch.Tensor, norm_groups: int) -> int:
    return t.numel() // max(t.shape[1] if not norm_groups else t.shape[0] * norm_groups, 1)


def statistics(y: torch.Tensor, norm_groups: int = 0):
    """(mean, biased variance) of y (N, C, H, W): per channel over N, H, W, or per sample and group (N, G). Both from
    the values centred on a first mean (whose rounding and cancellation the centred sums then correct): the mean
    within about half a unit, as torch's float64 accumulation gives it, and the variance with no cancellation of
    large values (mean(d^2) - mean(d)^2 with d = y - shift, where mean(d) is tiny). A shift that is not finite (an
    infinite value, an overflowing sum) is the mean, as a plain mean gives it. Differentiable (the shift is a
    constant: the derivatives are those of the mean and variance)."""
    count = _values_per_statistic(y, norm_groups)
    # any rough mean will do (the centred sums correct it): the platform's own
    shift = (_grouped(y, norm_groups).mean(2) if norm_groups else y.mean((0, 2, 3))).detach()
    centred = y - statistic_view(shift, y, norm_groups)
    centred_mean = statistics_sum(centred, norm_groups) / count
    square_mean = statistics_sum(centred * centred, norm_groups) / count
    # values whose squares overflow (1e30 in float32): torch's variance is inf there, where the difference of the two
    # overflowed terms would be inf - inf
    variance = torch.where(square_mean == math.inf, square_mean, square_mean - centred_mean * centred_mean)
    return torch.where(shift.isfinite(), shift + centred_mean, shift), variance.clamp(min=0)


def statistic_view(values: torch.Tensor, like: torch.Tensor, norm_groups: int = 0) -> torch.Tensor:
    """Statistics (C,) or (N, G) broadcastable over `like` (N, C, H, W)."""
    if norm_groups:
        return values.repeat_interleave(like.shape[1] // norm_groups, dim=1)[:, :, None, None]
    return channel(values)


def statistics_mean(t: torch.Tensor, norm_groups: int = 0) -> torch.Tensor:
    """The mean of t over the values that share statistics, broadcastable over t."""
    return statistic_view(statistics_sum(t, norm_groups) / _values_per_statistic(t, norm_groups), t, norm_groups)


def normalised_gradient(dxhat: torch.Tensor, xhat: torch.Tensor, invstd: torch.Tensor,
                        norm_groups: int = 0) -> torch.Tensor:
    """The gradient of the normalisation's input from that of x-hat (the statistics' own derivatives included)."""
    return statistic_view(invstd, xhat, norm_groups) * (dxhat - statistics_mean(dxhat, norm_groups)
                                                        - xhat * statistics_mean(dxhat * xhat, norm_groups))


def conv_bn_leaky_relu_train(input, weight, bias, bn_weight, bn_bias, running_mean, running_var, stride, padding,
                             dilation, groups, momentum, eps, negative_slope, save_output, relu=False, transposed=False,
                             output_padding=(0, 0), norm_groups=0, recompute=False, padding_mode="zeros"):
    y = conv2d(input, weight, bias, stride, padding, dilation, groups, transposed, output_padding, padding_mode)
    out, mean, invstd = batch_norm_activation(y, bn_weight, bn_bias, running_mean, running_var, momentum, eps,
                                              negative_slope, relu, norm_groups)
    kept = input.new_empty(0) if save_output or recompute else y
    return out, kept, mean, invstd


def batch_norm_activation(y, bn_weight, bn_bias, running_mean, running_var, momentum, eps, negative_slope, relu,
                          norm_groups=0):
    """The normalisation + activation part of the training op on the conv output y: (out, mean, invstd), the
    running statistics updated in place."""
    yc = y.to(compute_dtype(y.dtype))
    mean, variance = statistics(yc, norm_groups)
    invstd = torch.rsqrt(variance + eps)
    z = pre_activation(yc, statistic_view(mean, yc, norm_groups), statistic_view(invstd, yc, norm_groups),
                       channel(bn_weight.to(yc.dtype)), channel(bn_bias.to(yc.dtype)))
    out = activation(z, negative_slope, relu).to(y.dtype)
    update_running_statistics(running_mean, running_var, mean, variance, y.shape, momentum)
    return out, mean, invstd


def pre_activation(y, mean, invstd, gamma, beta):
    """The norm's output z from y with broadcastable statistics and affine, as the forward computes it (the backward
    recomputes it so, so that its activation branch is the forward's): (y - mean) * invstd * gamma + beta, except
    where alpha = gamma * invstd is 0 or infinite (a zero or infinite norm weight, an infinite eps). There torch's own
    y * alpha + (beta - mean * alpha) (aten's batch_norm and group_norm on the CPU), as y * invstd * gamma (alpha's
    sign of zero or infinity for y's sign): the centred form would give the zeros the sign of y - mean, not y's, and
    +-inf where torch's two infinite terms meet as NaN. Differentiable."""
    alpha = gamma * invstd
    degenerate = (alpha == 0) | alpha.isinf()
    centre, shift = torch.where(degenerate, 0.0, mean), torch.where(degenerate, beta - mean * alpha, beta)
    return (y - centre) * invstd * gamma + shift


def conv_bn_leaky_relu_train_backward(grad_out, saved, saved_is_result, input, weight, bn_weight, bn_bias, mean,
                                      invstd, stride, padding, dilation, groups, negative_slope, relu=False,
                                      transposed=False, output_padding=(0, 0), norm_groups=0, bias=None,
                                      padding_mode="zeros", output_mask=ALL_GRADIENTS):
    c = compute_dtype(input.dtype)
    gamma, beta = channel(bn_weight.to(c)), channel(bn_bias.to(c))
    saved, grad = saved.to(c), grad_out.to(c)
    if saved_is_result:  # InPlace-ABN: invert LeakyReLU and the affine
        z = torch.where(saved > 0, saved, saved / negative_slope)
        xhat = (z - beta) / gamma
    else:
        mean_view, invstd_view = statistic_view(mean.to(c), saved, norm_groups), statistic_view(invstd.to(c), saved,
                                                                                                 norm_groups)
        xhat = (saved - mean_view) * invstd_view
        z = pre_activation(saved, mean_view, invstd_view, gamma, beta)
    dz = activation_gradient(z, grad, negative_slope, relu)
    grad_gamma, grad_beta = statistics_sum(dz * xhat), statistics_sum(dz)
    # x-hat centred exactly: with a float32 mean one unit off (values far from 0), x-hat sums to far from 0 and so
    # would dy, which the weight gradient multiplies by the conv input (the activation branch keeps the uncentred z)
    dy = normalised_gradient(dz * gamma, xhat - statistics_mean(xhat, norm_groups), invstd.to(c), norm_groups)
    grad_input, grad_weight, grad_bias = conv2d_backward(dy.to(input.dtype), input, weight, stride, padding,
                                                         dilation, groups, transposed, output_padding, padding_mode,
                                                         output_mask)
    return grad_input, grad_weight, grad_bias, grad_gamma.to(bn_weight.dtype), grad_beta.to(bn_bias.dtype)


def conv_bn_leaky_relu_eval(input, weight, bias, stride, padding, dilation, groups, negative_slope, relu=False,
                            transposed=False, output_padding=(0, 0), padding_mode="zeros", bn_weight=None,
                            bn_bias=None):
    geometry = (stride, padding, dilation, groups, transposed, output_padding, padding_mode)
    pre, _ = eval_pre_activation(lambda w, b: conv2d(input, w, b, *geometry), weight, bias, bn_weight, bn_bias,
                                 transposed, groups)
    return activation(pre, negative_slope, relu).to(input.dtype)


def conv_bn_leaky_relu_eval_backward(grad_out, input, weight, bias, stride, padding, dilation, groups, negative_slope,
                                     relu=False, transposed=False, output_padding=(0, 0), padding_mode="zeros",
                                     output_mask=ALL_GRADIENTS, bn_weight=None, bn_bias=None, affine_mask=(True, True)):
    geometry = (stride, padding, dilation, groups, transposed, output_padding, padding_mode)
    return eval_op_backward(lambda w, b: conv2d(input, w, b, *geometry),
                         lambda pre: activation_gradient(pre, grad_out.to(pre.dtype), negative_slope, relu),
                         lambda grad, w, mask: conv2d_backward(grad, input, w, *geometry, mask),
                         weight, bias, bn_weight, bn_bias, output_mask, affine_mask, transposed, groups)
