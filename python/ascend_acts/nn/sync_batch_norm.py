"""SyncBatchNorm: torch.nn.SyncBatchNorm's constructor, state and results, on the CPU as well, and accepted by
DistributedDataParallel in a CPU module.

torch's DDP refuses any torch.nn.SyncBatchNorm in a CPU module at construction ("SyncBatchNorm layers only work
with GPU modules": an isinstance check), and torch's SyncBatchNorm itself raises for a CPU input in distributed
training. This class is therefore deliberately NOT a torch.nn.SyncBatchNorm subclass: a _BatchNorm, as torch's
is, with the same attributes (process_group included) and state_dict keys, so checkpoints load both ways and
`__class__` can be swapped in place (`ascend_acts.convert` does). Inside a fused block (nn/fusion.py's rules) it
runs the synchronised fused op, sync_batch_norm.sync_conv_bn_leaky_relu (Conv2d or ConvTranspose2d, LeakyReLU or
ReLU); anywhere else its own forward below.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F
from torch.nn.modules.batchnorm import _BatchNorm
from torch.utils import checkpoint as _checkpoint

from ..sync_batch_norm import sync_batch_norm, synchronising_group

# raised by torch.utils.checkpoint's recomputation once the last needed tensor is saved: after the running
# statistics were updated, so the batch stays counted (as in torch)
RECOMPUTATION_STOPPED = getattr(_checkpoint, "_StopRecomputationError", ())

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_BatchNorm):
    """Like torch.nn.SyncBatchNorm: in training, with torch.distributed initialised and more than one process
    in `process_group` (None: the default group), the batch statistics are those of every process's batch
    (gloo, HCCL, NCCL); otherwise plain batch norm. Every process must call it, whatever its batch size (0
    too). Unlike torch's, one value per channel over all processes raises BatchNorm's ValueError (torch's
    gives a NaN running variance), and a call that raises changes nothing (num_batches_tracked included)."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group=None, device=None, dtype=None, *,
                 bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device=device, dtype=dtype,
                         bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input: torch.Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """torch.nn.SyncBatchNorm.forward's bookkeeping, with the synchronised part on every device."""
        self._check_input_dim(input)
        if input.size(1) == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        counts = self.training and self.track_running_stats and self.num_batches_tracked is not None
        # counted once the batch is normalised (a call that raises leaves the buffer, its version too)
        try:
            output = self._normalise(input, counts)
        except RECOMPUTATION_STOPPED:
            if counts:
                self.num_batches_tracked.add_(1)
            raise
        if counts:
            self.num_batches_tracked.add_(1)
        return output

    def _normalise(self, input: torch.Tensor, counts: bool) -> torch.Tensor:
        factor = 0.0 if self.momentum is None else self.momentum
        if counts and self.momentum is None:  # cumulative moving average: 1 / the count with this batch
            factor = 1.0 / (float(self.num_batches_tracked) + 1)
        batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        statistics = not self.training or self.track_running_stats
        running_mean = self.running_mean if statistics else None
        running_var = self.running_var if statistics else None
        group = synchronising_group(batch_stats and self.training, self.process_group)
        if group is None:
            return F.batch_norm(input, running_mean, running_var, self.weight, self.bias, batch_stats, factor,
                                self.eps)
        return sync_batch_norm(input, running_mean, running_var, self.weight, self.bias, factor, self.eps, group)
