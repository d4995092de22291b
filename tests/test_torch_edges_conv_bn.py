"""The fused Conv2d + BatchNorm2d + LeakyReLU op and `convert` at the edges, judged against torch's own
nn.Sequential(Conv2d, BatchNorm2d, LeakyReLU) (or F.conv2d + F.batch_norm + F.leaky_relu) computed in each test:
results, error types, running statistics, num_batches_tracked."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

import ascend_acts
from markers import slow

ops = torch.ops.ascend_acts


def torch_block(c_in=2, c_out=3, groups=1, eps=1e-5, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, groups=groups, bias=True),
                         nn.BatchNorm2d(c_out, eps=eps), nn.LeakyReLU(0.2))


def ours_and_torch(model):
    return ascend_acts.convert(copy.deepcopy(model)), model


def close(ours, theirs):
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5, equal_nan=True)


def same_state(ours, theirs):
    for (name, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, equal_nan=True, msg=name)


# --- 1. NaN and inf in a training batch -----------------------------------------------------------------------------
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("where", [(0, 0, 0, 0), (1, 0, 2, 1)])  # the channel's first element (the kernel's shift)
def test_nonfinite_training_batch_as_torch(backend, value, where):
    # a depthwise conv keeps the value in channel 0: the other channels stay finite
    ours, theirs = ours_and_torch(torch_block(3, 3, groups=3))
    x = torch.randn(2, 3, 4, 4)
    x[where] = value
    close(ours(x), theirs(x))
    same_state(ours, theirs)
    assert theirs[1].running_var[0].isnan() and ours[1].running_var[0].isnan()
    assert torch.isfinite(ours[1].running_var[1:]).all()


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nonfinite_batch_saved_statistics_as_torch(backend, value):
    y = torch.randn(2, 2, 3, 3)
    y[0, 0, 0, 0] = value
    identity = torch.ones(2, 1, 1, 1)  # depthwise: the value stays in channel 0
    gamma, beta = torch.ones(2), torch.zeros(2)
    rm, rv = torch.zeros(2), torch.ones(2)
    out, _, mean, invstd = ops.conv_bn_leaky_relu_train(y, identity, None, gamma, beta, rm, rv, [1, 1], [0, 0, 0, 0],
                                                        [1, 1], 2, 0.1, 1e-5, 0.2, False)
    trm, trv = torch.zeros(2), torch.ones(2)
    expected, t_mean, t_invstd = torch.native_batch_norm(y, gamma, beta, trm, trv, True, 0.1, 1e-5)
    close(out, F.leaky_relu(expected, 0.2))
    close(mean, t_mean)
    close(invstd, t_invstd)
    close(rm, trm)
    close(rv, trv)


# --- 2. fake tensors, meta tensors, export ---------------------------------------------------------------------------
def fake_outputs(make_model, train: bool):
    with FakeTensorMode():
        out = make_model().train(train)(torch.randn(2, 2, 5, 5))
        return out.shape, out.dtype, out.stride()


@pytest.mark.parametrize("train", [True, False])
def test_fake_tensor_mode_as_torch(train):
    expected = fake_outputs(torch_block, train)
    assert fake_outputs(lambda: ascend_acts.convert(torch_block()), train) == expected
    fused = fake_outputs(lambda: ascend_acts.nn.ConvBNLeakyReLU2d(2, 3, 3, padding=1, bias=True, negative_slope=0.2),
                         train)
    assert fused == expected


@pytest.mark.parametrize("training", [True, False])
def test_meta_tensors_as_torch(training):
    def args(device):
        torch.manual_seed(0)
        return [t.to(device) for t in (torch.randn(2, 2, 5, 5), torch.randn(3, 2, 3, 3), torch.zeros(3), torch.ones(3),
                                       torch.ones(3), torch.zeros(3))]

    x, w, rm, rv, g, b = args("meta")
    out = ascend_acts.conv_bn_leaky_relu(x, w, None, rm, rv, g, b, training=training, negative_slope=0.2)
    x, w, rm, rv, g, b = args("meta")
    expected = F.leaky_relu(F.batch_norm(F.conv2d(x, w), rm, rv, g, b, training), 0.2)
    assert (out.device, out.shape, out.dtype, out.stride()) == (expected.device, expected.shape, expected.dtype,
                                                                 expected.stride())


@pytest.mark.slow
@pytest.mark.parametrize("train", [True, False])
def test_export_with_a_dynamic_batch_as_torch(backend, train):
    from torch.export import Dim, export

    ours, theirs = ours_and_torch(torch_block().train(train))
    program = export(ours, (torch.randn(4, 2, 5, 5),), dynamic_shapes=({0: Dim("batch")},))
    x = torch.randn(6, 2, 5, 5)
    close(program.module()(x), theirs(x))


# --- 3. inference tensors and odd buffers ----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_model_built_or_converted_under_inference_mode_runs_eval(backend, mode):
    x = torch.randn(2, 2, 4, 4)
    with torch.inference_mode():
        built = torch_block().eval()
        ours_built = ascend_acts.convert(copy.deepcopy(built))
        ours_converted = ascend_acts.convert(torch_block()).eval()
    context = torch.no_grad() if mode == "no_grad" else torch.inference_mode()
    with context:
        expected = built(x)
        close(ours_built(x), expected)
        close(ours_converted(x), expected)


def test_inference_statistics_in_training_outside_inference_mode_raise_as_torch(backend):
    with torch.inference_mode():
        ours, theirs = ours_and_torch(torch_block())
    x = torch.randn(2, 2, 4, 4)
    with pytest.raises(RuntimeError), torch.no_grad():
        theirs(x)
    with pytest.raises(RuntimeError), torch.no_grad():
        ours(x)


def test_expanded_running_mean_in_eval_as_torch(backend):
    ours, theirs = ours_and_torch(torch_block().eval())
    for model in (ours, theirs):
        model[1].running_mean = torch.full((1,), 0.5).expand(3)
    x = torch.randn(2, 2, 4, 4)
    close(ours(x), theirs(x))


def test_expanded_running_mean_in_training_as_torch(backend):
    # torch's batch_norm updates the shared element once per channel in its own (thread-dependent) order: one thread
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ours, theirs = ours_and_torch(torch_block())
        for model in (ours, theirs):
            model[1].running_mean = torch.zeros(1).expand(3)
        x = torch.randn(2, 2, 4, 4)
        close(ours(x), theirs(x))
        same_state(ours, theirs)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("buffer", ["running_mean", "running_var"])
def test_running_statistics_requiring_grad_raise_as_torch(backend, train, buffer):
    ours, theirs = ours_and_torch(torch_block().train(train))
    for model in (ours, theirs):
        getattr(model[1], buffer).requires_grad_(True)
    x = torch.randn(2, 2, 4, 4)
    with pytest.raises(RuntimeError):
        theirs(x)
    before = copy.deepcopy(ours.state_dict())
    with pytest.raises(RuntimeError, match=f"'{buffer}' requires grad"):
        ours(x)
    assert all(torch.equal(before[k], v) for k, v in ours.state_dict().items())  # a failed call changes nothing
    with torch.no_grad():  # torch reads and updates them there
        ours_again, theirs_again = ours_and_torch(torch_block().train(train))
        for model in (ours_again, theirs_again):
            getattr(model[1], buffer).requires_grad_(True)
        close(ours_again(x), theirs_again(x))
        same_state(ours_again, theirs_again)


# --- 4. tensor-valued module attributes ------------------------------------------------------------------------------
@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("module, attribute, value",
                         [(1, "momentum", 0.3), (1, "eps", 1e-3), (2, "negative_slope", 0.3)])
def test_tensor_valued_attributes_as_torch(backend, train, module, attribute, value):
    ours, theirs = ours_and_torch(torch_block().train(train))
    for model in (ours, theirs):
        setattr(model[module], attribute, torch.tensor(value))
    x = torch.randn(2, 2, 4, 4)
    close(ours(x), theirs(x))
    same_state(ours, theirs)


@pytest.mark.parametrize("train", [True, False])
def test_tensor_valued_attributes_of_the_fused_module_as_torch(backend, train):
    torch.manual_seed(0)
    fused = ascend_acts.nn.ConvBNLeakyReLU2d(2, 3, 3, padding=1, bias=True).train(train)
    fused.bn.eps, fused.bn.momentum = torch.tensor(1e-3), torch.tensor(0.3)
    theirs = nn.Sequential(copy.deepcopy(fused.conv), copy.deepcopy(fused.bn), nn.LeakyReLU(0.01))
    x = torch.randn(2, 2, 4, 4)
    close(fused(x), theirs(x))
    close(fused.bn.running_var, theirs[1].running_var)


# --- 5. error types --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("missing", ["running_mean", "running_var"])
def test_one_running_statistic_missing_raises_torchs_type(training, missing):
    x, w = torch.randn(2, 2, 4, 4), torch.randn(3, 2, 3, 3)
    stats = {"running_mean": torch.zeros(3), "running_var": torch.ones(3), missing: None}
    with pytest.raises(Exception) as theirs:
        F.batch_norm(F.conv2d(x, w), stats["running_mean"], stats["running_var"], training=training)
    with pytest.raises(theirs.type, match=missing if not training else "both"):
        ascend_acts.conv_bn_leaky_relu(x, w, None, stats["running_mean"], stats["running_var"], training=training)


# --- 6. eps = 0 with a zero-variance channel in eval -----------------------------------------------------------------
def test_eps_zero_with_a_zero_running_variance_as_torch(backend):
    ours, theirs = ours_and_torch(torch_block(eps=0.0).eval())
    for model in (ours, theirs):
        with torch.no_grad():
            model[1].running_var[1] = 0.0
            model[1].running_mean[1] = model[0].bias[1]  # conv_out == running_mean where the input patch is 0
    x = torch.randn(2, 2, 4, 4)
    x[0, :, :2, :2] = 0.0
    xs = [x.clone().requires_grad_(), x.clone().requires_grad_()]
    out, expected = ours(xs[0]), theirs(xs[1])
    close(out, expected)
    assert expected[:, 1].isinf().any() and expected[:, 1].isnan().any()
    out.sum().backward()
    expected.sum().backward()
    close(xs[0].grad, xs[1].grad)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        close(a.grad, b.grad)


def test_non_finite_fold_runs_unfolded_as_torch(backend):
    ours, theirs = ours_and_torch(torch_block().eval())
    for model in (ours, theirs):
        with torch.no_grad():
            model[1].weight[0] = float("inf")
    x = torch.randn(2, 2, 4, 4)
    close(ours(x), theirs(x))


@pytest.mark.parametrize("attribute, value", [("momentum", float("nan")), ("momentum", float("inf")),
                                              ("eps", float("nan")), ("eps", float("inf")), ("eps", True),
                                              ("momentum", True)])
@pytest.mark.parametrize("training", [True, False])
def test_any_real_eps_and_momentum_as_torch(backend, attribute, value, training):
    """torch's BatchNorm takes NaN, inf and bools for eps and momentum (their results propagate them)."""
    torch.manual_seed(0)
    theirs = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.LeakyReLU(0.2))
    setattr(theirs[1], attribute, value)
    theirs.train(training)
    ours = ascend_acts.convert(copy.deepcopy(theirs))
    x = torch.randn(2, 3, 6, 6)
    expected, got = theirs(x), ours(x)
    torch.testing.assert_close(got, expected, equal_nan=True)
    for name in ("running_mean", "running_var"):
        torch.testing.assert_close(getattr(ours[1], name), getattr(theirs[1], name), equal_nan=True)


