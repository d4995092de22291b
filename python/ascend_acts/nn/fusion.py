"""When a (2-D pad ->) Conv2d or ConvTranspose2d -> BatchNorm2d, InstanceNorm2d or GroupNorm, Conv1d -> BatchNorm1d,
or Linear -> BatchNorm1d (-> LeakyReLU, ReLU or nothing) run of modules may execute as the fused op, and running it.
The op is the Conv2d one: a Linear on (N, F) is a 1x1 convolution on (N, F, 1, 1) and a Conv1d on (N, C, L) a (1, K)
convolution on (N, C, 1, L); BatchNorm1d over (N, C) or (N, C, L) is BatchNorm2d over those views (the same
statistics and bookkeeping). InstanceNorm2d and GroupNorm are the op's norm_groups (C or num_groups: per-sample
statistics).

Decided at every call from the modules as they are then, so that whatever a user does to a module after `convert` (a
hook, spectral_norm, a parametrization, a new padding_mode, eval() on the BN alone) is seen: only exact conv / norm /
activation classes (a synchronised BN after a Conv2d or ConvTranspose2d too: ascend_acts.nn.SyncBatchNorm or
nn.SyncBatchNorm, sync_batch_norm.py) with no hooks of any kind (their own or the global module hooks) and no
instance-level forward fuse; anything else runs module by module, which is torch's behaviour by definition. The fused
call reproduces the norm module's forward: nn.BatchNorm2d's bookkeeping (momentum=None, num_batches_tracked,
track_running_stats, affine=False, eval with or without running statistics), nn.InstanceNorm2d's (running statistics
used in eval and updated in training only with track_running_stats, momentum None as 0, no num_batches_tracked) and
nn.GroupNorm's (per-sample statistics in train and eval).

Padding: a Conv2d's padding_mode "reflect" or "replicate" is the op's, and an exact, untouched nn.ReflectionPad2d or
nn.ReplicationPad2d right before a fusing Conv2d joins its run (the conv then pads nothing itself): the op keeps the
unpadded input and pads again in its backward, where torch keeps the pad's input (its backward takes it) and the conv
the padded copy. torch's circular, zero and constant pads keep nothing of their input (only the conv keeps the
padded copy), so that input may change in place after the forward: folded, the op would keep it and its backward
would raise. A circular padding_mode is applied before the op (F.pad, as torch's Conv2d does), and those pad modules
run themselves (the rest of the run still fuses), as does any pad that cannot join. A negative padding (a crop) is
left to the modules.

Recompute: a training run that keeps its conv output z (ReLU, a slope <= 0, no activation) has the op recompute z in
the backward instead, where the convolution is cheap enough on the NPU (recompute_is_cheaper).
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.modules import module as _module_globals
from torch.nn.utils import parametrize

from ..ops._library import values_unknown
from ..ops.conv_bn_leaky_relu.function import conv_bn_activation, conv_bn_leaky_relu_tensor_momentum
from ..ops.conv_bn_leaky_relu.torch_ops import output_channels
from ..ops.conv_bn_leaky_relu.validation import _index as int_argument
from ..sync_batch_norm import sync_conv_bn_leaky_relu
from .activation import LeakyReLU
from .sync_batch_norm import RECOMPUTATION_STOPPED, SyncBatchNorm

_ACTIVATIONS = (nn.LeakyReLU, LeakyReLU)  # exact types: a user's subclass may change the forward
# both run the synchronised op (sync_batch_norm.py); torch's is accepted for a model converted before
# convert_sync_batchnorm put it in (DDP refuses it on the CPU until a second `convert` swaps in ours)
_SYNC_BATCH_NORMS = (SyncBatchNorm, nn.SyncBatchNorm)
_BATCH_NORMS = (nn.BatchNorm2d, *_SYNC_BATCH_NORMS)
# per-sample statistics: the op's norm_groups (C for InstanceNorm2d, num_groups for GroupNorm)
_PER_SAMPLE_NORMS = (nn.InstanceNorm2d, nn.GroupNorm)
# exact types: the fused op computes their forward (transposed or not; a Conv1d as a (1, K) Conv2d)
_FUSED_CONVS = (nn.Conv2d, nn.ConvTranspose2d, nn.Conv1d)
# the exact norms the fused op computes after each conv, and the one a message names
_NORMS_AFTER = {nn.Conv2d: (*_BATCH_NORMS, *_PER_SAMPLE_NORMS), nn.ConvTranspose2d: (*_BATCH_NORMS, *_PER_SAMPLE_NORMS),
                nn.Conv1d: (nn.BatchNorm1d,)}
_NORM_NAMED = {nn.Conv2d: "nn.BatchNorm2d, nn.InstanceNorm2d or nn.GroupNorm",
               nn.ConvTranspose2d: "nn.BatchNorm2d, nn.InstanceNorm2d or nn.GroupNorm", nn.Conv1d: "nn.BatchNorm1d"}
# exact pad classes a Conv2d run folds in, with the op's padding_mode for each: those whose backward takes their
# input, which torch keeps anyway
_FOLDED_PADS = {nn.ReflectionPad2d: "reflect", nn.ReplicationPad2d: "replicate"}
# pads whose backward needs no input: torch keeps only the conv's padded copy, which the op must keep as well
_INPUT_FREE_PADS = (nn.CircularPad2d, nn.ZeroPad2d, nn.ConstantPad2d)
_PADS = (nn.modules.padding._ConstantPadNd, nn.modules.padding._ReflectionPadNd,
         nn.modules.padding._ReplicationPadNd, nn.modules.padding._CircularPadNd)

# The recompute rule's numbers: the 910B2's cube peak (fp16 matmul) and HBM bandwidth, from
# /work/shared/design/ARCHITECTURE.md's measured 910B figures and Ascend facts (the bandwidth is "commonly quoted,
# treat as +-30%"). z is counted in fp16 (2 bytes): the NPU trains in mixed precision, and float32 convolutions run
# on the cube in HF32 by default (torch_npu's allow_hf32).
CUBE_FLOPS = 314.5e12
HBM_BYTES_PER_SECOND = 1.6e12
Z_ELEMENT_BYTES = 2


def recompute_is_cheaper(macs_per_output: float) -> bool:
    """Whether recomputing a conv output element in the backward (2 FLOPs per multiply-accumulate on the cube) takes
    less time than keeping it (written in the forward, read back in the backward at HBM bandwidth): K = MACs per
    output element, 2K / CUBE_FLOPS < 2 * Z_ELEMENT_BYTES / HBM_BYTES_PER_SECOND, i.e. K < 393. The input the
    recomputation reads is kept anyway (the weight gradient needs it). What flips a layer: the bandwidth's +-30%
    moves the bound to 302-562 (CycleGAN's 3x3 stride-2 64 -> 128 conv, K = 576, stays kept; its 128 -> 64
    transposed conv, K = 288, is recomputed at any bandwidth in that range); counting z in float32 at the cube's
    84.5 TFLOPS fp32 gives 211 (only the 7x7 3 -> 64 conv, K = 147, then)."""
    return 2 * macs_per_output / CUBE_FLOPS < 2 * Z_ELEMENT_BYTES / HBM_BYTES_PER_SECOND


def macs_per_output(conv: nn.Module, height: int, width: int) -> float:
    """Multiply-accumulates per conv output element for an input of height x width: C_in / groups * kH * kW for a
    Conv2d (a Conv1d C_in / groups * K, a Linear in_features), the total over the output elements for a
    ConvTranspose2d (each input element reaches kH * kW outputs over the stride)."""
    if type(conv) is nn.Linear:
        return conv.in_features
    kernel = math.prod(conv.weight.shape[2:])
    if type(conv) is nn.ConvTranspose2d:
        outputs = _output_length(conv, 0, height) * _output_length(conv, 1, width)
        return conv.in_channels / conv.groups * kernel * height * width / max(outputs, 1)
    return conv.in_channels / conv.groups * kernel


def _untouched(module: nn.Module) -> bool:
    """No hooks on the module and no forward assigned to the instance: its forward is its class's."""
    return _touched(module, "") is None


