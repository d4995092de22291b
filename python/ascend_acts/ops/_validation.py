"""Argument checks shared by the public functions: clear errors that name the argument."""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from ..numerics.dtypes import FLOATING_DTYPES


def check_input(fn: str, input, name: str = "input") -> None:
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be a torch.Tensor, got {type(input).__name__}")
    if input.dtype not in FLOATING_DTYPES:  # NotImplementedError, as torch's kernels have no such dtype
        raise NotImplementedError(
            f"{fn}(): argument '{name}' must be a floating-point tensor (float16, bfloat16, float32 or "
            f"float64), got {input.dtype}"
        )


FLOAT32_MAX = 3.4028234663852886e38


def check_number(fn: str, name: str, value, input: torch.Tensor | None = None) -> float:
    """A torch `Scalar` argument as torch's functions take it: a Python or NumPy number (bool included: True is
    1.0), or a 0-d tensor that does not require grad (its item()); a complex number only with imaginary part 0.
    A finite value outside float32's range raises torch's overflow error for a non-float64
    `input` given (torch's kernels convert it to float; float16/bfloat16 compute in float32)."""
    if type(value) is float:  # the usual case, which none of the conversions below changes
        return _fits_input(fn, name, value, input)
    if isinstance(value, torch.Tensor):
        if value.dim() != 0 or value.requires_grad:
            raise TypeError(f"{fn}(): argument '{name}' must be a number or a 0-d tensor that does not require "
                            f"grad, got a tensor of shape {tuple(value.shape)}"
                            f"{' that requires grad' if value.requires_grad else ''}")
        value = value.item()
    if isinstance(value, np.bool_):
        value = bool(value)
    if torch.compiler.is_compiling() and isinstance(value, np.ndarray) and value.ndim == 0:
        value = float(value)  # a NumPy scalar (NVlabs' gain=np.sqrt(0.5)) is a 0-d array to dynamo
    if isinstance(value, int) and not -(2**63) <= value < 2**64:  # torch's Scalar holds an int64 or a uint64
        raise OverflowError(f"{fn}(): argument '{name}' {value}: int too big to convert")
    # torch's Scalar: Python's and NumPy's numbers, not every numbers.Number (a Fraction, a Decimal: TypeError)
    if not isinstance(value, (int, float, complex, np.number)):
        raise TypeError(f"{fn}(): argument '{name}' must be a real number, got {type(value).__name__}")
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        if value.imag != 0:  # torch's message and type for a complex scalar given to a real kernel
            raise RuntimeError(f"{fn}(): argument '{name}' {value}: value cannot be converted to type float "
                               "without overflow")
        value = value.real
    return _fits_input(fn, name, float(value), input)


def _fits_input(fn: str, name: str, value: float, input: torch.Tensor | None) -> float:
    if (input is not None and input.dtype != torch.float64 and not torch.compiler.is_compiling()
            and math.isfinite(value) and abs(value) > FLOAT32_MAX):
        raise RuntimeError(f"{fn}(): argument '{name}' {value}: value cannot be converted to type float without "
                           f"overflow (the input is {input.dtype})")
    return value


def check_bool(fn: str, name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{fn}(): argument '{name}' must be a bool, got {type(value).__name__}")
    return value


def check_bounds(fn: str, lower, upper, input: torch.Tensor | None = None) -> tuple[float, float]:
    """RReLU's bounds as torch takes them (`check_number`; `input` given: training, where each bound must fit the
    input's dtype, as torch's uniform_ requires); non-finite ones raise torch's RuntimeError."""
    lower = check_number(fn, "lower", lower, input)
    upper = check_number(fn, "upper", upper, input)
    if not torch.compiler.is_compiling():
        for name, value in (("lower", lower), ("upper", upper)):
            if not math.isfinite(value):
                raise RuntimeError(f"{fn}(): argument '{name}' must be finite, got {value}")
    if lower > upper:
        raise RuntimeError(f"{fn}(): Lower bound should be less than or equal to the upper bound (argument 'lower' "
                           f"{lower} is greater than 'upper' {upper})")
    return lower, upper


def check_generator(fn: str, generator, device: torch.device) -> None:
    """A meta input takes a generator of any device, as torch's meta kernels (they draw nothing)."""
    if generator is None:
        return
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            f"{fn}(): argument 'generator' must be a torch.Generator or None, got {type(generator).__name__}"
        )
    if generator.device.type != device.type and device.type != "meta":
        raise ValueError(
            f"{fn}(): argument 'generator' is on device '{generator.device}' but 'input' is on "
            f"'{device}'; pass a generator of the input's device type"
        )