@pytest.mark.parametrize("slope", [1e-8, 1e-40])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_tiny_slopes_keep_the_conv_output_and_torchs_gradients(backend, slope, dtype):
    """A slope whose products fall among the subnormals cannot give x-hat back from the output (and 1 / slope may
    overflow float32): the conv output is kept, and the gradients are torch's (found by the adversarial review: NaN
    on sim, 42% error in float16 before)."""
    torch.manual_seed(0)
    theirs = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.LeakyReLU(slope)).to(dtype)
    ours = ascend_acts.convert(copy.deepcopy(theirs))
    exact = copy.deepcopy(theirs).double()
    x = torch.randn(2, 3, 6, 6)
    grads = []
    for model, data in ((theirs, x.to(dtype)), (ours, x.to(dtype)), (exact, x.double())):
        data = data.clone().requires_grad_()
        (model(data).double() * torch.linspace(-1, 1, 4 * 16).view(1, 4, 4, 4)).sum().backward()
        grads.append((data.grad.double(), model[0].weight.grad.double()))
    for (ours_g, theirs_g, exact_g) in zip(grads[1], grads[0], grads[2]):
        assert torch.isfinite(ours_g).all()
        assert (ours_g - exact_g).norm() <= 2 * (theirs_g - exact_g).norm() + 1e-12 * exact_g.norm()


