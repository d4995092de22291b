"""Fused Conv2d + BatchNorm2d + LeakyReLU against torch's composite (the oracle), train and eval."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import ascend_acts
from conftest import backend_dtypes
from markers import fast_only, slow

ops = torch.ops.ascend_acts

# (N, C_in, C_out, H, W, kernel, stride, padding, dilation, groups, bias)
GRID = [
    (4, 3, 8, 16, 16, 4, 2, 1, 1, 1, False),   # DCGAN layer
    (2, 8, 16, 9, 7, 4, 2, 1, 1, 1, False),    # odd sizes
    (3, 4, 6, 5, 5, 1, 1, 0, 1, 1, True),      # 1x1
    (2, 4, 8, 11, 10, 3, 1, "same", 1, 2, True),
    (2, 6, 6, 12, 9, 3, 2, 2, 2, 3, False),    # dilation, groups
    (1, 3, 5, 8, 8, 2, 1, "same", 1, 1, True), # even kernel: asymmetric "same"
    (2, 2, 4, 7, 7, 3, (2, 1), (1, 0), 1, 1, True),
]
TOL = {torch.float64: 1e-10, torch.float32: 2e-4, torch.float16: 3e-2, torch.bfloat16: 1.5e-1}


def pair(seed, config, dtype, slope=0.2):
    n, cin, cout, h, w, k, stride, padding, dilation, groups, bias = config
    torch.manual_seed(seed)
    seq = nn.Sequential(nn.Conv2d(cin, cout, k, stride, padding, dilation, groups, bias), nn.BatchNorm2d(cout),
                        nn.LeakyReLU(slope))
    with torch.no_grad():
        seq[1].weight.uniform_(0.5, 1.5), seq[1].bias.uniform_(-0.5, 0.5)
        seq[1].running_mean.uniform_(-0.2, 0.2), seq[1].running_var.uniform_(0.5, 2)
    seq = seq.to(dtype)
    fused = ascend_acts.nn.ConvBNLeakyReLU2d(cin, cout, k, stride, padding, dilation, groups, bias,
                                              negative_slope=slope).to(dtype)
    fused.load_state_dict(seq.state_dict())
    x = torch.randn(n, cin, h, w, dtype=torch.float64).to(dtype)
    return seq, fused, x


def params(seq_or_fused):
    conv, bn = (seq_or_fused[0], seq_or_fused[1]) if isinstance(seq_or_fused, nn.Sequential) else \
        (seq_or_fused.conv, seq_or_fused.bn)
    return [p for p in (conv.weight, conv.bias, bn.weight, bn.bias) if p is not None]


def close(a, b, dtype):
    torch.testing.assert_close(a.double(), b.double(), rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("config", fast_only(GRID, [GRID[4]]), ids=lambda c: "x".join(map(str, c)))
@backend_dtypes("conv_bn_leaky_relu_train", [torch.float64, torch.float32])
def test_matches_sequential(config, training, dtype, backend):
    seq, fused, x = pair(0, config, dtype)
    seq.train(training), fused.train(training)
    xs, xf = x.clone().requires_grad_(), x.clone().requires_grad_()
    ys, yf = seq(xs), fused(xf)
    close(yf, ys, dtype)
    grad = torch.randn_like(ys)
    gs = torch.autograd.grad(ys, [xs, *params(seq)], grad)
    gf = torch.autograd.grad(yf, [xf, *params(fused)], grad)
    for a, b in zip(gf, gs):
        close(a, b, dtype)
    close(fused.bn.running_mean, seq[1].running_mean, dtype)
    close(fused.bn.running_var, seq[1].running_var, dtype)
    assert fused.bn.num_batches_tracked == seq[1].num_batches_tracked


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("training", [True, False])
def test_half_types_no_worse_than_twice_torch(training, dtype, backend):
    """|ours - float64 reference| <= 2 |torch's same-dtype result - float64 reference| (+ a tiny floor)."""
    seq64, fused, x = pair(1, GRID[0], torch.float64)
    seq64.train(training)
    reference = seq64(x)
    seq_low = pair(1, GRID[0], dtype)[0].train(training)
    fused = fused.to(dtype).train(training)
    ours = (fused(x.to(dtype)).double() - reference).abs().max()
    theirs = (seq_low(x.to(dtype)).double() - reference).abs().max()
    assert ours <= 2 * theirs + 1e-3


