"""`convert(model)`: swap torch.nn activations for the ascend_acts ones."""

from __future__ import annotations

import torch

from . import nn as acts_nn
from .fusion import fuse_graph, fuse_sequentials

# exact types: a user's own subclass of nn.LeakyReLU may change behaviour, so it is left alone
_REPLACEMENTS = {
    torch.nn.LeakyReLU: lambda m: acts_nn.LeakyReLU(m.negative_slope, m.inplace),
    torch.nn.RReLU: lambda m: acts_nn.RReLU(m.lower, m.upper, m.inplace),
}


def _replacement(module: torch.nn.Module) -> torch.nn.Module | None:
    make = _REPLACEMENTS.get(type(module))
    if make is None:
        return None
    new = make(module)
    new.train(module.training)
    return new


def convert(model: torch.nn.Module, fuse: bool = True) -> torch.nn.Module:
    """Fuse Conv2d -> BatchNorm2d -> LeakyReLU chains into nn.ConvBNLeakyReLU2d (see fusion.py), then
    replace every remaining torch.nn.LeakyReLU and torch.nn.RReLU with ascend_acts.nn's.

    Sequential-built models are changed in place and returned; a model with chains outside
    nn.Sequential comes back as a torch.fx GraphModule when it traces (otherwise only its
    activations are swapped). Parameters are the original objects either way, so an existing
    optimizer keeps working. A model that is itself one activation comes back as a new module.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"convert(): argument 'model' must be a torch.nn.Module, got {type(model).__name__}")
    root = _replacement(model)
    if root is not None:
        return root
    if fuse:
        fuse_sequentials(model)
        try:
            model = fuse_graph(model)
        except (torch.fx.proxy.TraceError, TypeError, NotImplementedError):
            pass  # not fx-traceable: the Sequential fusion above is all we can do
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            new = _replacement(child)
            if new is not None:
                setattr(parent, name, new)
    return model
