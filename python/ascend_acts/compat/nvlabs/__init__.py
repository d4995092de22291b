"""A stand-in for NVlabs' `torch_utils.ops.bias_act` (stylegan2-ada-pytorch, stylegan3), on any machine:

    from ascend_acts.compat.nvlabs import bias_act      # instead of `from torch_utils.ops import bias_act`

then the module's callers work unchanged: `bias_act.bias_act(x, b=None, dim=1, act='linear', alpha=None,
gain=None, clamp=None, impl='cuda')` is `ascend_acts.bias_act` (our fused op for linear, relu and lrelu, clamp
included) and `bias_act.activation_funcs[name].def_gain` / `.def_alpha` are NVlabs' defaults (networks.py reads
them).
"""

from . import bias_act

__all__ = ["bias_act"]
