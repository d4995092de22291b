"""The public functions lay their results out as torch's own functions (the composite they replace) do, for
contiguous, channels_last, transposed, sliced and empty inputs. (Each op's real, fake and torch strides:
tests/test_op_contract.py.)"""

import pytest
import torch
import torch.nn.functional as F

import ascend_acts

ops = torch.ops.ascend_acts
def layouts(shape):
    """Inputs of `shape` (4-D) in each layout, from one set of values."""
    base = torch.randn(shape)
    return {
        "contiguous": base,
        "channels_last": base.contiguous(memory_format=torch.channels_last),
        "transposed": base.transpose(2, 3).contiguous().transpose(2, 3),
        "sliced": torch.randn(shape[0], shape[1], shape[2], 2 * shape[3])[..., ::2],
        "empty_channels_last": torch.randn(0, *shape[1:]).contiguous(memory_format=torch.channels_last),
    }


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed", "sliced", "empty_channels_last"])
def test_public_functions_lay_out_results_as_torchs_composites(backend, layout):
    """Strides of nonempty results as torch's F.leaky_relu / its composite give them (empty tensors' strides carry
    no data, and torch itself is not consistent about them)."""
    x = layouts((2, 3, 5, 4))[layout]
    bias = torch.randn(3)
    pairs = [
        (ascend_acts.leaky_relu(x, 0.2), F.leaky_relu(x, 0.2)),
        (ascend_acts.rrelu(x, training=True), F.rrelu(x, training=True)),
        (ascend_acts.fused_bias_leaky_relu(x, bias), F.leaky_relu(x + bias.view(1, -1, 1, 1), 0.2) * 2**0.5),
    ]
    for ours, theirs in pairs:
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        if theirs.numel():
            assert ours.stride() == theirs.stride()
