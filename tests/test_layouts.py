"""One layout rule: every op's device kernel returns what its fake kernel promises (shape, dtype, strides), on every
CPU backend, for contiguous, channels_last, transposed, sliced and empty inputs; and the public functions lay their
results out as torch's own functions (the composite they replace) do."""

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import ascend_acts
from conftest import backend_dtypes

ops = torch.ops.ascend_acts
SEED = torch.tensor(7, dtype=torch.int64)


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


def calls(x, dtype):
    """(op, args) for every functional op of the table, on input x (grad_output and saved of x's layout too)."""
    x = x.to(dtype)
    like = torch.empty_like(x).copy_(torch.randn(x.shape))  # x's strides, other values
    c = x.shape[1]
    weight, bias = torch.randn(5, c, 3, 3, dtype=dtype), torch.randn(5, dtype=dtype)
    stats = (torch.ones(5), torch.zeros(5)) if dtype != torch.float64 else (torch.ones(5, dtype=dtype),
                                                                            torch.zeros(5, dtype=dtype))
    geometry = ([1, 1], [1, 1, 1, 1], [1, 1], 1)
    return {
        "leaky_relu": (ops.leaky_relu, (x, 0.2)),
        "leaky_relu_backward": (ops.leaky_relu_backward, (like, x, 0.2, False)),
        "rrelu": (ops.rrelu, (x, SEED, 0.1, 0.3)),
        "rrelu_backward": (ops.rrelu_backward, (like, x, SEED, 0.1, 0.3, False)),
        "fused_bias_leaky_relu": (ops.fused_bias_leaky_relu, (x, torch.randn(c, dtype=dtype), 0.2, 2**0.5)),
        "fused_bias_leaky_relu_backward": (ops.fused_bias_leaky_relu_backward,
                                           (like, x, torch.randn(c, dtype=dtype), -0.2, 2.0, False)),
        "conv_bn_leaky_relu_eval": (ops.conv_bn_leaky_relu_eval, (x, weight, bias, *geometry, 0.2)),
        "conv_bn_leaky_relu_train": (ops.conv_bn_leaky_relu_train,
                                     (x, weight, bias, *stats, None, None, *geometry, 0.1, 1e-5, 0.2, False)),
    }


def metadata(result):
    results = result if isinstance(result, tuple) else (result,)
    return [(tuple(t.shape), t.dtype, t.stride() if t.numel() else None) for t in results]


@backend_dtypes("leaky_relu", [torch.float32, torch.float16])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "transposed", "sliced", "empty_channels_last"])
def test_every_op_returns_what_its_fake_kernel_promises(backend, dtype, layout):
    x = layouts((2, 3, 5, 4))[layout]
    checked = 0
    for name, (op, args) in calls(x, dtype).items():
        if name.startswith("conv") and x.numel() == 0:
            continue  # an empty training batch never reaches the op (conv_bn_leaky_relu runs torch's composite)
        real = metadata(op(*args))
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake_args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
            fake = metadata(op(*fake_args))
        assert real == fake, name
        checked += 1
    assert checked >= 6


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
