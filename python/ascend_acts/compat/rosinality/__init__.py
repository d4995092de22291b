"""A drop-in for the `op` package of rosinality's stylegan2-pytorch, on any machine (CPU, Ascend NPU):

    import sys, ascend_acts.compat.rosinality
    sys.modules["op"] = ascend_acts.compat.rosinality   # before `import model` / running train.py

then `from op import FusedLeakyReLU, fused_leaky_relu, upfirdn2d, conv2d_gradfix` in model.py and train.py gets:

- `FusedLeakyReLU`: ascend_acts.nn.FusedLeakyReLU (same arguments, attributes and state_dict);
- `fused_leaky_relu(input, bias=None, negative_slope=0.2, scale=2 ** 0.5)`: ascend_acts.fused_bias_leaky_relu;
- `upfirdn2d(input, kernel, up=1, down=1, pad=(0, 0))`: upsample, pad, FIR filter, downsample, on torch's ops;
- `conv2d_gradfix`: the submodule with `conv2d`, `conv_transpose2d`, `no_weight_gradients`, `enabled` and
  `weight_gradients_disabled`, on torch's convolution.

Importing it compiles nothing and imports no CUDA extension (rosinality's `op` builds two at import). First and
second derivatives of every function work (the R1 and path-length penalties). `op.fused_act` and
`op.conv2d_gradfix` import as submodules too; `op.upfirdn2d` is the function, as in rosinality's package after
its own `__init__` ran.
"""

from . import conv2d_gradfix
from .fused_act import FusedLeakyReLU, fused_leaky_relu
from .upfirdn import upfirdn2d

__all__ = ["FusedLeakyReLU", "conv2d_gradfix", "fused_leaky_relu", "upfirdn2d"]
