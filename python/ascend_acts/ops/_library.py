"""The `ascend_acts` torch.library namespace, its schemas (one per op of `op_table.TORCH_OPS`) and the pieces
the ops' folders share: torch's checks of in-place targets and result-based backwards, and the autograd rules.

What registers the ops' kernels is `ops._register` (a loop over the table); each op folder's semantics.py declares
its ops' semantics (validation, fake kernel, autograd, vmap, autocast) with `ops._semantics.declare`.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch._C._functorch import get_single_level_autograd_function_allowed, set_single_level_autograd_function_allowed
from torch.autograd import forward_ad

from ..numerics.dtypes import FLOATING_DTYPES
from ..op_table import TORCH_OPS, TorchOp

# (device type, dispatch key) of the autocast modes the ops have rules for (ops._register registers them); their
# kernels run with these keys excluded: the backend's torch ops are the op's own computation
AUTOCAST_KEYS = (("cpu", torch._C.DispatchKey.AutocastCPU),
                 ("privateuseone", torch._C.DispatchKey.AutocastPrivateUse1))
AUTOCAST_KEY_SET = torch._C.DispatchKeySet(AUTOCAST_KEYS[0][1]) | torch._C.DispatchKeySet(AUTOCAST_KEYS[1][1])


def autocast_dtype(tensor: torch.Tensor) -> torch.dtype | None:
    """The dtype the ops' autocast rules would cast `tensor` to here (an autocast region of its device type whose key
    is not excluded), or None."""
    for device_type, key in AUTOCAST_KEYS:
        # a compiled graph's own regions exclude no key (and dynamo cannot trace the query)
        if (tensor.device.type == device_type and torch.is_autocast_enabled(device_type)
                and (torch.compiler.is_compiling() or not torch._C._dispatch_tls_is_dispatch_key_excluded(key))):
            return torch.get_autocast_dtype(device_type)
    return None

lib = torch.library.Library("ascend_acts", "DEF")
for _op in TORCH_OPS:
    lib.define(_op.name + _op.schema)


def check_inplace_target(tensor: torch.Tensor) -> None:
    """torch's rules for the tensor an in-place kernel writes, checked before anything is written."""
    if tensor.is_inference() and not torch.is_inference_mode_enabled():
        raise RuntimeError(
            "Inplace update to inference tensor outside InferenceMode is not allowed. You can make a clone to "
            "get a normal tensor before doing inplace update."
        )
    if torch._debug_has_internal_overlap(tensor) == 1:
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a single "
            "memory location. Please clone() the tensor before performing the operation."
        )


_CREATION = torch._C._autograd.CreationMeta
_VIEW_REBASE_REFUSALS = {
    _CREATION.MULTI_OUTPUT_NODE: "This view is the output of a function that returns multiple views. Such functions "
                                 "do not allow the output views to be modified inplace. You should replace the "
                                 "inplace operation by an out-of-place one.",
    _CREATION.IN_CUSTOM_FUNCTION: "This view was created inside a custom Function (or because an input was returned "
                                  "as-is) and modifying it inplace would override the custom backward of that "
                                  "Function. This behavior is forbidden. You can fix this by cloning the output of "
                                  "the custom Function.",
    _CREATION.INFERENCE_MODE: "A view was created in inference mode and is being modified inplace in normal mode.",
}


def check_inplace_autograd(tensor: torch.Tensor) -> None:
    """torch's errors for in-place on leaves that require grad, raised before the input is touched."""
    if not torch.is_grad_enabled():
        return
    base = tensor._base
    if base is not None and tensor.requires_grad:  # views torch's autograd refuses to rebase (handle_view_on_rebase)
        refusal = _VIEW_REBASE_REFUSALS.get(torch._C._autograd._get_creation_meta(tensor))
        if refusal is not None:
            raise RuntimeError(f"{tensor.grad_fn.name() if tensor.grad_fn else 'A view'}: the tensor is a view and is "
                               f"being modified inplace. {refusal}")
    if base is not None and tensor.is_leaf and tensor.requires_grad:  # a view without grad_fn: made under no_grad
        raise RuntimeError(
            "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given "
            "that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
            "moving both the view and the inplace either both inside the no_grad block (if you don't want the "
            "inplace to be tracked) or both outside (if you want the inplace to be tracked)."
        )
    if tensor.is_leaf and tensor.requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if base is not None and base.is_leaf and base.requires_grad:
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place operation."
        )


def check_floating(op: str, name: str, tensor: torch.Tensor) -> None:
    if tensor.dtype not in FLOATING_DTYPES:  # NotImplementedError: torch's type for a kernel without the dtype
        raise NotImplementedError(f"ascend_acts::{op}: '{name}' must be float16, bfloat16, float32 or float64, got "
                                  f"{tensor.dtype}")


