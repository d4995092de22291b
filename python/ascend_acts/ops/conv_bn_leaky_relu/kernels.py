"""The fused Conv2d + BatchNorm2d + LeakyReLU ops on the AscendC kernels of its two families: on the emulator for CPU
tensors (the "sim" backend's functions), through the op package on NPU tensors, one launch sequence for both
(`backends.launch`):
- training: the platform's convolution (`platform_conv2d`: torch_npu's on an NPU, torch's computed as an NPU
  returns it on the CPU), then the BatchNorm + LeakyReLU training kernels (op_kernel/ family
  "batch_norm_leaky_relu"), the running statistics updated on float32 copies. The backward runs the gradient
  kernel from whichever tensor was kept: the output (InPlace-ABN) or the conv output (ReLU, slope <= 0, a zero
  bn_weight or a too large |bn_bias| / |bn_weight|). Per-channel statistics are float32 whatever the data type.
  norm_groups >= 1 (InstanceNorm, GroupNorm statistics) runs the same kernels with per-sample statistics.
- eval (`eval_path`): on the emulator the eval kernel (family "conv_bn_leaky_relu_eval": the convolution on the
  cube, img2col by LoadData 3Dv2, with the BN-folded weights packed in CANN's FRACTAL_Z order; bias and (Leaky)ReLU
  on the vector unit; one MIX launch). On an NPU the platform's convolution then our LeakyReLU kernel, unless
  ASCEND_ACTS_EVAL_KERNEL=fused asks for the eval kernel: it has never been measured on an NPU (its modelled
  figures: benchmarks/results/), so it stays opt-in until `scripts/npu_selftest.py eval-kernel` has measured it.
  Grouped and transposed convolutions, layers the kernel has no tiling for on the emulator (an output row of 16
  channels must fit L0C, and a band of input rows L1: e.g. a 1x1 convolution over rows wider than about 2000
  positions) and the eval
  backward (needed only to train through an eval-mode block) run the reference backend on the CPU and torch ops
  on an NPU.
"""

from __future__ import annotations

import os

import torch

from ...backends.launch import check_dtype, launch, on_emulator
from ...backends.sim import emulator
from ...numerics.layout import convolution_output_shape
from ...op_table import kernel as table_kernel
from ..leaky_relu import kernels as elementwise
from . import reference
from . import torch_ops as platform
from .folding import affine_fold, affine_follows_conv, eval_pre_activation

EVAL_KERNEL_ENV = "ASCEND_ACTS_EVAL_KERNEL"


def platform_conv2d(input, weight, bias, stride, padding, dilation, groups, transposed=False,
                    output_padding=(0, 0), padding_mode="zeros") -> torch.Tensor:
    """The platform's convolution (or transposed convolution) next to our kernels, contiguous: torch_npu's on an NPU;
    on the CPU torch's, conv2d(input, weight) + bias computed in float32 and rounded to the input's dtype once, as an
    NPU convolution returns it. A `padding_mode` other than "zeros" is the platform's pad (F.pad) before it."""
    geometry = (stride, padding, dilation, groups, transposed, output_padding, padding_mode)
    if not on_emulator(input):
        return platform.conv2d(input, weight, bias, *geometry).contiguous()
    f = torch.float32
    b = None if bias is None else bias.to(f)
    return platform.conv2d(input.to(f), weight.to(f), b, *geometry).to(input.dtype).contiguous()


def platform_conv2d_backward(grad_output, input, weight, stride, padding, dilation, groups, transposed=False,
                             output_padding=(0, 0), padding_mode="zeros", output_mask=platform.ALL_GRADIENTS):
    """Gradients of conv2d's (or the transposed convolution's) input, weight and bias from `grad_output`, in
    input's/weight's dtypes (on the CPU from grad_output in float32, as an NPU computes them); a pad of
    `padding_mode` is made again and its gradient folded back onto `input`; only those `output_mask` asks for
    (the others empty)."""
    geometry = (stride, padding, dilation, groups, transposed, output_padding, padding_mode, output_mask)
    if not on_emulator(input):
        return platform.conv2d_backward(grad_output.to(input.dtype), input, weight, *geometry)
    f = torch.float32
    grad_x, grad_w, grad_b = platform.conv2d_backward(grad_output.to(f), input.to(f), weight.to(f), *geometry)
    return grad_x.to(input.dtype), grad_w.to(weight.dtype), grad_b.to(weight.dtype)


