"""Bias gradients of the fused bias + LeakyReLU whose sums are not finite, per channel, for the tests of every
backend (test_torch_edges_activations.py) and of the emulated kernel's tiles (test_sim_fused_bias_leaky_relu.py),
judged against torch's composite."""

import math

import torch

SQRT2 = math.sqrt(2.0)  # StyleGAN2's scale


def non_finite_bias_gradients(shape, dtype, generator):
    """(x, dy) whose channels' bias gradients (dx summed over every dimension but 1) are, with the default slope
    and scale sqrt 2, in channel c % 8: 0 +inf from finite terms whose sum overflows, 1 -inf the same, 2 +inf
    from one +inf term, 3 NaN from a +inf and a -inf term, 4 NaN from a NaN term, 5 +inf from a term that dy *
    scale overflows (in float32: 0.9 max * sqrt 2), 6 finite small terms, 7 finite terms adding up to a quarter
    of the dtype's max. Each result is the same in any summation order (no cancellation of overflows).
    x > 0 except in channel 6 (the slope's side)."""
    big = torch.finfo(dtype).max
    terms = math.prod(shape) // shape[1]
    per_channel = torch.rand((shape[1], terms), generator=generator, dtype=torch.float64) + 0.5  # (C, terms)
    fills = [big / 4, -big / 4, None, None, None, None, None, big / (4 * math.sqrt(2) * 1.5 * terms)]
    for c, fill in enumerate(fills * (shape[1] // len(fills))):
        if fill is not None:
            per_channel[c] = fill * (per_channel[c] if c % 8 == 7 else 1.0)
    at = torch.randint(0, terms, (2,), generator=generator).tolist()
    second = (at[1] if at[1] != at[0] else (at[0] + 1)) % terms
    for c in range(2, shape[1], 8):
        per_channel[c, at[0]] = math.inf
        per_channel[c + 1, at[0]], per_channel[c + 1, second] = math.inf, -math.inf
        per_channel[c + 2, at[1]] = math.nan
        per_channel[c + 3, at[1]] = 0.9 * big
    dy = per_channel.reshape(shape[1], shape[0], -1).transpose(0, 1).reshape(shape).to(dtype)
    x = torch.ones(shape, dtype=dtype)
    x[:, 6::8] = -1.0
    return x, dy


def assert_same_bias_gradient(ours, theirs, dtype):
    """The same NaN and +-inf positions, the finite ones within a few roundings of the dtype (torch rounds dx to
    the dtype before summing, the kernels and the reference after)."""
    assert torch.equal(ours.isnan(), theirs.isnan()), (ours, theirs)
    assert torch.equal(ours.isinf(), theirs.isinf()) and torch.equal(ours[ours.isinf()], theirs[theirs.isinf()])
    finite = theirs.isfinite()
    torch.testing.assert_close(ours[finite], theirs[finite], rtol=8 * torch.finfo(dtype).eps, atol=0)


def composite_bias_gradient(x, dy, negative_slope=0.2, scale=SQRT2):
    """The oracle: the bias gradient of torch's F.leaky_relu(x + bias, slope) * scale (bias 0) for dy."""
    bias = torch.zeros(x.shape[1], dtype=x.dtype, requires_grad=True)
    pre = x + bias.view(1, -1, *([1] * (x.dim() - 2)))
    y = torch.nn.functional.leaky_relu(pre, negative_slope) * scale
    return torch.autograd.grad(y, bias, dy)[0]
