"""`convert(model)`: swap torch.nn activations for the ascend_acts ones."""

from __future__ import annotations

import torch

from . import nn as acts_nn

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


def convert(model: torch.nn.Module) -> torch.nn.Module:
    """Replace every torch.nn.LeakyReLU and torch.nn.RReLU in `model` with ascend_acts.nn's.

    The model is changed in place (parameters are untouched, so an existing optimizer keeps working)
    and returned; a model that is itself one of those activations comes back as a new module.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"convert(): argument 'model' must be a torch.nn.Module, got {type(model).__name__}")
    root = _replacement(model)
    if root is not None:
        return root
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            new = _replacement(child)
            if new is not None:
                setattr(parent, name, new)
    return model
