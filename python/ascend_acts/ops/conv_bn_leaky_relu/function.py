"""The public function `ascend_acts.conv_bn_leaky_relu`: leaky_relu(batch_norm(conv2d(...))) as one op, with BN
folding for eval: its checks (validation.py), then the training or the eval op, or torch's composite for what only
torch reproduces."""

from __future__ import annotations

import math

import torch
from torch.autograd.graph import _CloneArgBeforeMutateMode
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from ...numerics.dtypes import compute_dtype
from .._library import AUTOCAST_KEY_SET, values_unknown
from .._validation import check_bool
from .folding import eval_arguments
from .semantics import output_determines_batch_norm
from .torch_ops import activation
from .torch_ops import conv2d as platform_conv2d
from .validation import Checked, check_arguments, overlapping_statistics

ops = torch.ops.ascend_acts
F = torch.nn.functional


def _fold_reproduces_batch_norm(eval_arguments, running_var, bn_weight, eps) -> bool:
    """Whether the eval op's fold of its (weight, bias, bn_weight, bn_bias) `eval_arguments` stays within the weight's
    dtype with no zero per-channel scale (bn_weight / sqrt(running_var + eps)), its values then torch's batch_norm's
    (see the caller; in 16 bits beyond that range torch's own intermediates overflow). The weight's fold is bounded by
    max|weight| * max|bn_weight| (one pass over the weight, no products: a bound beyond the range where no product is
    only sends the call to torch's composite). Autocast is off here: its casts are the op's business."""
    weight, bias, affine_weight, affine_bias = eval_arguments
    largest = torch.finfo(weight.dtype).max
    with torch.no_grad(), torch._C._ExcludeDispatchKeyGuard(AUTOCAST_KEY_SET):
        c = compute_dtype(weight.dtype)
        bound = torch.stack(torch.aminmax(weight)).abs().amax().to(c) if weight.numel() else torch.zeros((), dtype=c)
        folded_bias = bias.to(c)
        if affine_weight is not None:
            bound, folded_bias = bound * affine_weight.abs().amax().to(c), folded_bias * affine_weight.to(c)
        if affine_bias is not None:
            folded_bias = folded_bias + affine_bias.to(c)
        scale = torch.rsqrt(running_var + eps)
        scale = scale if bn_weight is None else scale * bn_weight
        return bool((bound <= largest) & (folded_bias.abs() <= largest).all()
                    & (scale.count_nonzero() == scale.numel()))


def conv_bn_leaky_relu(input, weight, bias=None, running_mean=None, running_var=None, bn_weight=None, bn_bias=None,
                       training=False, momentum=0.1, eps=1e-5, negative_slope=0.01, stride=1, padding=0,
                       dilation=1, groups=1, transposed=False, output_padding=0, relu=False, norm_groups=0,
                       padding_mode="zeros"):
    """leaky_relu(batch_norm(conv2d(input, weight, bias, ...), ...), negative_slope), as torch computes it
    (relu=True: torch's relu in place of the LeakyReLU, negative_slope unused).

    Training (or no running statistics): batch statistics; running_mean/running_var, when given, are
    updated in place with `momentum` (torch's formula, unbiased variance). Autograd keeps the output
    instead of the conv and BN outputs when negative_slope > 0 and no bn_weight is 0 (checked eagerly;
    under torch.compile the conv output is kept). Eval: BN folded into the conv, one op; the fold is
    recomputed on every call (O(C_out * C_in * kH * kW), small next to the convolution), so it always
    sees the current weights, whatever changed them.
    Every argument is checked before anything is computed or written: a call that raises changes nothing.
    `momentum` is a number here; nn.ConvBNLeakyReLU2d handles momentum=None (cumulative average).
    `transposed=True`: the convolution is conv_transpose2d (weight (C_in, C_out/groups, kH, kW), `output_padding`),
    as aten::convolution takes it.
    `norm_groups` G >= 1: InstanceNorm (G == C_out) or GroupNorm in place of the BatchNorm (conv_bn_activation).
    `padding_mode`: torch's Conv2d's ("zeros", "reflect", "replicate", "circular"); any but "zeros" pads the input
    with F.pad and convolves unpadded, and autograd keeps only the unpadded input (the backward pads it again).
    """
    check_bool("conv_bn_leaky_relu", "relu", relu)
    return conv_bn_activation(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, training, momentum,
                              eps, negative_slope, stride, padding, dilation, groups, relu=relu, transposed=transposed,
                              output_padding=output_padding, norm_groups=norm_groups, padding_mode=padding_mode)


