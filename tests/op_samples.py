"""Every op's sample calls, declared once: `SAMPLES[op name](dtype, device)` gives a few small calls (args, kwargs)
of `torch.ops.ascend_acts.<op name>`: odd shapes, a channels_last or otherwise non-contiguous input, the extreme
slopes (0, negative) and an empty input where the op takes one. The first sample of each op is its representative
one (the one the other backends and the fast subset run). `tests/test_op_contract.py` runs them all through the
op contract; a backward op's samples are what its forward returns (the ops read `saved`, `mean` and `invstd` as
the forward's, not as free inputs).

`COMPOSITES[op name](*args)` is what torch's own functions give for the same call (layout and dtype oracle: the
values of RReLU's noise differ), `NON_DIFFERENTIABLE[op name]` the floating arguments autograd does not
differentiate through."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ascend_acts import op_table

ops = torch.ops.ascend_acts
CL = torch.channels_last


@dataclass
class Sample:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    name: str = ""


class _Maker:
    """Tensors of one dtype/device from one generator; values kept away from the kinks at 0 so that finite
    differences (gradcheck) never straddle one."""

    def __init__(self, dtype, device, seed=0):
        self.dtype, self.device = dtype, device
        self.generator = torch.Generator().manual_seed(seed)

    def randn(self, *shape, away_from_zero=True):
        x = torch.randn(*shape, generator=self.generator, dtype=torch.float64)
        if away_from_zero:
            x = torch.where(x.abs() < 0.1, x.sign() * 0.1 + x, x)
        return x.to(self.dtype).to(self.device)

    def positive(self, *shape, dtype=None):
        x = torch.rand(*shape, generator=self.generator, dtype=torch.float64) + 0.5
        return x.to(dtype or self.dtype).to(self.device)

    @property
    def per_channel_dtype(self):
        """BatchNorm parameters: float32 for a 16-bit input (as torch's batch_norm takes them), else the input's."""
        return self.dtype if self.dtype in (torch.float32, torch.float64) else torch.float32

    def seed(self, value=1234):
        return torch.tensor(value, dtype=torch.int64, device=self.device)


def _layouts(m: _Maker):
    """(name, x) in the layouts every elementwise op is sampled in: odd 2-D, channels_last 4-D, transposed, sliced
    (not dense), empty."""
    return [("odd", m.randn(3, 5)), ("channels_last", m.randn(2, 3, 4, 5).contiguous(memory_format=CL)),
            ("transposed", m.randn(5, 3).t()), ("sliced", m.randn(2, 3, 8)[..., ::2]), ("empty", m.randn(0, 4))]


def leaky_relu(dtype, device):
    m = _Maker(dtype, device)
    slopes = {"odd": 0.2, "channels_last": -0.3, "transposed": 0.0, "sliced": 0.01, "empty": 0.2}
    return [Sample((x, slopes[name]), name=f"{name}-slope{slopes[name]}") for name, x in _layouts(m)]


def leaky_relu_backward(dtype, device):
    m, samples = _Maker(dtype, device, seed=1), []
    for (name, x), slope in zip(_layouts(m), (0.2, -0.3, 0.0, -2.0, 0.2)):
        saved_is_result = slope >= 0  # the forward keeps its output when it tells the input's sign
        saved = ops.leaky_relu(x, slope) if saved_is_result else x
        grad = torch.empty_like(x).copy_(m.randn(*x.shape))
        samples.append(Sample((grad, saved, slope, saved_is_result), name=f"{name}-slope{slope}"))
    return samples


RRELU_BOUNDS = {"odd": (0.1, 0.3), "channels_last": (-0.5, 0.3), "transposed": (0.125, 1 / 3),
                "sliced": (-0.8, -0.2), "empty": (0.1, 0.3)}


def rrelu(dtype, device):
    m = _Maker(dtype, device, seed=2)
    return [Sample((x, m.seed(), *RRELU_BOUNDS[name]), name=name) for name, x in _layouts(m)]


def rrelu_backward(dtype, device):
    m, samples = _Maker(dtype, device, seed=3), []
    for name, x in _layouts(m):
        lower, upper = RRELU_BOUNDS[name]
        saved_is_result = lower >= 0
        seed = m.seed()
        saved = ops.rrelu(x, seed, lower, upper) if saved_is_result else x
        grad = torch.empty_like(x).copy_(m.randn(*x.shape))
        samples.append(Sample((grad, saved, seed, lower, upper, saved_is_result), name=name))
    return samples


def fused_bias_leaky_relu(dtype, device):
    m = _Maker(dtype, device, seed=4)
    return [
        Sample((m.randn(2, 5, 3), m.randn(5), 0.2, 2**0.5), name="odd-3d"),
        Sample((m.randn(3, 5), None, -0.3, 2.0), name="2d-no-bias-negative"),
        Sample((m.randn(2, 3, 4, 5).contiguous(memory_format=CL), m.randn(3), -0.2, 1.5), name="channels_last"),
        Sample((m.randn(4, 3, 2).transpose(0, 2), m.randn(3), 0.0, 2**0.5), name="transposed"),
        Sample((m.randn(3, 4, 6)[..., ::2], m.randn(4), 0.2, 0.5), name="sliced-scale-below-1"),
        Sample((m.randn(3, 4), m.randn(4), 0.2, -1.5), name="negative-scale"),
        Sample((m.randn(0, 3, 2), m.randn(3), 0.2, 2**0.5), name="empty"),
        # NVlabs bias_act's modes: clamp (>= 0) and relu
        Sample((m.randn(2, 4, 3) * 2, m.randn(4), 0.2, 2**0.5, 1.0), name="clamp"),
        Sample((m.randn(3, 5).contiguous(), None, 0.0, 2**0.5, -1.0, True), name="relu-no-bias"),
        Sample((m.randn(2, 3, 4, 5).contiguous(memory_format=CL) * 2, m.randn(3), 0.0, 1.0, 0.5, True),
               name="relu-clamp-channels_last"),
    ]


def fused_bias_leaky_relu_backward(dtype, device):
    from ascend_acts.ops.fused_bias_leaky_relu.semantics import saves_result

    samples = []
    m = _Maker(dtype, device, seed=5)
    for forward in fused_bias_leaky_relu(dtype, device):
        x, bias, slope, scale, *modes = forward.args
        saved_is_result = saves_result(slope, scale, *modes)  # the forward keeps its output when it tells the mask
        saved = ops.fused_bias_leaky_relu(x, bias, slope, scale, *modes) if saved_is_result else x
        grad = torch.empty_like(x).copy_(m.randn(*x.shape))
        samples.append(Sample((grad, saved, bias, slope, scale, saved_is_result, *modes), name=forward.name))
    return samples


# (N, C_in, C_out, H, W, kernel, stride, padding (top, bottom, left, right), dilation, groups)
CONV_GEOMETRIES = {
    "3x3": (2, 3, 4, 5, 4, 3, [1, 1], [1, 1, 1, 1], [1, 1], 1),
    "strided-asymmetric-groups": (2, 4, 4, 5, 5, 3, [2, 1], [1, 0, 0, 1], [1, 1], 2),
    "dilated": (3, 2, 2, 5, 5, 2, [1, 1], [1, 1, 1, 1], [2, 2], 1),
}
# transposed (conv_transpose2d's weight (C_in, C_out/groups, k, k)), with output_padding (height, width)
TRANSPOSED_GEOMETRIES = {
    "transposed-strided-groups": ((2, 4, 6, 3, 4, 3, [2, 2], [1, 1, 1, 1], [1, 1], 2), [1, 0]),
    "transposed-dilated": ((2, 3, 4, 3, 3, 2, [1, 2], [0, 0, 1, 1], [2, 1], 1), [0, 1]),
}


def _transposed_tensors(m: _Maker, geometry, layout=""):
    """Input, weight, bias of a transposed convolution; layout "input": a channels_last input."""
    n, cin, cout, h, w, k, *_, groups = geometry
    x, weight = m.randn(n, cin, h, w), m.randn(cin, cout // groups, k, k)
    return x.contiguous(memory_format=CL) if layout == "input" else x, weight, m.randn(cout)


def _conv_tensors(m: _Maker, geometry, layout=""):
    """Input, weight, bias; layout "input": a channels_last input, "weight": a channels_last weight, "sliced": a
    non-dense input (every other column)."""
    n, cin, cout, h, w, k, *_, groups = geometry
    x, weight = m.randn(n, cin, h, 2 * w if layout == "sliced" else w), m.randn(cout, cin // groups, k, k)
    if layout == "input":
        x = x.contiguous(memory_format=CL)
    if layout == "sliced":
        x = x[..., ::2]
    if layout == "weight":
        weight = weight.contiguous(memory_format=CL)
    return x, weight, m.randn(cout)


def _layout_name(layout):
    return {"": "", "input": "-channels_last", "weight": "-channels_last-weight", "sliced": "-sliced"}[layout]


def conv_bn_leaky_relu_train(dtype, device):
    m, samples = _Maker(dtype, device, seed=6), []
    cases = [  # geometry, with conv bias, running statistics, slope, save_output, layout (_conv_tensors), relu
        ("3x3", True, True, 0.2, True, "", False),
        ("strided-asymmetric-groups", False, False, -0.3, False, "weight", False),
        ("dilated", True, True, 0.0, False, "input", False),
        ("3x3", False, True, 0.2, False, "sliced", False),
        ("strided-asymmetric-groups", True, True, 0.0, False, "input", True),
    ]
    for geometry, with_bias, stats, slope, save_output, layout, relu in cases:
        config = CONV_GEOMETRIES[geometry]
        x, weight, bias = _conv_tensors(m, config, layout)
        c, pc = config[2], m.per_channel_dtype
        running = (m.randn(c).to(pc) * 0.1, m.positive(c, dtype=pc)) if stats else (None, None)
        args = (x, weight, bias if with_bias else None, m.positive(c, dtype=pc), (m.randn(c) * 0.3).to(pc), *running,
                *config[6:], 0.1, 1e-5, slope, save_output, relu)
        samples.append(Sample(args, name=f"{geometry}-bias{with_bias}-stats{stats}-slope{slope}-save{save_output}"
                                         f"{_layout_name(layout)}{'-relu' if relu else ''}"))
    for geometry, with_bias, slope, save_output, layout, relu in (
            ("transposed-strided-groups", True, 0.2, True, "", False),
            ("transposed-dilated", False, 0.0, False, "input", True)):
        config, output_padding = TRANSPOSED_GEOMETRIES[geometry]
        x, weight, bias = _transposed_tensors(m, config, layout)
        c, pc = config[2], m.per_channel_dtype
        args = (x, weight, bias if with_bias else None, m.positive(c, dtype=pc), (m.randn(c) * 0.3).to(pc),
                m.randn(c).to(pc) * 0.1, m.positive(c, dtype=pc), *config[6:], 0.1, 1e-5, slope, save_output, relu,
                True, output_padding)
        samples.append(Sample(args, name=f"{geometry}-bias{with_bias}-slope{slope}-save{save_output}"
                                         f"{_layout_name(layout)}{'-relu' if relu else ''}"))
    # norm_groups: InstanceNorm (G == C) with running statistics, GroupNorm (2 channels a group) of a transposed conv
    config = CONV_GEOMETRIES["3x3"]
    x, weight, bias = _conv_tensors(m, config, "input")
    c, pc = config[2], m.per_channel_dtype
    args = (x, weight, bias, m.positive(c, dtype=pc), (m.randn(c) * 0.3).to(pc), m.randn(c).to(pc) * 0.1,
            m.positive(c, dtype=pc), *config[6:], 0.1, 1e-5, 0.2, True, False, False, [0, 0], c)
    samples.append(Sample(args, name="norm-groups-instance-3x3-stats-save-channels_last"))
    config, output_padding = TRANSPOSED_GEOMETRIES["transposed-strided-groups"]
    x, weight, _ = _transposed_tensors(m, config)
    c, pc = config[2], m.per_channel_dtype
    args = (x, weight, None, m.positive(c, dtype=pc), (m.randn(c) * 0.3).to(pc), None, None, *config[6:], 0.1, 1e-5,
            0.0, False, True, True, output_padding, c // 2)
    samples.append(Sample(args, name="norm-groups-group-transposed-relu"))
    # padding modes (F.pad's, then an unpadded convolution) and recompute (no conv output kept): BatchNorm + ReLU,
    # an asymmetric circular pad of a strided grouped conv (channels_last), GroupNorm whose conv bias shifts the
    # statistics, InstanceNorm with zero padding
    for geometry, mode, recompute, slope, relu, layout, norm_groups in (
            ("3x3", "reflect", True, 0.0, True, "", 0),
            ("strided-asymmetric-groups", "circular", False, 0.2, False, "input", 0),
            ("3x3", "replicate", True, 0.0, False, "weight", 2),
            ("dilated", "zeros", True, -0.3, False, "", 2)):
        config = CONV_GEOMETRIES[geometry]
        x, weight, bias = _conv_tensors(m, config, layout)
        c, pc = config[2], m.per_channel_dtype
        running = (m.randn(c).to(pc) * 0.1, m.positive(c, dtype=pc)) if norm_groups in (0, c) else (None, None)
        args = (x, weight, bias, m.positive(c, dtype=pc), (m.randn(c) * 0.3).to(pc), *running, *config[6:], 0.1,
                1e-5, slope, False, relu, False, [0, 0], norm_groups, recompute, mode)
        samples.append(Sample(args, name=f"padding-{mode}-{geometry}-groups{norm_groups}-slope{slope}"
                                         f"{'-recompute' if recompute else ''}{_layout_name(layout)}"
                                         f"{'-relu' if relu else ''}"))
    return samples


def conv_bn_leaky_relu_train_backward(dtype, device):
    m, samples = _Maker(dtype, device, seed=7), []
    for forward in conv_bn_leaky_relu_train(dtype, device):
        x, weight, bias, bn_weight, bn_bias = forward.args[:5]
        geometry, (slope, save_output, *options) = forward.args[7:11], forward.args[13:]  # options: relu, transposed...
        # the backward takes the conv output: the forward runs without recompute; its padding_mode follows `bias`
        padding_mode, options = options[5:], options[:4]
        forward_options, backward_options = ((*options, False, *padding_mode), (*options, None, *padding_mode)) \
            if padding_mode else (options, options)
        out, conv_out, mean, invstd = ops.conv_bn_leaky_relu_train(x, weight, bias, bn_weight, bn_bias, None, None,
                                                                   *geometry, 0.1, 1e-5, slope, save_output,
                                                                   *forward_options)
        grad = torch.empty_like(out).copy_(m.randn(*out.shape))
        saved = out if save_output else conv_out
        samples.append(Sample((grad, saved, save_output, x, weight, bn_weight, bn_bias, mean, invstd, *geometry, slope,
                               *backward_options), name=forward.name))
    # output_mask, the conv gradients autograd asks for (every option then given): a frozen discriminator's input
    # gradient only, plain and through a replicate pad; a leaf input's weight and bias (transposed), a conv without bias
    # (GroupNorm), none but the normalisation's. Options: relu, transposed, output_padding, norm_groups, bias,
    # padding_mode
    defaults = (False, False, [0, 0], 0, None, "zeros")
    for sample, mask in _masked(samples, (("3x3", INPUT_ONLY), ("transposed-strided", WEIGHT_AND_BIAS),
                                          ("padding-replicate", INPUT_ONLY), ("norm-groups-group", WEIGHT_ONLY),
                                          ("padding-circular", NONE))):
        options = sample.args[14:]
        samples.append(Sample((*sample.args[:14], *options, *defaults[len(options):], mask),
                              name=f"{sample.name}-mask{_mask_name(mask)}"))
    return samples


# the backward ops' output_mask (grad_input, grad_weight, grad_bias) as autograd sets it
INPUT_ONLY, WEIGHT_AND_BIAS, WEIGHT_ONLY, NONE, ALL = [True, False, False], [False, True, True], \
    [False, True, False], [False, False, False], [True, True, True]


def _mask_name(mask) -> str:
    return "".join("1" if m else "0" for m in mask)


def _masked(samples, pairs):
    """(sample, mask): the first sample named with each prefix, with its mask."""
    return [(next(s for s in samples if s.name.startswith(prefix)), mask) for prefix, mask in pairs]


def conv_bn_leaky_relu_eval(dtype, device):
    m, samples = _Maker(dtype, device, seed=8), []
    for geometry, slope, layout, relu in (("3x3", 0.2, "", False), ("strided-asymmetric-groups", -0.3, "input", False),
                                          ("dilated", 0.0, "weight", False), ("3x3", -2.0, "sliced", False),
                                          ("3x3", 0.0, "input", True)):
        config = CONV_GEOMETRIES[geometry]
        x, weight, bias = _conv_tensors(m, config, layout)
        samples.append(Sample((x, weight, bias, *config[6:], slope, relu),
                              name=f"{geometry}-slope{slope}{_layout_name(layout)}{'-relu' if relu else ''}"))
    x, weight, bias = _conv_tensors(m, CONV_GEOMETRIES["3x3"])
    samples.append(Sample((x[:0], weight, bias, *CONV_GEOMETRIES["3x3"][6:], 0.2, False), name="empty"))
    for geometry, slope, layout, relu in (("transposed-strided-groups", 0.2, "input", False),
                                          ("transposed-dilated", 0.0, "", True)):
        config, output_padding = TRANSPOSED_GEOMETRIES[geometry]
        x, weight, bias = _transposed_tensors(m, config, layout)
        samples.append(Sample((x, weight, bias, *config[6:], slope, relu, True, output_padding),
                              name=f"{geometry}-slope{slope}{_layout_name(layout)}{'-relu' if relu else ''}"))
    for geometry, mode, slope, layout, relu in (("3x3", "reflect", 0.2, "", False),
                                                ("strided-asymmetric-groups", "circular", 0.0, "input", True)):
        config = CONV_GEOMETRIES[geometry]
        x, weight, bias = _conv_tensors(m, config, layout)
        samples.append(Sample((x, weight, bias, *config[6:], slope, relu, False, [0, 0], mode),
                              name=f"padding-{mode}-{geometry}-slope{slope}{_layout_name(layout)}"
                                   f"{'-relu' if relu else ''}"))
    # the BN affine (folded in inside the op): a zero and a small bn_weight under a large bn_bias; a transposed grouped
    # conv; bn_weight alone (a reflect pad), bn_bias alone
    pc = m.per_channel_dtype
    for geometry, slope, relu, which in (("3x3", 0.2, False, "both"), ("transposed-strided-groups", 0.0, True, "both"),
                                         ("3x3", -0.3, False, "weight"), ("dilated", 0.2, False, "bias")):
        transposed = geometry in TRANSPOSED_GEOMETRIES
        config, output_padding = TRANSPOSED_GEOMETRIES[geometry] if transposed else (CONV_GEOMETRIES[geometry], [0, 0])
        x, weight, bias = _transposed_tensors(m, config) if transposed else _conv_tensors(m, config)
        c = config[2]
        gamma = m.randn(c).to(pc)
        gamma[-1] = 0.01
        if which == "both":  # a zero bn_weight without bn_bias puts the channel on the activation's kink
            gamma[0] = 0.0
        beta = m.randn(c).to(pc) * 2
        affine = {"both": (gamma, beta), "weight": (gamma, None), "bias": (None, beta)}[which]
        samples.append(Sample((x, weight, bias, *config[6:], slope, relu, transposed, output_padding,
                               "reflect" if which == "weight" else "zeros", *affine),
                              name=f"affine-{which}-{geometry}-slope{slope}{'-relu' if relu else ''}"))
    return samples


def conv_bn_leaky_relu_eval_backward(dtype, device):
    m, samples = _Maker(dtype, device, seed=9), []
    for forward in conv_bn_leaky_relu_eval(dtype, device):
        out = ops.conv_bn_leaky_relu_eval(*forward.args)
        grad = torch.empty_like(out).copy_(m.randn(*out.shape))
        # the affine follows the backward's output_mask
        args = (*forward.args[:12], ALL, *forward.args[12:]) if len(forward.args) > 12 else forward.args
        samples.append(Sample((grad, *args), name=forward.name))
    # output_mask (see the train backward's): options relu, transposed, output_padding, padding_mode; then the
    # affine and its affine_mask: each of its gradients alone, none (the conv's only)
    defaults = (False, False, [0, 0], "zeros")
    for sample, mask in _masked(samples, (("3x3", INPUT_ONLY), ("padding-circular", INPUT_ONLY),
                                          ("transposed-strided", WEIGHT_AND_BIAS), ("strided-asymmetric", WEIGHT_ONLY),
                                          ("dilated", NONE))):
        options = sample.args[9:]
        samples.append(Sample((*sample.args[:9], *options, *defaults[len(options):], mask),
                              name=f"{sample.name}-mask{_mask_name(mask)}"))
    affine = next(s for s in samples if s.name.startswith("affine-both-3x3"))
    for mask, affine_mask in ((ALL, [True, False]), (NONE, [False, True]), (INPUT_ONLY, [False, False])):
        samples.append(Sample((*affine.args[:13], mask, *affine.args[14:], affine_mask),
                              name=f"{affine.name}-mask{_mask_name(mask)}-affine{_mask_name(affine_mask)}"))
    return samples


SAMPLES = {
    "leaky_relu": leaky_relu, "leaky_relu_": leaky_relu, "leaky_relu_backward": leaky_relu_backward,
    "rrelu": rrelu, "rrelu_": rrelu, "rrelu_backward": rrelu_backward,
    "fused_bias_leaky_relu": fused_bias_leaky_relu, "fused_bias_leaky_relu_backward": fused_bias_leaky_relu_backward,
    "conv_bn_leaky_relu_train": conv_bn_leaky_relu_train,
    "conv_bn_leaky_relu_train_backward": conv_bn_leaky_relu_train_backward,
    "conv_bn_leaky_relu_eval": conv_bn_leaky_relu_eval,
    "conv_bn_leaky_relu_eval_backward": conv_bn_leaky_relu_eval_backward,
}

# floating arguments autograd does not differentiate through (besides the running statistics, which the train op
# updates in place): the backward ops read `saved`, `mean` and `invstd` as the forward's results and recompute their
# dependence on the input (ops/conv_bn_leaky_relu.py), and the elementwise backward ops' derivative in `saved` is 0
NON_DIFFERENTIABLE = {
    "leaky_relu_backward": {"saved"},
    "rrelu_backward": {"saved"},
    "fused_bias_leaky_relu_backward": {"saved"},
    "conv_bn_leaky_relu_train_backward": {"saved", "mean", "invstd"},
}


# --- torch's own functions for the same calls ---------------------------------------------------------------------
def _conv(x, weight, bias, stride, padding, dilation, groups, transposed=False, output_padding=(0, 0),
          padding_mode="zeros"):
    top, bottom, left, right = padding
    if transposed:
        return F.conv_transpose2d(x, weight, bias, stride, (top, left), output_padding, groups, dilation)
    mode = {} if padding_mode == "zeros" else {"mode": padding_mode}
    return F.conv2d(F.pad(x, (left, right, top, bottom), **mode), weight, bias, stride, 0, dilation, groups)


def _activation(z, slope, relu):
    return F.relu(z) if relu else F.leaky_relu(z, slope)


def _norm(conv, bn_weight, bn_bias, momentum, eps, norm_groups):
    """torch's BatchNorm (norm_groups 0), InstanceNorm (G == C) or GroupNorm of the conv output, batch statistics."""
    if not norm_groups:
        return F.batch_norm(conv, None, None, bn_weight, bn_bias, True, momentum, eps)
    if norm_groups == conv.shape[1]:
        return F.instance_norm(conv, None, None, bn_weight, bn_bias, True, momentum, eps)
    return F.group_norm(conv, norm_groups, bn_weight, bn_bias, eps)


def _train_composite(x, weight, bias, bn_weight, bn_bias, running_mean, running_var, stride, padding, dilation,
                     groups, momentum, eps, slope, save_output, relu, transposed=False, output_padding=(0, 0),
                     norm_groups=0, recompute=False, padding_mode="zeros"):
    conv = _conv(x, weight, bias, stride, padding, dilation, groups, transposed, output_padding, padding_mode)
    out = _activation(_norm(conv, bn_weight, bn_bias, momentum, eps, norm_groups), slope, relu)
    computed = conv.float() if conv.dtype != torch.float64 else conv
    if norm_groups:
        var, mean = torch.var_mean(computed.reshape(conv.shape[0], norm_groups, -1), 2, correction=0)
    else:
        var, mean = torch.var_mean(computed, (0, 2, 3), correction=0)
    return out, conv, mean, (var + eps).rsqrt()


def _gradients(out, leaves, grad, wanted):
    """torch.autograd.grad of the `wanted` leaves; None for the others."""
    chosen = [leaf for leaf, w in zip(leaves, wanted) if w]
    grads = iter(torch.autograd.grad(out, chosen, grad) if chosen else ())
    return tuple(next(grads) if w else None for w in wanted)


def _train_backward_composite(grad, saved, saved_is_result, x, weight, bn_weight, bn_bias, mean, invstd, stride,
                              padding, dilation, groups, slope, relu, transposed=False, output_padding=(0, 0),
                              norm_groups=0, bias=None, padding_mode="zeros", output_mask=(True, True, True)):
    leaves = [t.detach().requires_grad_() for t in (x, weight, bn_weight, bn_bias)]
    bias = (torch.zeros(bn_weight.shape[0], dtype=weight.dtype) if bias is None else bias.detach()).requires_grad_()
    conv = _conv(leaves[0], leaves[1], bias, stride, padding, dilation, groups, transposed, output_padding,
                 padding_mode)
    out = _activation(_norm(conv, leaves[2], leaves[3], 0.1, 1e-5, norm_groups), slope, relu)
    return _gradients(out, [*leaves[:2], bias, *leaves[2:]], grad, (*output_mask, True, True))


def _eval_composite(x, weight, bias, stride, padding, dilation, groups, slope, relu, transposed=False,
                    output_padding=(0, 0), padding_mode="zeros", bn_weight=None, bn_bias=None):
    """torch's activation(bn_weight * conv + bn_bias), the affine as batch_norm applies it (float32 parameters of a
    16-bit conv output: the result in the conv's dtype)."""
    conv = _conv(x, weight, bias, stride, padding, dilation, groups, transposed, output_padding, padding_mode)
    z = conv
    if bn_weight is not None:
        z = z * bn_weight.view(1, -1, 1, 1)
    if bn_bias is not None:
        z = z + bn_bias.view(1, -1, 1, 1)
    return _activation(z.to(conv.dtype), slope, relu)


def _eval_backward_composite(grad, x, weight, bias, stride, padding, dilation, groups, slope, relu, transposed=False,
                             output_padding=(0, 0), padding_mode="zeros", output_mask=(True, True, True),
                             bn_weight=None, bn_bias=None, affine_mask=(True, True)):
    leaves = [t.detach().requires_grad_() for t in (x, weight, bias)]
    affine = [None if t is None else t.detach().requires_grad_() for t in (bn_weight, bn_bias)]
    out = _eval_composite(*leaves, stride, padding, dilation, groups, slope, relu, transposed, output_padding,
                          padding_mode, *affine)
    wanted = [t is not None and m for t, m in zip(affine, affine_mask)]
    return _gradients(out, [*leaves, *(t if t is not None else leaves[2] for t in affine)], grad,
                      (*output_mask, *wanted))


def _fused_bias_composite(x, bias, slope, scale, clamp=-1.0, relu=False):
    if bias is not None:
        x = x + bias.view(1, -1, *[1] * (x.dim() - 2))
    y = (F.relu(x) if relu else F.leaky_relu(x, slope)) * scale
    return y.clamp(-clamp, clamp) if clamp >= 0 else y


def _fused_bias_backward_composite(grad, saved, bias, slope, scale, saved_is_result, clamp=-1.0, relu=False):
    x = saved.detach().requires_grad_()  # the layout of the input's gradient follows saved's (same layout as input)
    leaves = [x] + ([bias.detach().requires_grad_()] if bias is not None else [])
    grads = torch.autograd.grad(_fused_bias_composite(x, leaves[1] if bias is not None else None, slope, scale,
                                                      clamp, relu),
                                leaves, grad)
    return grads if bias is not None else (grads[0], None)


COMPOSITES = {
    "leaky_relu": F.leaky_relu,
    "leaky_relu_backward": torch.ops.aten.leaky_relu_backward,
    # torch's CPU rrelu has no float16 kernel: float32's result, cast (keeping its layout)
    "rrelu": lambda x, seed, lower, upper: F.rrelu(x if x.dtype != torch.float16 else x.float(), lower, upper,
                                                   training=True).to(x.dtype),
    # elementwise in grad_output and saved as aten's own leaky_relu_backward
    "rrelu_backward": lambda grad, saved, seed, lower, upper, saved_is_result: torch.ops.aten.leaky_relu_backward(
        grad, saved, lower, saved_is_result and lower >= 0),
    "fused_bias_leaky_relu": _fused_bias_composite,
    "fused_bias_leaky_relu_backward": _fused_bias_backward_composite,
    "conv_bn_leaky_relu_train": _train_composite,
    "conv_bn_leaky_relu_train_backward": _train_backward_composite,
    "conv_bn_leaky_relu_eval": _eval_composite,
    "conv_bn_leaky_relu_eval_backward": _eval_backward_composite,
}


def ops_without_samples() -> set[str]:
    return {op.name for op in op_table.TORCH_OPS} - set(SAMPLES)
