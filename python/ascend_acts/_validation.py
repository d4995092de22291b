"""Argument checks shared by the public functions: clear errors that name the argument."""

from __future__ import annotations

import math
import numbers

import torch

FLOATING_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_input(fn: str, input) -> None:
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"{fn}(): argument 'input' must be a torch.Tensor, got {type(input).__name__}")
    if input.dtype not in FLOATING_DTYPES:  # NotImplementedError, as torch's kernels have no such dtype
        raise NotImplementedError(
            f"{fn}(): argument 'input' must be a floating-point tensor (float16, bfloat16, float32 or "
            f"float64), got {input.dtype}"
        )


def check_real(fn: str, name: str, value, finite: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}(): argument '{name}' must be a real number, got {type(value).__name__}")
    value = float(value)
    # under torch.compile(dynamic=True) a module's float attributes are symbolic, and math.isfinite on
    # them would break the graph: finiteness is checked in eager calls only
    if finite and not torch.compiler.is_compiling() and not math.isfinite(value):
        raise ValueError(f"{fn}(): argument '{name}' must be finite, got {value}")
    return value


def check_bool(fn: str, name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{fn}(): argument '{name}' must be a bool, got {type(value).__name__}")
    return value


def check_bounds(fn: str, lower, upper) -> tuple[float, float]:
    lower = check_real(fn, "lower", lower, finite=True)
    upper = check_real(fn, "upper", upper, finite=True)
    if lower > upper:
        raise RuntimeError(f"{fn}(): Lower bound should be less than or equal to the upper bound (argument 'lower' "
                           f"{lower} is greater than 'upper' {upper})")
    return lower, upper


def check_generator(fn: str, generator, device: torch.device) -> None:
    if generator is None:
        return
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"{fn}(): argument 'generator' must be a torch.Generator or None, got {type(generator).__name__}"
        )
    if generator.device.type != device.type:
        raise ValueError(
            f"{fn}(): argument 'generator' is on device '{generator.device}' but 'input' is on "
            f"'{device}'; pass a generator of the input's device type"
        )
