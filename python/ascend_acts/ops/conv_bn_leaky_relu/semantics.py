"""ascend_acts::conv_bn_leaky_relu_train (+ _backward) and conv_bn_leaky_relu_eval (+ _backward).

Training keeps the post-activation output (InPlace-ABN) when the activation and the affine can be
inverted (negative_slope > 0, no zero bn_weight, |bn_bias| / |bn_weight| small enough for the dtype; the caller
decides with `save_output`, see output_determines_batch_norm below); otherwise it
keeps the conv output. `norm_groups` G >= 1 normalises per sample over groups of C/G channels (InstanceNorm G == C,
GroupNorm) instead of per channel over the batch: mean/invstd are then (N, G), and running statistics are taken only
with G == C (F.instance_norm's update). Eval runs the conv with the running statistics folded into weight and bias and
the BN affine (bn_weight, bn_bias) applied inside the op (folding.py: so that its backward takes the affine's
gradients as torch's batch_norm); its backward recomputes the pre-activation, so nothing but the input, the
normalised weight and bias and the affine is kept.
`padding_mode` (torch's Conv2d's: "zeros", "reflect", "replicate", "circular"): any but "zeros" pads the input with
F.pad and convolves unpadded; autograd keeps the unpadded input and the backward pads it again (a transient copy).
`recompute` (training): autograd keeps no conv output (conv_out is empty, as with save_output); the backward
recomputes it from input, weight and bias, for a convolution cheaper to run again than its output is to keep.
The backward ops' `output_mask` (aten::convolution_backward's: grad_input, grad_weight, grad_bias) is set by autograd
from what needs a gradient: a frozen discriminator in a generator step needs only its input's, a detached input none,
a conv without bias no bias gradient; each skipped one saves a convolution (or a reduction), and comes back empty.
Device kernels: the backends' (`ops._kernels`); results follow torch's convolution into channels_last.
"""

from __future__ import annotations

import torch

from ...backends import current_backend_name
from ...numerics.dtypes import FLOATING_DTYPES, compute_dtype
from ...numerics.layout import convolution_output_shape
from .._library import (
    AUTOCAST_KEY_SET,
    OpFunction,
    autograd_function,
    call_in_backward,
    composite_autograd,
    per_sample_vmap,
    run_below_autograd,
    values_unknown,
)
from .._semantics import declare
from . import derivatives
from .torch_ops import ALL_GRADIENTS, check_pad, check_padding_mode, output_channels
from .torch_ops import conv2d as platform_conv2d

ops = torch.ops.ascend_acts
TRAIN, TRAIN_BACKWARD = "conv_bn_leaky_relu_train", "conv_bn_leaky_relu_train_backward"
EVAL, EVAL_BACKWARD = "conv_bn_leaky_relu_eval", "conv_bn_leaky_relu_eval_backward"


def output_determines_batch_norm(gamma: torch.Tensor, beta: torch.Tensor, negative_slope: float,
                                 dtype: torch.dtype) -> bool:
    """Whether training may keep only the output (InPlace-ABN): LeakyReLU invertible (slope > 0) and
    x-hat = (z - beta) / gamma recoverable from the output rounded to `dtype`. That recovery's error is
    about u(dtype) * (|x-hat| + 2 |beta| / |gamma|), against the u(dtype) * |x-hat| (|x-hat| ~ 1) that
    torch's own backward has from the rounded conv output. Measured on the BN weight's gradient (the one that
    sums x-hat; DCGAN-like layers, 4 seeds) against a float64 composite: up to |beta| / |gamma| = 8 ours stays within
    1.5x torch's float32 error; float16/bfloat16 reach 2x torch's error near a ratio of 4 (3x at 7), so 16-bit
    outputs are kept only up to 2. A larger ratio (e.g. a BN channel decayed towards gamma = 0) keeps the conv
    output instead."""
    # slope * z must keep its precision in `dtype` (and 1 / slope be finite in float32, as the kernels divide): a
    # slope below twice the smallest normal number would put it among the subnormals, whose absolute spacing divided
    # by the slope exceeds the rounding of an O(1) value
    if not negative_slope >= 2 * torch.finfo(dtype).smallest_normal or values_unknown(gamma, beta):
        return False  # a graph or fake tensors make no data-dependent choice: the conv output is kept
    limit = 8.0 if dtype in (torch.float32, torch.float64) else 2.0
    # one reduction and one read of its value (a call on every training step): |beta / gamma| is |beta| / |gamma|
    # rounded alike; a zero gamma gives an infinite ratio (NaN with beta 0), a NaN one NaN: neither passes the limit;
    # nor does an infinite gamma (gamma * 0 is NaN there, +-0 elsewhere): x-hat = (z - beta) / gamma would be NaN,
    # where torch's backward has x-hat from the conv output and finite norm weight and bias gradients
    gamma = gamma.detach()
    return (beta.detach() / gamma + gamma * 0).abs_().max().item() <= limit


