"""The op layer's per-call shortcuts give what the general code gives: the memoised convolution layouts, the plain
float and int-pair argument checks, and the backward's call below the Autograd kernel."""

import math

import numpy as np
import pytest
import torch

import ascend_acts
from ascend_acts.ops import _validation
from ascend_acts.ops.conv_bn_leaky_relu import derivatives, semantics, validation


def _layouts():
    """4-D tensors whose layouts torch's stride rule tells apart, several of one shape (the memo's key must see the
    strides), and the ambiguous (N, C, 1, 1) and single-channel ones."""
    x = torch.randn(2, 3, 5, 4)
    point = torch.randn(2, 6, 1, 1)
    return [x, x.contiguous(memory_format=torch.channels_last), x.transpose(2, 3), x[:, :, ::2],
            point, point.contiguous(memory_format=torch.channels_last), torch.randn(2, 1, 3, 3),
            torch.randn(2, 1, 3, 3).contiguous(memory_format=torch.channels_last), torch.randn(0, 3, 2, 2)]


@pytest.mark.parametrize("mode", ["zeros", "reflect", "circular"])
def test_memoised_layouts_are_torchs_rule(mode):
    weights = [torch.randn(4, 3, 3, 3), torch.randn(4, 3, 3, 3).contiguous(memory_format=torch.channels_last)]
    for _ in range(2):  # the second pass reads the memo
        for input in _layouts():
            for weight in weights:
                assert semantics._memory_formats(input, weight, mode) == (
                    derivatives.memory_format(input, weight, mode),
                    derivatives.input_gradient_format(input, weight, mode))


@pytest.mark.parametrize("value", [0.2, -0.0, 1e-300, 3.5e38, -3.5e38, math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_plain_float_check_is_the_general_one(value, dtype):
    """A float takes the fast path, a NumPy float64 (a float subclass) the general one: same value or same error."""
    input = torch.zeros(1, dtype=dtype)

    def outcome(number):
        try:
            return _validation.check_number("f", "negative_slope", number, input)
        except RuntimeError as error:
            return str(error)

    fast, general = outcome(value), outcome(np.float64(value))
    assert type(fast) is type(general)
    assert fast == general or (isinstance(fast, float) and math.isnan(fast) and math.isnan(general))


@pytest.mark.parametrize("value", [(1, 2), [3, 3], 2, (0, -1), (2**63 - 1, 1), (2**63, 1), 2**63, (1, 2, 3), True,
                                   (True, 1)])
def test_int_pair_check_is_the_general_one(value):
    """Python ints take the fast path; the same numbers as 0-d int64 tensors the general one (which converts them
    first): same pair, or the same error."""
    def outcome(pair):
        try:
            return validation._pair("stride", pair)
        except (TypeError, ValueError, RuntimeError) as error:
            return type(error), str(error).replace(repr(pair), "<value>")

    def as_tensors(v):
        if isinstance(v, bool) or (isinstance(v, int) and not -(2**63) <= v < 2**63):
            return v  # no int64 tensor holds it: the general path's own input
        return torch.tensor(v) if isinstance(v, int) else [as_tensors(i) for i in v]

    assert outcome(value) == outcome(as_tensors(value))


def test_backward_below_autograd_matches_a_differentiated_call():
    """A plain backward calls the backward op below its Autograd kernel; under a forward-mode level (where the kernel
    must look for tangents) it calls the op as before: the gradients agree bit for bit."""
    torch.manual_seed(0)
    model = ascend_acts.convert(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, bias=False), torch.nn.BatchNorm2d(4),
                                                    torch.nn.LeakyReLU(0.2)))
    x = torch.randn(2, 3, 6, 6, requires_grad=True)
    gradients = []
    for forward_mode in (False, True):
        state = {k: v.clone() for k, v in model.state_dict().items()}
        out = model(x)
        if forward_mode:
            with torch.autograd.forward_ad.dual_level():
                gradients.append(torch.autograd.grad(out.sum(), [x, *model.parameters()]))
        else:
            gradients.append(torch.autograd.grad(out.sum(), [x, *model.parameters()]))
        model.load_state_dict(state)
    for plain, levelled in zip(*gradients):
        assert torch.equal(plain, levelled)
