"""What each op means beyond its schema, declared by the op folders (`ops/<op>/semantics.py`) and registered by
`ops._register`.

An op folder declares, per op of `op_table.TORCH_OPS`, its argument validation, fake kernel, autograd rule and,
where they apply, its result layout, vmap rule and autocast casts. The device kernels are not declared: they are
generic (`ops._kernels`), the backends' functions of the op's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..op_table import torch_op
from ._library import AutogradRule


@dataclass(frozen=True)
class Semantics:
    autograd: AutogradRule
    fake: Callable | None = None    # shapes and dtypes for torch.compile / meta; None: in-place ops (they return ())
    check: Callable | None = None   # validation (errors naming the argument) before any device kernel writes
    layout: Callable | None = None  # (args, results) -> results in the layout torch would give them
    vmap: Callable | None = None    # torch.library.register_vmap rule
    autocast: Callable | None = None  # (args, dtype, device_type) -> args cast as torch.autocast casts its own op


SEMANTICS: dict[str, Semantics] = {}


def declare(name: str, **fields) -> None:
    """Declares op `name` (which must be in the table) once."""
    op = torch_op(name)  # KeyError for an op the table does not have
    if name in SEMANTICS:
        raise ValueError(f"ascend_acts::{name} is declared twice")
    if fields.get("fake") is None and not op.inplace:
        raise ValueError(f"ascend_acts::{name} returns tensors: it needs a fake kernel")
    SEMANTICS[name] = Semantics(**fields)


def like_argument(index: int) -> Callable:
    """The layout of elementwise results: torch.empty_like(args[index])'s (dense non-contiguous inputs, e.g.
    transposed or channels_last, keep their strides as torch's own elementwise ops keep them)."""

    def layout(args, results):
        like = args[index]
        if like.is_contiguous():
            return results
        return tuple(torch.empty_like(like).copy_(result) for result in results)

    return layout