# --- what the ops accept (checked by the CPU and the fake kernels, before anything runs) -----------
def check_dtypes(op: str, input: torch.Tensor, same_dtype: dict, channel_parameters: dict | None = None) -> None:
    """`same_dtype` tensors must have the input's dtype (conv weight and bias, gradients, kept tensors);
    `channel_parameters` (BatchNorm's weight/bias and statistics) the input's or, for float16/bfloat16
    input, float32 (autocast keeps them float32, as torch's batch_norm takes them). A mismatch is a RuntimeError,
    as torch's conv2d and batch_norm raise it; an input that is not floating point is a TypeError."""
    if input.dtype not in FLOATING_DTYPES:
        raise TypeError(f"ascend_acts::{op}: 'input' must be float16, bfloat16, float32 or float64, got {input.dtype}")
    for name, t in same_dtype.items():
        if t is not None and t.dtype != input.dtype:
            raise RuntimeError(f"ascend_acts::{op}: '{name}' must have the input's dtype {input.dtype}, got {t.dtype} "
                            "(mixed precision: use torch.autocast)")
    allowed = {input.dtype, compute_dtype(input.dtype)}
    for name, t in (channel_parameters or {}).items():
        if t.dtype not in allowed:
            raise RuntimeError(f"ascend_acts::{op}: '{name}' must be {' or '.join(sorted(map(str, allowed)))} for "
                            f"{input.dtype} input, got {t.dtype}")


def conv_output_shape(input, weight, stride, padding, dilation, groups=1, transposed=False,
                      output_padding=(0, 0)) -> list:
    """The convolution output's shape as torch's conv2d (conv_transpose2d) gives it (meta included): no output
    channels for an input without channels."""
    shape = convolution_output_shape(input.shape, weight.shape, stride, padding, dilation, groups, transposed,
                                     output_padding)
    return [shape[0], 0, *shape[2:]] if input.shape[1] == 0 else shape


def check_shapes(op: str, out_channels: int, per_channel: dict, like_output: dict | None = None,
                 out_shape=None) -> None:
    """Per-channel tensors (conv bias, BatchNorm parameters and statistics) have shape (C_out,); gradients and kept
    tensors the convolution output's. A RuntimeError naming the argument, as torch's batch_norm raises for a
    running_mean of the wrong size (before any backend reads a wrong-sized buffer, or NumPy broadcasts one)."""
    channels = (out_channels,)
    for name, t in per_channel.items():
        if t is not None and tuple(t.shape) != channels:
            raise RuntimeError(f"ascend_acts::{op}: '{name}' must have shape {channels} (the output channels), got "
                               f"{tuple(t.shape)}")
    for name, t in (like_output or {}).items():
        if tuple(t.shape) != tuple(out_shape):
            raise RuntimeError(f"ascend_acts::{op}: '{name}' must have the convolution output's shape "
                               f"{tuple(out_shape)}, got {tuple(t.shape)}")


def statistics_shape(batch: int, channels: int, norm_groups: int) -> tuple[int, ...]:
    """The shape of the ops' mean and invstd: (C,) for BatchNorm, (N, G) for norm_groups G >= 1."""
    return (batch, norm_groups) if norm_groups else (channels,)


def check_norm_groups(op: str, norm_groups, channels: int, running_statistics: bool) -> None:
    """norm_groups is 0 (BatchNorm) or a G >= 1 dividing the output channels (a RuntimeError, as torch's group_norm
    raises it); running statistics only with G == C (InstanceNorm's; GroupNorm has none): a ValueError."""
    if isinstance(norm_groups, bool) or not isinstance(norm_groups, int) or norm_groups < 0:
        raise ValueError(f"ascend_acts::{op}: 'norm_groups' must be an int >= 0 (0: BatchNorm), got {norm_groups!r}")
    if norm_groups and channels % norm_groups:
        raise RuntimeError(f"ascend_acts::{op}: 'norm_groups' ({norm_groups}) must divide the output channels "
                           f"({channels})")
    if norm_groups and running_statistics and norm_groups != channels:
        raise ValueError(f"ascend_acts::{op}: 'running_mean' and 'running_var' are InstanceNorm's (norm_groups == "
                         f"{channels}, the output channels), got norm_groups={norm_groups}: GroupNorm keeps none")


def check_output_mask(op: str, output_mask) -> None:
    """Three booleans (grad_input, grad_weight, grad_bias), as aten::convolution_backward's bool[3] (torch.library
    passes a list of any length through): a RuntimeError naming it otherwise."""
    if len(output_mask) != 3:
        raise RuntimeError(f"ascend_acts::{op}: 'output_mask' must have 3 values (grad_input, grad_weight, grad_bias), "
                           f"got {list(output_mask)}")