def _channel_floats(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float32).contiguous()


def _per_channel(like: torch.Tensor, channels: int) -> torch.Tensor:
    """A new float32 per-channel tensor on `like`'s device."""
    return torch.empty(channels, dtype=torch.float32, device=like.device)


def _statistics_shape(shape, norm_groups: int) -> tuple[int, ...]:
    """save_mean's and save_invstd's shape: (C,), or (N, G) for norm_groups G > 0."""
    return (shape[0], norm_groups) if norm_groups else ((shape[1],) if len(shape) > 1 else (0,))


def batch_norm_leaky_relu_tiling(kernel: str, shape, element_size: int, platform: str | None = None,
                                 vector_cores: int | None = None, **attrs):
    """The op_host tiling (ascend_acts._sim.BatchNormLeakyReluTiling) of `kernel` for an N, C, spatial `shape`, with
    the kernel's attributes `attrs` (the op table's defaults for those not given); the backward's save_mean is given
    only from the conv output (saved_is_result False)."""
    spec = table_kernel(kernel)
    attrs = {a.name: a.default for a in spec.attrs} | attrs
    shape = tuple(shape)
    channels = (shape[1],) if len(shape) > 1 else (0,)
    statistics = _statistics_shape(shape, attrs["norm_groups"]) if len(shape) > 1 else channels

    def input_shape(name):
        if name in ("x", "dy", "saved"):
            return shape
        if name == "save_mean":
            return None if attrs["saved_is_result"] else statistics
        return statistics if name == "save_invstd" else channels

    current = emulator.settings()
    return emulator.binding().batch_norm_leaky_relu_tiling(
        kernel, [input_shape(t.name) for t in spec.inputs], element_size, attrs,
        current.platform if platform is None else platform,
        current.vector_cores if vector_cores is None else vector_cores)


def _check_statistics(**tensors) -> None:
    for name, t in tensors.items():
        if t is not None and (t.dtype != torch.float32 or not t.is_contiguous()):
            raise TypeError(f"{name}: the kernels keep per-channel statistics as contiguous float32, got {t.dtype}")


def _check_norm_groups(shape, norm_groups: int, running: bool) -> None:
    channels = shape[1]
    if norm_groups < 0 or (norm_groups and channels % norm_groups):
        raise ValueError(f"norm_groups: must be 0 (BatchNorm) or divide the {channels} channels, got {norm_groups}")
    if running and norm_groups not in (0, channels):
        raise ValueError(f"norm_groups: running statistics are per channel, so grouped statistics update them only "
                         f"with norm_groups == C ({channels}, instance norm), got {norm_groups}")


