"""NVlabs' fused bias + activation (`torch_utils.ops.bias_act.bias_act` of stylegan2-ada-pytorch and stylegan3),
written from its documented semantics: x + b along `dim`, an activation by name, times a gain, clamped.

`linear`, `relu` and `lrelu` run on our fused op `ascend_acts::fused_bias_leaky_relu` (one kernel launch each
way): leaky_relu(x + b, slope) * gain with slope 1 (linear) or alpha (lrelu), or its relu mode, clamped inside the
kernels. A bias along `dim` is the kernels' dimension 1 of x viewed as (prod(shape[:dim]), shape[dim],
prod(shape[dim + 1:])), a view of a contiguous x. The other activations are torch composites of the same formulas.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from typing import Callable

import torch
import torch.nn.functional as F

from . import ops as _ops  # noqa: F401  (registers torch.ops.ascend_acts)
from .ops import _validation as check

ops = torch.ops.ascend_acts


@dataclasses.dataclass(frozen=True)
class Activation:
    """One entry of `ACTIVATIONS`: `func(x, alpha=...)` (the activation alone, for the torch composite), the
    defaults that `alpha=None` and `gain=None` stand for, and whether our fused op runs it (leaky_relu with slope
    `fused_slope(alpha)`; relu by the op's relu mode, the slope unused). `def_alpha` and `def_gain` are NVlabs'
    attribute names (networks.py reads `activation_funcs[name].def_gain`)."""

    func: Callable[..., torch.Tensor]  # func(x, alpha=...), as NVlabs calls it
    def_alpha: float
    def_gain: float
    # NVlabs' other entry fields, for code that reads them: its CUDA kernel's index of the activation, which of x
    # ('x') or y ('y') its gradient reads ('': neither), whether it has a nonzero second derivative
    cuda_idx: int
    ref: str
    has_2nd_grad: bool
    fused_slope: Callable[[float], float] | None = None


    def __getitem__(self, key: str):  # NVlabs' entries are dicts with attribute access: spec['def_gain'] too
        return getattr(self, key)


SQRT2 = math.sqrt(2)
ACTIVATIONS: dict[str, Activation] = {
    "linear": Activation(lambda x, **_: x, 0.0, 1.0, 1, "", False, fused_slope=lambda alpha: 1.0),
    # relu: the op's relu mode (its LeakyReLU with slope 0 would give -inf * 0 = NaN and -0.0 where relu gives 0, +0.0)
    "relu": Activation(lambda x, **_: F.relu(x), 0.0, SQRT2, 2, "y", False, fused_slope=lambda alpha: 0.0),
    "lrelu": Activation(lambda x, alpha, **_: F.leaky_relu(x, alpha), 0.2, SQRT2, 3, "y", False,
                        fused_slope=lambda alpha: alpha),
    # alpha is read by lrelu only (elu is F.elu's alpha=1.0 whatever `alpha` says, as in NVlabs' table)
    "tanh": Activation(lambda x, **_: torch.tanh(x), 0.0, 1.0, 4, "y", True),
    "sigmoid": Activation(lambda x, **_: torch.sigmoid(x), 0.0, 1.0, 5, "y", True),
    "elu": Activation(lambda x, **_: F.elu(x), 0.0, 1.0, 6, "y", True),
    "selu": Activation(lambda x, **_: F.selu(x), 0.0, 1.0, 7, "y", True),
    "softplus": Activation(lambda x, **_: F.softplus(x), 0.0, 1.0, 8, "y", True),
    "swish": Activation(lambda x, **_: torch.sigmoid(x) * x, 0.0, SQRT2, 9, "x", True),
}
FUSED_ACTIVATIONS = tuple(name for name, spec in ACTIVATIONS.items() if spec.fused_slope is not None)
IMPLS = ("ref", "cuda")

_FN = "bias_act"


def _check_bias(x: torch.Tensor, b, dim) -> int:
    """The bias's checks (NVlabs asserts them only when a bias is given: `dim` is ignored without one); returns
    `dim` as an int."""
    if not isinstance(b, torch.Tensor):
        raise TypeError(f"{_FN}(): argument 'b' must be a torch.Tensor or None, got {type(b).__name__}")
    if isinstance(dim, bool):
        raise TypeError(f"{_FN}(): argument 'dim' must be an int, got bool")
    try:
        dim = operator.index(dim)
    except TypeError:
        raise TypeError(f"{_FN}(): argument 'dim' must be an int, got {type(dim).__name__}") from None
    if not 0 <= dim < x.dim():  # NVlabs: `assert 0 <= dim < x.ndim` (no negative dims)
        raise ValueError(f"{_FN}(): argument 'dim' must satisfy 0 <= dim < x.ndim = {x.dim()} (negative dims are "
                         f"not accepted, as in NVlabs' bias_act), got {dim}")
    if b.dim() != 1 or b.shape[0] != x.shape[dim]:
        raise RuntimeError(f"{_FN}(): argument 'b' must have shape ({x.shape[dim]},) (dimension {dim} of 'x' "
                           f"{tuple(x.shape)}), got {tuple(b.shape)}")
    if b.dtype not in check.FLOATING_DTYPES:
        raise RuntimeError(f"{_FN}(): argument 'b' must be a floating-point tensor (float16, bfloat16, float32 or "
                           f"float64), got {b.dtype}")
    if b.device != x.device:
        raise RuntimeError(f"{_FN}(): argument 'b' is on {b.device}, 'x' on {x.device}: expected all tensors to be "
                           "on the same device")
    return dim


def _spec(act) -> Activation:
    if not isinstance(act, str) or act not in ACTIVATIONS:
        raise ValueError(f"{_FN}(): argument 'act' must be one of {', '.join(map(repr, ACTIVATIONS))}, "
                         f"got {act!r}")
    return ACTIVATIONS[act]


class _BiasAdd(torch.autograd.Function):
    """x + b over dimension 1 (linear, gain 1, no clamp) on our forward kernel; its backward is the composite's Add's:
    grad_x is grad_output itself (no kernel writes a copy of it) and grad_b a reduction of it, so the bias has no
    second derivative, as in the composite. (Not a branch of the op's own autograd: fused_leaky_relu with slope 1
    and scale 1 keeps its kernel's grad_bias bits.)"""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, b):
        return ops.fused_bias_leaky_relu(x, b, 1.0, 1.0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.shape = inputs[0].shape

    @staticmethod
    def backward(ctx, grad_output):
        reduced = [i for i in range(grad_output.dim()) if i != 1]
        return grad_output, grad_output.sum(reduced) if ctx.needs_input_grad[1] else None


class _BiasAddForwardAD(_BiasAdd):
    """_BiasAdd with its forward-mode derivative, x_t + b_t (eager: dynamo cannot trace a Function with a custom
    jvp, so compiled graphs take _BiasAdd)."""

    @staticmethod
    def jvp(ctx, x_tangent, b_tangent):
        if b_tangent is None:
            return x_tangent
        spread = b_tangent.view([-1 if i == 1 else 1 for i in range(len(ctx.shape))])
        return x_tangent + spread if x_tangent is not None else spread.expand(ctx.shape).clone()


def _on_kernels(x: torch.Tensor, b: torch.Tensor | None, slope: float, gain: float, clamp: float,
                relu: bool) -> torch.Tensor:
    """Our op on x of rank >= 2, the bias over dimension 1."""
    if b is not None and not relu and slope == 1 and gain == 1 and clamp < 0:
        return (_BiasAdd if torch.compiler.is_compiling() else _BiasAddForwardAD).apply(x, b)
    return ops.fused_bias_leaky_relu(x, b, slope, gain, clamp, relu)


def _fused(x: torch.Tensor, b: torch.Tensor | None, dim: int, slope: float, gain: float, clamp: float,
           relu: bool) -> torch.Tensor:
    """act(x + b along dim) * gain, clamped when clamp >= 0, on our op, whose bias is over dimension 1 of a rank >= 2
    input: for another dim, x viewed as (prod(shape[:dim]), shape[dim], prod(shape[dim + 1:])) -- a view when x is
    contiguous. A non-contiguous x with dim != 1 is moved instead (the op copies it to a contiguous one either way),
    so that the result keeps the composite's strides."""
    run = functools.partial(_on_kernels, slope=slope, gain=gain, clamp=clamp, relu=relu)
    if x.dim() >= 2 and (b is None or dim == 1):
        return run(x, b)
    if b is not None and x.dim() >= 2 and not x.is_contiguous():
        return run(x.movedim(dim, 1), b).movedim(1, dim)
    if b is None:  # rank 0 or 1: one row of one channel
        return run(x.reshape(1, 1, -1), None).view(x.shape)
    shape = x.shape
    return run(x.reshape(math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])), b).view(shape)


def _composite(x: torch.Tensor, b: torch.Tensor | None, dim: int, spec: Activation, alpha: float,
               gain: float) -> torch.Tensor:
    if b is not None:
        x = x + b.view([x.shape[dim] if i == dim else 1 for i in range(x.dim())])
    x = spec.func(x, alpha=alpha)
    return x * gain if gain != 1 else x


def bias_act(x: torch.Tensor, b: torch.Tensor | None = None, dim: int = 1, act: str = "linear", alpha=None,
             gain=None, clamp=None, impl: str = "cuda") -> torch.Tensor:
    """NVlabs' `bias_act` (stylegan2-ada-pytorch, stylegan3): `act(x + b) * gain`, clamped to [-clamp, clamp].

    - `b`: None, or a 1-D tensor of length `x.shape[dim]` added along dimension `dim` (0 <= dim < x.ndim; `dim`
      is ignored when `b` is None). A floating `b` of another dtype promotes as `x + b` does (the reference's
      result dtype; NVlabs' CUDA kernel requires equal dtypes).
    - `act`: 'linear', 'relu', 'lrelu', 'tanh', 'sigmoid', 'elu', 'selu', 'softplus' or 'swish'. `alpha` (None:
      the activation's default) is lrelu's negative slope (default 0.2) and ignored by the others.
    - `gain`: None for the activation's default (sqrt(2) for relu, lrelu and swish, else 1); applied when != 1.
    - `clamp`: None (no clamping) or a number >= 0: the result is clamped to [-clamp, clamp] (zero gradient
      outside, as torch.clamp's).
    - `impl`: 'ref' or 'cuda' (anything else is an error, as in NVlabs), otherwise ignored: ours picks its own
      implementation. linear, relu and lrelu run on our fused op `ascend_acts::fused_bias_leaky_relu` (scale =
      gain, the clamp and relu modes; x viewed as (outer, channels, inner) when `dim` is not 1), one kernel
      launch each way; linear with gain 1 and no clamp passes the gradient through, as the composite's Add. The
      other activations are torch composites of NVlabs' formulas.

    float32: linear, relu and lrelu are the composite `act(x + b.view(...)) * gain`, clamped, bit for bit (values
    and input gradients; the bias gradient to rounding). Half types: the fused activations round once, the
    composite after each step. First and second derivatives, forward-mode AD,
    torch.compile and autocast (which the composite's ops ignore: a float32 `b` promotes a half `x`) work.
    Errors name the argument: ValueError for `act`, `dim`, `clamp` and `impl` (NVlabs: AssertionError or
    KeyError), RuntimeError for a `b` of the wrong shape, dtype or device, TypeError for a wrong type.
    """
    check.check_input(_FN, x, "x")
    if not isinstance(impl, str) or impl not in IMPLS:
        raise ValueError(f"{_FN}(): argument 'impl' must be 'ref' or 'cuda' (ignored: ours picks its own "
                         f"implementation), got {impl!r}")
    spec = _spec(act)
    alpha = spec.def_alpha if alpha is None else check.check_number(_FN, "alpha", alpha, x)
    gain = spec.def_gain if gain is None else check.check_number(_FN, "gain", gain)
    if clamp is not None:
        clamp = check.check_number(_FN, "clamp", clamp, x)  # torch.clamp refuses a bound past x's dtype
        if not clamp >= 0:  # NaN too, as NVlabs' `assert clamp is None or clamp >= 0`
            raise ValueError(f"{_FN}(): argument 'clamp' must be None or a number >= 0, got {clamp}")
    if b is not None:
        dim = _check_bias(x, b, dim)
        if b.dtype != x.dtype:  # as `x + b` promotes (autocast leaves additions alone)
            dtype = torch.promote_types(x.dtype, b.dtype)
            x, b = x.to(dtype), b.to(dtype)

    if spec.fused_slope is None:
        y = _composite(x, b, dim, spec, alpha, gain)
        return y if clamp is None else y.clamp(-clamp, clamp)
    if b is None and gain == 1 and act == "linear" and clamp is None:
        return x  # nothing to compute: NVlabs returns x itself
    return _fused(x, b, dim, spec.fused_slope(alpha), gain, -1.0 if clamp is None else clamp, act == "relu")
