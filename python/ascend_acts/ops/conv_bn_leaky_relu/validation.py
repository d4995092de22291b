"""Every argument check of `conv_bn_leaky_relu`, done before it computes or writes anything.

Error types follow what torch's nn.Sequential(Conv2d, BatchNorm2d, LeakyReLU) raises for the same mistake
(RuntimeError from the convolution and the tensor checks, ValueError from BatchNorm's own checks); the
messages name the argument. With `norm_groups` G >= 1 the normalisation's checks are F.instance_norm's (G == C) or
F.group_norm's (G < C) instead of F.batch_norm's.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from ...numerics.dtypes import FLOATING_DTYPES
from .. import _validation as check
from .torch_ops import check_pad, check_padding_mode

FN = "conv_bn_leaky_relu"
_STATISTICS = ("running_mean", "running_var", "bn_weight", "bn_bias")


@dataclass(frozen=True)
class Checked:
    """The validated call: plain Python values and the op's geometry arguments."""

    batch_stats: bool
    momentum: float
    eps: float
    negative_slope: float
    stride: list[int]
    padding: list[int]  # (top, bottom, left, right)
    dilation: list[int]
    groups: int
    output_shape: torch.Size
    no_input_channels: bool
    transposed: bool = False
    output_padding: list[int] | tuple[int, int] = (0, 0)  # conv_transpose2d's; (0, 0) when not transposed
    norm_groups: int = 0  # 0 BatchNorm; G: statistics per sample over groups of C/G channels (G == C InstanceNorm)
    padding_mode: str = "zeros"  # torch's Conv2d's; any other is F.pad's mode before an unpadded convolution

    @property
    def geometry(self) -> tuple:
        """The ops' convolution arguments after the bias, in the platform convolution's order (torch_ops.conv2d)."""
        return (self.stride, self.padding, self.dilation, self.groups, self.transposed, self.output_padding,
                self.padding_mode)


def _index(value) -> int | None:
    """value as torch's int arguments take one (what operator.index takes: a Python or NumPy int, a 0-d integer
    tensor), else None; not a bool (torch refuses one) nor an array (torch's parser fails on a 0-d one)."""
    if isinstance(value, (bool, np.bool_, np.ndarray)):
        return None
    if isinstance(value, torch.Tensor):
        integral = value.dim() == 0 and not value.is_floating_point() and not value.is_complex() \
            and value.dtype != torch.bool
        return int(value) if integral else None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _int(name: str, value, position: int | None = None) -> int:
    """An int as conv2d's int and int[2] arguments take one, within int64: beyond it torch's ValueError for a
    single int, its TypeError for the element at `position` (from 1) of a sequence."""
    index = _index(value)
    if index is None:
        raise TypeError(f"{FN}(): argument '{name}' must be an int or a pair of ints, got {value!r}")
    if not _in_int64(index):
        if position is None:
            raise ValueError(f"{FN}(): argument '{name}' {index}: Overflow when unpacking long long")
        raise TypeError(f"{FN}(): argument '{name}' failed to unpack the object at pos {position}: {index} is not an "
                        "int64 (Overflow when unpacking long long)")
    return index


def _in_int64(value: int) -> bool:
    return -(2**63) <= value < 2**63


def _pair(name: str, value) -> list[int]:
    """conv2d's int[2]: one int (or a list of one) for both axes, or two."""
    if type(value) in (tuple, list) and len(value) == 2 and type(value[0]) is int and type(value[1]) is int \
            and _in_int64(value[0]) and _in_int64(value[1]):
        return [value[0], value[1]]  # a module's own (the usual case): what the checks below give it
    if type(value) is int and _in_int64(value):
        return [value, value]
    if _index(value) is not None or not isinstance(value, Iterable):
        pair = [_int(name, value)] * 2
    else:
        pair = [_int(name, v, position) for position, v in enumerate(value, start=1)]  # torch counts from 1
    if len(pair) == 1:
        pair *= 2
    if len(pair) != 2:  # conv2d's type for a wrong number of values
        raise RuntimeError(f"{FN}(): argument '{name}' must be a single int or a list of 2 values, got {value!r}")
    return pair