def batch_norm_leaky_relu(x, weight, bias, running_mean, running_var, negative_slope: float, eps: float,
                          momentum: float, relu: bool = False, norm_groups: int = 0):
    """y = leaky_relu(norm(x) * weight + bias) (or torch's relu) over N, C, spatial `x`: (y, save_mean, save_invstd).
    norm_groups 0: BatchNorm, the batch mean and 1 / sqrt(var + eps) per channel (C,); G > 0: GroupNorm, per sample
    and group of C/G channels, (N, G). The running statistics (float32, or both None; grouped only for G == C) are
    updated in place as torch's batch_norm / instance_norm do (momentum, unbiased variance)."""
    check_dtype(x)
    _check_statistics(weight=weight, bias=bias, running_mean=running_mean, running_var=running_var)
    c = x.shape[1]
    if x.numel() == 0 and not on_emulator(x):  # the emulator's host tiling refuses it (ValueError); the private op
        # would launch nothing and leave the statistics unwritten
        raise ValueError(f"batch_norm_leaky_relu: training needs at least one value per channel, got shape "
                         f"{tuple(x.shape)}")
    update = running_mean is not None
    _check_norm_groups(x.shape, norm_groups, update)
    attrs = {"negative_slope": negative_slope, "eps": eps, "momentum": momentum, "update_running_stats": update,
             "relu": relu, "norm_groups": norm_groups}
    if update or on_emulator(x):
        # the emulator takes None for statistics it does not update (it requires every output byte written)
        statistics = (running_mean, running_var)
    else:  # the OpDef's inputs are required: placeholders the kernel neither reads nor writes
        statistics = (torch.zeros(c, dtype=torch.float32, device=x.device),  # float32 whatever the default dtype
                      torch.ones(c, dtype=torch.float32, device=x.device))
    y = torch.empty_like(x)
    saved_shape = _statistics_shape(x.shape, norm_groups)
    save_mean = torch.empty(saved_shape, dtype=torch.float32, device=x.device)
    save_invstd = torch.empty(saved_shape, dtype=torch.float32, device=x.device)
    launch("batch_norm_leaky_relu", {
        "x": x, "weight": weight, "bias": bias, "running_mean": statistics[0], "running_var": statistics[1], "y": y,
        "save_mean": save_mean, "save_invstd": save_invstd}, attrs,
        lambda: batch_norm_leaky_relu_tiling("batch_norm_leaky_relu", x.shape, x.element_size(), **attrs))
    return y, save_mean, save_invstd


def batch_norm_leaky_relu_grad(dy, saved, weight, bias, save_invstd, negative_slope: float, *, save_mean=None,
                               saved_is_result: bool = True, relu: bool = False, norm_groups: int = 0):
    """Gradients of x, weight, bias of `batch_norm_leaky_relu` (same norm_groups, relu, slope): (dx, grad_weight,
    grad_bias). From the forward's output `saved` (saved_is_result, InPlace-ABN: needs LeakyReLU with a slope > 0 and
    no zero weight), or from the conv output `saved` and the forward's save_mean (any slope, or relu)."""
    if saved_is_result:
        if relu or not negative_slope > 0:
            raise ValueError(f"negative_slope: the output-based backward needs a slope > 0, got "
                             f"{'relu' if relu else negative_slope}")
    elif save_mean is None:
        raise ValueError("save_mean: the backward from the conv output (saved_is_result=False) needs the forward's "
                         "save_mean")
    check_dtype(dy)
    _check_statistics(weight=weight, bias=bias, save_invstd=save_invstd, save_mean=save_mean)
    _check_norm_groups(dy.shape, norm_groups, False)
    if saved_is_result and not bool((weight != 0).all()):
        raise ValueError("weight: the output-based backward divides by weight (gamma); a zero entry needs the conv "
                         "output kept")
    c = dy.shape[1]
    dx, grad_weight, grad_bias = torch.empty_like(dy), _per_channel(dy, c), _per_channel(dy, c)
    attrs = {"negative_slope": negative_slope, "saved_is_result": saved_is_result, "relu": relu,
             "norm_groups": norm_groups}
    launch("batch_norm_leaky_relu_grad", {
        "dy": dy, "saved": saved, "weight": weight, "bias": bias, "save_mean": None if saved_is_result else save_mean,
        "save_invstd": save_invstd, "dx": dx, "grad_weight": grad_weight, "grad_bias": grad_bias}, attrs,
        lambda: batch_norm_leaky_relu_tiling("batch_norm_leaky_relu_grad", dy.shape, dy.element_size(), **attrs))
    return dx, grad_weight, grad_bias