def check_backward_operands(op: str, grad_output: torch.Tensor, saved: torch.Tensor) -> None:
    """An elementwise backward's grad_output and saved: floating, of one shape, dtype and device. aten's
    leaky_relu_backward broadcasts and promotes them; ours raise (docs/usage.md, "Errors")."""
    check_floating(op, "saved", saved)
    for what, got, expected in (("shape", tuple(grad_output.shape), tuple(saved.shape)),
                                ("dtype", grad_output.dtype, saved.dtype),
                                ("device", grad_output.device, saved.device)):
        if got != expected:
            raise RuntimeError(f"ascend_acts::{op}: argument 'grad_output' has {what} {got} but 'saved' has "
                               f"{expected}; they must match (no broadcasting or type promotion)")


def check_result_based_backward(op: str, slope_may_be_negative: bool, saved_is_result: bool) -> None:
    """A backward from the output cannot tell x <= 0 from x > 0 once a negative slope flipped signs."""
    if saved_is_result and slope_may_be_negative:
        raise RuntimeError(
            f"In-place {op} backward calculation is triggered with a negative slope which is not "
            "supported. This is caused by calling in-place forward function with a negative slope, "
            "please call out-of-place version instead."
        )


class OpFunction(torch.autograd.function._SingleLevelFunction):
    """Base of the ops' autograd Functions (forward / setup_context / backward / jvp).

    The ops' Autograd kernels run below torch.func's transform layers, where a plain autograd.Function
    would re-enter functorch (and fail); like torch's own C++ autograd kernels, a single-level Function
    records at the current level, so torch.func.grad/vjp/jvp/jacfwd/hessian compose with the ops."""

    # whether gradients that reach no output stay undefined (below; for a backward that reads only its first output's
    # gradient, the fused conv + norm ops'); the activation ops' Functions leave autograd's
    # zeros, which their backward ops' own derivatives need: torch's leaky_relu_backward gives its input a zero
    # gradient, and their jvps read the tangents as tensors
    undefined_gradients_stay_undefined = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        setup_context, backward = cls.__dict__.get("setup_context"), cls.__dict__.get("backward")
        if cls.undefined_gradients_stay_undefined and setup_context is not None and backward is not None:
            cls.setup_context = staticmethod(_keeping_undefined_gradients(setup_context.__func__))
            cls.backward = staticmethod(_none_without_gradients(backward.__func__))

    @staticmethod
    def _compiled_autograd_key(ctx):
        # torch.autograd.Function's (compiled autograd keys a node by it); _SingleLevelFunction lacks it
        return (ctx._autograd_function_id,)


# Gradients that reach no output stay undefined, as through torch's own nodes (the fused conv + norm runs: their
# composites give torch's zeros where torch has them): autograd would otherwise hand a Function zeros for them and its
# backward would give its inputs zero gradients where torch's give none (an R1 penalty's own backward through a conv
# that only needs its weight: the norm bias of the run before it, without activation), which the next Adam or
# SGD-momentum step turns into a move torch's step does not make.
# The Functions that opt in read only their first output's gradient (the others are non-differentiable statistics),
# so no other is materialised either: autograd's zeros for them were allocated on every backward for nothing.
def _keeping_undefined_gradients(setup_context: Callable) -> Callable:
    def setup_context_keeping_undefined(ctx, inputs, output):
        setup_context(ctx, inputs, output)
        ctx.set_materialize_grads(False)
        ctx.input_count = len(inputs)

    return setup_context_keeping_undefined


def _none_without_gradients(backward: Callable) -> Callable:
    def backward_of_defined(ctx, grad, *others):
        if grad is None:
            return (None,) * ctx.input_count
        return backward(ctx, grad, *others)

    return backward_of_defined


def has_forward_tangent(tensor: torch.Tensor) -> bool:
    """Whether `tensor` carries a forward-mode tangent (torch.autograd.forward_ad or torch.func.jvp)."""
    if forward_ad._current_level < 0 and not torch._C._are_functorch_transforms_active():
        return False
    return torch._unpack_dual(tensor, 0).tangent is not None


def differentiating(args) -> bool:
    """Whether a call with `args` must record for autograd or propagate forward tangents."""
    if torch.is_grad_enabled():
        for a in args:
            if isinstance(a, torch.Tensor) and a.requires_grad:
                return True
    if forward_ad._current_level < 0 and not torch._C._are_functorch_transforms_active():
        return False  # no tangent anywhere (has_forward_tangent's first test, once per call)
    return any(has_forward_tangent(a) for a in args if isinstance(a, torch.Tensor))


def call_in_backward(op: Callable, *args):
    """op(*args) from an OpFunction's backward. Outside a differentiated backward (grad mode off, no forward-mode
    level, no torch.func transform) `differentiating` is False whatever the arguments, and the op's Autograd kernel
    would only redispatch below itself: the call goes there at once (dispatched below Autograd, as torch's own
    backward formulas run their kernels), sparing a Python kernel and a redispatch per backward call."""
    if torch.is_grad_enabled() or forward_ad._current_level >= 0 or torch._C._are_functorch_transforms_active():
        return op(*args)
    with torch._C._AutoDispatchBelowAutograd():
        return op(*args)


