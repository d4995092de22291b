"""ConvTranspose2d -> BatchNorm2d -> ReLU / LeakyReLU / no activation (DCGAN's generator, pix2pix's decoder), fused by
`convert`: as the unconverted torch model on every CPU backend (values, gradients of the input and every parameter,
running statistics, num_batches_tracked, optimizer steps, eval, checkpoints, channels_last, double backward,
compile); a bad output_padding is refused as torch refuses it, changing nothing."""

import copy

import pytest
import torch
from torch import nn

import ascend_acts
from gan_models import assert_compiled_as_torch, assert_gradient_penalty_as_torch, assert_training_step_as_torch
from markers import slow
from op_counter import OpCounter


def dcgan_generator(nz=8, ngf=4):
    """pytorch/examples' DCGAN generator, small: 1x1 -> 4x4 -> 8x8 -> 16x16 -> 32x32."""
    return nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
        nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())


BLOCKS = {  # (model, input shape, fused runs)
    "dcgan generator": (dcgan_generator, (3, 8, 1, 1), 3),
    # pix2pix's U-Net decoder block (no conv bias before a BatchNorm, as pix2pix builds it)
    "k4 s2 p1 relu": (lambda: nn.Sequential(nn.ConvTranspose2d(6, 4, 4, 2, 1, bias=False), nn.BatchNorm2d(4),
                                            nn.ReLU()),
                      (3, 6, 5, 5), 1),
    "k3 s2 output_padding leaky": (lambda: nn.Sequential(nn.ConvTranspose2d(6, 4, 3, 2, 1, output_padding=1),
                                                         nn.BatchNorm2d(4), nn.LeakyReLU(0.2)), (3, 6, 5, 4), 1),
    "groups dilation none": (lambda: nn.Sequential(nn.ConvTranspose2d(6, 4, 3, 1, 2, groups=2, dilation=2),
                                                   nn.BatchNorm2d(4, momentum=None), nn.Tanh()), (3, 6, 5, 5), 1),
}


def make(block, dtype):
    torch.manual_seed(3)
    model = BLOCKS[block][0]().to(dtype)
    with torch.no_grad():  # about half the BN outputs negative
        for module in model:
            if isinstance(module, nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5), module.bias.uniform_(-0.5, 0.5)
    return model


def dtype_of(backend):
    return torch.float64 if backend == "reference" else torch.float32  # the kernels have no float64


def tolerance(dtype, layers=1):
    """float32: the Conv2d runs' tolerance per fused layer (each BatchNorm's backward amplifies the rounding of the
    layers after it: the DCGAN generator's input gradient goes through three)."""
    return dict(rtol=1e-10, atol=1e-10) if dtype == torch.float64 else dict(rtol=2e-4 * layers, atol=2e-4 * layers)


@pytest.mark.parametrize("block", BLOCKS)
def test_runs_fuse_and_train_like_torch(block, backend):
    dtype = dtype_of(backend)
    original = make(block, dtype)
    converted = ascend_acts.convert(copy.deepcopy(original))
    _, shape, runs = BLOCKS[block]
    tol = tolerance(dtype, runs)
    # SGD: a conv bias before a BN has a zero gradient up to rounding, which Adam would normalise to steps of lr. A
    # small one: steps that move the weights by O(1) flip ReLU masks on rounding differences, and the runs diverge
    optimizers = [torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9) for m in (original, converted)]
    for step, training in enumerate([True, True, False, True, False]):
        original.train(training), converted.train(training)
        x = torch.randn(shape, dtype=dtype)
        if step in (3, 4):  # restrided even where already contiguous: DCGAN's (N, nz, 1, 1) z gets (nz, 1, nz, nz)
            x = x.to(memory_format=torch.channels_last)  # strides, and torch's convolution a channels_last output
        xs, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
        with OpCounter() as counter:
            got = converted(xc)
        assert counter.fused == runs
        assert "batch_norm" not in "".join(counter.calls) and "relu" not in counter.calls  # no aten of its own
        expected = original(xs)
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, **tol)
        assert_training_step_as_torch(original, converted, optimizers, expected, got, xs, xc, step, **tol)
    # a checkpoint round trip: the converted model's state loads into torch's and back
    again = make(block, dtype)
    again.load_state_dict(converted.state_dict())
    converted.load_state_dict(again.state_dict())
    x = torch.randn(shape, dtype=dtype)
    torch.testing.assert_close(converted.eval()(x), again.eval()(x), **tol)


