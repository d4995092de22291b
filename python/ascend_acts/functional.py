"""The public functions: drop-ins for torch.nn.functional.leaky_relu and rrelu, StyleGAN2's fused bias + LeakyReLU
(rosinality's fused_leaky_relu, mmcv's fused_bias_leakyrelu) and the fused Conv2d + BatchNorm2d + LeakyReLU.
`ascend_acts` exports every name of `__all__`: a new op's public function is added here only."""

from __future__ import annotations

import math

import torch

from . import ops as _ops  # noqa: F401  (registers torch.ops.ascend_acts)
from .ops import _validation as check
from .ops.conv_bn_leaky_relu.function import conv_bn_leaky_relu
from .ops.fused_bias_leaky_relu.semantics import autocast_casts_bias

__all__ = ["conv_bn_leaky_relu", "fused_bias_leaky_relu", "leaky_relu", "rrelu"]

ops = torch.ops.ascend_acts


def leaky_relu(input: torch.Tensor, negative_slope: float = 0.01, inplace: bool = False) -> torch.Tensor:
    """LeakyReLU: `input` where input > 0, else `input * negative_slope`.

    With negative_slope >= 0 autograd keeps the output (not the input) for the backward.
    """
    check.check_input("leaky_relu", input)
    negative_slope = check.check_number("leaky_relu", "negative_slope", negative_slope, input)
    if inplace:  # any truthy value, as torch.nn.functional's `if inplace:`
        ops.leaky_relu_(input, negative_slope)
        return input
    return ops.leaky_relu(input, negative_slope)


def draw_seed(device: torch.device, generator: torch.Generator | None = None) -> torch.Tensor:
    """One 63-bit seed from the torch generator, as a 0-d int64 tensor (traceable by torch.compile). A meta input
    draws nothing (torch's meta kernels ignore the generator, whatever its device)."""
    if device.type == "meta":
        return torch.empty((), dtype=torch.int64, device=device)
    return torch.randint(0, 2**63 - 1, (), dtype=torch.int64, device=device, generator=generator)


def _rrelu_training(input, lower, upper, inplace, generator) -> torch.Tensor:
    seed = draw_seed(input.device, generator)
    if inplace:  # any truthy value, as torch.nn.functional's `if inplace:`
        ops.rrelu_(input, seed, lower, upper)
        return input
    return ops.rrelu(input, seed, lower, upper)


def _rrelu_training_rng_kept_on_error(input, lower, upper, inplace, generator) -> torch.Tensor:
    """A call that fails after its seed was drawn (an in-place check, a backend without the dtype) leaves the
    generator as it was, as torch's failed calls do (they fail before drawing). Not for compiled graphs (they draw
    in the graph) nor other devices' default generators (no common state API)."""
    if torch.compiler.is_compiling() or (generator is None and input.device.type != "cpu"):
        return _rrelu_training(input, lower, upper, inplace, generator)
    state = generator.get_state() if generator is not None else torch.get_rng_state()
    try:
        return _rrelu_training(input, lower, upper, inplace, generator)
    except BaseException:
        if generator is not None:
            generator.set_state(state)
        else:
            torch.set_rng_state(state)
        raise