def test_no_running_stats_and_momentum_none():
    seq, fused, x = pair(2, GRID[1], torch.float64)
    seq[1].momentum = fused.bn.momentum = None
    for _ in range(3):
        close(fused(x), seq(x), torch.float64)
    close(fused.bn.running_var, seq[1].running_var, torch.float64)
    assert fused.bn.num_batches_tracked == 3
    plain = nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4, track_running_stats=False), nn.LeakyReLU()).double()
    mine = ascend_acts.nn.ConvBNLeakyReLU2d.from_modules(*plain).eval()
    plain.eval()
    y = torch.randn(2, 2, 6, 6, dtype=torch.float64)
    close(mine(y), plain(y), torch.float64)


@pytest.mark.parametrize("slope", fast_only([0.0, -0.3], [0.0]))
def test_non_invertible_slope_keeps_conv_output(slope, backend):
    """slope <= 0: the output does not determine the BN output, so the conv output is kept."""
    seq, fused, x = pair(8, GRID[1], torch.float32, slope=slope)
    xs, xf = x.clone().requires_grad_(), x.clone().requires_grad_()
    ys, yf = seq(xs), fused(xf)
    close(yf, ys, torch.float32)
    grad = torch.randn_like(ys)
    for a, b in zip(torch.autograd.grad(yf, [xf, *params(fused)], grad),
                    torch.autograd.grad(ys, [xs, *params(seq)], grad)):
        close(a, b, torch.float32)


def test_zero_bn_weight_falls_back_and_is_correct():
    seq, fused, x = pair(4, GRID[2], torch.float64)
    with torch.no_grad():
        seq[1].weight[1] = 0
        fused.bn.weight[1] = 0
    close(fused(x), seq(x), torch.float64)
    gs = torch.autograd.grad(seq(x).sum(), params(seq))
    gf = torch.autograd.grad(fused(x).sum(), params(fused))
    for a, b in zip(gf, gs):
        close(a, b, torch.float64)


