"""Double backward through the fused block (each op's gradgradcheck: tests/test_op_contract.py): second order
through the public function and against torch's composite, the same first- and second-order gradients on sim in
float32, and WGAN-GP / R1 penalties through a DCGAN-style discriminator
whose parameter gradients equal those of the same penalty through plain torch modules."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ascend_acts
from markers import fast_only

ops = torch.ops.ascend_acts
F64 = torch.float64

# (N, C_in, C_out, H, W, kernel, stride, padding (top, bottom, left, right), dilation, groups)
GEOMETRIES = {
    "3x3": (2, 2, 3, 4, 4, 3, [1, 1], [1, 1, 1, 1], [1, 1], 1),
    "strided-asymmetric-groups": (2, 4, 4, 5, 5, 3, [2, 1], [1, 0, 0, 1], [1, 1], 2),
    "dilated": (3, 2, 2, 5, 5, 2, [1, 1], [1, 1, 1, 1], [2, 2], 1),
}


def tensors(geometry, dtype=F64, seed=0):
    n, cin, cout, h, w, k, *_, groups = geometry
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, cin, h, w, generator=g, dtype=F64)
    weight = torch.randn(cout, cin // groups, k, k, generator=g, dtype=F64)
    bias = torch.randn(cout, generator=g, dtype=F64)
    gamma = torch.rand(cout, generator=g, dtype=F64) + 0.5
    beta = torch.randn(cout, generator=g, dtype=F64) * 0.3
    return [t.to(dtype).requires_grad_() for t in (x, weight, bias, gamma, beta)]


def train_fn(geometry, slope, save_output, with_bias):
    def fn(x, weight, bias, gamma, beta):
        return ops.conv_bn_leaky_relu_train(x, weight, bias if with_bias else None, gamma, beta, None, None,
                                            *geometry[6:], 0.1, 1e-5, slope, save_output)[0]
    return fn


def eval_fn(geometry, slope):
    def fn(x, weight, bias):
        return ops.conv_bn_leaky_relu_eval(x, weight, bias, *geometry[6:], slope)
    return fn


@pytest.mark.slow
@pytest.mark.parametrize("training", [True, False])
def test_public_function_gradgradcheck_with_running_statistics(training):
    """Second order through the public function, eval (BN folded with differentiable torch ops) and training; running
    statistics that require grad are refused as torch's batch_norm refuses them (it is not differentiable in them)."""
    x, weight, bias, gamma, beta = tensors(GEOMETRIES["3x3"])
    running_mean = torch.randn(3, dtype=F64)
    running_var = torch.rand(3, dtype=F64) + 0.5

    def fn(x, weight, bias, gamma, beta):
        stats = (None, None) if training else (running_mean, running_var)
        return ascend_acts.conv_bn_leaky_relu(x, weight, bias, *stats, gamma, beta, training=training,
                                              negative_slope=0.2, padding=1)

    assert torch.autograd.gradgradcheck(fn, (x, weight, bias, gamma, beta), fast_mode=True)
    mean, var = running_mean.clone().requires_grad_(), running_var.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="not differentiable"):  # torch's own call, the oracle
        F.batch_norm(F.conv2d(x, weight, bias, padding=1), mean, var, gamma, beta, training)
    with pytest.raises(RuntimeError, match="requires grad"):
        ascend_acts.conv_bn_leaky_relu(x, weight, bias, mean, var, gamma, beta, training=training, padding=1)


def test_backward_op_differentiates_through_the_kept_output_and_statistics():
    """The kept output and the batch statistics are functions of the input: the second-order gradient
    through the fused block equals torch's composite one for both kinds of kept tensor."""
    geometry = GEOMETRIES["strided-asymmetric-groups"]
    expected = None
    for save_output in (True, False, "torch"):
        x, weight, bias, gamma, beta = tensors(geometry, seed=3)
        if save_output == "torch":
            y = F.conv2d(F.pad(x, (0, 1, 1, 0)), weight, bias, geometry[6], 0, 1, 2)
            out = F.leaky_relu(F.batch_norm(y, None, None, gamma, beta, True, eps=1e-5), 0.2)
        else:
            out = train_fn(geometry, 0.2, save_output, True)(x, weight, bias, gamma, beta)
        (grad_x,) = torch.autograd.grad(out.pow(3).sum(), x, create_graph=True)
        second = torch.autograd.grad(grad_x.pow(2).sum(), (x, weight, gamma, beta))
        if expected is None:
            expected = second
        for got, want in zip(second, expected):
            torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