@pytest.mark.parametrize("attribute, value", [("momentum", "requires_grad"), ("eps", "one_dimensional")])
def test_tensor_attributes_torch_refuses_are_refused_as_torch(attribute, value):
    """A BN attribute torch cannot read as a number (a tensor requiring grad, a 1-D one): the converted model runs
    the children, so torch's own error is raised."""
    theirs = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.LeakyReLU(0.2))
    number = torch.tensor(0.1, requires_grad=True) if value == "requires_grad" else torch.tensor([1e-5])
    setattr(theirs[1], attribute, number)
    ours = ascend_acts.convert(copy.deepcopy(theirs))
    x = torch.randn(2, 3, 6, 6)
    with pytest.raises(Exception) as expected:
        theirs(x)
    with pytest.raises(expected.type):
        ours(x)


@pytest.mark.parametrize("training", [True, False])
def test_zero_input_channels_as_torch(backend, training):
    torch.manual_seed(0)
    theirs = nn.Sequential(nn.Conv2d(0, 4, 3), nn.BatchNorm2d(4), nn.LeakyReLU(0.2)).train(training)
    with torch.no_grad():
        theirs[0].bias.uniform_(-1, 1)
    ours = ascend_acts.convert(copy.deepcopy(theirs))
    x = torch.randn(2, 0, 5, 5)
    expected, got = theirs(x), ours(x)
    torch.testing.assert_close(got, expected)
    expected.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(ours[0].bias.grad, theirs[0].bias.grad)
    torch.testing.assert_close(ours[1].running_mean, theirs[1].running_mean)