def conv_bn_leaky_relu_train(input, weight, bias, bn_weight, bn_bias, running_mean, running_var, stride, padding,
                             dilation, groups, momentum, eps, negative_slope, save_output, relu=False, transposed=False,
                             output_padding=(0, 0), norm_groups=0, recompute=False, padding_mode="zeros"):
    check_dtype(input)
    y = platform_conv2d(input, weight, bias, stride, padding, dilation, groups, transposed, output_padding,
                        padding_mode)
    # the kernel updates the running statistics in float32: on float32 copies, written back (in the buffers'
    # dtype) once it has run
    update = running_mean is not None
    staged = [t.detach().to(torch.float32, copy=True).contiguous() for t in (running_mean, running_var)] \
        if update else [None, None]
    out, mean, invstd = batch_norm_leaky_relu(y, _channel_floats(bn_weight), _channel_floats(bn_bias), *staged,
                                              negative_slope, eps, momentum, relu, norm_groups)
    if update:
        with torch.no_grad():  # with torch's version bumps, not the copies' own
            running_mean.data.copy_(staged[0])
            running_var.data.copy_(staged[1])
        platform.running_statistics_written(running_mean, running_var, norm_groups != 0)
    kept = input.new_empty(0) if save_output or recompute else y
    return out, kept, mean, invstd


def conv_bn_leaky_relu_train_backward(grad_out, saved, saved_is_result, input, weight, bn_weight, bn_bias, mean,
                                      invstd, stride, padding, dilation, groups, negative_slope, relu=False,
                                      transposed=False, output_padding=(0, 0), norm_groups=0, bias=None,
                                      padding_mode="zeros", output_mask=platform.ALL_GRADIENTS):
    """The gradient kernel, from the output (InPlace-ABN) or from the conv output (ReLU, slope <= 0, an affine that
    cannot be inverted), then the platform's convolution backward. `bias` (the conv's) is needed only to
    differentiate this op again (the composite); the kernel never reads it."""
    check_dtype(input)
    grad_y, grad_gamma, grad_beta = batch_norm_leaky_relu_grad(
        grad_out.contiguous(), saved.contiguous(), _channel_floats(bn_weight), _channel_floats(bn_bias),
        _channel_floats(invstd), negative_slope, save_mean=None if saved_is_result else _channel_floats(mean),
        saved_is_result=saved_is_result, relu=relu, norm_groups=norm_groups)
    grad_y = grad_y.float()
    grad_input, grad_weight, grad_bias = platform_conv2d_backward(grad_y, input, weight, stride, padding, dilation,
                                                                  groups, transposed, output_padding, padding_mode,
                                                                  output_mask)
    return grad_input, grad_weight, grad_bias, grad_gamma.to(bn_weight.dtype), grad_beta.to(bn_bias.dtype)


def conv_bn_leaky_relu_eval_tiling(x_shape, weight_shape, stride, padding, dilation, element_size: int,
                                   negative_slope: float = 0.0, platform: str | None = None, relu: bool = False):
    """The op_host tiling (ascend_acts._sim.ConvBnLeakyReluEvalTiling) of the layer: W' of `weight_shape`
    (C_out, C_in, kh, kw), which the kernel reads packed (`packed_weight_shape`); padding (top, bottom, left, right);
    groups = 1. `relu` leaves Select's UB free, so a layer at the UB's limit may tile only without it."""
    platform = emulator.settings().platform if platform is None else platform
    x_shape, weight_shape = tuple(x_shape), tuple(weight_shape)
    layer = f"for input {list(x_shape)}, weight {list(weight_shape)} on {platform}"
    if len(x_shape) != 4 or len(weight_shape) != 4:
        raise ValueError(f"conv_bn_leaky_relu_eval_tiling(): x_shape and weight_shape need 4 sizes, {layer}")
    if weight_shape[1] != x_shape[1]:
        raise ValueError(f"conv_bn_leaky_relu_eval_tiling(): weight.shape[1] is not the input's channels (groups = 1), "
                         f"{layer}")
    attrs = {"strides": list(stride), "pads": list(padding), "dilations": list(dilation),
             "negative_slope": negative_slope, "relu": relu}
    return emulator.binding().conv_bn_leaky_relu_eval_tiling(
        "conv_bn_leaky_relu_eval", [x_shape, packed_weight_shape(weight_shape, element_size), (weight_shape[0],)],
        element_size, attrs, platform)


