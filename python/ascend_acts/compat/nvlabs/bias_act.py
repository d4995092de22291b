"""NVlabs' `torch_utils.ops.bias_act` module, on ascend_acts: `bias_act` (the function, same signature),
`activation_funcs` (each activation's `def_alpha` and `def_gain`, as networks.py reads them; `func(x, alpha)` is
the activation alone) and `_init()` (nothing to build: returns True, as NVlabs' does once its plugin is loaded)."""

from ascend_acts.bias_activation import ACTIVATIONS as activation_funcs
from ascend_acts.bias_activation import bias_act

__all__ = ["activation_funcs", "bias_act"]


def _init() -> bool:
    """NVlabs' builds its CUDA plugin here (scripts call it to build it early); ours has nothing to build."""
    return True