@pytest.mark.parametrize("geometry", [dict(stride=(2,)), dict(padding=(1,)), dict(stride=torch.tensor(2)),
                                      dict(dilation=[2]), dict(stride=[torch.tensor(2), 1]),
                                      dict(groups=torch.tensor(1))])
def test_geometry_forms_conv2d_takes(backend, geometry):
    """One-element lists and 0-d integer tensors, as F.conv2d takes them."""
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    theirs = F.leaky_relu(F.batch_norm(F.conv2d(x, w, **geometry), None, None, training=True), 0.2)
    ours = ascend_acts.conv_bn_leaky_relu(x, w, training=True, negative_slope=0.2, **geometry)
    torch.testing.assert_close(ours, theirs)


@pytest.mark.parametrize("attribute", ["eps", "momentum"])
def test_complex_eps_or_momentum_raise_type_error_as_torch(attribute):
    theirs = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.LeakyReLU(0.2))
    setattr(theirs[1], attribute, complex(0.1, 0))
    ours = ascend_acts.convert(copy.deepcopy(theirs))
    x = torch.randn(2, 3, 6, 6)
    for model in (theirs, ours):
        with pytest.raises(TypeError):
            model(x)


def test_geometry_beyond_int64_raises_value_error_as_torch():
    x, w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    with pytest.raises(ValueError, match="Overflow"):
        F.conv2d(x, w, stride=2**63)
    with pytest.raises(ValueError, match="Overflow"):
        ascend_acts.conv_bn_leaky_relu(x, w, training=True, stride=2**63)


# --- the eval op's BN affine (bn_weight, bn_bias) ----------------------------------------------------------------
def test_eval_bn_bias_changed_in_place_before_the_backward_as_torch(backend):
    """torch's batch_norm keeps no bias for its backward: a BN bias changed in place between forward and backward (an
    optimizer step on another loss, an EMA) is no error, and the gradients are the forward's. The eval op keeps a copy
    of its values."""
    ours, theirs = ours_and_torch(torch_block(c_out=4).eval())
    x = torch.randn(2, 2, 6, 6)
    outputs = [model(x) for model in (ours, theirs)]
    for model in (ours, theirs):
        with torch.no_grad():
            model[1].bias.add_(0.5)
    grad = torch.randn_like(outputs[0])
    for out in outputs:
        out.backward(grad)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        close(a.grad, b.grad)


