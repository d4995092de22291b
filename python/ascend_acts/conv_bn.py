"""`conv_bn_leaky_relu`: leaky_relu(batch_norm(conv2d(...))) as one op, with BN folding for eval."""

from __future__ import annotations

import torch

from . import _validation as check
from . import ops as _ops  # noqa: F401  (registers torch.ops.ascend_acts)

ops = torch.ops.ascend_acts
FN = "conv_bn_leaky_relu"


def _pair(name: str, value) -> list[int]:
    pair = [value, value] if isinstance(value, int) else list(value)
    if len(pair) != 2 or not all(isinstance(v, int) for v in pair):
        raise TypeError(f"{FN}(): argument '{name}' must be an int or a pair of ints, got {value!r}")
    return pair


def resolve_padding(padding, weight: torch.Tensor, stride: list[int], dilation: list[int]) -> list[int]:
    """(top, bottom, left, right); "same" follows torch: the extra row/column goes bottom/right."""
    if padding == "valid":
        return [0, 0, 0, 0]
    if padding == "same":
        if stride != [1, 1]:
            raise ValueError(f"{FN}(): padding='same' is not supported for strided convolutions")
        sides = []
        for axis in range(2):
            total = dilation[axis] * (weight.shape[2 + axis] - 1)
            sides += [total // 2, total - total // 2]
        return sides
    if isinstance(padding, str):
        raise ValueError(f"{FN}(): argument 'padding' must be 'same', 'valid', an int or a pair, got {padding!r}")
    ph, pw = _pair("padding", padding)
    if ph < 0 or pw < 0:
        raise ValueError(f"{FN}(): argument 'padding' must be non-negative, got {padding!r}")
    return [ph, ph, pw, pw]


def _check_shapes(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, groups) -> None:
    check.check_input(FN, input)
    if input.dim() != 4:
        raise ValueError(f"{FN}(): argument 'input' must be 4-D (N, C, H, W), got {input.dim()}-D")
    if not isinstance(weight, torch.Tensor) or weight.dim() != 4:
        raise ValueError(f"{FN}(): argument 'weight' must be a 4-D tensor (C_out, C_in/groups, kH, kW)")
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{FN}(): argument 'groups' must be a positive int, got {groups!r}")
    c_in, c_out = input.shape[1], weight.shape[0]
    if c_in % groups or c_out % groups:
        raise ValueError(f"{FN}(): groups ({groups}) must divide input channels ({c_in}) and output channels ({c_out})")
    if weight.shape[1] * groups != c_in:
        raise ValueError(f"{FN}(): 'weight' expects {weight.shape[1] * groups} input channels, 'input' has {c_in}")
    for name, t in (("bias", bias), ("running_mean", running_mean), ("running_var", running_var),
                    ("bn_weight", bn_weight), ("bn_bias", bn_bias)):
        if t is not None and (not isinstance(t, torch.Tensor) or t.shape != (c_out,)):
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{FN}(): argument '{name}' must have shape ({c_out},), got {shape}")
    if (running_mean is None) != (running_var is None):
        raise ValueError(f"{FN}(): 'running_mean' and 'running_var' must both be given or both be None")


def fold_batch_norm(weight, bias, running_mean, running_var, bn_weight, bn_bias, eps):
    """Conv weight and bias with eval-mode BN folded in (exact up to rounding; differentiable)."""
    scale = torch.rsqrt(running_var + eps)
    if bn_weight is not None:
        scale = scale * bn_weight
    shift = -running_mean * scale if bias is None else (bias - running_mean) * scale
    if bn_bias is not None:
        shift = shift + bn_bias
    return weight * scale.to(weight.dtype).reshape(-1, 1, 1, 1), shift.to(weight.dtype)


def output_determines_batch_norm(gamma: torch.Tensor, beta: torch.Tensor, negative_slope: float,
                                 dtype: torch.dtype) -> bool:
    """Whether training may keep only the output (InPlace-ABN): LeakyReLU invertible (slope > 0) and
    x-hat = (z - beta) / gamma recoverable from the output rounded to `dtype`. That recovery's error is
    about u(dtype) * (|x-hat| + 2 |beta| / |gamma|): the beta/gamma term must not exceed 1e-2 or, where
    the dtype's own rounding is coarser (bfloat16), 8x the |x-hat| ~ 1 term every BN backward has."""
    if not negative_slope > 0 or torch.compiler.is_compiling():
        return False  # under compile: no data-dependent choice; the conv output is kept
    magnitude = gamma.detach().abs()
    if not bool((magnitude > 0).all()):
        return False
    unit_roundoff = torch.finfo(dtype).eps / 2
    limit = max(8.0, 1e-2 / (2 * unit_roundoff))
    return float((beta.detach().abs() / magnitude).max()) <= limit


def conv_bn_leaky_relu(input, weight, bias=None, running_mean=None, running_var=None, bn_weight=None, bn_bias=None,
                       training=False, momentum=0.1, eps=1e-5, negative_slope=0.01, stride=1, padding=0,
                       dilation=1, groups=1):
    """leaky_relu(batch_norm(conv2d(input, weight, bias, ...), ...), negative_slope), as torch computes it.

    Training (or no running statistics): batch statistics; running_mean/running_var, when given, are
    updated in place with `momentum` (torch's formula, unbiased variance). Autograd keeps the output
    instead of the conv and BN outputs when negative_slope > 0 and no bn_weight is 0 (checked eagerly;
    under torch.compile the conv output is kept). Eval: BN folded into the conv, one op.
    `momentum` is a number here; nn.ConvBNLeakyReLU2d handles momentum=None (cumulative average).
    """
    _check_shapes(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, groups)
    training = check.check_bool(FN, "training", training)
    momentum = check.check_real(FN, "momentum", momentum, finite=True)
    eps = check.check_real(FN, "eps", eps, finite=True)
    negative_slope = check.check_real(FN, "negative_slope", negative_slope)
    stride, dilation = _pair("stride", stride), _pair("dilation", dilation)
    if min(stride) < 1 or min(dilation) < 1:
        raise ValueError(f"{FN}(): 'stride' and 'dilation' must be positive, got {stride} and {dilation}")
    pad = resolve_padding(padding, weight, stride, dilation)
    geometry = (stride, pad, dilation, groups)
    if not training and running_mean is not None:
        folded_weight, folded_bias = fold_batch_norm(weight, bias, running_mean, running_var, bn_weight, bn_bias, eps)
        return ops.conv_bias_leaky_relu(input, folded_weight, folded_bias, *geometry, negative_slope)

    c_out = weight.shape[0]
    gamma = bn_weight if bn_weight is not None else weight.new_ones(c_out)
    beta = bn_bias if bn_bias is not None else weight.new_zeros(c_out)
    invertible = output_determines_batch_norm(gamma, beta, negative_slope, input.dtype)
    out, _, mean, invstd = ops.conv_bn_leaky_relu_train(input, weight, bias, gamma, beta, *geometry, eps,
                                                        negative_slope, invertible)
    if running_mean is not None:
        with torch.no_grad():
            count = out.numel() // c_out
            variance = (invstd.reciprocal().square() - eps) * (count / max(count - 1, 1))
            running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
            running_var.mul_(1 - momentum).add_(variance.to(running_var.dtype), alpha=momentum)
    return out
