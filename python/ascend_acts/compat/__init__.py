"""Drop-in stand-ins for other projects' op packages, built on ascend_acts and torch's own ops (nothing compiled,
no CUDA). `ascend_acts.compat.rosinality` replaces the `op` package of rosinality's stylegan2-pytorch.
`ascend_acts.compat.nvlabs.bias_act` replaces NVlabs' `torch_utils.ops.bias_act`
(stylegan2-ada-pytorch, stylegan3)."""