def conv_bn_activation(input, weight, bias=None, running_mean=None, running_var=None, bn_weight=None, bn_bias=None,
                       training=False, momentum=0.1, eps=1e-5, negative_slope=0.01, stride=1, padding=0, dilation=1,
                       groups=1, relu=False, transposed=False, output_padding=0, keep_output=True, norm_groups=0,
                       padding_mode="zeros", recompute=False):
    """conv_bn_leaky_relu, or with relu=True torch's relu in place of the LeakyReLU (negative_slope is then unused).
    ReLU is not invertible: training keeps the conv output, which the backward needs anyway to tell z <= 0 from
    z > 0 and to rebuild x-hat where the output is 0 (the least any backward of batch_norm + relu can keep).
    keep_output=False keeps the conv output whatever the activation: for a caller whose output may be changed in
    place before the backward (a Conv -> BN run with no activation, followed by any module), as torch's BN keeps its
    input.

    norm_groups G >= 1 replaces BatchNorm by torch's per-sample norms of the conv output: G == C (the output channels)
    F.instance_norm (running statistics only as track_running_stats keeps them: used in eval, updated in training;
    without them per-sample statistics in train and eval; momentum None is 0.0, as nn.InstanceNorm2d passes it),
    any other G dividing C F.group_norm (no running statistics). bn_weight/bn_bias are the norm's affine (None:
    affine=False). A GroupNorm with G == C follows instance_norm's rules too: they differ only in which calls with a
    single value per instance raise (instance_norm's 1x1 planes; group_norm's only with N == 1).
    padding_mode: see conv_bn_leaky_relu. recompute=True: where training would keep the conv output (ReLU, slope <= 0,
    an affine that cannot be inverted, keep_output=False), autograd keeps none of it and the backward recomputes it
    from input, weight and bias (for a convolution cheaper to run again than its output is to keep); ignored where the
    output is kept instead, and in eval or unfused runs."""
    args = check_arguments(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, training, momentum,
                           eps, negative_slope, stride, padding, dilation, groups, transposed=transposed,
                           output_padding=output_padding, norm_groups=norm_groups, padding_mode=padding_mode)
    check_bool("conv_bn_activation", "recompute", recompute)
    geometry = (args.stride, args.padding, args.dilation, args.groups)
    transposition = (args.transposed, args.output_padding)
    padded = (args.padding_mode,) if args.padding_mode != "zeros" else ()  # the ops' calls as before padding_mode
    if not args.batch_stats:
        # eps == 0 (a static choice): a zero running variance makes the folded weight inf and the conv inf * 0 = NaN,
        # where torch's (conv - mean) * inf is a signed inf; so is any fold that is not finite, and a zero BN weight
        # (torch's conv * 0 + (bias - mean * 0) has the signs of zero of the conv output, which the folded conv's sum
        # of zeros loses), checked on the CPU only: elsewhere the check would cost a host sync per layer, and there a
        # non-finite fold makes the output non-finite as in torch (NaN where torch may give an infinity), a zero BN
        # weight the right zeros up to their signs. A zero scale is checked, not only a zero weight: an infinite
        # running variance or eps, or a subnormal weight over a large variance, make it 0 too. An input without
        # channels gives a conv output without channels, which only torch's batch_norm takes with C_out parameters
        if args.eps != 0 and not args.no_input_channels:
            # the normalisation folds here; the affine inside the op, whose backward then takes bn_weight's and
            # bn_bias's gradients as torch's batch_norm does (folding.py)
            arguments = eval_arguments(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, args.eps,
                                       args.transposed, args.groups)
            if values_unknown(arguments[0]) or input.device.type != "cpu" or _fold_reproduces_batch_norm(
                    arguments, running_var, bn_weight, args.eps):
                op_weight, op_bias, *affine = arguments
                options = (args.padding_mode, *affine) if any(t is not None for t in affine) else padded
                out = ops.conv_bn_leaky_relu_eval(input, op_weight, op_bias, *geometry, args.negative_slope, relu,
                                                  *transposition, *options)
                # running statistics with norm_groups are InstanceNorm's, whose output torch makes contiguous
                return out.contiguous() if args.norm_groups else out
        return _unfused(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, args, relu)
    if _is_empty(args.output_shape):
        statistics = (running_mean, running_var) if args.norm_groups else (None, None)
        return _unfused(input, weight, bias, *statistics, bn_weight, bn_bias, args, relu)
    if args.no_input_channels:  # the conv output is its bias alone, which only torch's ops take
        return _unfused(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, args, relu)
    if overlapping_statistics(running_mean, running_var):
        return _unfused(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, args, relu)
    if running_mean is None and _clones_before_mutation():
        return _unfused(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, args, relu)

    c_out = args.output_shape[1]
    gamma = bn_weight if bn_weight is not None else weight.new_ones(c_out)
    beta = bn_bias if bn_bias is not None else weight.new_zeros(c_out)
    invertible = (keep_output and not relu
                  and output_determines_batch_norm(gamma, beta, args.negative_slope, input.dtype))
    # recompute the conv output rather than keep it, where it would be kept
    recompute = recompute and not invertible
    if recompute or padded:
        options = (args.norm_groups, recompute, *padded)
    else:
        options = (args.norm_groups,) if args.norm_groups else ()  # BatchNorm's call as before norm_groups
    # the op updates running_mean/running_var itself, as torch's batch_norm does
    out, _, _, _ = ops.conv_bn_leaky_relu_train(input, weight, bias, gamma, beta, running_mean, running_var,
                                                *geometry, args.momentum, args.eps, args.negative_slope, invertible,
                                                relu, *transposition, *options)
    return out