def resolve_padding(padding, weight: torch.Tensor, stride: list[int], dilation: list[int]) -> list[int]:
    """(top, bottom, left, right); "same" follows torch: the extra row/column goes bottom/right."""
    if padding == "valid":
        return [0, 0, 0, 0]
    if padding == "same":
        if stride != [1, 1]:
            raise RuntimeError(f"{FN}(): padding='same' is not supported for strided convolutions")
        sides = []
        for axis in range(2):
            total = dilation[axis] * (weight.shape[2 + axis] - 1)
            sides += [total // 2, total - total // 2]
        return sides
    if isinstance(padding, str):  # conv2d's type: "Invalid padding string"
        raise RuntimeError(f"{FN}(): argument 'padding' must be 'same', 'valid', an int or a pair, got {padding!r}")
    ph, pw = _pair("padding", padding)
    if ph < 0 or pw < 0:
        raise RuntimeError(f"{FN}(): argument 'padding' must be non-negative, got {padding!r}")
    return [ph, ph, pw, pw]


def _check_tensors(input, weight, bias, statistics: dict, transposed: bool, groups) -> None:
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"{FN}(): argument 'input' must be a torch.Tensor, got {type(input).__name__}")
    if input.dim() != 4:  # conv2d refuses all but 3-D and 4-D (RuntimeError); BatchNorm2d then a 3-D (ValueError)
        error = ValueError if input.dim() == 3 else RuntimeError
        raise error(f"{FN}(): argument 'input' must be 4-D (N, C, H, W), got {input.dim()}-D")
    if not isinstance(weight, torch.Tensor) or weight.dim() != 4:
        layout = "(C_in, C_out/groups, kH, kW)" if transposed else "(C_out, C_in/groups, kH, kW)"
        raise RuntimeError(f"{FN}(): argument 'weight' must be a 4-D tensor {layout}")
    if transposed:  # the output channels are weight.shape[1] * groups
        groups = _int("groups", groups)
        if groups < 1:
            raise RuntimeError(f"{FN}(): argument 'groups' must be positive, got {groups}")
    c_out = weight.shape[1] * groups if transposed else weight.shape[0]
    for name, t in (("bias", bias), *statistics.items()):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor) or t.shape != (c_out,):
            shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise RuntimeError(f"{FN}(): argument '{name}' must have shape ({c_out},), got {shape}")
    for name, t in (("weight", weight), ("bias", bias), *statistics.items()):
        if t is not None and t.device != input.device:
            raise RuntimeError(f"{FN}(): argument '{name}' is on {t.device}, 'input' on {input.device}: "
                               "expected all tensors to be on the same device")


def _check_dtypes(input, weight, bias, statistics: dict) -> None:
    """Outside autocast: conv2d's rule (input, weight and bias share one dtype) and BatchNorm's (its
    tensors have the input's dtype, or float32 for a 16-bit input). Under autocast for the input's device
    the op's Autocast kernel casts input, weight and bias as conv2d's does; only floating types are checked."""
    for name, t in (("input", input), ("weight", weight), ("bias", bias), *statistics.items()):
        if t is not None and t.dtype not in FLOATING_DTYPES:
            raise RuntimeError(f"{FN}(): argument '{name}' must be a floating-point tensor, got {t.dtype}")
    if torch.amp.is_autocast_available(input.device.type) and torch.is_autocast_enabled(input.device.type):
        return
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype != input.dtype:
            raise RuntimeError(f"{FN}(): argument '{name}' has dtype {t.dtype} but 'input' has {input.dtype}; "
                               "they must match outside torch.autocast")
    allowed = {input.dtype, torch.float32} if input.dtype in (torch.float16, torch.bfloat16) else {input.dtype}
    for name, t in statistics.items():
        if t is not None and t.dtype not in allowed:
            raise RuntimeError(f"{FN}(): argument '{name}' has dtype {t.dtype}; with a {input.dtype} 'input' "
                               f"it must be {' or '.join(sorted(str(d) for d in allowed))}")


