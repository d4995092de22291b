"""The "sim" CPU backend: our AscendC kernels (op_kernel/) run by our emulator (ascendc_sim/), through the
compiled binding `ascend_acts._sim` (built by CMake during `pip install`).

The backend protocol (ascend_acts.backends): one function per functional op of the op table, tensors in and
out. Every launch is checked against the emulator's rules (UB capacity, alignment, queues, GM bounds,
cross-core writes, dtype support: a broken one raises EmulatorError) and counted: `last_launch()` returns the
counters of the calling context's latest launch, `launch_settings()` changes the platform or the cores
tiled for. One module per kernel family; the kernel-level functions and op_host's tilings are here too, for
tests and benchmarks.
"""

from .batch_norm_leaky_relu_kernels import (  # noqa: F401
    batch_norm_leaky_relu,
    batch_norm_leaky_relu_grad,
    conv_bn_leaky_relu_train,
    conv_bn_leaky_relu_train_backward,
)
from .batch_norm_leaky_relu_kernels import tiling as batch_norm_leaky_relu_tiling  # noqa: F401
from .conv_bn_leaky_relu_eval_kernels import (  # noqa: F401
    conv_bn_leaky_relu_eval,
    conv_bn_leaky_relu_eval_backward,
    eval_kernel,
)
from .conv_bn_leaky_relu_eval_kernels import has_tiling as conv_bn_leaky_relu_eval_has_tiling  # noqa: F401
from .conv_bn_leaky_relu_eval_kernels import tiling as conv_bn_leaky_relu_eval_tiling  # noqa: F401
from .elementwise_kernels import (  # noqa: F401
    leaky_relu,
    leaky_relu_backward,
    rrelu,
    rrelu_backward,
)
from .elementwise_kernels import tiling as elementwise_tiling  # noqa: F401
from .emulator import (  # noqa: F401
    EmulatorError,
    Launch,
    Rule,
    last_launch,
    launch_settings,
    platforms,
    unavailable_reason,
)
from .fused_bias_leaky_relu_kernels import fused_bias_leaky_relu, fused_bias_leaky_relu_backward  # noqa: F401
from .fused_bias_leaky_relu_kernels import tiling as fused_bias_leaky_relu_tiling  # noqa: F401