def _touched(module: nn.Module, role: str) -> str | None:
    """Why the module's forward may not be its class's (a hook, an instance forward), or None."""
    if (module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
            or module._backward_pre_hooks):  # nn.Module's hook dicts
        return f"a hook on the {role}"
    if "forward" in module.__dict__:
        return f"a custom forward on the {role}"
    return None


def no_global_hooks() -> bool:
    return not (_module_globals._global_forward_hooks or _module_globals._global_forward_pre_hooks
                or _module_globals._global_backward_hooks or _module_globals._global_backward_pre_hooks)


_NO_KERNEL_YET = (nn.BatchNorm3d, nn.InstanceNorm1d, nn.InstanceNorm3d, nn.LayerNorm)


def conv_bn_obstacle(conv: nn.Module, bn: nn.Module | None) -> str | None:
    """Why `bn(conv(x))` is not exactly what the fused op computes before its activation, or None when it is.
    The one rule for Sequential's forward, ConvBNLeakyReLU2d and `ascend_acts.explain`."""
    if parametrize.is_parametrized(conv):
        return "a parametrization on the conv (spectral_norm, weight_norm...)"
    if type(conv) is nn.Linear:
        return _linear_bn_obstacle(conv, bn)
    if type(conv) not in _FUSED_CONVS:
        expected = next((f"nn.{t.__name__}" for t in (nn.ConvTranspose2d, nn.Linear, nn.Conv1d) if isinstance(conv, t)),
                        "nn.Conv2d")
        return f"the conv is a {type(conv).__name__}, not exactly {expected} (its forward may differ)"
    if bn is None:
        return "no normalisation after the conv"
    if parametrize.is_parametrized(bn):
        return "a parametrization on the norm"
    if type(bn) not in _NORMS_AFTER[type(conv)]:
        if isinstance(bn, _NO_KERNEL_YET):
            return f"{type(bn).__name__}: no kernel yet"
        after = " after a Conv1d" if type(conv) is nn.Conv1d else ""
        return f"the norm{after} is a {type(bn).__name__}, not exactly {_NORM_NAMED[type(conv)]}"
    if conv.padding_mode != "zeros" and type(conv) is not nn.Conv2d:  # the op pads a Conv2d's input only
        return f"padding_mode={conv.padding_mode!r} (only 'zeros' fuses)"
    if conv.padding_mode != "zeros" and type(bn) in _SYNC_BATCH_NORMS:  # the synchronised op pads nothing
        return f"padding_mode={conv.padding_mode!r} before a synchronised BatchNorm (only 'zeros' fuses there)"
    if conv.padding_mode != "zeros" and _negative_padding(conv):  # F.pad crops: the op's padding cannot
        return _negative_padding(conv)
    if type(bn) in _PER_SAMPLE_NORMS:
        return _per_sample_norm_obstacle(conv, bn) or _touched(conv, "conv") or _touched(bn, "norm")
    if bn.num_features != conv.out_channels:
        return "the BatchNorm's num_features differs from the conv's out_channels"
    if (bn.running_mean is None) != (bn.running_var is None):
        return "only one of running_mean and running_var"
    return _touched(conv, "conv") or _touched(bn, "norm")


