"""The reference backend's float32 normalisation + activation passes, compiled: ascend_acts._cpu
(cpu_kernel/norm_activation.cpp), with reference_batch_norm.forward/backward's signatures and results.

The same statistics, factors and per-value operations in the same roundings as reference_batch_norm.py's NumPy
passes; the row sums are float32 lanes of 32 values merged in float64 (at least as accurate as the NumPy segments).
Each statistics set (a channel over the batch, a sample's group) is visited whole while it is near the core, so a
forward reads its input about once from memory and a backward its two inputs about twice, where NumPy's passes,
one ufunc each, gain nothing from a second thread on a small machine (docs/benchmarks.md). Sets are shared out
to torch's threads for large tensors (numerics.compiled).

NumPy's passes stay the oracle of these and run where these do not: float64, empty tensors, batch statistics over
planes shorter than reference_batch_norm._SHORT_PLANE values (their whole-tensor passes), a build without the
module, and with ASCEND_ACTS_NUMPY_PASSES=1 (numerics.compiled).
"""

from __future__ import annotations

import math

import numpy as np

from ...numerics import compiled
from ...numerics.elementwise import quiet
from . import reference_batch_norm


def handles(values: np.ndarray, groups: int) -> bool:
    """Whether these passes run the normalisation of `values` (N, C, ...) with `groups` (0: batch statistics)."""
    if values.size == 0 or compiled.module_for(values) is None:
        return False
    return groups > 0 or math.prod(values.shape[2:]) >= reference_batch_norm._SHORT_PLANE


def _activation(relu: bool, slope: np.float32) -> int:
    """cpu_kernel's Activation: 1 ReLU, 0 none (slope 1: z * 1 is z), 2 LeakyReLU."""
    return 1 if relu else 0 if slope == 1 else 2


def _float32(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float32)


def _check(tensors, parameters, statistics, c: int, groups: int) -> None:
    """The module reads and writes these arrays by address: their layout is checked here, every time (a mistake would
    read or write outside them, not raise)."""
    shape = tensors[0].shape
    if not all(t.shape == shape and t.dtype == np.float32 and t.flags.c_contiguous for t in tensors):
        raise ValueError(f"compiled norm passes: tensors must be C-contiguous float32 of one shape, got "
                         f"{[(t.shape, t.dtype, t.flags.c_contiguous) for t in tensors]}")
    if groups < 0 or (groups and c % groups):
        raise ValueError(f"compiled norm passes: {groups} groups do not divide {c} channels")
    sets = shape[0] * groups if groups else c
    if any(p.size != c for p in parameters) or any(s.size != sets for s in statistics):
        raise ValueError(f"compiled norm passes: {c} parameters and {sets} statistics per array expected, got "
                         f"{[p.size for p in parameters]} and {[s.size for s in statistics]}")


def forward(y: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, slope: float, out: np.ndarray,
            relu: bool = False, groups: int = 0, centre_on_mean: bool = False):
    """reference_batch_norm.forward (see there) for float32, C-contiguous y and out (handles(y, groups))."""
    n, c = y.shape[:2]
    size = math.prod(y.shape[2:])
    gamma, beta = _float32(gamma), _float32(beta)
    slope = np.float32(slope)
    _check((y, out), (gamma, beta), (), c, groups)
    mean, invstd, variance = (np.empty((n, groups) if groups else c, np.float32) for _ in range(3))
    address = compiled.address
    with quiet():
        compiled.module().forward(address(y), address(out), n, c, size, groups, address(gamma), address(beta),
                                  float(eps), _activation(relu, slope), float(slope), centre_on_mean,
                                  *(address(a) for a in (mean, invstd, variance)), compiled.threads())
    return mean, invstd, variance


def backward(grad_out: np.ndarray, saved: np.ndarray, saved_is_result: bool, gamma: np.ndarray,
             beta: np.ndarray, mean: np.ndarray, invstd: np.ndarray, slope: float, grad_y: np.ndarray,
             relu: bool = False, groups: int = 0):
    """reference_batch_norm.backward (see there) for float32, C-contiguous arrays (handles(grad_out, groups))."""
    n, c = grad_out.shape[:2]
    size = math.prod(grad_out.shape[2:])
    gamma, beta, mean, invstd = (_float32(a) for a in (gamma, beta, mean, invstd))
    slope = np.float32(slope)
    _check((grad_out, saved, grad_y), (gamma, beta), (mean, invstd), c, groups)
    # float64 sums: per channel (batch statistics) or per row, added over the batch below (group statistics)
    grad_gamma, grad_beta = (np.empty((n, c) if groups else c) for _ in range(2))
    address = compiled.address
    with quiet():
        compiled.module().backward(*(address(a) for a in (grad_out, saved, grad_y)), saved_is_result, n, c, size,
                                   groups, *(address(a) for a in (gamma, beta, mean, invstd)),
                                   _activation(relu, slope), float(slope), address(grad_gamma), address(grad_beta),
                                   compiled.threads())
        if groups:
            grad_gamma, grad_beta = grad_gamma.sum(axis=0), grad_beta.sum(axis=0)
    return grad_gamma.astype(np.float32), grad_beta.astype(np.float32)
