"""The backward from the conv output (ReLU, slope 0: the conv output is what training keeps) takes the activation's
branch the forward took for every value, one whose pre-activation z is within a rounding of 0 included, as torch's
backward does (it reads its forward's own z). A backend recomputes z from the kept conv output with the forward's
operations and constants: (y - mean) * (gamma * invstd) + beta and ((y - mean) * invstd) * gamma + beta round
differently, and a z near 0 rounded one way in the forward and the other in the backward would lose, or gain, its
whole gradient. Constructed here: channels whose values are mean -+ 3 (exact statistics), a gamma for which the two
orders of rounding differ at y - mean = 3, and a beta that makes one of them exactly 0 and the other positive; with a
gradient of ones, grad_beta counts the values the backward passes, which must be those the forward made positive."""

import numpy as np
import pytest
import torch

from ascend_acts.ops.conv_bn_leaky_relu.function import conv_bn_activation

EPS = 1e-5
# the statistics of every channel (and instance) of the input below: mean 1, variance 9
INVSTD = np.float32(1) / np.sqrt(np.float32(9) + np.float32(EPS))


def _boundary_affine(channels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """gamma and beta per channel: the orders of rounding of 3 * gamma * invstd differ, and beta cancels one of them
    exactly (even channels the scale-first order, odd ones the normalise-first), leaving the other positive."""
    gammas, betas = [], []
    for candidate in np.linspace(0.5, 1.5, 20001, dtype=np.float32):
        scale_first = np.float32(3) * (candidate * INVSTD)
        normalise_first = (np.float32(3) * INVSTD) * candidate
        if scale_first == normalise_first:
            continue
        zero, positive = (scale_first, normalise_first) if len(gammas) % 2 == 0 else (normalise_first, scale_first)
        if positive > zero:  # beta = -zero leaves the other order's z > 0
            gammas.append(candidate)
            betas.append(-zero)
        if len(gammas) == channels:
            break
    return torch.tensor(np.array(gammas)), torch.tensor(np.array(betas))


@pytest.mark.parametrize("plane, norm_groups", [((4, 4), 0), ((5, 5), 0), ((1, 1), 0), ((4, 4), "C")],
                         ids=["batch, plane walk", "batch, row mode", "batch, (N, F) rows", "instance"])
@pytest.mark.parametrize("relu", [True, False], ids=["relu", "leaky 0"])
def test_backward_takes_the_forward_branch_at_zero(plane, norm_groups, relu, backend):
    channels = 8
    gamma, beta = _boundary_affine(channels)
    assert len(gamma) == channels
    # each instance: half its values -2, half 4 (mean 1, variance 9, exact in every summation order)
    n = 2 if plane != (1, 1) else 4
    values = torch.tensor([-2.0, 4.0]).repeat(n * channels * plane[0] * plane[1] // 2)
    x = values.reshape(channels, n, *plane).transpose(0, 1).contiguous().requires_grad_()
    if plane == (1, 1):  # (N, F) rows: sample n has -2 or 4 in every channel
        x = torch.tensor([-2.0, 4.0, -2.0, 4.0])[:, None, None, None].expand(n, channels, 1, 1).contiguous()
        x.requires_grad_()
    identity = torch.eye(channels).reshape(channels, channels, 1, 1)
    gamma.requires_grad_(), beta.requires_grad_()
    groups = channels if norm_groups == "C" else 0
    out = conv_bn_activation(x, identity, None, None, None, gamma, beta, True, 0.1, EPS, 0.0, 1, 0, 1, 1, relu=relu,
                             norm_groups=groups)
    (grad_beta,) = torch.autograd.grad(out, beta, torch.ones_like(out))
    positive = (out > 0).sum((0, 2, 3)).to(grad_beta.dtype)
    # the values at 4 sit on the boundary (z > 0 in one order, 0 in the other): in every backend some channels have them
    # positive
    assert positive.sum() > 0
    torch.testing.assert_close(grad_beta, positive, rtol=0, atol=0)



@pytest.mark.parametrize("norm_groups", [0, "C"], ids=["batch", "instance"])
@pytest.mark.parametrize("relu", [True, False], ids=["relu", "leaky 0"])
def test_backward_takes_the_forward_branch_with_a_rounded_mean(norm_groups, relu, backend):
    """Statistics that do not round exactly (values far from 0 relative to their spread, repeated as a quantised input
    makes them), and a beta that puts z within a rounding of 0 at one of the repeated values: the forward's z there is
    the one its backward recovers from the conv output, whatever the rounded mean (the reference backend's forward
    centred on another estimate of the mean took the other branch in most of these seeds)."""
    for seed in range(4):
        generator = torch.Generator().manual_seed(seed)
        shape = (1, 4, 3, 5) if norm_groups else (4, 4, 3, 5)  # one instance per channel: beta can place its boundary
        x = (torch.randint(-3, 4, shape, generator=generator).float() * 0.37 + 5.0).requires_grad_()
        gamma = torch.rand(shape[1], generator=generator) + 0.5
        dims = (0, 2, 3)
        mean, variance = x.detach().double().mean(dims), x.detach().double().var(dims, unbiased=False)
        beta = (-(5.37 - mean) * (variance + EPS).rsqrt() * gamma.double()).float().requires_grad_()  # z ~ 0 at 5.37
        depthwise_identity = torch.ones(shape[1], 1, 1, 1)
        out = conv_bn_activation(x, depthwise_identity, None, None, None, gamma, beta, True, 0.1, EPS, 0.0, 1, 0, 1,
                                 shape[1], relu=relu, norm_groups=shape[1] if norm_groups else 0)
        (grad_beta,) = torch.autograd.grad(out, beta, torch.ones_like(out))
        torch.testing.assert_close(grad_beta, (out > 0).sum(dims).to(grad_beta.dtype), rtol=0, atol=0,
                                   msg=lambda m, seed=seed: f"seed {seed}: {m}")