def _negative_padding(conv: nn.Module) -> str | None:
    """Why a negative padding leaves the conv to its module (F.pad crops; torch's zeros-mode conv refuses it, where
    ConvBNLeakyReLU2d keeps the op's own error), or None."""
    if isinstance(conv.padding, str) or min(conv.padding) >= 0:
        return None
    return f"a negative padding {tuple(conv.padding)} (a crop): the conv's own"


def _per_sample_norm_obstacle(conv: nn.Module, norm: nn.InstanceNorm2d | nn.GroupNorm) -> str | None:
    """conv_bn_obstacle's rules for an exact InstanceNorm2d or GroupNorm after an exact Conv2d / ConvTranspose2d."""
    eps = _readable_number(norm.eps)
    if isinstance(eps, numbers.Real) and not eps > 0:  # NumPy scalars and 0-d tensors too
        # instance_norm and group_norm take it (only batch_norm refuses it in training); the fused op does not
        return f"eps={norm.eps}: only torch's per-sample norms take an eps <= 0"
    if type(norm) is nn.GroupNorm:
        if norm.num_channels != conv.out_channels:
            return "the GroupNorm's num_channels differs from the conv's out_channels"
        if _num_groups(norm) is None:  # a float, a bool, a 1-element tensor: group_norm's own TypeError
            return f"num_groups={norm.num_groups!r}, which torch's group_norm takes for no int"
        if conv.out_channels % norm.num_groups:  # a num_groups set after construction: group_norm's own error
            return "the GroupNorm's num_groups does not divide the channels"
        return None
    if norm.num_features != conv.out_channels:
        # affine: torch's error; otherwise torch warns and normalises the channels it gets (or fails on the running
        # statistics' size): only its modules do exactly that
        return "the InstanceNorm2d's num_features differs from the conv's out_channels (torch warns or raises)"
    if (norm.running_mean is None) != (norm.running_var is None):
        return "only one of running_mean and running_var"
    if norm.track_running_stats and norm.running_mean is None:  # F.instance_norm's eval then has no statistics
        return "track_running_stats without running statistics"
    if norm.running_mean is not None and norm.running_mean.dtype != conv.weight.dtype:
        # torch's instance_norm takes them with affine=False (it updates copies of another dtype); the op does not
        return "running statistics of another dtype than the conv's weight"
    return None