def check_padding(op: str, input, padding, transposed: bool, padding_mode) -> None:
    """No negative amount (a RuntimeError, as torch's conv2d raises it: a crop is F.pad's, before the conv), the mode
    (a ValueError naming 'padding_mode'), then the pad F.pad must make of the input (torch's error)."""
    if any(amount < 0 for amount in padding):
        raise RuntimeError(f"ascend_acts::{op}: 'padding' must be non-negative (negative padding is not supported), "
                           f"got {list(padding)}")
    check_padding_mode(f"ascend_acts::{op}", padding_mode, transposed)
    check_pad(input, padding, padding_mode)


def _check_train(input, weight, bias, bn_weight, bn_bias, running_mean, running_var, stride, padding, dilation, groups,
                 momentum, eps, negative_slope, save_output, relu=False, transposed=False, output_padding=(0, 0),
                 norm_groups=0, recompute=False, padding_mode="zeros"):
    if recompute and save_output:
        raise ValueError(f"ascend_acts::{TRAIN}: 'recompute' and 'save_output' exclude each other (the output is "
                         "kept, or the conv output recomputed)")
    if relu and save_output:
        raise ValueError(f"ascend_acts::{TRAIN}: 'save_output' needs an invertible activation; relu is not")
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"ascend_acts::{TRAIN}: 'running_mean' and 'running_var' must both be given or both be None")
    statistics = {} if running_mean is None else {"running_mean": running_mean, "running_var": running_var}
    channels = output_channels(weight, groups, transposed)
    check_norm_groups(TRAIN, norm_groups, channels, running_mean is not None)
    check_dtypes(TRAIN, input, {"weight": weight, "bias": bias},
                 {"bn_weight": bn_weight, "bn_bias": bn_bias, **statistics})
    check_shapes(TRAIN, channels, {"bias": bias, "bn_weight": bn_weight, "bn_bias": bn_bias, **statistics})
    check_padding(TRAIN, input, padding, transposed, padding_mode)


def _check_train_backward(grad_out, saved, saved_is_result, input, weight, bn_weight, bn_bias, mean, invstd, stride,
                          padding, dilation, groups, negative_slope, relu=False, transposed=False,
                          output_padding=(0, 0), norm_groups=0, bias=None, padding_mode="zeros",
                          output_mask=ALL_GRADIENTS):
    if relu and saved_is_result:  # the forward refuses to keep it (save_output); a ReLU output loses z <= 0
        raise ValueError(f"ascend_acts::{TRAIN_BACKWARD}: 'saved_is_result' needs an invertible activation; relu is "
                         "not (keep the conv output)")
    channels = output_channels(weight, groups, transposed)
    check_norm_groups(TRAIN_BACKWARD, norm_groups, channels, False)
    check_dtypes(TRAIN_BACKWARD, input, {"grad_out": grad_out, "saved": saved, "weight": weight, "bias": bias},
                 {"bn_weight": bn_weight, "bn_bias": bn_bias, "mean": mean, "invstd": invstd})
    statistics = {"mean": mean, "invstd": invstd}
    check_shapes(TRAIN_BACKWARD, channels,
                 {"bn_weight": bn_weight, "bn_bias": bn_bias, **({} if norm_groups else statistics), "bias": bias},
                 {"grad_out": grad_out, "saved": saved},
                 conv_output_shape(input, weight, stride, padding, dilation, groups, transposed, output_padding))
    expected = statistics_shape(input.shape[0], channels, norm_groups)
    for name, t in statistics.items() if norm_groups else ():
        if tuple(t.shape) != expected:
            raise RuntimeError(f"ascend_acts::{TRAIN_BACKWARD}: '{name}' must have shape {expected} (N, norm_groups), "
                               f"got {tuple(t.shape)}")
    check_padding(TRAIN_BACKWARD, input, padding, transposed, padding_mode)
    check_output_mask(TRAIN_BACKWARD, output_mask)


def _affine(bn_weight, bn_bias) -> dict:
    return {name: t for name, t in (("bn_weight", bn_weight), ("bn_bias", bn_bias)) if t is not None}


def check_devices(op: str, input: torch.Tensor, tensors: dict) -> None:
    """Every tensor on the input's device: a RuntimeError naming the argument, as torch's conv2d and batch_norm raise
    one (before a backend reads another device's memory)."""
    for name, t in tensors.items():
        if t is not None and t.device != input.device:
            raise RuntimeError(f"ascend_acts::{op}: '{name}' is on {t.device}, 'input' on {input.device}: expected all "
                               "tensors to be on the same device")


