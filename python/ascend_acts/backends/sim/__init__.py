"""The "sim" CPU backend's infrastructure: our emulator (ascendc_sim/) that runs the AscendC kernels of op_kernel/,
through the compiled binding `ascend_acts._sim` (built by CMake during `pip install`).

Every launch is checked against the emulator's rules (UB capacity, alignment, queues, GM bounds, cross-core
writes, dtype support: a broken one raises EmulatorError) and counted: `last_launch()` returns the counters of
the calling context's latest launch, `launch_settings()` changes the platform or the cores tiled for. The
backend's functions (one per functional op, tensors in and out: the launch sequence an NPU runs too, launching
through `backends.launch`) and each kernel family's tiling helpers are in the ops' folders:
`ascend_acts.ops.<op>.kernels`.
"""

from .emulator import (  # noqa: F401  (the emulator's API, for tests, benchmarks and users)
    EmulatorError,
    Launch,
    Rule,
    last_launch,
    launch_settings,
    platforms,
    unavailable_reason,
)