# --- sim: no float64, so first- and second-order gradients against the reference in float32 -----
@pytest.mark.parametrize("geometry", fast_only(["3x3", "strided-asymmetric-groups"], ["3x3"]))
@pytest.mark.parametrize("mode", fast_only(["train-output", "train-conv", "eval"], ["train-output"]))
def test_sim_first_and_second_order_match_reference_float32(geometry, mode):
    from ascend_acts import backends

    if backends.unavailable_reason("sim") is not None:
        pytest.skip("sim backend unavailable")
    config = GEOMETRIES[geometry]
    results = {}
    for backend in ("reference", "sim"):
        with ascend_acts.use_backend(backend):
            x, weight, bias, gamma, beta = tensors(config, torch.float32, seed=5)
            if mode == "eval":
                out = eval_fn(config, 0.2)(x, weight, bias)
                params = (x, weight, bias)
            else:
                out = train_fn(config, 0.2, mode == "train-output", True)(x, weight, bias, gamma, beta)
                params = (x, weight, gamma, beta)
            first = torch.autograd.grad(out.pow(2).sum(), params, create_graph=True)
            second = torch.autograd.grad(sum(g.pow(2).sum() for g in first), params)
            results[backend] = [t.detach() for t in (out, *first, *second)]
    for got, want in zip(results["sim"], results["reference"]):
        scale = want.abs().max().clamp_min(1.0)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * float(scale))


# --- gradient penalties through a DCGAN-style discriminator -------------------------------------
def discriminator(fused: str):
    """pytorch/examples dcgan's netD shape on 16x16 inputs: conv, [conv, bn, leaky] x 2, conv."""
    def block(cin, cout):
        if fused == "module":
            return ascend_acts.nn.ConvBNLeakyReLU2d(cin, cout, 4, 2, 1, negative_slope=0.2)
        if fused == "functional":
            return FunctionalBlock(cin, cout)
        return nn.Sequential(nn.Conv2d(cin, cout, 4, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2))

    return nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1, bias=False), nn.LeakyReLU(0.2), block(8, 16), block(16, 32),
                         nn.Conv2d(32, 1, 2, 1, 0, bias=False), nn.Flatten())


class FunctionalBlock(nn.Module):
    """ascend_acts.conv_bn_leaky_relu over the modules' parameters (same state_dict keys as Sequential)."""

    def __init__(self, cin, cout):
        super().__init__()
        self.add_module("0", nn.Conv2d(cin, cout, 4, 2, 1, bias=False))
        self.add_module("1", nn.BatchNorm2d(cout))

    def forward(self, x):
        conv, bn = self._modules["0"], self._modules["1"]
        return ascend_acts.conv_bn_leaky_relu(x, conv.weight, None, bn.running_mean, bn.running_var, bn.weight,
                                              bn.bias, training=self.training, momentum=bn.momentum, eps=bn.eps,
                                              negative_slope=0.2, stride=2, padding=1)


def wgan_gp(model, real, fake):
    alpha = torch.rand(real.shape[0], 1, 1, 1, dtype=real.dtype, generator=torch.Generator().manual_seed(1))
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_()
    (grad,) = torch.autograd.grad(model(mixed).sum(), mixed, create_graph=True)
    return ((grad.flatten(1).norm(2, dim=1) - 1) ** 2).mean()


def r1(model, real, fake):
    real = real.clone().requires_grad_()
    (grad,) = torch.autograd.grad(model(real).sum(), real, create_graph=True)
    return grad.pow(2).flatten(1).sum(1).mean()


@pytest.mark.slow
@pytest.mark.parametrize("penalty", [wgan_gp, r1], ids=["wgan-gp", "r1"])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("fused", ["module", "functional"])
def test_gradient_penalty_parameter_gradients_equal_torch(penalty, training, fused):
    torch.manual_seed(0)
    plain = discriminator("torch").double()
    with torch.no_grad():
        for m in plain.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5), m.bias.uniform_(-0.3, 0.3)
                m.running_mean.uniform_(-0.2, 0.2), m.running_var.uniform_(0.5, 2)
    ours = discriminator(fused).double()
    ours.load_state_dict(plain.state_dict())
    plain.train(training), ours.train(training)
    real, fake = torch.randn(2, 6, 3, 16, 16, dtype=F64)
    expected = torch.autograd.grad(penalty(plain, real, fake), tuple(plain.parameters()))
    got = torch.autograd.grad(penalty(ours, real, fake), tuple(ours.parameters()))
    names = list(dict(ours.named_parameters()))
    for name, a, b in zip(names, got, expected):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=name)
    # the fused blocks' conv and BN weights get real (nonzero) gradients from the penalty
    for name in ("2.0.weight", "2.1.weight", "3.0.weight", "3.1.weight"):
        assert got[names.index(name)].abs().max() > 1e-6, name