def _check_statistics(statistics: dict, training: bool) -> None:
    """torch's batch_norm rules for the running statistics: both or neither (ValueError in training, RuntimeError
    in eval, as F.batch_norm); none requiring grad while grad mode is on (RuntimeError, in train and eval, as
    native_batch_norm's autograd); in training, written in place, so no inference tensor outside InferenceMode
    (eagerly; torch.compile checks the traced update itself). An aliased (expanded) one is torch's business:
    conv_bn_leaky_relu hands such a training call to torch's batch_norm."""
    running_mean, running_var = statistics["running_mean"], statistics["running_var"]
    if (running_mean is None) != (running_var is None):
        if training:
            raise ValueError(f"{FN}(): 'running_mean' and 'running_var' must both be given or both be None")
        missing = "running_mean" if running_mean is None else "running_var"
        raise RuntimeError(f"{FN}(): argument '{missing}' must be defined in evaluation mode")
    if running_mean is None:
        return
    for name in ("running_mean", "running_var"):
        t = statistics[name]
        if t.requires_grad and torch.is_grad_enabled():
            raise RuntimeError(f"{FN}(): argument '{name}' requires grad: batch_norm is not differentiable with "
                               "respect to the running statistics (detach it, or run under torch.no_grad())")
        if training and not torch.compiler.is_compiling() and t.is_inference() \
                and not torch.is_inference_mode_enabled():
            raise RuntimeError(f"{FN}(): argument '{name}' is an inference tensor: an in-place update outside "
                               "InferenceMode is not allowed")


def overlapping_statistics(running_mean, running_var) -> bool:
    """Whether an element of a running statistic shares memory with another (an expanded buffer): torch's
    batch_norm updates it in its own order, which only torch reproduces. Never under compile (not traceable)."""
    return running_mean is not None and not torch.compiler.is_compiling() and any(
        torch._debug_has_internal_overlap(t) == 1 for t in (running_mean, running_var))


