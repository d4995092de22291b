"""The public functions: drop-ins for torch.nn.functional.leaky_relu and rrelu."""

from __future__ import annotations

import torch

from . import _validation as check
from . import ops as _ops  # noqa: F401  (registers torch.ops.ascend_acts)

ops = torch.ops.ascend_acts


def leaky_relu(input: torch.Tensor, negative_slope: float = 0.01, inplace: bool = False) -> torch.Tensor:
    """LeakyReLU: `input` where input > 0, else `input * negative_slope`.

    With negative_slope >= 0 autograd keeps the output (not the input) for the backward.
    """
    check.check_input("leaky_relu", input)
    negative_slope = check.check_real("leaky_relu", "negative_slope", negative_slope)
    if check.check_bool("leaky_relu", "inplace", inplace):
        ops.leaky_relu_(input, negative_slope)
        return input
    return ops.leaky_relu(input, negative_slope)


def draw_seed(device: torch.device, generator: torch.Generator | None = None) -> torch.Tensor:
    """One 63-bit seed from the torch generator, as a 0-d int64 tensor (traceable by torch.compile)."""
    return torch.randint(0, 2**63 - 1, (), dtype=torch.int64, device=device, generator=generator)


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
    lower, upper = check.check_bounds("rrelu", lower, upper)
    training = check.check_bool("rrelu", "training", training)
    inplace = check.check_bool("rrelu", "inplace", inplace)
    check.check_generator("rrelu", generator, input.device)
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    seed = draw_seed(input.device, generator)
    if inplace:
        ops.rrelu_with_seed_(input, seed, lower, upper)
        return input
    return ops.rrelu_with_seed(input, seed, lower, upper)
