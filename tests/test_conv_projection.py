"""The platform convolution's matrix-product route for a transposed convolution from 1x1 planes (torch_ops.
_is_projection: a DCGAN generator's first layer): torch's values and gradients in both float dtypes, for any stride,
and torch's oneDNN route for everything else."""

import re

import pytest
import torch
import torch.nn.functional as F

from ascend_acts.ops.conv_bn_leaky_relu import torch_ops


def _close(ours, theirs, dtype):
    tolerance = {torch.float32: 2e-6, torch.float64: 1e-13}[dtype]
    torch.testing.assert_close(ours, theirs, rtol=tolerance, atol=tolerance * theirs.abs().max().item())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("stride", [(1, 1), (2, 3)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_a_projection_gives_torchs_values_and_gradients(dtype, stride, with_bias):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(5, 7, 1, 1, generator=generator, dtype=dtype)
    w = torch.randn(7, 6, 4, 3, generator=generator, dtype=dtype)
    b = torch.randn(6, generator=generator, dtype=dtype) if with_bias else None
    geometry = (stride, (0, 0, 0, 0), (1, 1), 1, True, (0, 0))
    assert torch_ops._is_projection(x, w, (0, 0, 0, 0), (1, 1), 1, True, (0, 0))
    ours = torch_ops.conv2d(x, w, b, *geometry)
    expected = F.conv_transpose2d(x, w, b, stride)
    assert ours.shape == expected.shape and ours.is_contiguous()
    _close(ours, expected, dtype)
    grad = torch.randn(expected.shape, generator=generator, dtype=dtype)
    mask = (True, True, with_bias)
    theirs = torch.ops.aten.convolution_backward(grad, x, w, [6] if with_bias else None, list(stride), [0, 0],
                                                 [1, 1], True, [0, 0], 1, list(mask))
    for wanted in ((True, True, with_bias), (False, True, False), (True, False, False)):
        result = torch_ops.conv2d_backward(grad, x, w, *geometry, output_mask=wanted)
        for got, want, expected_gradient in zip(result, wanted, theirs):
            if want:
                _close(got, expected_gradient, dtype)
            else:
                assert got.numel() == 0


def test_only_an_unpadded_undilated_ungrouped_transposed_one_from_1x1_planes_is_a_projection():
    x, w = torch.zeros(2, 4, 1, 1), torch.zeros(4, 3, 4, 4)
    assert torch_ops._is_projection(x, w, (0, 0, 0, 0), (1, 1), 1, True, (0, 0))
    assert not torch_ops._is_projection(x, w, (0, 0, 0, 0), (1, 1), 1, False, (0, 0))  # not transposed
    assert not torch_ops._is_projection(x, w, (1, 1, 1, 1), (1, 1), 1, True, (0, 0))  # cropped by padding
    assert not torch_ops._is_projection(x, w, (0, 0, 0, 0), (2, 2), 1, True, (0, 0))  # dilated: zeros between
    assert not torch_ops._is_projection(x, w, (0, 0, 0, 0), (1, 1), 1, True, (1, 1))  # output_padding
    assert not torch_ops._is_projection(x, torch.zeros(4, 1, 4, 4), (0, 0, 0, 0), (1, 1), 2, True, (0, 0))
    assert not torch_ops._is_projection(torch.zeros(2, 4, 2, 1), w, (0, 0, 0, 0), (1, 1), 1, True, (0, 0))


def test_a_projection_of_zeros_gives_onednns_positive_zeros():
    """oneDNN adds to a +0 accumulator: a sum of -0 products is +0 there, and so is +0 plus a -0 bias (an eval fold
    with a running mean of 0 makes one); here too, in the forward and both gradients (a matrix product kept -0)."""
    x, w = torch.ones(1, 2, 1, 1), torch.full((2, 3, 2, 2), -0.0)
    geometry = ((1, 1), (0, 0, 0, 0), (1, 1), 1, True, (0, 0))
    for bias in (None, torch.full((3,), -0.0)):
        expected = F.conv_transpose2d(x, w, bias)
        assert torch.equal(torch_ops.conv2d(x, w, bias, *geometry).signbit(), expected.signbit())
    grad = torch.full((1, 3, 2, 2), -0.0)
    theirs = torch.ops.aten.convolution_backward(grad, x, w, None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1,
                                                 [True, True, False])
    grad_input, grad_weight, _ = torch_ops.conv2d_backward(grad, x, w, *geometry, output_mask=(True, True, False))
    assert torch.equal(grad_input.signbit(), theirs[0].signbit())
    assert torch.equal(grad_weight.signbit(), theirs[1].signbit())


@pytest.mark.parametrize("bias", [torch.zeros(1), torch.zeros(3, 1), torch.zeros(3, dtype=torch.float64)],
                         ids=["one value", "two dims", "float64"])
def test_a_bias_torchs_convolution_refuses_is_refused_as_torch_refuses_it(bias):
    """The matrix product would broadcast or promote it: the call goes to torch's convolution, for its error."""
    x, w = torch.zeros(2, 4, 1, 1), torch.zeros(4, 3, 2, 2)
    with pytest.raises(RuntimeError) as expected:
        F.conv_transpose2d(x, w, bias)
    with pytest.raises(RuntimeError, match=re.escape(str(expected.value).splitlines()[0])):
        torch_ops.conv2d(x, w, bias, (1, 1), (0, 0, 0, 0), (1, 1), 1, True, (0, 0))


@pytest.mark.parametrize("case", ["no input channels", "other input channels", "3-d weight"])
def test_what_torchs_convolution_refuses_it_refuses_with_torchs_error(case):
    """A matrix product of (N, 0) by (0, K) is zeros, and shapes that do not fit give mm's message: torch's
    convolution decides instead."""
    x, w = {"no input channels": (torch.zeros(2, 0, 1, 1), torch.zeros(0, 3, 2, 2)),
            "other input channels": (torch.zeros(2, 4, 1, 1), torch.zeros(5, 3, 2, 2)),
            "3-d weight": (torch.zeros(2, 4, 1, 1), torch.zeros(4, 3, 2))}[case]
    with pytest.raises(RuntimeError) as expected:
        F.conv_transpose2d(x, w)
    with pytest.raises(RuntimeError, match=re.escape(str(expected.value).splitlines()[0])):
        torch_ops.conv2d(x, w, None, (1, 1), (0, 0, 0, 0), (1, 1), 1, True, (0, 0))


@pytest.mark.parametrize("layout", ["channels_last weight", "channels_last-strided input"])
def test_a_channels_last_argument_gives_torchs_channels_last_result(layout):
    x, w = torch.randn(2, 4, 1, 1), torch.randn(4, 3, 2, 2)
    if layout == "channels_last weight":
        w = w.contiguous(memory_format=torch.channels_last)
    else:
        x = x.as_strided(x.shape, (4, 1, 4, 4))
    ours = torch_ops.conv2d(x, w, None, (1, 1), (0, 0, 0, 0), (1, 1), 1, True, (0, 0))
    expected = F.conv_transpose2d(x, w)
    assert ours.stride() == expected.stride() and torch.equal(ours, expected)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_with_a_bias_rounds_once_as_torchs(dtype):
    """oneDNN adds the bias before its one rounding to 16 bits; a 16-bit matrix product and a sum would round twice."""
    generator = torch.Generator().manual_seed(3)
    x, w, b = (torch.randn(shape, generator=generator).to(dtype) for shape in ((8, 16, 1, 1), (16, 8, 4, 4), (8,)))
    ours = torch_ops.conv2d(x, w, b, (1, 1), (0, 0, 0, 0), (1, 1), 1, True, (0, 0))
    assert torch.equal(ours, F.conv_transpose2d(x, w, b))
