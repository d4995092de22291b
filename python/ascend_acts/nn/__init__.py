"""Modules: drop-in replacements for torch.nn activations."""

from .activation import LeakyReLU, RReLU

__all__ = ["LeakyReLU", "RReLU"]
