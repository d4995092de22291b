"""torch.library operators of the `ascend_acts` namespace (importing this package registers them)."""

from . import conv_bn_leaky_relu, leaky_relu, rrelu  # noqa: F401  (registration side effects)
from ._library import lib  # noqa: F401
