"""The fast subset (`pytest -m "not slow"`): a parametrisation keeps representative values fast and marks the rest
`slow`, so the fast subset still runs every op on every backend and dtype while the full suite (CI) runs them all."""

from collections.abc import Collection, Iterable

import pytest

slow = pytest.mark.slow


def fast_only(values: Iterable, fast: Collection, *, unpack: bool = False) -> list:
    """`values` as parametrize arguments, those not in `fast` marked slow (test ids are unchanged).
    `unpack`: each value is a tuple of several argnames' values."""
    def param(value, marks=()):
        return pytest.param(*value, marks=marks) if unpack else pytest.param(value, marks=marks)

    values = list(values)
    missing = [value for value in fast if value not in values]
    if missing:
        raise ValueError(f"fast_only: fast values {missing!r} are not among the values {values!r}")
    return [param(value) if value in fast else param(value, slow) for value in values]