def packed_weight_shape(weight_shape, element_size: int) -> tuple[int, ...]:
    """The shape (C1, kh, kw, M1, 16, C0) of W' (C_out, C_in, kh, kw) packed by `pack_weight`, C0 = 32 bytes."""
    cout, cin, kh, kw = weight_shape
    c0 = 32 // max(element_size, 1)
    return -(-cin // c0), kh, kw, -(-cout // 16), 16, c0


def conv_bn_leaky_relu_eval_has_tiling(x_shape, weight_shape, stride, padding, dilation, element_size: int,
                                       relu: bool = False) -> bool:
    """Whether the kernel can run this layer (the op layer has checked the shapes: a refusal here is capacity)."""
    try:
        conv_bn_leaky_relu_eval_tiling(x_shape, weight_shape, stride, padding, dilation, element_size, relu=relu)
    except ValueError:
        return False
    return True


def pack_weight(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """W' (Cout, Cin, kh, kw) in the kernel's FRACTAL_Z layout (C1, kh, kw, M1, 16, C0), C0 = 32 bytes of `dtype`:
    element [c1][i][j][mi][r][c] = W'[mi*16 + r][c1*C0 + c][i][j], zero past Cout and Cin
    (op_kernel/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_tiling_data.h)."""
    cout, cin, kh, kw = weight.shape
    c1, _, _, m1, _, c0 = packed_weight_shape(weight.shape, torch.empty((), dtype=dtype).element_size())
    padded = torch.nn.functional.pad(weight.to(dtype), (0, 0, 0, 0, 0, c1 * c0 - cin, 0, m1 * 16 - cout))
    return padded.view(m1, 16, c1, c0, kh, kw).permute(2, 4, 5, 0, 1, 3).contiguous()


def eval_kernel(x, weight, bias, stride, padding, dilation, negative_slope: float, relu: bool = False) -> torch.Tensor:
    """leaky_relu(conv2d(x, weight) + bias, negative_slope) (torch's relu with `relu`) in one launch, weight and bias
    already BN-folded; groups = 1. `bias` is float32; x and weight share one dtype."""
    check_dtype(x)
    if weight.dtype != x.dtype:
        raise TypeError(f"weight must have the input's dtype {x.dtype}, got {weight.dtype}")
    if bias.dtype != torch.float32 or not bias.is_contiguous():
        raise TypeError(f"bias: the kernel takes a contiguous float32 bias, got {bias.dtype}")
    y = torch.empty(convolution_output_shape(x.shape, weight.shape, stride, padding, dilation), dtype=x.dtype,
                    device=x.device)
    attrs = {"strides": list(stride), "pads": list(padding), "dilations": list(dilation),
             "negative_slope": negative_slope, "relu": relu}
    packed = pack_weight(weight, x.dtype)
    launch("conv_bn_leaky_relu_eval", {"x": x, "weight": packed, "bias": bias, "y": y}, attrs,
           lambda: emulator.binding().conv_bn_leaky_relu_eval_tiling(  # the op package's tiling, from the launch's
               "conv_bn_leaky_relu_eval", [x.shape, packed.shape, bias.shape], x.element_size(), attrs,
               emulator.settings().platform))
    return y


def fused_eval_kernel_requested() -> bool:
    """Whether an NPU runs the one-launch eval kernel: ASCEND_ACTS_EVAL_KERNEL unset or "aclnn" (the default), or
    "fused" (to measure it on an NPU). Anything else is an error rather than a silent default."""
    choice = os.environ.get(EVAL_KERNEL_ENV)
    if choice is None or choice == "aclnn":
        return False
    if choice != "fused":
        raise ValueError(f'ascend_acts: {EVAL_KERNEL_ENV} must be "aclnn" or "fused", got "{choice}"')
    return True


def eval_path(input, weight, stride, padding, dilation, groups, transposed=False, relu=False) -> str:
    """Which eval runs: "fused" (our eval kernel), "platform" (the platform's convolution + our LeakyReLU kernel,
    an NPU's default) or "reference" (the CPU's oracle, where the emulator has no tiling). The emulator always runs
    the fused kernel where it can: it is the only place that kernel runs until an NPU has measured it."""
    if not on_emulator(input) and not fused_eval_kernel_requested():
        return "platform"
    # the kernel takes a (not transposed) convolution with groups = 1, a non-empty input (torch's convolution decides
    # what an empty one gives, errors included) and a layer its tiling covers (the same pure function as the op
    # package's: the emulator binding's, when this install has it; without it an NPU's op package refuses what it
    # cannot tile)
    fits = not transposed and groups == 1 and input.numel() > 0 and (
        (emulator.unavailable_reason() is not None and not on_emulator(input))
        or conv_bn_leaky_relu_eval_has_tiling(input.shape, weight.shape, stride, padding, dilation,
                                              input.element_size(), relu))
    if fits:
        return "fused"
    return "reference" if on_emulator(input) else "platform"


def conv_bn_leaky_relu_eval(input, weight, bias, stride, padding, dilation, groups, negative_slope, relu=False,
                            transposed=False, output_padding=(0, 0), padding_mode="zeros", bn_weight=None,
                            bn_bias=None):
    """A transposed convolution has no eval kernel: it runs as grouped ones do. A `padding_mode` other than "zeros"
    is the platform's pad, then the convolution unpadded. The affine folds into weight and bias first (torch ops on
    the device: C_out * C_in * kH * kW values), or follows a 16-bit platform convolution (folding.py)."""
    check_dtype(input)
    if padding_mode != "zeros":
        input, padding = platform.pad(input, padding, padding_mode), (0, 0, 0, 0)
    if affine_follows_conv(weight, bn_weight, bn_bias):
        geometry = (stride, padding, dilation, groups, transposed, output_padding)
        pre, _ = eval_pre_activation(lambda w, b: platform_conv2d(input, w, b, *geometry), weight, bias, bn_weight,
                                     bn_bias, transposed, groups)
        return (torch.relu(pre) if relu else elementwise.leaky_relu(pre, negative_slope)).to(input.dtype)
    weight, bias = affine_fold(weight, bias, bn_weight, bn_bias, transposed, groups)
    path = eval_path(input, weight, stride, padding, dilation, groups, transposed, relu)
    if path == "reference":
        return reference.conv_bn_leaky_relu_eval(input, weight, bias, stride, padding, dilation, groups, negative_slope,
                                                 relu, transposed, output_padding)
    if path == "platform":
        y = platform_conv2d(input, weight, bias, stride, padding, dilation, groups, transposed, output_padding)
        return torch.relu(y) if relu else elementwise.leaky_relu(y, negative_slope)
    shape = convolution_output_shape(input.shape, weight.shape, stride, padding, dilation)
    if 0 in shape:  # an empty batch: nothing to launch (the emulator, like the NPU, takes no empty grid)
        return input.new_empty(shape)
    return eval_kernel(input.contiguous(), weight.detach().to(input.dtype).contiguous(),
                       bias.detach().to(torch.float32).contiguous(), stride, padding, dilation, negative_slope, relu)


def conv_bn_leaky_relu_eval_backward(grad_out, input, weight, bias, stride, padding, dilation, groups,
                                     negative_slope, relu=False, transposed=False, output_padding=(0, 0),
                                     padding_mode="zeros", output_mask=platform.ALL_GRADIENTS, bn_weight=None,
                                     bn_bias=None, affine_mask=(True, True)):
    """No kernel of ours: the reference backend's on the CPU, the torch backend's torch ops on an NPU."""
    backend = reference if on_emulator(input) else platform
    return backend.conv_bn_leaky_relu_eval_backward(grad_out, input, weight, bias, stride, padding, dilation, groups,
                                                    negative_slope, relu, transposed, output_padding, padding_mode,
                                                    output_mask, bn_weight, bn_bias, affine_mask)