def _below_autograd(op_name: str) -> Callable:
    """`run(keyset, args)`: op `op_name` redispatched past the Autograd kernels (its overload found once)."""
    redispatch = getattr(torch.ops.ascend_acts, op_name).default.redispatch
    after_autograd = torch._C._after_autograd_keyset

    def run(keyset, args):
        return redispatch(keyset & after_autograd, *args)

    return run


AutogradRule = Callable[[TorchOp], Callable]  # op -> its Autograd kernel `kernel(keyset, *args)`


def autograd_function(function: type[OpFunction], extra_arguments: Callable[..., tuple] | None = None) -> AutogradRule:
    """Autograd (reverse and forward mode) of an op through `function`.

    Functional ops return `function`'s output; in-place ops `op(Tensor(a!) self, ...) -> ()` get torch's
    leaf checks first and always go through `function` (it marks `self` dirty, which bumps its version).
    `extra_arguments(recording, *args)`, when given, is appended to `function`'s arguments: what the
    backward needs that must be taken before an in-place write (`recording`: whether it will be needed)."""

    def kernel_of(op: TorchOp):
        inplace, below_autograd = op.inplace, _below_autograd(op.name)

        def autograd_kernel(keyset, *args):
            if inplace:
                check_inplace_autograd(args[0])
            recording = differentiating(args)
            if not recording and not inplace:
                return below_autograd(keyset, args)
            if extra_arguments is not None:
                args = (*args, *extra_arguments(recording, *args))
            # enable_single_level_autograd_function's switch, without its generator-based context manager
            allowed = get_single_level_autograd_function_allowed()
            set_single_level_autograd_function_allowed(True)
            try:
                result = function.apply(*args)
            finally:
                set_single_level_autograd_function_allowed(allowed)
            return None if inplace else result

        return autograd_kernel

    return kernel_of


def composite_autograd(composite: Callable) -> AutogradRule:
    """Autograd of a backward op by its formula in differentiable torch ops: when it is differentiated
    (double backward, forward-over-reverse, torch.func), `composite` computes it and torch differentiates
    that; otherwise the device kernel runs."""

    def kernel_of(op: TorchOp):
        below_autograd = _below_autograd(op.name)

        def autograd_kernel(keyset, *args):
            if differentiating(args):
                return composite(*args)
            return below_autograd(keyset, args)

        return autograd_kernel

    return kernel_of


def run_below_autograd(op: Callable, *args):
    """Runs `op` past the Autograd kernels of this level (inside an OpFunction's forward). Grad modes are
    switched back on, as torch's own autograd kernels leave them when they redispatch: under nested
    torch.func transforms the levels below record `op` in their turn (the autograd keys stay excluded here)."""
    # torch.enable_grad() and forward_ad._set_fwd_grad_enabled(True)'s switches, without their context-manager objects
    grad_enabled, fwd_grad_enabled = torch.is_grad_enabled(), torch._C._is_fwd_grad_enabled()
    torch._C._set_grad_enabled(True)
    torch._C._set_fwd_grad_enabled(True)
    try:
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)
    finally:
        torch._C._set_fwd_grad_enabled(fwd_grad_enabled)
        torch._C._set_grad_enabled(grad_enabled)


_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


def values_unknown(*tensors: torch.Tensor) -> bool:
    """Whether tensor values cannot be read here: a compiled, traced or exported graph, fake or meta tensors.
    Such calls take the static path (no choice made from the data)."""
    if torch.compiler.is_compiling() or torch.jit.is_tracing() or any(t.device.type == "meta" for t in tensors):
        return True
    if (torch._C._len_torch_dispatch_stack() == 0 and torch._guards.TracingContext.try_get() is None
            and all(type(t) in _PLAIN_TENSOR_TYPES for t in tensors)):
        return False  # detect_fake_mode's answer without its pytree walk: no mode, no tracing, no tensor subclass
    return torch._guards.detect_fake_mode(tensors) is not None


def elementwise_vmap(op_name: str, tensors: int) -> Callable:
    """vmap of an elementwise op whose first `tensors` arguments are same-shaped tensors: one call over the batch (the
    batch dims moved to the front, an unbatched argument expanded), as torch's own elementwise ops batch."""

    def rule(info, in_dims, *args):
        batched = [t.movedim(d, 0) if d is not None else t.expand(info.batch_size, *t.shape)
                   for t, d in zip(args[:tensors], in_dims[:tensors])]
        return getattr(torch.ops.ascend_acts, op_name)(*batched, *args[tensors:]), 0

    return rule


def per_sample_vmap(op_name: str) -> Callable:
    """vmap by calling the op once per sample and stacking the results: what torch's fallback does, without its
    performance warning (torch's own ops give none), for ops whose batched form is not one call of the op."""

    def rule(info, in_dims, *args):
        op = getattr(torch.ops.ascend_acts, op_name)
        results = [op(*(a.select(d, i) if isinstance(a, torch.Tensor) and d is not None else a
                        for a, d in zip(args, in_dims)))
                   for i in range(info.batch_size)]
        if isinstance(results[0], torch.Tensor):
            return torch.stack(results), 0
        return tuple(torch.stack(r) for r in zip(*results)), (0,) * len(results[0])

    return rule