def _check_eval(input, weight, bias, stride, padding, dilation, groups, negative_slope, relu=False, transposed=False,
                output_padding=(0, 0), padding_mode="zeros", bn_weight=None, bn_bias=None):
    affine = _affine(bn_weight, bn_bias)
    check_devices(EVAL, input, {"weight": weight, "bias": bias, **affine})
    check_dtypes(EVAL, input, {"weight": weight, "bias": bias}, affine)
    check_shapes(EVAL, output_channels(weight, groups, transposed), {"bias": bias, **affine})
    check_padding(EVAL, input, padding, transposed, padding_mode)


def _check_eval_backward(grad_out, input, weight, bias, stride, padding, dilation, groups, negative_slope, relu=False,
                         transposed=False, output_padding=(0, 0), padding_mode="zeros", output_mask=ALL_GRADIENTS,
                         bn_weight=None, bn_bias=None, affine_mask=(True, True)):
    affine = _affine(bn_weight, bn_bias)
    check_devices(EVAL_BACKWARD, input, {"grad_out": grad_out, "weight": weight, "bias": bias, **affine})
    check_dtypes(EVAL_BACKWARD, input, {"grad_out": grad_out, "weight": weight, "bias": bias}, affine)
    check_shapes(EVAL_BACKWARD, output_channels(weight, groups, transposed), {"bias": bias, **affine},
                 {"grad_out": grad_out},
                 conv_output_shape(input, weight, stride, padding, dilation, groups, transposed, output_padding))
    check_padding(EVAL_BACKWARD, input, padding, transposed, padding_mode)
    check_output_mask(EVAL_BACKWARD, output_mask)
    if len(affine_mask) != 2:
        raise RuntimeError(f"ascend_acts::{EVAL_BACKWARD}: 'affine_mask' must have 2 values (grad_bn_weight, "
                           f"grad_bn_bias), got {list(affine_mask)}")


def _padding_mode(args, position: int) -> str:
    return args[position] if len(args) > position else "zeros"


# (layout, shape and strides of input and weight, padding_mode) -> (derivatives.memory_format,
# derivatives.input_gradient_format): functions of exactly these, whose stride walk in Python cost more than the rest of
# a small call's layout; bounded, as the shapes a process sees may not be
_FORMATS: dict[tuple, tuple[torch.memory_format, torch.memory_format]] = {}
_FORMATS_KEPT = 1024


def _memory_formats(input: torch.Tensor, weight: torch.Tensor, mode: str):
    key = (input.layout, input.shape, input.stride(), weight.layout, weight.shape, weight.stride(), mode)
    try:
        formats = _FORMATS.get(key)
    except TypeError:  # symbolic sizes are not hashable
        return derivatives.memory_format(input, weight, mode), derivatives.input_gradient_format(input, weight, mode)
    if formats is None:
        if len(_FORMATS) >= _FORMATS_KEPT:
            _FORMATS.clear()
        formats = _FORMATS[key] = (derivatives.memory_format(input, weight, mode),
                                   derivatives.input_gradient_format(input, weight, mode))
    return formats


def _conv_layout(input_index: int, laid_out: tuple[int, ...], mode_index: int, input_gradient: int | None = None):
    """Results at `laid_out` (the 4-D ones) in the layout torch's convolution gives them: channels_last when the
    op's input (at `input_index`; padded with the padding_mode at `mode_index`) or conv weight (the next argument)
    is; the result at `input_gradient` as torch's pad backward lays it out."""

    def layout(args, results):
        memory_format, input_format = _memory_formats(args[input_index], args[input_index + 1],
                                                      _padding_mode(args, mode_index))
        if memory_format == torch.contiguous_format:  # the input's gradient too
            return results
        return tuple(derivatives.input_gradient_in_format(t, input_format) if i == input_gradient and t.dim() == 4
                     else t.contiguous(memory_format=memory_format) if i in laid_out and t.dim() == 4 else t
                     for i, t in enumerate(results))

    return layout


_NORM_GROUPS = 18  # the position of conv_bn_leaky_relu_train's norm_groups
# the position of padding_mode in the train, train backward, eval and eval backward ops
_TRAIN_MODE, _TRAIN_BACKWARD_MODE, _EVAL_MODE, _EVAL_BACKWARD_MODE = 20, 19, 11, 12


def instance_norm_of(norm_groups: int, channels: int) -> bool:
    """Whether the statistics are InstanceNorm's, whose output torch's instance_norm makes contiguous whatever the
    layout of its input (group_norm and batch_norm keep a channels_last one)."""
    return norm_groups == channels


def _train_layout(args, results):
    results = _conv_layout(0, (0, 1), _TRAIN_MODE)(args, results)
    norm_groups = args[_NORM_GROUPS] if len(args) > _NORM_GROUPS else 0
    if instance_norm_of(norm_groups, results[0].shape[1]):
        return (results[0].contiguous(), *results[1:])
    return results


