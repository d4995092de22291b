"""Input tensors shared by the forward/backward tests: odd shapes, empty, 0-d, non-contiguous."""

import torch


def _transposed(dtype):
    return torch.randn(17, 33, dtype=torch.float64).to(dtype).t()


def _strided_slice(dtype):
    return torch.randn(9, 40, dtype=torch.float64).to(dtype)[1::2, ::3]


CASES = {
    "0d": lambda dtype: torch.randn((), dtype=torch.float64).to(dtype),
    "empty": lambda dtype: torch.randn(0, dtype=torch.float64).to(dtype),
    "empty3d": lambda dtype: torch.randn(1, 0, 3, dtype=torch.float64).to(dtype),
    "7": lambda dtype: torch.randn(7, dtype=torch.float64).to(dtype),
    "33x17": lambda dtype: torch.randn(33, 17, dtype=torch.float64).to(dtype),
    "2x3x64x64": lambda dtype: torch.randn(2, 3, 64, 64, dtype=torch.float64).to(dtype),
    "transposed": _transposed,
    "strided_slice": _strided_slice,
}


def make(case: str, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    torch.manual_seed(seed)
    return CASES[case](dtype)


def special_values(dtype: torch.dtype) -> torch.Tensor:
    inf, nan = float("inf"), float("nan")
    return torch.tensor([-0.0, 0.0, nan, inf, -inf, 1.5, -1.5, 1e-30, -1e-30], dtype=dtype)