def rrelu(
    input: torch.Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    inplace: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Randomized LeakyReLU.

    Training: elements x <= 0 are multiplied by a slope drawn uniformly from [lower, upper]; the
    slopes are regenerated in the backward from one seed (drawn from `generator`, or torch's default
    generator), so no noise tensor is kept. Eval: leaky_relu with slope (lower + upper) / 2.
    """
    check.check_input("rrelu", input)
    # torch adds two bool bounds as bools (True + True is True) before halving them for the eval slope
    bool_bounds = all(isinstance(v, bool) or (isinstance(v, torch.Tensor) and v.dtype == torch.bool)
                      for v in (lower, upper))
    training = check.check_bool("rrelu", "training", training)  # torch's rrelu takes a bool only, unlike inplace
    # eval reads only the slope (lower + upper) / 2, which leaky_relu checks against the input's dtype
    lower, upper = check.check_bounds("rrelu", lower, upper, input if training else None)
    check.check_generator("rrelu", generator, input.device)
    if not training:
        out = leaky_relu(input, float(bool(lower or upper)) / 2 if bool_bounds else (lower + upper) / 2, inplace)
        return out if inplace else out.contiguous()  # torch's rrelu returns a contiguous tensor, eval too
    span_limit = math.inf if input.dtype == torch.float64 else check.FLOAT32_MAX
    if not torch.compiler.is_compiling() and not (math.isfinite(upper - lower) and upper - lower <= span_limit):
        # torch's uniform_ raises for a span beyond double; ours computes the noise in float32 (docs/rng.md), where
        # a span beyond float32's range would be inf and the noise NaN: an error rather than a wrong value
        raise RuntimeError(f"rrelu(): upper - lower must be at most {span_limit:g} for a {input.dtype} input (the "
                           f"noise's span is computed in float32), got lower={lower}, upper={upper}")
    return _rrelu_training_rng_kept_on_error(input, lower, upper, inplace, generator)


def _check_fused_bias(input, bias) -> None:
    """Errors of the types torch's composite x + bias.view(1, -1, 1, ...) and its ops raise, naming the argument."""
    fn = "fused_bias_leaky_relu"
    check.check_input(fn, input)
    if input.dim() < 2:
        raise ValueError(f"{fn}(): argument 'input' must have rank >= 2 (N, C, ...: the bias is over dimension 1), "
                         f"got shape {tuple(input.shape)}")
    if bias is None:
        return
    if not isinstance(bias, torch.Tensor):
        raise TypeError(f"{fn}(): argument 'bias' must be a torch.Tensor or None, got {type(bias).__name__}")
    if bias.dim() != 1 or bias.shape[0] != input.shape[1]:
        raise RuntimeError(f"{fn}(): argument 'bias' must have shape ({input.shape[1]},) (the channels of 'input' "
                           f"{tuple(input.shape)}), got {tuple(bias.shape)}")
    if bias.dtype not in check.FLOATING_DTYPES:
        raise RuntimeError(f"{fn}(): argument 'bias' must be a floating-point tensor, got {bias.dtype}")
    if bias.device != input.device:
        raise RuntimeError(f"{fn}(): argument 'bias' is on {bias.device}, 'input' on {input.device}: expected all "
                           "tensors to be on the same device")
    if bias.dtype != input.dtype and not (torch.is_autocast_enabled(input.device.type)
                                          and autocast_casts_bias(input, bias, input.device.type)):
        raise RuntimeError(f"{fn}(): argument 'bias' has dtype {bias.dtype} but 'input' has {input.dtype}; they must "
                           "match outside torch.autocast (under it a float16/bfloat16/float32 bias takes the input's "
                           "dtype)")


def fused_bias_leaky_relu(input: torch.Tensor, bias: torch.Tensor | None = None, negative_slope: float = 0.2,
                          scale: float = 2**0.5) -> torch.Tensor:
    """StyleGAN2's fused bias + LeakyReLU: `leaky_relu(input + bias.view(1, -1, 1, ...), negative_slope) * scale`,
    the bias (C,) over dimension 1 of `input` (rank >= 2: (N, C) after a linear layer, (N, C, H, W) after a conv);
    `bias=None` adds nothing. Computed in float32 (float64 for float64) and rounded once.

    Autograd keeps the output only when negative_slope >= 0 and scale >= 1, else the input and the bias. The bias
    must have the input's dtype, except under torch.autocast, where a float32 bias is cast to the input's dtype
    (as autocast casts a conv's bias).
    """
    _check_fused_bias(input, bias)
    # as the composite F.leaky_relu(input + bias, negative_slope) * scale takes them: the slope overflows float
    # as leaky_relu's; `* scale` converts any real number (a float32 product overflows to inf)
    negative_slope = check.check_number("fused_bias_leaky_relu", "negative_slope", negative_slope, input)
    if isinstance(scale, complex) or (isinstance(scale, torch.Tensor) and scale.is_complex()):
        raise TypeError("fused_bias_leaky_relu(): argument 'scale' must be a real number (a complex scale would "
                        "make the output complex)")
    scale = check.check_number("fused_bias_leaky_relu", "scale", scale)
    return ops.fused_bias_leaky_relu(input, bias, negative_slope, scale)
