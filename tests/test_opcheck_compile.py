"""Every op passes torch.library.opcheck; a model with both ops compiles with fullgraph=True."""

import pytest
import torch

import ascend_acts
from markers import slow

ops = torch.ops.ascend_acts


def _x(requires_grad=False):
    return torch.randn(5, 7, requires_grad=requires_grad)


def _seed():
    return torch.tensor(1234, dtype=torch.int64)


# (op, args factory): in-place ops get a fresh non-leaf input per call
OP_SAMPLES = {
    "leaky_relu": lambda: (ops.leaky_relu.default, (_x(True), 0.2)),
    "leaky_relu_negative": lambda: (ops.leaky_relu.default, (_x(True), -0.3)),
    "leaky_relu_": lambda: (ops.leaky_relu_.default, (_x(True) * 1.0, 0.2)),
    "leaky_relu_backward": lambda: (ops.leaky_relu_backward.default, (_x(True), _x(), 0.2, True)),
    "rrelu": lambda: (ops.rrelu.default, (_x(True), _seed(), 0.1, 0.3)),
    "rrelu_": lambda: (ops.rrelu_.default, (_x(True) * 1.0, _seed(), 0.1, 0.3)),
    "rrelu_backward": lambda: (
        ops.rrelu_backward.default, (_x(True), _x(), _seed(), 0.1, 0.3, False)),
    "fused_bias_leaky_relu": lambda: (ops.fused_bias_leaky_relu.default,
                                      (torch.randn(2, 5, 3, requires_grad=True), torch.randn(5, requires_grad=True),
                                       0.2, 2**0.5)),
    "fused_bias_leaky_relu_no_bias_keeps_input": lambda: (ops.fused_bias_leaky_relu.default,
                                                          (_x(True), None, -0.3, 2.0)),
    "fused_bias_leaky_relu_channels_last": lambda: (
        ops.fused_bias_leaky_relu.default,
        (torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last).requires_grad_(),
         torch.randn(3, requires_grad=True), 0.2, 2**0.5)),
    "fused_bias_leaky_relu_backward": lambda: (ops.fused_bias_leaky_relu_backward.default,
                                               (_x(True), _x(), None, 0.2, 2**0.5, True)),
    "fused_bias_leaky_relu_backward_from_input": lambda: (
        ops.fused_bias_leaky_relu_backward.default,
        (torch.randn(2, 5, 3, requires_grad=True), torch.randn(2, 5, 3), torch.randn(5), -0.3, 2.0, False)),
    # the fused backward ops differentiated themselves (double backward)
    "conv_bn_leaky_relu_train_backward_differentiated": lambda: (
        ops.conv_bn_leaky_relu_train_backward.default,
        (torch.randn(2, 4, 5, 5, requires_grad=True), torch.randn(2, 4, 5, 5), False,
         torch.randn(2, 3, 5, 5, requires_grad=True), torch.randn(4, 3, 3, 3, requires_grad=True),
         torch.rand(4).add(0.5).requires_grad_(), torch.randn(4, requires_grad=True), torch.zeros(4), torch.ones(4),
         [1, 1], [1, 1, 1, 1], [1, 1], 1, 0.2)),
    "conv_bn_leaky_relu_eval_backward_differentiated": lambda: (
        ops.conv_bn_leaky_relu_eval_backward.default,
        (torch.randn(2, 6, 3, 3, requires_grad=True), torch.randn(2, 4, 7, 7, requires_grad=True),
         torch.randn(6, 2, 3, 3, requires_grad=True), torch.randn(6, requires_grad=True), [2, 2], [1, 0, 1, 0],
         [1, 1], 2, 0.1)),
}


@slow
@pytest.mark.parametrize("sample", OP_SAMPLES)
def test_opcheck(backend, sample):
    op, args = OP_SAMPLES[sample]()
    torch.library.opcheck(op, args)


class TinyDiscriminator(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 1)
        self.act1, self.act2 = ascend_acts.nn.LeakyReLU(0.2), ascend_acts.nn.RReLU()

    def forward(self, x):
        return self.fc2(self.act2(self.act1(self.fc1(x))))