def _readable_number(value):
    """A 0-d tensor's value where it can be read (not in a graph: readable_numbers sends those to the modules), else
    the value as it is."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not values_unknown(value):
        return value.item()
    return value


def _num_groups(norm: nn.GroupNorm) -> int | None:
    """num_groups as torch's group_norm reads it (a NumPy int or a 0-d integer tensor is its value; the fused op
    takes a Python int), or None where torch refuses it or a graph cannot read it."""
    if isinstance(norm.num_groups, torch.Tensor) and values_unknown(norm.num_groups):
        return None
    return int_argument(norm.num_groups)


def _linear_bn_obstacle(linear: nn.Linear, bn: nn.Module | None) -> str | None:
    """conv_bn_obstacle for a Linear: an exact nn.BatchNorm1d after it (a synchronised one runs as modules)."""
    if bn is None:
        return "no normalisation after the Linear"
    if parametrize.is_parametrized(bn):
        return "a parametrization on the norm"
    if type(bn) is not nn.BatchNorm1d:
        return f"the norm after a Linear is a {type(bn).__name__}, not exactly nn.BatchNorm1d"
    if bn.num_features != linear.out_features:
        return "the BatchNorm's num_features differs from the Linear's out_features"
    if (bn.running_mean is None) != (bn.running_var is None):
        return "only one of running_mean and running_var"
    return _touched(linear, "Linear") or _touched(bn, "norm")


def plain_conv_bn(conv: nn.Module, bn: nn.Module) -> bool:
    """`bn(conv(x))` is exactly what conv_bn_leaky_relu computes before its activation."""
    return conv_bn_obstacle(conv, bn) is None


def plain_leaky_relu(act: nn.Module) -> bool:
    return type(act) in _ACTIVATIONS and _untouched(act)


def plain_relu(act: nn.Module) -> bool:
    """An exact nn.ReLU (in place or not: the fused op's output is a new tensor that nothing else sees)."""
    return type(act) is nn.ReLU and _untouched(act)


IDENTITY_SLOPE = 1.0  # no activation: LeakyReLU with slope 1 is z * 1 = z exactly, and invertible (InPlace-ABN)


def activation_of(act: nn.Module | None, bn: nn.Module) -> tuple[float, bool] | None:
    """(negative_slope, relu) of the fused op that computes `act` after `bn`, or None if it cannot: an untouched
    LeakyReLU or ReLU."""
    if act is not None and plain_leaky_relu(act):
        return act.negative_slope, False
    if act is not None and plain_relu(act):
        return 0.0, True
    return None


def activation_obstacle(act: nn.Module | None, bn: nn.Module) -> str | None:
    """Why an activation module after the BN is not part of the fused run (it then runs itself), or None."""
    if act is None or activation_of(act, bn) is not None:
        return None
    if isinstance(act, (nn.LeakyReLU, nn.ReLU)):
        if type(act) not in (*_ACTIVATIONS, nn.ReLU):
            return f"the activation is a {type(act).__name__}, not exactly torch's"
        return _touched(act, "activation")
    return None


def readable_numbers(bn: nn.Module, negative_slope, input: torch.Tensor) -> bool:
    """bn.eps, bn.momentum and the slope may be tensors (torch's functionals read them as numbers): the fused op
    takes their values, which a graph or fake tensors cannot read; there the modules run, as torch's do."""
    tensors = [v for v in (bn.eps, getattr(bn, "momentum", None), negative_slope) if isinstance(v, torch.Tensor)]
    if any(t.dim() != 0 or t.requires_grad for t in tensors):  # what torch refuses for a number: its modules raise it
        return False
    return not tensors or not values_unknown(input)


def fused_device(input) -> bool:
    """Devices with kernels for the fused op (CPU backends, the NPU); others (CUDA, meta) run the modules."""
    return isinstance(input, torch.Tensor) and input.device.type in ("cpu", torch._C._get_privateuse1_backend_name())


class Decision(NamedTuple):
    """What Sequential's forward does with the modules from one position: `length` modules as the fused op with
    (negative_slope, relu): a pad the op applies if `padded`, the conv, the norm and the activation if any; or none
    (length 0) and why not. `recompute`: the op recomputes the conv output in its backward rather than keeping it."""
    length: int = 0
    negative_slope: float = IDENTITY_SLOPE
    relu: bool = False
    reason: str | None = None
    padded: bool = False
    recompute: bool = False

    @property
    def with_activation(self) -> bool:
        return self.length - self.padded == 3


_NOT_A_CONV = Decision(reason="not a convolution")
_CONVS = (nn.Conv2d, nn.ConvTranspose2d, nn.Conv1d, nn.Linear)


def decide(modules: list, i: int, input) -> Decision:
    """Whether modules[i:] start a run Sequential's forward fuses, for this input (the modules as they are now)."""
    module = modules[i]
    if isinstance(module, _PADS):
        return _decide_padded(modules, i, input)
    if not isinstance(module, _CONVS):
        return _NOT_A_CONV  # the common case first: cheap
    return _decide_run(modules, i, input, None)


def _decide_padded(modules: list, i: int, input) -> Decision:
    """A pad at modules[i] joins the run of the conv after it when that run fuses with the pad folded in."""
    conv = modules[i + 1] if i + 1 < len(modules) else None
    if not isinstance(conv, _CONVS):
        return Decision(reason="no convolution after the pad")
    obstacle = pad_obstacle(modules[i], conv, input)
    if obstacle is None and i + 2 < len(modules) and type(modules[i + 2]) in _SYNC_BATCH_NORMS:
        obstacle = "a synchronised BatchNorm's run pads with zeros only"
    if obstacle is not None:
        return Decision(reason=obstacle)
    run = _decide_run(modules, i + 1, input, modules[i])
    return run._replace(length=run.length + 1, padded=True) if run.length else run


def pad_obstacle(pad: nn.Module, conv: nn.Module, input) -> str | None:
    """Why conv(pad(x)) is not the conv with the pad folded into the op's padding (the pad then runs as a module,
    the conv's run may still fuse), or None."""
    mode = _FOLDED_PADS.get(type(pad))
    if type(pad) in _INPUT_FREE_PADS:
        return f"torch's {type(pad).__name__} keeps no input: folded, the run would keep the unpadded input"
    if mode is None:
        return "only an exact nn.ReflectionPad2d or nn.ReplicationPad2d folds"
    if type(conv) is not nn.Conv2d:  # the op pads the input of a convolution, not of a transposed one
        return f"a pad folds into an exact nn.Conv2d only, not a {type(conv).__name__}"
    touched = _touched(pad, "pad")
    if touched is not None:
        return touched
    if min(pad.padding) < 0:
        return "a negative pad (it crops)"
    if any(conv._reversed_padding_repeated_twice):
        return f"the conv pads too (padding={conv.padding!r}, padding_mode={conv.padding_mode!r})"
    left, right, top, bottom = pad.padding
    if (top, left) != (bottom, right):
        return f"asymmetric padding {tuple(pad.padding)} (the op pads both sides of an axis alike)"
    if isinstance(input, torch.Tensor) and input.dim() == 4 and _pad_refused(mode, pad.padding, input):
        return "a pad F.pad refuses for this input: the module's own error"
    return None


def _pad_refused(mode: str, amounts, input: torch.Tensor) -> bool:
    """F.pad's limits for (left, right, top, bottom) on an (N, C, H, W) input: reflect below the size, circular up
    to it, replicate a non-empty plane (the modules raise torch's own error)."""
    height, width = input.shape[2], input.shape[3]
    sizes = (width, width, height, height)
    if mode == "reflect":
        return any(a >= size for a, size in zip(amounts, sizes))
    if mode == "circular":
        return any(a > size for a, size in zip(amounts, sizes))
    return any(amounts) and min(sizes) == 0


def _padded_size(pad: nn.Module | None, input: torch.Tensor) -> tuple[int, int]:
    """(height, width) the conv convolves: the input's, grown by a folded pad."""
    height, width = input.shape[2], input.shape[3]
    if pad is None:
        return height, width
    left, right, top, bottom = pad.padding
    return height + top + bottom, width + left + right


def _batch_statistics(norm: nn.Module) -> bool:
    """The norm normalises with the batch's statistics (the training op runs), as its module decides."""
    if type(norm) is nn.GroupNorm:
        return True
    if type(norm) is nn.InstanceNorm2d:
        return norm.training or not norm.track_running_stats
    return norm.training or norm.running_mean is None


def _decide_run(modules: list, i: int, input, pad: nn.Module | None) -> Decision:
    """decide() for the conv at modules[i] (the input is the pad's, if a pad is folded in)."""
    conv = modules[i]
    if i + 1 >= len(modules):
        return Decision(reason="no normalisation after the conv")
    bn = modules[i + 1]
    if not no_global_hooks():
        return Decision(reason="a global module hook")
    obstacle = conv_bn_obstacle(conv, bn) or (None if type(conv) is nn.Linear else _negative_padding(conv))
    if obstacle is not None:
        return Decision(reason=obstacle)
    if not fused_device(input):
        return Decision(reason=f"an input on {getattr(input, 'device', type(input).__name__)}: no kernels there")
    size = (1, 1)
    if type(conv) is nn.Linear:
        if input.dim() != 2:  # BatchNorm1d over (N, C, L) normalises other planes; a 1-D input makes it raise
            return Decision(reason=f"a {input.dim()}-D input to the Linear (only (N, F) fuses)")
        if input.shape[1] != conv.in_features or (input.dtype != conv.weight.dtype
                                                  and not torch.is_autocast_enabled(input.device.type)):
            return Decision(reason="an input the Linear refuses: its own error")  # torch's message, not the op's
    elif type(conv) is nn.Conv1d:
        refusal = _conv1d_input_obstacle(conv, input)
        if refusal is not None:
            return Decision(reason=refusal)
    elif input.dim() != 4:  # torch's Conv2d takes a 3-D (unbatched) input and its BatchNorm2d raises
        return Decision(reason="an unbatched (3-D) input")
    else:
        size = _padded_size(pad, input)
        if type(bn) in _PER_SAMPLE_NORMS and _single_value_per_statistic(conv, bn, *size):
            return Decision(reason=f"one value per {type(bn).__name__} statistic: the modules raise or compute it")
        if pad is None and conv.padding_mode != "zeros" and _pad_refused(
                conv.padding_mode, conv._reversed_padding_repeated_twice, input):
            return Decision(reason=f"a padding_mode={conv.padding_mode!r} pad F.pad refuses for this input: the "
                                   "conv's own error")
    act = modules[i + 2] if i + 2 < len(modules) else None
    activation = activation_of(act, bn)
    slope, relu = activation or (IDENTITY_SLOPE, False)
    if not readable_numbers(bn, slope, input):
        return Decision(reason="eps, momentum or the slope is a tensor a graph cannot read")
    # only where the op keeps the conv output: no activation (what follows may change the output in place), ReLU, a
    # slope <= 0 (an invertible LeakyReLU run keeps its output instead)
    keeps_conv_output = activation is None or relu or _number(slope) <= 0
    recompute = (keeps_conv_output and type(bn) not in _SYNC_BATCH_NORMS and _batch_statistics(bn)
                 and recompute_is_cheaper(macs_per_output(conv, *size))
                 and _weight_copy_is_small(conv, _output_elements(conv, input, size)))
    return Decision(2 if activation is None else 3, slope, relu, None if activation else activation_obstacle(act, bn),
                    recompute=recompute)


def _conv1d_input_obstacle(conv: nn.Conv1d, input: torch.Tensor) -> str | None:
    """Why a Conv1d -> BatchNorm1d run does not fuse for this input, or None: only (N, C, L) inputs the Conv1d takes
    (any other raises the modules' own errors, naming torch's shapes rather than the op's (N, C, 1, L) view)."""
    if input.dim() != 3:  # (C, L): BatchNorm1d would take the conv's (C_out, L) output as a batch of C_out
        return f"a {input.dim()}-D input to the Conv1d (only (N, C, L) fuses)"
    if input.shape[1] != conv.in_channels or _output_length(conv, 0, input.shape[2]) < 1 or (
            input.dtype != conv.weight.dtype and not torch.is_autocast_enabled(input.device.type)):
        return "an input the Conv1d refuses: its own error"
    return None


def _weight_copy_is_small(conv: nn.Module, output_elements: int) -> bool:
    """Recomputing keeps a copy of the conv weight and bias as the forward used them (semantics._Train): only where
    that copy is smaller than the conv output it replaces (a DCGAN generator's first transposed conv from a 1x1 latent
    has K = 100 but, at batch 64, a weight larger than its output)."""
    copied = conv.weight.numel() + (0 if conv.bias is None else conv.bias.numel())
    return copied < output_elements


def _output_elements(conv: nn.Module, input: torch.Tensor, size: tuple[int, int]) -> int:
    """The conv output's number of elements for this input (`size`: the (padded) height and width of a 4-D one)."""
    if type(conv) is nn.Linear:
        return input.shape[0] * conv.out_features
    channels = conv.out_channels * input.shape[0]
    if type(conv) is nn.Conv1d:
        return channels * _output_length(conv, 0, input.shape[2])
    return channels * _output_length(conv, 0, size[0]) * _output_length(conv, 1, size[1])


def _output_length(conv: nn.Module, axis: int, length: int) -> int:
    """The conv's output size along spatial `axis` for an input of `length` (torch's formulas; "same" keeps it)."""
    kernel, stride, dilation = conv.kernel_size[axis], conv.stride[axis], conv.dilation[axis]
    if isinstance(conv, nn.ConvTranspose2d):
        return ((length - 1) * stride - 2 * conv.padding[axis] + dilation * (kernel - 1) + conv.output_padding[axis]
                + 1)
    if conv.padding == "same":
        return length
    padding = 0 if conv.padding == "valid" else conv.padding[axis]
    return (length + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _single_value_per_statistic(conv: nn.Module, norm: nn.InstanceNorm2d | nn.GroupNorm, height: int,
                                width: int) -> bool:
    """Whether each statistic is of one value: F.instance_norm's input statistics of 1x1 planes (its ValueError), or
    F.group_norm's groups of one value (its ValueError in a batch of one, otherwise zero variance, where the op, seeing
    instance norm in a GroupNorm(C, C), would raise instance_norm's). The modules raise or compute it, as torch's."""
    positions = _output_length(conv, 0, height) * _output_length(conv, 1, width)
    if positions < 1:  # the convolution's own error, which the op raises as for a BatchNorm
        return False
    if type(norm) is nn.GroupNorm:
        return (conv.out_channels // norm.num_groups) * positions == 1
    return positions == 1 and (norm.training or not norm.track_running_stats)


class _Conv2dView(NamedTuple):
    """A Linear's weight (O, F) or a Conv1d's (O, C/groups, K) and their geometry seen as a Conv2d's over
    (N, F, 1, 1) or (N, C, 1, L): views, so autograd reaches the module's own Parameters."""
    weight: torch.Tensor
    bias: torch.Tensor | None
    stride: tuple = (1, 1)
    padding: tuple | str = (0, 0)
    dilation: tuple = (1, 1)
    groups: int = 1
    padding_mode: str = "zeros"


def _conv2d_view(conv: nn.Linear | nn.Conv1d) -> _Conv2dView:
    if type(conv) is nn.Linear:
        return _Conv2dView(conv.weight[:, :, None, None], conv.bias)
    padding = conv.padding if isinstance(conv.padding, str) else (0, conv.padding[0])  # "same" pads no row
    return _Conv2dView(conv.weight[:, :, None, :], conv.bias, (1, conv.stride[0]), padding, (1, conv.dilation[0]),
                       conv.groups)


def _viewed_bn_leaky_relu_modules(conv: nn.Linear | nn.Conv1d, bn: nn.BatchNorm1d, negative_slope,
                                  input: torch.Tensor, relu: bool, keep_output: bool,
                                  recompute: bool = False) -> torch.Tensor:
    """The fused op on a Linear's input (N, F) as (N, F, 1, 1) or a Conv1d's (N, C, L) as (N, C, 1, L), its output
    viewed back as (N, O) or (N, O, L_out)."""
    if type(conv) is nn.Linear:
        bn_input_size, view = (input.shape[0], conv.out_features), input[:, :, None, None]
    else:
        # contiguous: torch's conv1d returns a contiguous output whatever the input's strides, where the op would
        # lay out (N, C, 1, L) as channels_last for an input whose channels are innermost
        bn_input_size = (input.shape[0], conv.out_channels, _output_length(conv, 0, input.shape[2]))
        view = input.contiguous()[:, :, None, :]
    if (bn.training or bn.running_mean is None) and bn_input_size[0] * math.prod(bn_input_size[2:]) == 1:
        # torch's message names BatchNorm1d's input, not our view; raised before anything changes
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"{torch.Size(bn_input_size)}")
    output = conv_bn_leaky_relu_modules(_conv2d_view(conv), bn, negative_slope, view, relu, keep_output,
                                        recompute=recompute)
    return output.flatten(1) if type(conv) is nn.Linear else output.squeeze(2)


# `ascend_acts.explain` listens to Sequential's decisions and runs (explanation.py); None when nobody does
listener = None


def _number(value):
    """A tensor attribute's value, as torch's argument parser reads a tensor given for a float."""
    return value.item() if isinstance(value, torch.Tensor) else value


def run_decided(modules: list, i: int, decision: Decision, input: torch.Tensor) -> torch.Tensor:
    """The fused op for the run `decide` found at modules[i] (the pad first when decision.padded)."""
    j = i + decision.padded
    # with no activation the next module may change the output in place (pix2pix's U-Net: an in-place LeakyReLU
    # opens the inner block): the op keeps the conv output, as torch's BN does
    return conv_bn_leaky_relu_modules(modules[j], modules[j + 1], decision.negative_slope, input, decision.relu,
                                      keep_output=decision.with_activation, pad=modules[i] if decision.padded else None,
                                      recompute=decision.recompute)


def _padding(conv: nn.Module, pad: nn.Module | None) -> tuple[tuple | str, str]:
    """(padding, padding_mode) the op takes for conv(pad(input)) (pad None: the conv alone, its own padding_mode)."""
    if pad is None:
        return conv.padding, conv.padding_mode
    left, right, top, bottom = pad.padding  # the same on both sides of an axis, the conv pads nothing (pad_obstacle)
    return (top, left), _FOLDED_PADS[type(pad)]


def conv_bn_leaky_relu_modules(conv: nn.Module, bn: nn.Module, negative_slope: float, input: torch.Tensor,
                               relu: bool = False, keep_output: bool = True, pad: nn.Module | None = None,
                               recompute: bool = False) -> torch.Tensor:
    """leaky_relu(bn(conv(pad(input))), negative_slope) (relu: torch's relu; pad None: none) through the fused op
    (keep_output: it may keep its output for backward rather than the conv output, see conv_bn_activation;
    recompute: it recomputes the conv output in the backward rather than keeping it), with
    nn.BatchNorm2d.forward's bookkeeping. num_batches_tracked is counted once the op succeeded (momentum=None's
    factor is 1 / the new count, as torch's): a call that fails (a bad argument, caught before the op writes
    anything) changes nothing, not even the buffer's version, as torch's conv raising before its BatchNorm2d runs.
    A torch.utils.checkpoint recomputation stops inside the op (after its running-statistics update) and counts the
    batch again, as torch's does. An InstanceNorm2d or GroupNorm follows its own module's rules instead
    (_per_sample_norm_modules)."""
    if type(conv) in (nn.Linear, nn.Conv1d):
        return _viewed_bn_leaky_relu_modules(conv, bn, negative_slope, input, relu, keep_output, recompute)
    if pad is None and conv.padding_mode == "circular":
        # torch's circular pad keeps nothing of its input: the op keeps the padded copy, as torch's conv does
        input, conv = F.pad(input, conv._reversed_padding_repeated_twice, mode="circular"), _unpadded(conv)
    padding, padding_mode = _padding(conv, pad)
    options = {"relu": relu, "keep_output": keep_output}
    if padding_mode != "zeros":
        options["padding_mode"] = padding_mode
    if recompute:
        options["recompute"] = True
    if type(bn) in _PER_SAMPLE_NORMS:
        return _per_sample_norm_modules(conv, bn, negative_slope, input, padding, options)
    counts = bn.training and bn.track_running_stats and bn.num_batches_tracked is not None
    momentum, eps, negative_slope = _number(bn.momentum), _number(bn.eps), _number(negative_slope)
    factor = 0.0 if momentum is None else momentum
    statistics = not bn.training or bn.track_running_stats
    if type(conv) is nn.ConvTranspose2d:
        options |= {"transposed": True, "output_padding": conv.output_padding}
    if type(bn) in _SYNC_BATCH_NORMS:
        fused, options = sync_conv_bn_leaky_relu, options | {"process_group": bn.process_group}
    else:
        fused = conv_bn_activation
    if counts and momentum is None:
        if torch.compiler.is_compiling() and statistics and bn.running_mean is not None:
            # float() of a buffer is data-dependent (a graph break, as in torch's BatchNorm2d): a tensor factor
            factor = 1.0 / (bn.num_batches_tracked + 1).to(torch.float64)
            if fused is conv_bn_activation:
                fused = conv_bn_leaky_relu_tensor_momentum
        else:
            factor = 1.0 / (float(bn.num_batches_tracked) + 1)
    try:
        output = fused(input, conv.weight, conv.bias, bn.running_mean if statistics else None,
                       bn.running_var if statistics else None, bn.weight, bn.bias, bn.training, factor,
                       eps, negative_slope, conv.stride, padding, conv.dilation, conv.groups, **options)
    except RECOMPUTATION_STOPPED:
        if counts:
            bn.num_batches_tracked.add_(1)
        raise
    if counts:
        bn.num_batches_tracked.add_(1)
    return output


class _UnpaddedConv(NamedTuple):
    """A Conv2d's parameters and geometry for its already padded input (no padding of its own)."""
    weight: torch.Tensor
    bias: torch.Tensor | None
    stride: tuple
    dilation: tuple
    groups: int
    padding: tuple = (0, 0)
    padding_mode: str = "zeros"


def _unpadded(conv: nn.Conv2d) -> _UnpaddedConv:
    return _UnpaddedConv(conv.weight, conv.bias, conv.stride, conv.dilation, conv.groups)


def _per_sample_norm_modules(conv: nn.Conv2d | nn.ConvTranspose2d, norm: nn.InstanceNorm2d | nn.GroupNorm,
                             negative_slope, input: torch.Tensor, padding, options: dict) -> torch.Tensor:
    """The fused op computing norm(conv(input)) and the activation, with the op's norm_groups: nn.GroupNorm's
    F.group_norm (per-sample statistics of num_groups channel groups, in train and eval), or nn.InstanceNorm2d's
    F.instance_norm (one group per channel): input statistics in training or without running statistics, the running
    ones in eval; the running statistics updated in training with momentum (None means 0 there: no update, no
    cumulative average) and num_batches_tracked never counted, as torch's InstanceNorm2d.forward does. `padding` and
    `options` as conv_bn_leaky_relu_modules resolved them."""
    if type(conv) is nn.ConvTranspose2d:
        options |= {"transposed": True, "output_padding": conv.output_padding}
    if type(norm) is nn.GroupNorm:
        groups, training, momentum, statistics = _num_groups(norm), True, 0.0, (None, None)
    else:
        # one group per channel of the conv output: what instance_norm normalises, whatever type num_features has
        # (a NumPy int; a float torch takes with affine=False, where it only warns on a mismatch)
        groups = int(output_channels(conv.weight, conv.groups, options.get("transposed", False)))
        training = norm.training or not norm.track_running_stats
        momentum = 0.0 if norm.momentum is None else _number(norm.momentum)
        statistics = (norm.running_mean, norm.running_var)  # as torch passes them (None without track_running_stats)
    return conv_bn_activation(input, conv.weight, conv.bias, *statistics, norm.weight, norm.bias, training, momentum,
                              _number(norm.eps), _number(negative_slope), conv.stride, padding, conv.dilation,
                              conv.groups, norm_groups=groups, **options)