# --- fake kernels ------------------------------------------------------------------------------
def _empty(shape, like: torch.Tensor, layout: torch.memory_format):
    return torch.empty(shape, dtype=like.dtype, device=like.device, memory_format=layout)


def _train_fake(input, weight, bias, bn_weight, bn_bias, running_mean, running_var, stride, padding, dilation, groups,
                momentum, eps, negative_slope, save_output, relu=False, transposed=False, output_padding=(0, 0),
                norm_groups=0, recompute=False, padding_mode="zeros"):
    _check_train(input, weight, bias, bn_weight, bn_bias, running_mean, running_var, stride, padding, dilation, groups,
                 momentum, eps, negative_slope, save_output, relu, transposed, output_padding, norm_groups, recompute,
                 padding_mode)
    shape = conv_output_shape(input, weight, stride, padding, dilation, groups, transposed, output_padding)
    c, layout = compute_dtype(input.dtype), derivatives.memory_format(input, weight, padding_mode)
    out = _empty(shape, input, torch.contiguous_format if instance_norm_of(norm_groups, shape[1]) else layout)
    kept = input.new_empty(0) if save_output or recompute else _empty(shape, input, layout)
    statistics = statistics_shape(shape[0], shape[1], norm_groups)
    return out, kept, input.new_empty(statistics, dtype=c), input.new_empty(statistics, dtype=c)


def _conv_gradients_fake(input, weight, groups, transposed, padding_mode, output_mask):
    """(grad_input, grad_weight, grad_bias) as the backends give them: empty (numel 0) where `output_mask` says no."""
    layout = derivatives.memory_format(input, weight, padding_mode)
    grad_input, grad_weight, grad_bias = output_mask
    return (_empty(input.shape, input, derivatives.input_gradient_format(input, weight, padding_mode))
            if grad_input else input.new_empty(0),
            _empty(weight.shape, weight, layout) if grad_weight else weight.new_empty(0),
            weight.new_empty(output_channels(weight, groups, transposed) if grad_bias else 0))


def _train_backward_fake(grad_out, saved, saved_is_result, input, weight, bn_weight, bn_bias, mean, invstd, stride,
                         padding, dilation, groups, negative_slope, relu=False, transposed=False,
                         output_padding=(0, 0), norm_groups=0, bias=None, padding_mode="zeros",
                         output_mask=ALL_GRADIENTS):
    _check_train_backward(grad_out, saved, saved_is_result, input, weight, bn_weight, bn_bias, mean, invstd, stride,
                          padding, dilation, groups, negative_slope, relu, transposed, output_padding, norm_groups,
                          bias, padding_mode, output_mask)
    return (*_conv_gradients_fake(input, weight, groups, transposed, padding_mode, output_mask),
            torch.empty_like(bn_weight), torch.empty_like(bn_bias))


def _eval_fake(input, weight, bias, stride, padding, dilation, groups, negative_slope, relu=False, transposed=False,
               output_padding=(0, 0), padding_mode="zeros", bn_weight=None, bn_bias=None):
    _check_eval(input, weight, bias, stride, padding, dilation, groups, negative_slope, relu, transposed,
                output_padding, padding_mode, bn_weight, bn_bias)
    shape = conv_output_shape(input, weight, stride, padding, dilation, groups, transposed, output_padding)
    return _empty(shape, input, derivatives.memory_format(input, weight, padding_mode))


def _eval_backward_fake(grad_out, input, weight, bias, stride, padding, dilation, groups, negative_slope, relu=False,
                        transposed=False, output_padding=(0, 0), padding_mode="zeros", output_mask=ALL_GRADIENTS,
                        bn_weight=None, bn_bias=None, affine_mask=(True, True)):
    _check_eval_backward(grad_out, input, weight, bias, stride, padding, dilation, groups, negative_slope, relu,
                         transposed, output_padding, padding_mode, output_mask, bn_weight, bn_bias, affine_mask)
    grad_input, grad_weight, _ = _conv_gradients_fake(input, weight, groups, transposed, padding_mode, output_mask)
    affine = (torch.empty_like(t) if t is not None and wanted else weight.new_empty(0)
              for t, wanted in zip((bn_weight, bn_bias), affine_mask))
    return grad_input, grad_weight, torch.empty_like(bias) if output_mask[2] else bias.new_empty(0), *affine


# --- autograd: reverse mode through the backward ops, forward mode by jvp rules in torch ops -----------
_RELU, _EVAL_RELU = 15, 8  # the position of `relu` in the train and eval ops' arguments; the arguments with defaults
# follow it: these, in the schemas' order
_TRAIN_OPTIONS = (("relu", False), ("transposed", False), ("output_padding", (0, 0)), ("norm_groups", 0),
                  ("recompute", False), ("padding_mode", "zeros"))