def saved_bytes(fn):
    storages = {}

    def pack(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, sum(storages.values())


def test_saves_less_than_the_composite(backend):
    seq, fused, x = pair(5, GRID[0], torch.float32)
    x.requires_grad_()
    out, ours = saved_bytes(lambda: fused(x))
    _, theirs = saved_bytes(lambda: seq(x))
    weight_bytes = fused.conv.weight.numel() * 4
    statistics = 16 * fused.conv.out_channels * 8  # bn weight/bias, mean/invstd: O(C)
    assert ours <= x.numel() * 4 + weight_bytes + out.numel() * 4 + statistics
    assert ours < theirs


DATA_CHANGES = {
    "clamp_ via .data (WGAN clipping)": lambda p: p.data.clamp_(-0.05, 0.05),
    "mul_/add_ via .data (EMA)": lambda p: p.data.mul_(0.9).add_(torch.ones_like(p), alpha=0.1),
    "rebinding p.data": lambda p: setattr(p, "data", p.data * 1.5 + 0.1),
    "in-place under no_grad": lambda p: p.mul_(0.5),
}


@pytest.mark.parametrize("change", fast_only(DATA_CHANGES, ["rebinding p.data"]))
def test_eval_output_follows_every_kind_of_weight_change(change):
    """The BN fold is recomputed on every eval call; version counters (which .data writes do not bump)
    play no part."""
    seq, fused, x = pair(6, GRID[1], torch.float64)
    seq.eval(), fused.eval()
    with torch.no_grad():
        close(fused(x), seq(x), torch.float64)
        for model in (seq, fused):
            for tensor in (*params(model), model[1].running_mean if model is seq else model.bn.running_mean):
                DATA_CHANGES[change](tensor)
        close(fused(x), seq(x), torch.float64)
    close(fused(x), seq(x), torch.float64)  # and with grad enabled


def torch_block(bn_momentum=None):
    torch.manual_seed(11)
    return nn.Sequential(nn.Conv2d(3, 4, 3, bias=True), nn.BatchNorm2d(4, momentum=bn_momentum),
                         nn.LeakyReLU(0.2)).double()


def child(model, index):
    """Child "0" (conv) or "1" (BN) of a Sequential or a ConvBNLeakyReLU2d."""
    return model._modules[str(index)]


def spoil(attribute, value):
    return lambda model: setattr(child(model, 0 if attribute in ("padding", "bias", "weight") else 1), attribute, value)


# (what is wrong, applied to the torch Sequential and to our block alike; input): torch's error type is the oracle
BAD_CALLS = {
    "wrong input channels": (None, torch.randn(2, 5, 8, 8, dtype=torch.float64), "expects 3 input channels"),
    "3-D input": (None, torch.randn(3, 8, 8, dtype=torch.float64), "'input' must be 4-D"),
    "0x0 spatial input": (None, torch.randn(2, 3, 0, 0, dtype=torch.float64), "'input' has an empty spatial size"),
    "kernel larger than the padded input": (None, torch.randn(2, 3, 2, 2, dtype=torch.float64),
                                            "padded 'input' is 2 x 2 per channel, smaller than the"),
    "one value per channel": (None, torch.randn(1, 3, 3, 3, dtype=torch.float64),
                              "Expected more than 1 value per channel when training, got input size "
                              "torch.Size\\(\\[1, 4, 1, 1\\]\\)"),
    "bf16 input, float64 weights": (None, torch.randn(2, 3, 8, 8, dtype=torch.bfloat16),
                                    "'weight' has dtype torch.float64 but 'input' has torch.bfloat16"),
    "int64 weights": (spoil("weight", nn.Parameter(torch.ones(4, 3, 3, 3, dtype=torch.int64), requires_grad=False)),
                      torch.randn(2, 3, 8, 8, dtype=torch.float64), "'weight' must be a floating-point tensor"),
    "float32 bias": (spoil("bias", nn.Parameter(torch.zeros(4))), torch.randn(2, 3, 8, 8, dtype=torch.float64),
                     "'bias' has dtype torch.float32"),
    "bias of the wrong shape": (spoil("bias", nn.Parameter(torch.zeros(5, dtype=torch.float64))),
                                torch.randn(2, 3, 8, 8, dtype=torch.float64), "'bias' must have shape \\(4,\\)"),
    "running_mean of the wrong shape": (spoil("running_mean", torch.zeros(3, dtype=torch.float64)),
                                        torch.randn(2, 3, 8, 8, dtype=torch.float64),
                                        "'running_mean' must have shape \\(4,\\)"),
    "float32 running_var, float64 input": (spoil("running_var", torch.ones(4)),
                                           torch.randn(2, 3, 8, 8, dtype=torch.float64),
                                           "'running_var' has dtype torch.float32"),
    "negative padding": (spoil("padding", (-1, -1)), torch.randn(2, 3, 8, 8, dtype=torch.float64),
                         "'padding' must be non-negative"),
    "eps = 0 in training": (spoil("eps", 0.0), torch.randn(2, 3, 8, 8, dtype=torch.float64),
                            "'eps' must be positive during training"),
    "eps < 0 in training": (spoil("eps", -1e-3), torch.randn(2, 3, 8, 8, dtype=torch.float64),
                            "'eps' must be positive during training"),
}


# errors raised inside torch's F.batch_norm, after BatchNorm2d.forward incremented num_batches_tracked
TORCH_COUNTS_FIRST = {"one value per channel", "running_mean of the wrong shape", "float32 running_var, float64 input",
                      "eps = 0 in training", "eps < 0 in training"}


def state(model):
    return {key: value.clone() for key, value in model.state_dict().items()}


@pytest.mark.parametrize("momentum", fast_only([0.1, None], [None]))
@pytest.mark.parametrize("case", BAD_CALLS)
def test_bad_call_raises_torchs_error_type_and_changes_nothing(case, momentum):
    """The same mistake in torch's Sequential(Conv2d, BatchNorm2d, LeakyReLU) and in the fused block (standalone
    and inside a converted Sequential): same error type, ours names the argument, and our state (running
    statistics and num_batches_tracked, which momentum=None turns into the update factor) stays bit-identical.
    torch's own is unchanged too, except where its BatchNorm2d counts the batch before F.batch_norm raises."""
    spoil_models, x, message = BAD_CALLS[case]
    theirs = torch_block(momentum)
    standalone = ascend_acts.nn.ConvBNLeakyReLU2d.from_modules(*copy.deepcopy(torch_block(momentum)))
    converted = ascend_acts.convert(copy.deepcopy(torch_block(momentum)))
    for model in (theirs, standalone, converted):
        if spoil_models is not None:
            spoil_models(model)
    before = state(theirs)
    with pytest.raises(Exception) as torch_error:
        theirs(x)
    torch_unchanged = all(torch.equal(a, b) for a, b in zip(before.values(), state(theirs).values()))
    assert torch_unchanged == (case not in TORCH_COUNTS_FIRST)
    for ours in (standalone, converted):
        before = state(ours)
        with pytest.raises(torch_error.type) as our_error:
            ours(x)
        if ours is standalone or case not in ("3-D input", "bias of the wrong shape", "negative padding"):
            assert our_error.match(message)  # (the converted Sequential leaves those three to torch's modules)
        after = state(ours)
        assert all(torch.equal(before[key], after[key]) for key in before), case


@pytest.mark.parametrize("change, error, message", [
    (dict(groups=2), RuntimeError, "'weight' \\(4, 3, 3, 3\\) with groups=2 expects 6 input channels"),
    (dict(groups=3), RuntimeError, "groups \\(3\\) must divide the output channels"),
    (dict(groups=0), RuntimeError, "'groups' must be positive"),
    (dict(stride=0), RuntimeError, "'stride' and 'dilation' must be positive"),
    (dict(padding="same", stride=2), RuntimeError, "padding='same' is not supported for strided"),
    (dict(padding="full"), RuntimeError, "'padding' must be 'same', 'valid', an int or a pair"),  # conv2d's type
    (dict(stride=(1, 1, 1)), RuntimeError, "'stride' must be a single int or a list of 2 values"),
    (dict(input=torch.randn(1, 2, 3, 8, 8)), RuntimeError, "'input' must be 4-D"),
    (dict(training=1), TypeError, "'training' must be a bool"),
    (dict(training=False, eps=-1.0), ValueError, "'eps' must be non-negative"),
    (dict(running_var=None), ValueError, "'running_mean' and 'running_var' must both be given"),
    (dict(input=torch.randn(2, 3, 8, 8).long()), RuntimeError, "'input' must be a floating-point tensor"),
    (dict(input=[[1.0]]), TypeError, "'input' must be a torch.Tensor"),
    (dict(running_mean=torch.zeros(8)[::2]), None, None),  # a strided view is fine: written in place correctly
])
def test_functional_arguments_are_checked_before_any_write(change, error, message):
    args = dict(input=torch.randn(2, 3, 8, 8), weight=torch.randn(4, 3, 3, 3), bias=None,
                running_mean=torch.zeros(4), running_var=torch.ones(4), training=True)
    args.update(change)
    written = [t for t in (args["running_mean"], args["running_var"]) if t is not None]
    before = [t.clone() for t in written]
    if error is None:
        ascend_acts.conv_bn_leaky_relu(**args)
        assert not torch.equal(args["running_mean"], before[0])
        return
    with pytest.raises(error, match=message):
        ascend_acts.conv_bn_leaky_relu(**args)
    assert all(torch.equal(a, b) for a, b in zip(before, written))


def test_inference_tensor_statistics_are_refused_before_writing():
    with torch.inference_mode():
        running_mean, running_var = torch.zeros(4), torch.ones(4)
    with pytest.raises(RuntimeError, match="'running_mean' is an inference tensor"):
        ascend_acts.conv_bn_leaky_relu(torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), None, running_mean,
                                       running_var, training=True)
    assert torch.equal(running_mean, torch.zeros(4)) and torch.equal(running_var, torch.ones(4))


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("training", [True, False])
def test_empty_batch_behaves_like_torch(training, momentum):
    """N = 0: torch returns an empty output, leaves the running statistics alone, counts the batch, and gives
    zero (not None) gradients to the parameters; so do we, where main made the statistics NaN for good."""
    theirs = torch_block(momentum).train(training)
    with torch.no_grad():
        theirs[1].running_mean.uniform_(-1, 1)
    ours = ascend_acts.nn.ConvBNLeakyReLU2d.from_modules(*copy.deepcopy(theirs)).train(training)
    x = torch.randn(0, 3, 8, 8, dtype=torch.float64, requires_grad=True)
    outputs = [model(x) for model in (theirs, ours)]
    assert outputs[1].shape == outputs[0].shape == (0, 4, 6, 6) and outputs[1].dtype == outputs[0].dtype
    for (key, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        assert torch.equal(a, b), key
    for out in outputs:
        out.sum().backward()
    for a, b in zip(ours.parameters(), theirs.parameters()):
        assert a.grad is not None and torch.equal(a.grad, b.grad)


def test_half_input_with_float32_weights_is_accepted_under_autocast():
    """Outside autocast it is a dtype error (as in torch); inside, conv2d's autocast casts, and so does ours."""
    seq = torch_block().float()
    fused = ascend_acts.nn.ConvBNLeakyReLU2d.from_modules(*copy.deepcopy(seq))
    x = torch.randn(2, 3, 8, 8).bfloat16()
    with pytest.raises(RuntimeError, match="'weight' has dtype torch.float32 but 'input' has torch.bfloat16"):
        fused(x)
    with torch.autocast("cpu", torch.bfloat16):
        expected, got = seq(x), fused(x)
    torch.testing.assert_close(got.float(), expected.float(), rtol=5e-2, atol=5e-2)


@slow
@pytest.mark.parametrize("compiler", ["aot_eager", "inductor"])
@pytest.mark.parametrize("training", [True, False])
def test_compile_fullgraph(compiler, training, backend):
    seq, fused, x = pair(7, GRID[0], torch.float32)
    seq.train(training), fused.train(training)
    compiled = torch.compile(fused, backend=compiler, fullgraph=True)
    xs, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    yc, ys = compiled(xc), seq(xs)
    close(yc, ys, torch.float32)
    (gc,) = torch.autograd.grad(yc.sum(), xc)
    (gs,) = torch.autograd.grad(ys.sum(), xs)
    close(gc, gs, torch.float32)
    # the op's in-place update of the running statistics survives functionalization
    assert int(fused.bn.num_batches_tracked) == int(seq[1].num_batches_tracked)
    close(fused.bn.running_mean, seq[1].running_mean, torch.float32)
    close(fused.bn.running_var, seq[1].running_var, torch.float32)


def assert_same_statistics(ours: nn.BatchNorm2d, theirs: nn.BatchNorm2d, dtype) -> None:
    assert int(ours.num_batches_tracked) == int(theirs.num_batches_tracked)
    close(ours.running_mean, theirs.running_mean, dtype)
    close(ours.running_var, theirs.running_var, dtype)


@slow
@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("checkpointing", ["early stop", "no early stop", "reentrant"])
def test_checkpointed_training_counts_and_updates_statistics_as_torch(checkpointing, momentum, backend):
    """torch.utils.checkpoint reruns the forward for the backward, and BatchNorm with it: torch counts the
    batch and updates the running statistics twice per step (momentum=None: factors 1/1, 1/2, 1/3, ...).
    With early stop the recomputation ends inside the fused op's autograd, once its last tensor is saved."""
    dtype = torch.float32 if backend == "sim" else torch.float64
    seq, fused, x = pair(3, GRID[0], dtype)
    for bn in (seq[1], fused.bn):
        bn.momentum = momentum
    converted = ascend_acts.convert(copy.deepcopy(seq))
    early_stop = torch.utils.checkpoint.set_checkpoint_early_stop(checkpointing == "early stop")
    with early_stop:
        for step in range(2):
            for model in (seq, fused, converted):
                xs = (x + step).requires_grad_()
                torch.utils.checkpoint.checkpoint(model, xs, use_reentrant=checkpointing == "reentrant") \
                    .square().sum().backward()
    for ours in (fused, converted):
        for a, b in zip(params(ours if ours is fused else nn.Sequential(ours[0], ours[1])), params(seq)):
            close(a.grad, b.grad, dtype)
    assert int(seq[1].num_batches_tracked) == 4
    assert_same_statistics(fused.bn, seq[1], dtype)
    assert_same_statistics(converted[1], seq[1], dtype)


@backend_dtypes("conv_bn_leaky_relu_train", [torch.float64, torch.float32, torch.bfloat16])
def test_train_op_updates_running_statistics_as_batch_norm(dtype, backend):
    """The op itself updates running_mean/running_var (torch's formula, unbiased variance), as
    aten::native_batch_norm does; None leaves nothing to update; half input takes float32 statistics."""
    torch.manual_seed(4)
    x, w = torch.randn(3, 2, 5, 6, dtype=torch.float64), torch.randn(4, 2, 3, 3, dtype=torch.float64)
    gamma, beta = torch.rand(4, dtype=torch.float64) + 0.5, torch.randn(4, dtype=torch.float64)
    stats_dtype = torch.float32 if dtype == torch.bfloat16 else dtype
    running = [torch.randn(4, dtype=torch.float64).to(stats_dtype), torch.rand(4, dtype=torch.float64).add(0.5)]
    running[1] = running[1].to(stats_dtype)
    expected = [t.double().clone() for t in running]
    geometry = ([1, 1], [1, 0, 0, 1], [1, 1], 1)
    out = ops.conv_bn_leaky_relu_train(x.to(dtype), w.to(dtype), None, gamma.to(stats_dtype), beta.to(stats_dtype),
                                       *running, *geometry, 0.3, 1e-5, 0.2, True)[0]
    conv = F.conv2d(F.pad(x.to(dtype).double(), [0, 1, 1, 0]), w.to(dtype).double())
    reference = F.leaky_relu(F.batch_norm(conv, *expected, gamma, beta, True, 0.3, 1e-5), 0.2)
    close(out, reference, dtype)
    for ours, theirs in zip(running, expected):
        assert ours.dtype == stats_dtype
        close(ours, theirs, dtype)  # from the conv output, which a bfloat16 device convolution rounds
    close(ops.conv_bn_leaky_relu_train(x.to(dtype), w.to(dtype), None, gamma.to(stats_dtype), beta.to(stats_dtype),
                                       None, None, *geometry, 0.3, 1e-5, 0.2, True)[0], reference, dtype)


def test_train_op_checks_the_running_statistics_before_writing():
    x, w, gamma, beta = torch.randn(2, 3, 4, 4), torch.randn(4, 3, 3, 3), torch.ones(4), torch.zeros(4)
    geometry = ([1, 1], [1, 1, 1, 1], [1, 1], 1)
    running_mean, running_var = torch.zeros(4), torch.ones(4)
    with pytest.raises(ValueError, match="'running_mean' and 'running_var' must both be given"):
        ops.conv_bn_leaky_relu_train(x, w, None, gamma, beta, running_mean, None, *geometry, 0.1, 1e-5, 0.2, True)
    with pytest.raises(RuntimeError, match="'running_var' must be torch.float32"):
        ops.conv_bn_leaky_relu_train(x, w, None, gamma, beta, running_mean, torch.ones(4, dtype=torch.float64),
                                     *geometry, 0.1, 1e-5, 0.2, True)
    assert torch.equal(running_mean, torch.zeros(4)) and torch.equal(running_var, torch.ones(4))


def test_vmap_of_the_train_op_updates_batched_running_statistics_per_sample():
    torch.manual_seed(6)
    xs, w = torch.randn(3, 2, 3, 4, 4, dtype=torch.float64), torch.randn(4, 3, 3, 3, dtype=torch.float64)
    gamma, beta = torch.ones(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    geometry = ([1, 1], [1, 1, 1, 1], [1, 1], 1)
    means, variances = torch.zeros(3, 4, dtype=torch.float64), torch.ones(3, 4, dtype=torch.float64)

    def train(x, running_mean, running_var):
        return ops.conv_bn_leaky_relu_train(x, w, None, gamma, beta, running_mean, running_var, *geometry, 0.1,
                                            1e-5, 0.2, True)[0]

    torch.func.vmap(train)(xs, means, variances)
    for x, mean, variance in zip(xs, means, variances):
        expected = torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64)
        F.batch_norm(F.conv2d(x, w, padding=1), *expected, None, None, True, 0.1, 1e-5)
        close(mean, expected[0], torch.float64), close(variance, expected[1], torch.float64)
    with pytest.raises(RuntimeError, match="running_mean or running_var, which it updates in place, are not batched"):
        torch.func.vmap(train, in_dims=(0, None, None))(xs, means[0], variances[0])


def test_inplace_abn_only_where_the_output_determines_x_hat():
    from ascend_acts.ops.conv_bn_leaky_relu.semantics import output_determines_batch_norm

    gamma, beta = torch.tensor([1.0, 0.5]), torch.tensor([0.0, 2.0])  # |beta| / |gamma| up to 4
    assert output_determines_batch_norm(gamma, beta, 0.2, torch.float32)
    assert not output_determines_batch_norm(gamma, beta, 0.2, torch.bfloat16)  # 16-bit: up to 2
    assert output_determines_batch_norm(gamma, beta / 2, 0.2, torch.bfloat16)
    assert not output_determines_batch_norm(gamma * 0.04, beta, 0.2, torch.float32)  # ratio 100: ~200 u error
    assert not output_determines_batch_norm(gamma * 0.04, beta, 0.2, torch.float16)
    assert not output_determines_batch_norm(gamma * 0.04, beta, 0.2, torch.bfloat16)
    assert not output_determines_batch_norm(gamma, beta, 0.0, torch.float32)
    assert not output_determines_batch_norm(torch.tensor([1.0, 0.0]), beta, 0.2, torch.float32)


@slow
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("ratio", [1.0, 2.0, 7.0])
def test_bn_weight_gradient_within_twice_torchs_error_in_16_bit(dtype, ratio):
    """The gradient that sums x-hat (recovered from the kept output where InPlace-ABN applies) against a float64
    composite: at most 2x the error of torch's Sequential in the same dtype (mean over 4 seeds)."""
    errors = {"torch": 0.0, "ours": 0.0}
    for seed in range(4):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Conv2d(8, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.LeakyReLU(0.2))
        with torch.no_grad():
            gamma = 0.1 * (1 + torch.rand(16))
            model[1].weight.copy_(gamma)
            model[1].bias.copy_(ratio * gamma * torch.sign(torch.randn(16)))
        exact = copy.deepcopy(model).double()
        x, v = torch.randn(8, 8, 16, 16), torch.randn(8, 16, 16, 16)
        (exact(x.double()) * v.double()).sum().backward()
        for name, candidate in (("torch", copy.deepcopy(model).to(dtype)),
                                ("ours", ascend_acts.convert(copy.deepcopy(model).to(dtype)))):
            (candidate(x.to(dtype)).float() * v).sum().backward()
            difference = candidate[1].weight.grad.double() - exact[1].weight.grad
            errors[name] += float(difference.norm() / exact[1].weight.grad.norm())
    assert errors["ours"] <= 2 * errors["torch"], errors


@slow
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_small_bn_weight_large_bias_gradients_stay_accurate(dtype, backend):
    """gamma = 0.01, beta = 1: rebuilding x-hat from a half-precision output would amplify its rounding 100x;
    the conv output is kept instead, so the gradients are no worse than twice torch's own."""
    seq64, fused, x = pair(9, GRID[0], torch.float64)
    with torch.no_grad():
        for bn in (seq64[1], fused.bn):
            bn.weight.fill_(0.01), bn.bias.fill_(1.0)
    grad = torch.randn(seq64(x).shape, dtype=torch.float64)
    x64 = x.clone().requires_grad_()
    exact = torch.autograd.grad(seq64(x64), [x64, seq64[1].weight], grad)
    seq_low = copy.deepcopy(seq64).to(dtype)
    fused = fused.to(dtype)
    errors = []
    for model in (fused, seq_low):
        xl = x.to(dtype).requires_grad_()
        got = torch.autograd.grad(model(xl), [xl, params(model)[-2]], grad.to(dtype))
        errors.append(max(float((g.double() - e).abs().max() / e.abs().max()) for g, e in zip(got, exact)))
    ours, theirs = errors
    assert ours <= 2 * theirs + 1e-3, (ours, theirs)


def test_a_call_the_op_itself_refuses_leaves_num_batches_tracked():
    """The batch is counted before the op runs (as torch counts it before F.batch_norm); an error the op raises
    before writing (here: the sim backend has no float64 kernels) takes the count back."""
    if ascend_acts.backends.unavailable_reason("sim") is not None:
        pytest.skip("sim backend not built")
    converted = ascend_acts.convert(torch_block(None))
    before = state(converted)
    with ascend_acts.use_backend("sim"), pytest.raises(TypeError, match="float64"):
        converted(torch.randn(2, 3, 8, 8, dtype=torch.float64))
    assert all(torch.equal(before[key], value) for key, value in state(converted).items())
