"""LeakyReLU written with torch tensor ops only, so it runs on any device: the "torch" backend's functions (the
backend protocol of `ascend_acts.backends`: tensors in, tensors out, `out=` for the forward), bit-identical to the
reference (half types computed in float32 and rounded once). `select` is the elementwise family's, RReLU's too.
"""

from __future__ import annotations

import torch

from ...numerics.dtypes import compute_dtype


def select(values: torch.Tensor, test: torch.Tensor, slopes, out: torch.Tensor | None) -> torch.Tensor:
    """test > 0 ? values : values * slopes, in the compute dtype, rounded once; into `out` when given."""
    v = values.to(compute_dtype(values.dtype))
    result = torch.where(test.to(compute_dtype(test.dtype)) > 0, v, v * slopes).to(values.dtype)
    if out is None:
        return result
    return out.copy_(result)  # after every read: `out` may be `values` itself


def leaky_relu(self: torch.Tensor, negative_slope: float, *, out: torch.Tensor | None = None) -> torch.Tensor:
    return select(self, self, negative_slope, out)


def leaky_relu_backward(grad_output: torch.Tensor, self: torch.Tensor, negative_slope: float,
                        saved_is_result: bool) -> torch.Tensor:
    return select(grad_output, self, negative_slope, None)