_EVAL_OPTIONS = (("relu", False), ("transposed", False), ("output_padding", (0, 0)), ("padding_mode", "zeros"),
                 ("bn_weight", None), ("bn_bias", None))
_EVAL_BN_WEIGHT = 12  # the position of the eval op's bn_weight (bn_bias follows)


def _trailing(ctx, inputs: tuple, position: int, options: tuple) -> None:
    """The arguments with defaults, from `relu` on, into ctx; a caller that left them out gets the schema's
    defaults. backward returns a None for each argument after the differentiable ones."""
    given = tuple(inputs[position:])
    for i, (name, default) in enumerate(options):
        setattr(ctx, name, given[i] if i < len(given) else default)
    ctx.trailing_arguments = len(inputs)


def recomputed_conv_output(input, weight, bias, *geometry) -> torch.Tensor:
    """The conv output the training op would have kept (not recorded by autograd): the same platform convolution
    as the backend that ran it, in the input's dtype (on the CPU the reference and sim backends compute it in
    float32 for 16-bit input and round once; the torch backend and an NPU in the input's dtype)."""
    c = compute_dtype(input.dtype)
    # as the op's kernel ran it: no autocast (a backward called inside an autocast region would otherwise recompute
    # in its dtype), nothing recorded
    with torch.no_grad(), torch._C._ExcludeDispatchKeyGuard(AUTOCAST_KEY_SET):
        if c == input.dtype or input.device.type != "cpu" or current_backend_name() == "torch":
            return platform_conv2d(input, weight, bias, *geometry, layout_route=True)
        return platform_conv2d(input.to(c), weight.to(c), None if bias is None else bias.to(c), *geometry,
                               layout_route=True).to(input.dtype)


def conv_output_mask(ctx, has_bias: bool) -> tuple[bool, bool, bool]:
    """The backward op's output_mask: the gradients of input, weight and conv bias (the first three arguments) that
    autograd needs."""
    needs = ctx.needs_input_grad
    return bool(needs[0]), bool(needs[1]), bool(has_bias and needs[2])


def masked(gradients, mask) -> tuple:
    """The backward op's conv gradients for autograd: None for each it did not compute (returned empty)."""
    return tuple(g if wanted else None for g, wanted in zip(gradients, mask))


def _forward_values(kept: torch.Tensor | None, parameter: torch.Tensor | None) -> torch.Tensor | None:
    """`parameter` for the recorded backward: the values the forward used (`kept`, its copy; the parameter itself
    where none was kept, as the backward then never reads its values) with the parameter's gradient. x - (+0) is
    x exactly, signed zeros included."""
    if kept is None or parameter is None:
        return parameter
    return kept - (parameter.detach() - parameter)


