"""torch.library operators of the `ascend_acts` namespace (importing this package registers them).

Everything Python about an op is in its folder `ops/<TorchOp.folder>/` (a namespace package: no __init__.py):
- semantics.py: its ops' checks, fake kernels, autograd, vmap and autocast rules (`_semantics.declare`);
- reference.py: the NumPy oracle (arrays) and the "reference" backend's functions (tensors, named as the ops);
- torch_ops.py: the "torch" backend's functions (torch ops only: any device, the NPU fallback);
- sim.py: the "sim" backend's functions (the op's kernels on the emulator) and its kernel families' tiling helpers;
- what else is the op's alone (rrelu/rng.py; conv_bn_leaky_relu's public function, its validation, derivatives).
A folder imports the op layer's machinery (`_library`, `_semantics`, `_validation`), the shared numerics and the
emulator, another op's folder where it reuses that op (rrelu the elementwise family of leaky_relu), never the public
modules. The folders are found by the op table's names (no list here); `_register` registers every op of the table.
"""

import importlib

from ..op_table import TORCH_OPS
from ._library import lib  # noqa: F401
from ._register import register_all

for _folder in dict.fromkeys(op.folder for op in TORCH_OPS):
    importlib.import_module(f"{__name__}.{_folder}.semantics")
register_all()
