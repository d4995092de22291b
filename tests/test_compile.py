"""Models and functions with our ops under torch.compile(fullgraph=True), aot_eager and inductor, against eager; fake
tensors on the meta device. (Each op alone under opcheck and compile: tests/test_op_contract.py.)"""

import numpy as np
import pytest
import torch

import ascend_acts
from markers import slow


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




_NUMPY_SCALAR_CALLS = {
    "bias_act gain": lambda x, b: ascend_acts.bias_act(x, b, act="lrelu", gain=np.sqrt(0.5)),  # NVlabs' skip layers
    "bias_act clamp": lambda x, b: ascend_acts.bias_act(x, b, act="lrelu", clamp=np.float32(256)),
    "fused_bias_leaky_relu scale": lambda x, b: ascend_acts.fused_bias_leaky_relu(x, b, scale=np.sqrt(2.0)),
    "leaky_relu slope": lambda x, b: ascend_acts.leaky_relu(x, np.float64(0.2)),
    "rrelu bounds": lambda x, b: ascend_acts.rrelu(x, np.float64(0.1), np.float64(0.3)),
}


@slow  # compiling: ~1-2 s each (the fast subset compiles nothing, as the slow marker says)
@pytest.mark.parametrize("name", _NUMPY_SCALAR_CALLS)
def test_numpy_scalar_arguments_compile_as_in_eager(name):
    """dynamo hands a NumPy scalar to our argument checks as a 0-d array; eager takes the scalar, so must compile."""
    torch._dynamo.reset()
    call = _NUMPY_SCALAR_CALLS[name]
    x, b = torch.randn(2, 8, 4, 4), torch.randn(8)
    assert torch.equal(torch.compile(call, fullgraph=True)(x, b), call(x, b))
