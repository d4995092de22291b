"""NVlabs' `torch_utils.ops.bias_act` module, on ascend_acts: `bias_act` (the function, same signature) and
`activation_funcs` (each activation's `def_alpha` and `def_gain`, as networks.py reads them; `func(x, alpha)`
is the activation alone)."""

from ascend_acts.bias_activation import ACTIVATIONS as activation_funcs
from ascend_acts.bias_activation import bias_act

__all__ = ["activation_funcs", "bias_act"]
