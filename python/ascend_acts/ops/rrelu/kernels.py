"""RReLU on our AscendC kernels: on the emulator for CPU tensors, through the op package on NPU tensors (the "sim"
backend's functions and the NPU's), launched by the elementwise family's `run` (ops/leaky_relu/kernels.py); on the
emulator in pieces keyed on the flat index of their first element."""

from __future__ import annotations

import torch

from ..leaky_relu.kernels import run


def _seed(seed: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """The one-element seed on the data's device (the kernel reads it there; the op layer allows a CPU seed)."""
    return seed.reshape(1).to(like.device).contiguous()


def rrelu(self: torch.Tensor, seed: torch.Tensor, lower: float, upper: float,
          *, out: torch.Tensor | None = None, index_base: int = 0) -> torch.Tensor:
    """`index_base`: the flat index of element 0 (the noise is keyed on (seed, flat index))."""
    return run("rrelu", out, (self, _seed(seed, self)), {"lower": lower, "upper": upper}, index_base)


def rrelu_backward(grad_output: torch.Tensor, self: torch.Tensor, seed: torch.Tensor, lower: float,
                   upper: float, saved_is_result: bool, *, index_base: int = 0) -> torch.Tensor:
    return run("rrelu_grad", None, (grad_output, self, _seed(seed, grad_output)), {"lower": lower, "upper": upper},
               index_base)