class _Train(OpFunction):
    undefined_gradients_stay_undefined = True

    @staticmethod
    def forward(*args):
        return run_below_autograd(ops.conv_bn_leaky_relu_train, *args)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias, bn_weight, bn_bias, _, _, *geometry, _, _, ctx.negative_slope, ctx.save_output = \
            inputs[:_RELU]
        _trailing(ctx, inputs, _RELU, _TRAIN_OPTIONS)
        ctx.geometry, ctx.has_bias = geometry, bias is not None
        out, conv_out, mean, invstd = output
        ctx.mark_non_differentiable(conv_out, mean, invstd)
        # the conv bias only where it shifts the statistics (groups of several channels): to differentiate again;
        # a recomputed conv output needs it always
        shifts = derivatives.conv_bias_shifts_statistics(ctx.norm_groups, bn_weight.shape[0])
        # a copy of the C values the forward used, not the bias: torch keeps the conv output, not the bias, so an
        # in-place change of the bias before the backward (a version bump, or a `.data` update) is no error there
        # and does not change the gradient
        kept_bias = bias.detach().clone() if bias is not None and (shifts or ctx.recompute) else None
        # for a backward that is differentiated again (R1, WGAN-GP), where torch's composite reaches the conv bias
        # through the conv output it keeps: on ctx, not saved, as torch's convolution does not keep it
        ctx.conv_bias = bias
        kept = None if ctx.recompute else out if ctx.save_output else conv_out
        # the recomputation reads the conv weight and bias as the forward used them: torch keeps the conv output, so
        # a weight changed since without a version bump (a `.data` update, WGAN's clipping) must not change it. The
        # copies are small next to the conv output they replace (the nn layer recomputes only where they are)
        snapshot = (weight.detach().clone(), kept_bias) if ctx.recompute else ()
        ctx.save_for_backward(kept, input, weight, bn_weight, bn_bias, mean, invstd, kept_bias, *snapshot)
        ctx.save_for_forward(out, input, weight, bn_weight, bn_bias, invstd, kept_bias)

    @staticmethod
    def backward(ctx, grad_out, _grad_conv_out, _grad_mean, _grad_invstd):
        saved, input, weight, bn_weight, bn_bias, mean, invstd, bias, *snapshot = ctx.saved_tensors
        saved_is_result, padded = ctx.save_output, ctx.padding_mode != "zeros"
        if ctx.recompute:  # not recorded: the backward op's own derivative recomputes it from input and weight
            saved = recomputed_conv_output(input, *snapshot, *ctx.geometry, ctx.transposed, ctx.output_padding,
                                           ctx.padding_mode)
            saved_is_result = False
        if torch.is_grad_enabled():  # recorded: the composite differentiates through the conv bias, as torch's
            bias = _forward_values(bias, ctx.conv_bias)
        elif not derivatives.conv_bias_shifts_statistics(ctx.norm_groups, bn_weight.shape[0]):
            bias = None  # the kernels never read it
        mask = conv_output_mask(ctx, ctx.has_bias)
        # BatchNorm's call as before norm_groups, the other options only where they are not the defaults
        if mask != ALL_GRADIENTS:
            options = (ctx.norm_groups, bias, ctx.padding_mode, mask)
        elif padded:
            options = (ctx.norm_groups, bias, ctx.padding_mode)
        else:
            options = (ctx.norm_groups, bias) if ctx.norm_groups or bias is not None else ()
        grads = call_in_backward(
            ops.conv_bn_leaky_relu_train_backward, grad_out, saved, saved_is_result, input, weight, bn_weight, bn_bias,
            mean, invstd, *ctx.geometry, ctx.negative_slope, ctx.relu, ctx.transposed, ctx.output_padding, *options)
        return (*masked(grads[:3], mask), *grads[3:], *(None,) * (ctx.trailing_arguments - 5))

    @staticmethod
    def jvp(ctx, *tangents):
        out, input, weight, bn_weight, bn_bias, invstd, bias = ctx.saved_tensors
        if torch.is_grad_enabled():  # a tangent differentiated in reverse mode reaches the conv bias, as the backward
            bias = _forward_values(bias, ctx.conv_bias)
        out_tangent = derivatives.conv_bn_leaky_relu_train_jvp(
            input, weight, bn_weight, bn_bias, invstd, tangents[:5], *ctx.geometry, ctx.negative_slope, out, ctx.relu,
            ctx.transposed, ctx.output_padding, ctx.norm_groups, bias, ctx.padding_mode)
        return out_tangent, None, None, None


class _Eval(OpFunction):
    undefined_gradients_stay_undefined = True

    @staticmethod
    def forward(*args):
        return run_below_autograd(ops.conv_bn_leaky_relu_eval, *args)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias, *ctx.geometry, ctx.negative_slope = inputs[:_EVAL_RELU]
        _trailing(ctx, inputs, _EVAL_RELU, _EVAL_OPTIONS)
        # the biases as copies of the C values the forward used: torch's convolution and batch_norm keep none, so an
        # in-place change of one before the backward (or an inference-mode one) is no error there (a 16-bit call's
        # conv bias is the module's own: folding.eval_arguments); on ctx for a recorded backward
        kept_bias, kept_bn_bias = (None if t is None else t.detach().clone() for t in (bias, ctx.bn_bias))
        ctx.save_for_backward(input, weight, kept_bias, ctx.bn_weight, kept_bn_bias)
        ctx.save_for_forward(output, input, weight, bias, ctx.bn_weight, ctx.bn_bias)
        ctx.conv_bias, ctx.bn_weight = bias, None  # bn_weight saved above

    @staticmethod
    def backward(ctx, grad_out):
        input, weight, bias, bn_weight, bn_bias = ctx.saved_tensors
        if torch.is_grad_enabled():  # recorded: the composite differentiates through the biases, as through torch's
            bias, bn_bias = _forward_values(bias, ctx.conv_bias), _forward_values(bn_bias, ctx.bn_bias)
        mask = conv_output_mask(ctx, True)
        needs = ctx.needs_input_grad
        affine_mask = [len(needs) > i and bool(needs[i]) for i in (_EVAL_BN_WEIGHT, _EVAL_BN_WEIGHT + 1)]
        # the calls as before the affine, the other options only where they are not the defaults
        if bn_weight is not None or bn_bias is not None:
            options = (ctx.padding_mode, mask, bn_weight, bn_bias, affine_mask)
        elif mask != ALL_GRADIENTS:
            options = (ctx.padding_mode, mask)
        else:
            options = (ctx.padding_mode,) if ctx.padding_mode != "zeros" else ()
        grads = call_in_backward(ops.conv_bn_leaky_relu_eval_backward, grad_out, input, weight, bias, *ctx.geometry,
                                 ctx.negative_slope, ctx.relu, ctx.transposed, ctx.output_padding, *options)
        gradients = [*masked(grads[:3], mask), *(None,) * (ctx.trailing_arguments - 3)]
        for i, wanted in enumerate(affine_mask):
            if wanted:
                gradients[_EVAL_BN_WEIGHT + i] = grads[3 + i]
        return tuple(gradients)

    @staticmethod
    def jvp(ctx, *tangents):
        out, input, weight, bias, bn_weight, bn_bias = ctx.saved_tensors
        affine_tangents = tuple(tangents[_EVAL_BN_WEIGHT + i] if len(tangents) > _EVAL_BN_WEIGHT + i else None
                                for i in range(2))
        return derivatives.conv_bn_leaky_relu_eval_jvp(input, weight, bias, tangents[:3], *ctx.geometry,
                                                    ctx.negative_slope, out, ctx.relu, ctx.transposed,
                                                    ctx.output_padding, ctx.padding_mode, bn_weight, bn_bias,
                                                    affine_tangents)


