"""torch.library operators of the `ascend_acts` namespace (importing this package registers them)."""

from . import leaky_relu, rrelu  # noqa: F401  (registration side effects)
from ._library import lib  # noqa: F401