@pytest.mark.parametrize("block", ["k4 s2 p1 relu", "k3 s2 output_padding leaky", "groups dilation none"])
def test_double_backward_as_torch(block, backend):
    dtype = dtype_of(backend)
    original = make(block, dtype)
    converted = ascend_acts.convert(copy.deepcopy(original))
    x = torch.randn(BLOCKS[block][1], dtype=dtype)
    assert_gradient_penalty_as_torch(original, converted, x, **tolerance(dtype))


def test_a_bad_output_padding_is_torchs_error_and_changes_nothing(backend):
    model = ascend_acts.convert(make("k4 s2 p1 relu", torch.float32))
    model[0].output_padding = (2, 2)  # not smaller than the stride (2) or the dilation (1)
    original = copy.deepcopy(model)
    before = copy.deepcopy(model.state_dict())
    x = torch.randn(2, 6, 5, 5)
    for training in (True, False):
        model.train(training), original.train(training)
        with pytest.raises(RuntimeError) as ours:
            model(x)
        with pytest.raises(RuntimeError) as torchs:
            nn.Sequential.forward(original, x)
        assert str(ours.value) == str(torchs.value)
        assert "output padding must be smaller than either stride or dilation" in str(ours.value)
        for key, value in model.state_dict().items():
            assert torch.equal(value, before[key]), key


def test_transposed_runs_say_why_or_fuse():
    class MyConvTranspose2d(nn.ConvTranspose2d):
        pass

    model = nn.Sequential(MyConvTranspose2d(4, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.ConvTranspose2d(4, 4, 3), ascend_acts.nn.SyncBatchNorm(4), nn.ReLU())
    table = ascend_acts.explain(model, torch.randn(2, 4, 5, 5))
    # a synchronised BN after a ConvTranspose2d fuses with its ReLU (a single process: the plain op)
    assert [r.fused for r in table] == [False, True]
    assert table[0].reason == "the conv is a MyConvTranspose2d, not exactly nn.ConvTranspose2d (its forward may differ)"


def test_the_public_function_takes_transposed(backend):
    torch.manual_seed(0)
    x, weight = torch.randn(2, 4, 5, 5), torch.randn(4, 3, 3, 3)
    gamma, beta = torch.rand(6) + 0.5, torch.randn(6)
    got = ascend_acts.conv_bn_leaky_relu(x, weight, None, None, None, gamma, beta, True, negative_slope=0.2, stride=2,
                                         padding=1, groups=2, transposed=True, output_padding=1)
    conv = torch.nn.functional.conv_transpose2d(x, weight, None, 2, 1, 1, 2)
    expected = torch.nn.functional.leaky_relu(torch.nn.functional.batch_norm(conv, None, None, gamma, beta, True),
                                              0.2)
    torch.testing.assert_close(got, expected, **tolerance(torch.float32))
    with pytest.raises(RuntimeError, match="'output_padding' is for a transposed convolution"):
        ascend_acts.conv_bn_leaky_relu(x, torch.randn(6, 2, 3, 3), bn_weight=gamma, bn_bias=beta, training=True,
                                       groups=2, output_padding=1)


@slow
@pytest.mark.parametrize("training", [True, False])
def test_compile_fullgraph(training, backend):
    original = make("dcgan generator", torch.float32).train(training)
    converted = ascend_acts.convert(copy.deepcopy(original))
    assert_compiled_as_torch(original, converted, torch.randn(3, 8, 1, 1), **tolerance(torch.float32, 3))