def test_eval_inference_mode_bn_bias_as_torch(backend):
    """A BN bias made under torch.inference_mode, then used where autograd records: torch's batch_norm keeps no bias, so
    it is no error."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 6, 6, generator=g, requires_grad=True)
    w, gamma = torch.randn(4, 3, 3, 3, generator=g), torch.rand(4, generator=g) + 0.5
    mean, var = torch.randn(4, generator=g), torch.rand(4, generator=g) + 0.5
    with torch.inference_mode():
        beta = torch.randn(4, generator=g)
    ours = ascend_acts.conv_bn_leaky_relu(x, w, None, mean, var, gamma, beta, training=False, negative_slope=0.2,
                                          padding=1)
    theirs = F.leaky_relu(F.batch_norm(F.conv2d(x, w, padding=1), mean, var, gamma, beta, False), 0.2)
    close(ours, theirs)
    grad = torch.randn_like(ours)
    close(*torch.autograd.grad(ours, x, grad), *torch.autograd.grad(theirs, x, grad))


@pytest.mark.parametrize("name", ["bn_weight", "bn_bias"])
def test_eval_ops_refuse_an_affine_on_another_device(name):
    """The raw ops check devices as torch's conv2d and batch_norm do, before any backend reads the tensor."""
    x, w, b, c = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3), torch.randn(4), torch.ones(4)
    affine = {"bn_weight": c, "bn_bias": c, name: c.to("meta")}
    geometry = ([1, 1], [0, 0, 0, 0], [1, 1], 1)
    with pytest.raises(RuntimeError, match=f"'{name}' is on meta"):
        ops.conv_bn_leaky_relu_eval(x, w, b, *geometry, 0.2, **affine)
    with pytest.raises(RuntimeError, match=f"'{name}' is on meta"):
        ops.conv_bn_leaky_relu_eval_backward(torch.randn(2, 4, 4, 4), x, w, b, *geometry, 0.2, **affine)


def test_16_bit_eval_conv_bias_changed_in_place_before_the_backward_as_torch(backend):
    """A 16-bit model's eval op takes the conv's own bias (folding.eval_arguments): kept as a copy, as torch's
    convolution keeps no bias."""
    ours, theirs = ours_and_torch(torch_block(c_out=4).eval().half())
    x = torch.randn(2, 2, 6, 6).half()
    outputs = [model(x) for model in (ours, theirs)]
    for model in (ours, theirs):
        with torch.no_grad():
            model[0].bias.add_(1)
    for out in outputs:
        out.float().sum().backward()
    for a, b in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("model_dtype, autocast_dtype", [(torch.float16, torch.bfloat16),
                                                         (torch.bfloat16, torch.float16)], ids=str)
def test_eval_under_autocast_of_the_other_16_bit_dtype_as_torch(backend, model_dtype, autocast_dtype):
    """A 16-bit model with float32 BN under autocast to the other 16-bit dtype (the fold check runs outside
    autocast's casts)."""
    ours, theirs = ours_and_torch(torch_block(c_out=4).eval().to(model_dtype))
    for model in (ours, theirs):
        model[1].float()
    x = torch.randn(2, 2, 6, 6).to(model_dtype)
    with torch.autocast("cpu", dtype=autocast_dtype):
        got, want = ours(x), theirs(x)
    assert got.dtype == want.dtype == autocast_dtype
    torch.testing.assert_close(got.float(), want.float(), rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("scale", [1e5, 1e30, 1e38])
def test_16_bit_eval_overflow_as_torch(backend, dtype, scale):
    """A BN weight whose fold leaves the 16-bit range runs torch's composite on the CPU: the infinities and NaN of
    the output and gradients where torch's are. (Within the range, bfloat16's at 1e38, the conv weight gradient sums
    products that overflow: infinities of both signs, whose sum is NaN in torch's order of summation where ours may
    stay infinite; docs/usage.md, "Degenerate norm weights".)"""
    ours, theirs = ours_and_torch(torch_block(c_in=3, c_out=4).eval())
    for model in (ours, theirs):
        with torch.no_grad():
            model[1].weight[0] = scale
        model.to(dtype)
    x = torch.randn(2, 3, 6, 6).to(dtype)
    results = []
    for model in (ours, theirs):
        xi = x.clone().requires_grad_()
        out = model(xi)
        out.float().sum().backward()
        conv_weight, *others = model.parameters()
        results.append([out, xi.grad, *(p.grad for p in others)])
    for got, want in zip(*results):
        assert torch.equal(got.isinf(), want.isinf()) and torch.equal(got.isnan(), want.isnan())


@slow
def test_compiled_eval_under_autocast_inside_fullgraph_as_eager():
    """torch.compile(fullgraph=True) of a converted eval block with autocast inside the compiled function: the op's
    16-bit form is chosen while tracing, and the result is eager's."""
    ours = ascend_acts.convert(torch_block(c_out=4).eval())
    x = torch.randn(2, 2, 6, 6)

    def run(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return ours(x)

    torch._dynamo.reset()
    compiled = torch.compile(run, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), run(x), rtol=0, atol=0)
