"""torch.library operators of the `ascend_acts` namespace (importing this package registers them): the op
modules declare each op's semantics, `_register` registers every op of the op table."""

from . import conv_bn_leaky_relu, fused_bias_leaky_relu, leaky_relu, rrelu  # noqa: F401  (declarations)
from ._library import lib  # noqa: F401
from ._register import register_all

register_all()