def _train_vmap(info, in_dims, input, weight, bias, bn_weight, bn_bias, running_mean, running_var, *attributes):
    """vmap: the op once per sample (what torch's fallback does for an op without mutable arguments). Running
    statistics must then be batched too, so that each sample updates its own, as torch's batch_norm requires."""
    tensors = (input, weight, bias, bn_weight, bn_bias, running_mean, running_var)
    dims = in_dims[:len(tensors)]
    if running_mean is not None and (dims[5] is None or dims[6] is None):
        raise RuntimeError(f"vmap: ascend_acts::{TRAIN} got batched tensors while running_mean or running_var, "
                           "which it updates in place, are not batched: batch them, or pass None")
    results = [ops.conv_bn_leaky_relu_train(*(t if d is None else t.select(d, i) for t, d in zip(tensors, dims)),
                                            *attributes) for i in range(info.batch_size)]
    return tuple(torch.stack(outputs) for outputs in zip(*results)), (0, 0, 0, 0)


# --- autocast: like torch's conv2d, input, weight and conv bias run in the autocast dtype; BatchNorm's
# parameters stay as they are (float32), as torch's batch_norm takes them under autocast ----------------
def _cast_conv_arguments(args, dtype, device_type):
    def cast(t):  # torch's eligibility: a floating tensor on the autocast device, float64 excluded
        eligible = t is not None and t.is_floating_point() and t.device.type == device_type and \
            t.dtype != torch.float64
        return t.to(dtype) if eligible else t

    return (*map(cast, args[:3]), *args[3:])


_SLOPE, _SAVE_OUTPUT = 13, 14  # conv_bn_leaky_relu_train's arguments negative_slope, save_output


def _cast_train_arguments(args, dtype, device_type):
    args = _cast_conv_arguments(args, dtype, device_type)
    if args[_SAVE_OUTPUT]:  # keep only the output if x-hat can be rebuilt from it in the dtype it now has
        keep = output_determines_batch_norm(args[3], args[4], args[_SLOPE], args[0].dtype)
        args = (*args[:_SAVE_OUTPUT], keep, *args[_SAVE_OUTPUT + 1:])
    return args


declare(TRAIN, fake=_train_fake, check=_check_train, autograd=autograd_function(_Train),
        layout=_train_layout, vmap=_train_vmap, autocast=_cast_train_arguments)
declare(TRAIN_BACKWARD, fake=_train_backward_fake, check=_check_train_backward,
        layout=_conv_layout(3, (0, 1), _TRAIN_BACKWARD_MODE, input_gradient=0),
        vmap=per_sample_vmap(TRAIN_BACKWARD),
        # the backward ops' own derivatives (gradient penalties, hessians): the differentiable torch formulation.
        # It differentiates through input, weight and the BN parameters only: `saved`, `mean` and `invstd` must
        # be what the forward returned for them (they are recomputed from those, so their dependence is included).
        autograd=composite_autograd(derivatives.conv_bn_leaky_relu_train_backward_differentiable))
declare(EVAL, fake=_eval_fake, check=_check_eval, autograd=autograd_function(_Eval),
        layout=_conv_layout(0, (0,), _EVAL_MODE),
        autocast=_cast_conv_arguments, vmap=per_sample_vmap(EVAL))
declare(EVAL_BACKWARD, fake=_eval_backward_fake, check=_check_eval_backward,
        layout=_conv_layout(1, (0, 1), _EVAL_BACKWARD_MODE, input_gradient=0),
        vmap=per_sample_vmap(EVAL_BACKWARD),
        autograd=composite_autograd(derivatives.conv_bn_leaky_relu_eval_backward_differentiable))