@slow
@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
def test_compile_fullgraph_eval_matches_eager(compiler):
    torch.manual_seed(0)
    model = TinyDiscriminator().eval()
    x = torch.randn(8, 16, requires_grad=True)
    compiled = torch.compile(model, backend=compiler, fullgraph=True)
    y, y_eager = compiled(x), model(x)
    torch.testing.assert_close(y, y_eager)
    (g,) = torch.autograd.grad(y.sum(), x)
    (g_eager,) = torch.autograd.grad(y_eager.sum(), x)
    torch.testing.assert_close(g, g_eager)


@slow
@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
def test_compile_fullgraph_training_runs_and_backward_uses_the_forward_noise(compiler):
    def f(x):
        return ascend_acts.rrelu(ascend_acts.leaky_relu(x, 0.5), 0.1, 0.3, training=True)

    compiled = torch.compile(f, backend=compiler, fullgraph=True)
    x = -torch.rand(64, dtype=torch.float64) - 0.5
    x.requires_grad_()
    y = compiled(x)
    (g,) = torch.autograd.grad(y.sum(), x)
    # y = 0.5 x * noise and dy/dx = 0.5 * noise: the backward regenerated the forward's noise
    torch.testing.assert_close(g, y.detach() / x.detach(), rtol=1e-12, atol=0)
    noise = g / 0.5
    assert bool(((noise >= 0.1) & (noise <= 0.3)).all())


class StyleGANBlock(torch.nn.Module):
    """rosinality's ConvLayer (conv without bias + FusedLeakyReLU) and EqualLinear with the fused activation."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.act = ascend_acts.nn.FusedLeakyReLU(4)
        self.linear = torch.nn.Linear(4 * 5 * 5, 6, bias=False)
        self.linear_bias = torch.nn.Parameter(torch.randn(6))

    def forward(self, x):
        return ascend_acts.fused_bias_leaky_relu(self.linear(self.act(self.conv(x)).flatten(1)), self.linear_bias)


@slow
@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
def test_compile_fullgraph_fused_leaky_relu_forward_backward_matches_eager(compiler):
    torch.manual_seed(0)
    model = StyleGANBlock()
    with torch.no_grad():
        model.act.bias.normal_()
    compiled = torch.compile(model, backend=compiler, fullgraph=True)
    x = torch.randn(2, 3, 5, 5, requires_grad=True)
    results = []
    for fn in (compiled, model):
        y = fn(x)
        results.append((y, *torch.autograd.grad(y.pow(2).sum(), [x, *model.parameters()])))
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_fake_tensor_propagation_on_meta():
    x = torch.empty(3, 4, device="meta")
    assert ascend_acts.leaky_relu(x, 0.1).shape == (3, 4)
    assert ascend_acts.rrelu(x, training=True).device.type == "meta"
    y = ascend_acts.fused_bias_leaky_relu(x, torch.empty(4, device="meta"))
    assert y.shape == (3, 4) and y.device.type == "meta"


@slow
@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
def test_compile_inplace_rrelu_negative_lower_matches_eager(compiler):
    def f(x, gen_seed):
        y = x * 2.0
        return ascend_acts.rrelu(y, -0.5, 0.3, training=True, inplace=True,
                                 generator=torch.Generator().manual_seed(gen_seed))

    x = torch.randn(40, dtype=torch.float64, requires_grad=True)
    compiled = torch.compile(f, backend=compiler, fullgraph=False)
    (g,) = torch.autograd.grad(compiled(x, 3).sum(), x)
    (g_eager,) = torch.autograd.grad(f(x, 3).sum(), x)
    torch.testing.assert_close(g, g_eager, rtol=0, atol=0)


def test_every_table_op_has_an_opcheck_sample():
    from ascend_acts.op_table import TORCH_OPS
    from test_conv_bn_leaky_relu import OPS as FUSED_SAMPLES

    sampled = {factory()[0].name() for factory in (*OP_SAMPLES.values(), *FUSED_SAMPLES.values())}
    assert sampled == {op.qualified_name for op in TORCH_OPS}
