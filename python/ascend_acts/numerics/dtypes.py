"""The floating dtypes the ops take, the dtype they compute in, and NumPy views of tensors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

FLOATING_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def compute_dtype(dtype):
    """float64 stays float64; float32, float16 and bfloat16 are computed in float32 (rounded once at the end). A
    torch dtype gives a torch dtype, anything else (a NumPy dtype or type) a NumPy dtype."""
    if isinstance(dtype, torch.dtype):
        return torch.float64 if dtype == torch.float64 else torch.float32
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def to_array(tensor: torch.Tensor) -> np.ndarray:
    """A NumPy view (shared memory) of a contiguous CPU tensor; bfloat16 through ml_dtypes."""
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()