def conv_bn_leaky_relu_tensor_momentum(input, weight, bias, running_mean, running_var, bn_weight, bn_bias,
                                      training, momentum: torch.Tensor, eps, negative_slope, stride, padding,
                                      dilation, groups, relu=False, transposed=False, output_padding=0,
                                      keep_output=True, padding_mode="zeros", recompute=False):
    """conv_bn_leaky_relu with a 0-dim tensor `momentum` (and running statistics): momentum=None's
    1 / num_batches_tracked under torch.compile, where that number is data-dependent and the op's float argument
    cannot take it. In training the op runs with momentum 1 on zeroed copies of the running statistics (which it
    sets to the batch statistics exactly: 0 * 0 + 1 * batch); torch's update is then made here with the tensor."""
    if not training:
        return conv_bn_activation(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, False, 0.0, eps,
                                  negative_slope, stride, padding, dilation, groups, relu, transposed, output_padding,
                                  keep_output, padding_mode=padding_mode)
    batch_mean, batch_var = torch.zeros_like(running_mean), torch.zeros_like(running_var)
    out = conv_bn_activation(input, weight, bias, batch_mean, batch_var, bn_weight, bn_bias, True, 1.0, eps,
                             negative_slope, stride, padding, dilation, groups, relu, transposed, output_padding,
                             keep_output, padding_mode=padding_mode, recompute=recompute)
    if out.numel():  # an empty batch leaves the running statistics as they are (as torch)
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(batch_mean * momentum)
            running_var.mul_(1 - momentum).add_(batch_var * momentum)
    return out


def _is_empty(shape: torch.Size) -> bool:
    """Size.numel() would specialise a symbolic (exported) batch size, which Python arithmetic decides without a
    guard; under torch.jit.trace the sizes are traced values, whose numel() is the plain number."""
    return shape.numel() == 0 if torch.jit.is_tracing() else math.prod(shape) == 0


def _clones_before_mutation() -> bool:
    """Whether torch.autograd.graph.allow_mutation_on_saved_tensors is active: its dispatch mode reads every
    argument an op may write, and fails on a None one (torch 2.13), as the training op's running statistics are
    without them (GroupNorm, an InstanceNorm that tracks none); torch's own norms have no such argument."""
    if torch.compiler.is_compiling() or not torch._C._len_torch_dispatch_stack():
        return False
    return any(isinstance(mode, _CloneArgBeforeMutateMode) for mode in _get_current_dispatch_mode_stack())


def _unfused(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, args: Checked,
             relu: bool) -> torch.Tensor:
    """torch's own composite, for what only it reproduces: an empty training batch (an empty output still connected
    to the parameters, zero gradients, running statistics untouched: pass None), an eval fold that is not finite,
    a training run without running statistics under allow_mutation_on_saved_tensors, and expanded running statistics
    in training (torch's batch_norm updates their shared elements in its own order);
    with norm_groups F.instance_norm or F.group_norm (whose empty batch with running statistics is torch's business:
    an IndexError)."""
    conv = platform_conv2d(input, weight, bias, *args.geometry)
    if not args.norm_groups:
        out = F.batch_norm(conv, running_mean, running_var, bn_weight, bn_bias, args.batch_stats, args.momentum,
                           args.eps)
    elif args.norm_groups == conv.shape[1]:
        out = F.instance_norm(conv, running_mean, running_var, bn_weight, bn_bias, args.batch_stats, args.momentum,
                              args.eps)
    else:
        out = F.group_norm(conv, args.norm_groups, bn_weight, bn_bias, args.eps)
    return activation(out, args.negative_slope, relu)