def _output_shape(input, weight, stride, padding, dilation) -> torch.Size:
    """conv2d's output shape, with conv2d's errors for inputs it cannot convolve."""
    n, c_in, h, w = input.shape
    _check_spatial_size(input)
    padded = (h + padding[0] + padding[1], w + padding[2] + padding[3])
    extent = tuple(dilation[a] * (weight.shape[2 + a] - 1) + 1 for a in range(2))
    if padded[0] < extent[0] or padded[1] < extent[1]:
        raise RuntimeError(f"{FN}(): the padded 'input' is {padded[0]} x {padded[1]} per channel, smaller than the "
                           f"(dilated) kernel {extent[0]} x {extent[1]} of 'weight'")
    return torch.Size([n, weight.shape[0], *((padded[a] - extent[a]) // stride[a] + 1 for a in range(2))])


def _check_spatial_size(input) -> None:
    n, c_in, h, w = input.shape
    if n > 0 and c_in > 0 and (h == 0 or w == 0):
        raise RuntimeError(f"{FN}(): argument 'input' has an empty spatial size {tuple(input.shape)}; only zero "
                           "batch or zero channel inputs are supported")


def _transposed_output_shape(input, weight, stride, padding, dilation, output_padding, groups) -> torch.Size:
    """conv_transpose2d's output shape, with its errors: output_padding smaller than stride or dilation, an output
    of at least one position."""
    if not all(output_padding[a] < stride[a] or output_padding[a] < dilation[a] for a in range(2)):
        raise RuntimeError(
            "output padding must be smaller than either stride or dilation, but got output_padding_height: "
            f"{output_padding[0]} output_padding_width: {output_padding[1]} stride_height: {stride[0]} stride_width: "
            f"{stride[1]} dilation_height: {dilation[0]} dilation_width: {dilation[1]}")
    _check_spatial_size(input)
    sizes = [(input.shape[2 + a] - 1) * stride[a] - 2 * padding[2 * a] + dilation[a] * (weight.shape[2 + a] - 1)
             + output_padding[a] + 1 for a in range(2)]
    if min(sizes) < 1:
        raise RuntimeError(f"{FN}(): given input size per channel ({input.shape[2]} x {input.shape[3]}), the "
                           f"transposed convolution's output would be ({sizes[0]} x {sizes[1]}): too small")
    return torch.Size([input.shape[0], weight.shape[1] * groups, *sizes])


def check_arguments(*args, transposed=False, output_padding=(0, 0), norm_groups=0, padding_mode="zeros") -> Checked:
    """(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, training, momentum, eps,
    negative_slope, stride, padding, dilation, groups), as conv_bn_leaky_relu takes them; `transposed`: weight is
    conv_transpose2d's (C_in, C_out/groups, kH, kW), with `output_padding`; `norm_groups`, `padding_mode`: see
    Checked."""
    if not torch.jit.is_tracing():
        return _check_arguments(*args, transposed, output_padding, norm_groups, padding_mode)
    # torch.jit.trace records the ops, not these Python checks: they run on the example input only, and
    # their shape comparisons would each warn that the trace may not generalize. The traced graph's shapes
    # come from the ops and their fake kernels, not from these values.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        return _check_arguments(*args, transposed, output_padding, norm_groups, padding_mode)


def _check_arguments(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, training, momentum, eps,
                     negative_slope, stride, padding, dilation, groups, transposed, output_padding,
                     norm_groups, padding_mode) -> Checked:
    if isinstance(norm_groups, bool) or not isinstance(norm_groups, int):
        raise TypeError(f"{FN}(): argument 'norm_groups' must be an int, got {norm_groups!r}")
    if norm_groups < 0:
        raise ValueError(f"{FN}(): argument 'norm_groups' must be >= 0 (0: BatchNorm), got {norm_groups}")
    if norm_groups and momentum is None:  # nn.InstanceNorm2d's None is 0.0 (it has no num_batches_tracked)
        momentum = 0.0
    statistics = dict(zip(_STATISTICS, (running_mean, running_var, bn_weight, bn_bias)))
    transposed = check.check_bool(FN, "transposed", transposed)
    check_padding_mode(f"{FN}()", padding_mode, transposed)  # a ValueError, as torch's Conv2d / ConvTranspose2d
    _check_tensors(input, weight, bias, statistics, transposed, groups)
    _check_dtypes(input, weight, bias, statistics)
    training = check.check_bool(FN, "training", training)
    _check_statistics(statistics, training)
    # any real momentum and eps, NaN and inf too, as torch's batch_norm takes them (their results propagate them); not
    # a complex one (batch_norm's are doubles, not Scalars)
    for name, value in (("momentum", momentum), ("eps", eps)):
        if isinstance(value, complex) or (isinstance(value, torch.Tensor) and value.is_complex()):
            raise TypeError(f"{FN}(): argument '{name}' must be a real number, not complex")
    momentum = check.check_number(FN, "momentum", momentum)
    eps = check.check_number(FN, "eps", eps)
    negative_slope = check.check_number(FN, "negative_slope", negative_slope, input)
    groups = _int("groups", groups)
    if groups < 1:
        raise RuntimeError(f"{FN}(): argument 'groups' must be positive, got {groups}")
    c_in, c_out = input.shape[1], weight.shape[0]
    if transposed:
        return _check_transposed(input, weight, running_mean, training, momentum, eps, negative_slope, stride,
                                 padding, dilation, groups, output_padding, norm_groups)
    if c_out % groups:
        raise RuntimeError(f"{FN}(): groups ({groups}) must divide the output channels of 'weight' ({c_out})")
    if weight.shape[1] * groups != c_in:
        raise RuntimeError(f"{FN}(): 'weight' {tuple(weight.shape)} with groups={groups} expects "
                           f"{weight.shape[1] * groups} input channels, 'input' has {c_in}")
    stride, dilation = _pair("stride", stride), _pair("dilation", dilation)
    if min(stride) < 1 or min(dilation) < 1:
        raise RuntimeError(f"{FN}(): 'stride' and 'dilation' must be positive, got {stride} and {dilation}")
    pad = resolve_padding(padding, weight, stride, dilation)
    if not torch.compiler.is_compiling():  # compiled, the op's fake kernel raises it
        check_pad(input, pad, padding_mode)  # F.pad's error, before the convolution's (as torch's Conv2d runs them)
    shape = _output_shape(input, weight, stride, pad, dilation)
    if _pair("output_padding", output_padding) != [0, 0]:
        raise RuntimeError(f"{FN}(): argument 'output_padding' is for a transposed convolution, got {output_padding}")
    return _checked(shape, training, running_mean, momentum, eps, negative_slope, stride, pad, dilation, groups, c_in,
                    norm_groups, padding_mode=padding_mode)


def _check_transposed(input, weight, running_mean, training, momentum, eps, negative_slope, stride, padding, dilation,
                      groups, output_padding, norm_groups) -> Checked:
    """conv_transpose2d's rules: weight (C_in, C_out/groups, kH, kW), groups dividing C_in, an int or pair padding
    (no 'same'/'valid'), output_padding smaller than stride or dilation."""
    c_in = input.shape[1]
    if weight.shape[0] != c_in or c_in % groups:
        raise RuntimeError(f"{FN}(): transposed 'weight' {tuple(weight.shape)} with groups={groups} expects "
                           f"{weight.shape[0]} input channels divisible by groups, 'input' has {c_in}")
    stride, dilation = _pair("stride", stride), _pair("dilation", dilation)
    if min(stride) < 1 or min(dilation) < 1:
        raise RuntimeError(f"{FN}(): 'stride' and 'dilation' must be positive, got {stride} and {dilation}")
    if isinstance(padding, str):
        raise RuntimeError(f"{FN}(): a transposed convolution takes an int or a pair 'padding', got {padding!r}")
    pad = resolve_padding(padding, weight, stride, dilation)
    output_padding = _pair("output_padding", output_padding)
    if min(output_padding) < 0:
        raise RuntimeError(f"{FN}(): argument 'output_padding' must be non-negative, got {output_padding}")
    shape = _transposed_output_shape(input, weight, stride, pad, dilation, output_padding, groups)
    return _checked(shape, training, running_mean, momentum, eps, negative_slope, stride, pad, dilation, groups, c_in,
                    norm_groups, transposed=True, output_padding=output_padding)


def _check_norm_groups(shape: torch.Size, norm_groups: int, running_mean, batch_stats: bool) -> None:
    """group_norm's and instance_norm's checks on the conv output's `shape`, with torch's types and, for the sizes,
    torch's messages (about the norm's input, our conv output)."""
    channels = shape[1]
    if channels % norm_groups:  # group_norm's RuntimeError
        raise RuntimeError(f"{FN}(): argument 'norm_groups' ({norm_groups}) must divide the output channels "
                           f"({channels})")
    if running_mean is not None and norm_groups != channels:
        raise ValueError(f"{FN}(): 'running_mean' and 'running_var' are InstanceNorm's (norm_groups == {channels}, the "
                         f"output channels); GroupNorm (norm_groups={norm_groups}) has no running statistics")
    if batch_stats and norm_groups == channels and shape[2] * shape[3] == 1:  # F.instance_norm's
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {shape}")


def _checked(shape, training, running_mean, momentum, eps, negative_slope, stride, pad, dilation, groups,
             c_in, norm_groups, **geometry) -> Checked:
    """The normalisation's checks on the conv output's `shape`, and the Checked call (`geometry`: Checked's
    transposed, output_padding and padding_mode where they are not the defaults)."""
    batch_stats = training or running_mean is None
    if norm_groups:
        _check_norm_groups(shape, norm_groups, running_mean, batch_stats)
    if batch_stats:
        if not norm_groups and shape[0] * shape[2] * shape[3] == 1:  # torch's BatchNorm message, about the BN input
            # (our conv output)
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {shape}")
        if eps <= 0:
            raise ValueError(f"{FN}(): argument 'eps' must be positive during training, got {eps}")
    elif eps < 0:
        raise ValueError(f"{FN}(): argument 'eps' must be non-negative, got {eps}")
    return Checked(batch_stats, momentum, eps, negative_slope, stride, pad, dilation, groups, shape, bool(c_in == 0),
                   norm_groups=norm_groups, **geometry)
