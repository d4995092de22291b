"""The activation ops at the edges, judged against plain torch doing the same thing: results (bit for bit where
we promise it), error types, and side effects (values, version counters, RNG state)."""

import contextlib
import decimal
import fractions
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ascend_acts
from bias_gradient_cases import assert_same_bias_gradient, non_finite_bias_gradients
from conftest import backend_dtypes

ops = torch.ops.ascend_acts


def composite(x, bias, negative_slope, scale):
    """torch's fused bias + LeakyReLU: what ascend_acts.fused_bias_leaky_relu promises."""
    pre = x if bias is None else x + bias.view(1, -1, *([1] * (x.dim() - 2)))
    return F.leaky_relu(pre, negative_slope) * scale


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal including the sign of zeros and NaN positions."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(view), b.contiguous().view(view))


def rrelu_train(x, *args, **kwargs):
    return ascend_acts.rrelu(x, *args, training=True, **kwargs)


MODES = {"grad": contextlib.nullcontext, "no_grad": torch.no_grad, "inference_mode": torch.inference_mode}
IN_PLACE = {  # ours and torch's: the same in-place call
    "leaky_relu": (lambda x: ascend_acts.leaky_relu(x, 0.2, inplace=True), lambda x: F.leaky_relu_(x, 0.2)),
    "rrelu_train": (lambda x: rrelu_train(x, inplace=True), lambda x: F.rrelu_(x, training=True)),
    "rrelu_eval": (lambda x: ascend_acts.rrelu(x, inplace=True), lambda x: F.rrelu_(x)),
}


# --- 1. one version bump per in-place call, in every grad mode (inference mode included) ----------------------
@pytest.mark.parametrize("op", IN_PLACE)
@pytest.mark.parametrize("mode", MODES)
def test_in_place_bumps_version_once_as_torch(backend, op, mode):
    ours, theirs = IN_PLACE[op]
    for make in (lambda: torch.randn(4), lambda: torch.randn(2, 4)[1], lambda: torch.randn(4, 2)[:, 1]):
        counts = []
        for call in (ours, theirs):
            x = make()
            base = x if x._base is None else x._base
            before = base._version
            with MODES[mode]():
                call(x)
            counts.append(base._version - before)
        assert counts[0] == counts[1] == 1


@pytest.mark.parametrize("op", IN_PLACE)
def test_in_place_under_inference_mode_fails_a_later_backward_as_torch(backend, op):
    for call in IN_PLACE[op]:
        leaf = torch.randn(4, requires_grad=True)
        y = leaf * 1
        loss = (y * y).sum()  # saves y
        with torch.inference_mode():
            call(y)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


# --- 2. the public backward ops check their operands (device and fake kernels alike) --------------------------
def _backward_calls(grad, saved):
    seed = torch.tensor(7)
    return {
        "leaky_relu_backward": lambda: ops.leaky_relu_backward(grad, saved, 0.2, False),
        "rrelu_backward": lambda: ops.rrelu_backward(grad, saved, seed, 0.1, 0.3, False),
        "fused_bias_leaky_relu_backward": lambda: ops.fused_bias_leaky_relu_backward(grad, saved, None, 0.2, 2.0,
                                                                                     False),
    }


@pytest.mark.parametrize("op", list(_backward_calls(None, None)))
@pytest.mark.parametrize("mismatch", ["shape", "broadcast", "dtype", "device"])
def test_backward_ops_reject_mismatched_operands(backend, op, mismatch):
    saved = torch.randn(2, 3)
    grad = {"shape": torch.randn(4, 3), "broadcast": torch.randn(1, 3), "dtype": torch.randn(2, 3).half(),
            "device": torch.randn(2, 3, device="meta")}[mismatch]
    if mismatch == "shape":  # aten raises too; for "broadcast" and "dtype" it broadcasts / promotes (docs/usage.md)
        with pytest.raises(RuntimeError):
            torch.ops.aten.leaky_relu_backward(grad, saved, 0.2, False)
    with pytest.raises(RuntimeError, match=r"'grad_output' (has|\()"):
        _backward_calls(grad, saved)[op]()
    with torch._subclasses.FakeTensorMode() as mode:  # the fake kernel agrees with the device kernel
        fake_grad, fake_saved = mode.from_tensor(grad), mode.from_tensor(saved)
        with pytest.raises(RuntimeError, match=r"'grad_output' (has|\()"):
            _backward_calls(fake_grad, fake_saved)[op]()


# --- 3. slope -0.0: torch's signed zeros ------------------------------------------------------------------------
@backend_dtypes("leaky_relu")
def test_negative_zero_slope_bit_for_bit(backend, dtype):
    values = torch.tensor([-2.0, -1.0, -0.0, 0.0, 0.5, 3.0], dtype=dtype)
    grad = torch.tensor([1.0, -1.0, 2.0, -2.0, 1.0, -1.0], dtype=dtype)
    cases = {"leaky_relu": (lambda x: ascend_acts.leaky_relu(x, -0.0), lambda x: F.leaky_relu(x, -0.0)),
             "rrelu_eval": (lambda x: ascend_acts.rrelu(x, -0.0, -0.0), lambda x: F.rrelu(x, -0.0, -0.0))}
    for ours, theirs in cases.values():
        results = []
        for call in (ours, theirs):
            x = values.clone().requires_grad_()
            y = call(x)
            y.backward(grad)
            results.append((y.detach(), x.grad))
        assert bits_equal(results[0][0], results[1][0]) and bits_equal(results[0][1], results[1][1])
    x, bias = values.reshape(2, 3).clone().requires_grad_(), torch.zeros(3, dtype=dtype, requires_grad=True)
    ours = ascend_acts.fused_bias_leaky_relu(x, bias, -0.0, 2.0)
    ours.backward(grad.reshape(2, 3))
    x2, bias2 = x.detach().clone().requires_grad_(), bias.detach().clone().requires_grad_()
    theirs = composite(x2, bias2, -0.0, 2.0)
    theirs.backward(grad.reshape(2, 3))
    assert bits_equal(ours.detach(), theirs.detach()) and bits_equal(x.grad, x2.grad)
    assert bits_equal(bias.grad, bias2.grad)


# --- 4. argument types torch takes ---------------------------------------------------------------------------
SLOPES = [torch.tensor(0.2), torch.tensor(0.2, dtype=torch.float64), torch.tensor(2), torch.tensor(True), True,
          np.bool_(True), np.float32(0.2), np.int64(2), 2, 0.5 + 0j, torch.tensor(0.5 + 0j)]
BAD_SLOPES = [torch.tensor([0.2]), torch.tensor(0.2, requires_grad=True), None, "0.2", 1j, 1e300,
              torch.tensor(1e300, dtype=torch.float64), 3.4028235e38, fractions.Fraction(1, 3), decimal.Decimal("0.1")]


def _outcome(call, *args):
    try:
        return call(*args)
    except Exception as error:  # noqa: BLE001 (the oracle's type is what is compared)
        return type(error)


@backend_dtypes("leaky_relu")
def test_slope_types_as_torch(backend, dtype):
    x = torch.tensor([-3.0, -1.0, 0.0, 2.0], dtype=dtype)
    for slope in SLOPES + BAD_SLOPES:
        expected = _outcome(F.leaky_relu, x, slope)
        got = _outcome(ascend_acts.leaky_relu, x, slope)
        if isinstance(expected, type):
            assert got is expected, (slope, got)
        else:
            assert bits_equal(got, expected), slope
        got = _outcome(ascend_acts.nn.LeakyReLU(slope), x)
        assert (got is expected) if isinstance(expected, type) else bits_equal(got, expected), slope


def test_overflowing_slope_is_torch_error_per_dtype(backend):
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        x = torch.randn(3).to(dtype)
        before = x.clone()
        for call in (lambda t: F.leaky_relu(t, 1e300), lambda t: ascend_acts.leaky_relu(t, 1e300),
                     lambda t: ascend_acts.leaky_relu(t, -1e39, inplace=True),
                     lambda t: ascend_acts.rrelu(t, -1e300, 0.1, training=True),
                     lambda t: ascend_acts.fused_bias_leaky_relu(t.reshape(1, 3), None, 1e300)):
            with pytest.raises(RuntimeError, match="cannot be converted to type float without overflow"):
                call(x)
        assert torch.equal(x, before)
        # the ops themselves too, as aten's (forward, in-place, backward)
        for op, reference in ((torch.ops.ascend_acts.leaky_relu, torch.ops.aten.leaky_relu),
                              (torch.ops.ascend_acts.leaky_relu_, torch.ops.aten.leaky_relu_),
                              (lambda t, s: torch.ops.ascend_acts.leaky_relu_backward(t, t, -s, False),
                               lambda t, s: torch.ops.aten.leaky_relu_backward(t, t, -s, False))):
            with pytest.raises(RuntimeError, match="cannot be converted to type float without overflow"):
                reference(x.clone(), 1e39)
            with pytest.raises(RuntimeError, match="cannot be converted to type float without overflow"):
                op(x, 1e39)
        assert torch.equal(x, before)
    if backend != "sim":  # float64 kernels take any double (sim has no float64)
        x = torch.randn(3, dtype=torch.float64)
        assert torch.equal(ascend_acts.leaky_relu(x, 1e300), F.leaky_relu(x, 1e300))
        assert torch.equal(torch.ops.ascend_acts.leaky_relu(x, 1e300), F.leaky_relu(x, 1e300))
    # the composite's `* scale` overflows to inf rather than raising
    x = torch.tensor([[1.0, -1.0]])
    assert torch.equal(ascend_acts.fused_bias_leaky_relu(x, None, 0.2, 1e300), composite(x, None, 0.2, 1e300))


@pytest.mark.parametrize("inplace", [1, 0, None, np.bool_(True), np.bool_(False), 1.0, torch.tensor(True)])
def test_inplace_takes_any_truthy_value_as_torch(backend, inplace):
    for ours, theirs in ((lambda x: ascend_acts.leaky_relu(x, 0.2, inplace), lambda x: F.leaky_relu(x, 0.2, inplace)),
                         (lambda x: ascend_acts.rrelu(x, 0.1, 0.3, False, inplace),
                          lambda x: F.rrelu(x, 0.1, 0.3, False, inplace)),
                         (lambda x: ascend_acts.nn.LeakyReLU(0.2, inplace)(x),
                          lambda x: torch.nn.LeakyReLU(0.2, inplace)(x))):
        x, x2 = torch.tensor([-1.0, 2.0]), torch.tensor([-1.0, 2.0])
        y, y2 = ours(x), theirs(x2)
        assert (y is x) == (y2 is x2) and torch.equal(x, x2) and torch.equal(y, y2)
    x = torch.randn(4)
    assert (rrelu_train(x, inplace=inplace) is x) == bool(inplace)


def test_rrelu_argument_types_as_torch(backend):
    x = torch.tensor([-3.0, -1.0, 0.0, 2.0])
    for lower, upper in ((torch.tensor(0.1), torch.tensor(0.3)), (True, True), (False, True), (False, False),
                         (torch.tensor(True), True), (np.bool_(True), np.bool_(True)), (True, 1), (0.5, True), (1, 2),
                         (np.float32(0.1), 0.3)):
        assert bits_equal(ascend_acts.rrelu(x, lower, upper), F.rrelu(x, lower, upper))
        assert bits_equal(ascend_acts.nn.RReLU(lower, upper).eval()(x), torch.nn.RReLU(lower, upper).eval()(x))
        y = rrelu_train(x, lower, upper)
        assert torch.equal(y[x > 0], x[x > 0]) and y.shape == F.rrelu(x, lower, upper, training=True).shape
    for training in (np.bool_(True), 1, None):
        with pytest.raises(TypeError):
            F.rrelu(x, training=training)
        with pytest.raises(TypeError, match="'training' must be a bool"):
            ascend_acts.rrelu(x, training=training)
    for lower in ("0.1", torch.tensor([0.1])):
        with pytest.raises(TypeError):
            F.rrelu(x, lower, 0.3)
        with pytest.raises(TypeError, match="'lower'"):
            ascend_acts.rrelu(x, lower, 0.3)


def test_fused_module_and_function_take_torch_scalars(backend):
    x = torch.randn(2, 3, 2)
    module = ascend_acts.nn.FusedLeakyReLU(3, negative_slope=torch.tensor(0.2), scale=torch.tensor(2.0))
    module.bias.data.normal_()
    expected = composite(x, module.bias.detach(), torch.tensor(0.2), torch.tensor(2.0))
    assert torch.equal(module(x), expected)
    assert torch.equal(ascend_acts.fused_bias_leaky_relu(x, None, True, 2), composite(x, None, True, 2))
    with pytest.raises(TypeError, match="'scale' must be a real number"):
        ascend_acts.fused_bias_leaky_relu(x, None, 0.2, 2j)


# --- 5. non-finite RReLU bounds: torch's RuntimeError -------------------------------------------------------
@pytest.mark.parametrize("training", [False, True])
def test_non_finite_bounds_raise_runtime_error_as_torch(backend, training):
    x = torch.randn(4)
    for lower, upper, name in ((0.1, math.inf, "upper"), (0.1, math.nan, "upper"), (-math.inf, 0.1, "lower")):
        with pytest.raises(RuntimeError, match="bound must be finite"):
            F.rrelu(x, lower, upper, training=training)
        with pytest.raises(RuntimeError, match=f"'{name}' must be finite"):
            ascend_acts.rrelu(x, lower, upper, training=training)
        with pytest.raises(RuntimeError, match=f"'{name}' must be finite"):
            ascend_acts.nn.RReLU(lower, upper).train(training)(x)


# --- 6. in-place through negative views ---------------------------------------------------------------------
@pytest.mark.parametrize("op", ["leaky_relu", "rrelu_eval"])
def test_in_place_on_negative_views_as_torch(backend, op):
    ours, theirs = IN_PLACE[op]
    data = torch.randn(6)
    c = torch.complex(torch.randn(6), torch.randn(6))
    for view in (torch._neg_view, lambda t: t.conj().imag):
        base = c if view is not torch._neg_view else data
        a, b = base.clone(), base.clone()
        va, vb = view(a), view(b)
        assert va.is_neg()
        ours(va)
        theirs(vb)
        assert bits_equal(torch.view_as_real(a) if a.is_complex() else a,
                          torch.view_as_real(b) if b.is_complex() else b)
        assert a._version == b._version


def test_rrelu_training_in_place_on_negative_view(backend):
    data = torch.randn(6)
    generator = torch.Generator().manual_seed(3)
    expected = rrelu_train(-data, generator=generator)
    generator.manual_seed(3)
    target = data.clone()
    rrelu_train(torch._neg_view(target), inplace=True, generator=generator)
    assert bits_equal(-target, expected)


# --- 7. empty tensors of every shape, forward and backward --------------------------------------------------
EMPTY_SHAPES = [(0,), (2, 0), (0, 3), (2, 3, 0, 4), (0, 3, 2), (2, 0, 3), (0, 0, 0)]


@pytest.mark.parametrize("shape", EMPTY_SHAPES)
def test_empty_tensors_as_torch(backend, shape):
    calls = [(lambda x: ascend_acts.leaky_relu(x, 0.2), lambda x: F.leaky_relu(x, 0.2)),
             (lambda x: ascend_acts.leaky_relu(x, -0.2), lambda x: F.leaky_relu(x, -0.2)),
             (rrelu_train, lambda x: F.rrelu(x, training=True)),
             (lambda x: rrelu_train(x, -0.3, 0.2), lambda x: F.rrelu(x, -0.3, 0.2, training=True)),
             (lambda x: ascend_acts.rrelu(x), F.rrelu)]
    for ours, theirs in calls:
        results = []
        for call in (ours, theirs):
            x = torch.randn(shape, requires_grad=True)
            y = call(x)
            y.sum().backward()
            results.append((y, x.grad))
        assert results[0][0].shape == results[1][0].shape and results[0][1].shape == results[1][1].shape
        assert results[0][0].stride() == results[1][0].stride()
    target = torch.randn(shape)
    assert ascend_acts.leaky_relu(target, 0.2, inplace=True) is target and rrelu_train(target, inplace=True) is target
    if len(shape) < 2:
        return
    for slope, scale in ((0.2, 2.0), (-0.2, 0.5)):
        results = []
        for call in (ascend_acts.fused_bias_leaky_relu, composite):
            x, bias = torch.randn(shape, requires_grad=True), torch.randn(shape[1], requires_grad=True)
            y = call(x, bias, slope, scale)
            y.sum().backward()
            results.append((y, x.grad, bias.grad))
        (y, gx, gb), (y2, gx2, gb2) = results
        assert y.shape == y2.shape and gx.shape == gx2.shape and torch.equal(gb, gb2)


# --- 8. no NumPy warnings: torch is silent on overflow and NaN ------------------------------------------------
@backend_dtypes("leaky_relu")
def test_special_values_are_silent(backend, dtype):
    big = torch.finfo(dtype).max
    x = torch.tensor([math.inf, -math.inf, math.nan, big, -big, 1e-45, -0.0, 0.0], dtype=dtype)
    grad = torch.tensor([big, -big, math.inf, math.nan, 2.0, -2.0, big, -big], dtype=dtype)
    seed = torch.tensor(11)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for slope in (2.0, -3.0, 0.5, math.inf, math.nan):
            ascend_acts.leaky_relu(x, slope)
            ascend_acts.leaky_relu(x.clone(), slope, inplace=True)
            ops.leaky_relu_backward(grad, x, slope, False)
        rrelu_train(x, 0.5, 4.0)
        rrelu_train(x.clone(), -4.0, 3.0, inplace=True)
        ops.rrelu_backward(grad, x, seed, -4.0, 3.0, False)
        ascend_acts.rrelu(x, 2.0, 3.0)
        for slope, scale in ((0.2, 2.0), (3.0, 4.0), (-2.0, 0.5)):
            x2, bias = x.reshape(2, 4), torch.tensor([big, -big, math.nan, 1.0], dtype=dtype)
            ascend_acts.fused_bias_leaky_relu(x2, bias, slope, scale)
            ops.fused_bias_leaky_relu_backward(grad.reshape(2, 4), x2, bias, slope, scale, False)
            # a bias gradient summing +-max to inf - inf
            ops.fused_bias_leaky_relu_backward(torch.full((2, 4), big, dtype=dtype) * torch.tensor([[1.0], [-1.0]]).to(
                dtype), x2.abs().nan_to_num(), None, slope, scale, False)


# --- 8b. grad_bias where the sum is not finite: torch's float32 sum's +-inf, NaN only from +inf + -inf or a NaN --
@backend_dtypes("fused_bias_leaky_relu")
@pytest.mark.parametrize("shape", [(6, 8), (3, 16, 5), (2, 8, 4, 33)], ids=str)
def test_grad_bias_overflow_and_non_finite_terms_as_torch(backend, dtype, shape):
    """Partial sums overflowing to +-inf, +inf and -inf terms, a NaN term: the bias gradient of the autograd
    through ascend_acts.fused_bias_leaky_relu is torch's composite's (a compensated sum must not turn inf into
    NaN through inf - inf), silently."""
    x, dy = non_finite_bias_gradients(shape, dtype, torch.Generator().manual_seed(3))
    results = []
    for call in (ascend_acts.fused_bias_leaky_relu, composite):
        leaf = x.clone().requires_grad_()
        bias = torch.zeros(shape[1], dtype=dtype, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            call(leaf, bias, 0.2, math.sqrt(2.0)).backward(dy)
        results.append(bias.grad)
    ours, theirs = results
    assert theirs[0::8].isposinf().all() and theirs[1::8].isneginf().all() and theirs[3::8].isnan().all()
    assert theirs[6::8].isfinite().all() and theirs[7::8].isfinite().all()  # the cases are what they claim
    assert_same_bias_gradient(ours, theirs, dtype)


# --- 9. a failed call changes nothing, the RNG state included ---------------------------------------------------
def _failing_in_place_targets():
    leaf = torch.randn(4, requires_grad=True)
    with torch.inference_mode():
        inference = torch.randn(4)
    with torch.no_grad():
        no_grad_view = leaf[:2]
    return {"leaf requiring grad": leaf, "view of such a leaf": leaf.view(2, 2),
            "inference tensor outside inference mode": inference, "internal overlap": torch.randn(1).expand(4),
            "view made under no_grad": no_grad_view}


@pytest.mark.parametrize("with_generator", [False, True])
def test_failed_in_place_rrelu_leaves_rng_state(backend, with_generator):
    for name, target in _failing_in_place_targets().items():
        generator = torch.Generator().manual_seed(5) if with_generator else None
        state = torch.get_rng_state()
        generator_state = generator.get_state() if with_generator else None
        values = target.detach().clone()
        version = None if target.is_inference() else target._version
        with pytest.raises(RuntimeError):
            rrelu_train(target, inplace=True, generator=generator)
        assert torch.equal(torch.get_rng_state(), state), name
        if with_generator:
            assert torch.equal(generator.get_state(), generator_state), name
        assert torch.equal(target.detach(), values), name
        assert version is None or target._version == version, name
        # torch's type; torch itself draws (and, for the inference tensor, writes) before failing there
        with pytest.raises(RuntimeError):
            F.rrelu(target, training=True, inplace=True)


def test_failed_rrelu_on_a_dtype_the_backend_lacks_leaves_rng_state():
    if ascend_acts.backends.unavailable_reason("sim") is not None:
        pytest.skip("needs the sim backend (no float64)")
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(3, dtype=torch.float64)
    state, generator_state = torch.get_rng_state(), generator.get_state()
    with ascend_acts.use_backend("sim"):  # fails in the backend, after the seed was drawn
        for inplace in (False, True):
            with pytest.raises(TypeError, match="no float64"):
                rrelu_train(x, inplace=inplace)
            with pytest.raises(TypeError, match="no float64"):
                rrelu_train(x, inplace=inplace, generator=generator)
    assert torch.equal(torch.get_rng_state(), state) and torch.equal(generator.get_state(), generator_state)


# --- 10. meta tensors -----------------------------------------------------------------------------------------
def test_meta_tensors_as_torch(backend):
    x = torch.empty(3, 4, device="meta").t()  # non-contiguous: torch.empty_like's strides
    state = torch.get_rng_state()
    for ours, theirs in ((lambda t: ascend_acts.leaky_relu(t, 0.2), lambda t: F.leaky_relu(t, 0.2)),
                         (rrelu_train, lambda t: F.rrelu(t, training=True)),
                         (lambda t: rrelu_train(t, generator=torch.Generator("cpu")),
                          lambda t: torch.ops.aten.rrelu_with_noise(t, torch.empty_like(t), 0.125, 1 / 3, True,
                                                                    torch.Generator("cpu"))),
                         (lambda t: ascend_acts.rrelu(t), F.rrelu)):
        y, y2 = ours(x), theirs(x)
        assert (y.device, y.shape, y.dtype) == (y2.device, y2.shape, y2.dtype)
        # strides: torch's own CPU result's (rrelu's meta kernel keeps the input's strides, its CPU kernel returns a
        # contiguous tensor; ours is contiguous on every device, real and fake alike)
        assert y.stride() == theirs(torch.zeros(3, 4).t()).stride()
    torch.set_rng_state(state)  # the CPU calls above drew
    for ours in (lambda t: ascend_acts.leaky_relu(t, 0.2), rrelu_train, lambda t: ascend_acts.rrelu(t)):
        ours(x)
    assert torch.equal(torch.get_rng_state(), state)  # nothing drawn for meta, as torch
    target = torch.empty(3, device="meta")
    assert rrelu_train(target, inplace=True, generator=torch.Generator("cpu")) is target
    y = ascend_acts.fused_bias_leaky_relu(torch.empty(2, 3, 4, device="meta"), torch.empty(3, device="meta"))
    y2 = composite(torch.empty(2, 3, 4, device="meta"), torch.empty(3, device="meta"), 0.2, 2**0.5)
    assert (y.shape, y.dtype, y.stride()) == (y2.shape, y2.dtype, y2.stride())


def test_rrelu_bounds_whose_span_overflows_double_raise_as_torch(backend):
    if backend == "sim":
        pytest.skip("float64 only: float32 bounds cannot overflow a double span")
    x = torch.tensor([-1.0, 2.0], dtype=torch.float64)
    with pytest.raises(RuntimeError):
        F.rrelu(x, -1e308, 1e308, training=True)
    with pytest.raises(RuntimeError, match="upper - lower must be at most"):
        rrelu_train(x, -1e308, 1e308)
    assert torch.equal(ascend_acts.rrelu(x, -1e308, 1e308), F.rrelu(x, -1e308, 1e308))  # eval: no span


def test_rrelu_float32_span_beyond_float32_is_an_error_not_nan(backend):
    """Our noise is computed in float32 (docs/rng.md): a span beyond float32's range would make it NaN, where torch
    (drawing in double) gives finite values; a clear error instead. Eval reads only (lower + upper) / 2, as torch."""
    x = torch.tensor([-1.0, 0.0, 2.0])
    F.rrelu(x, -3e38, 3e38, training=True)  # torch: finite
    with pytest.raises(RuntimeError, match="upper - lower must be at most 3.40282e\\+38"):
        rrelu_train(x, -3e38, 3e38)
    assert torch.equal(ascend_acts.rrelu(x, -1e300, 1e300), F.rrelu(x, -1e300, 1e300))
    with pytest.raises(RuntimeError, match="without overflow"):  # training: each bound in float32, as torch
        F.rrelu(x, -1e300, 1e300, training=True)
    with pytest.raises(RuntimeError, match="without overflow"):
        rrelu_train(x, -1e300, 1e300)


def test_in_place_on_self_overlapping_windows_reads_before_it_writes(backend):
    """Where torch cannot prove the overlap (as_strided windows) its in-place result depends on the order its kernel
    visits the elements (some values are scaled more than once); ours reads every element before it writes any, so
    each location holds the activation of its original value once (docs/usage.md). torch's refusal of a provable
    overlap (expand) is ours too, and changes nothing."""
    base = torch.tensor([-1.0, -2.0, 3.0, -4.0, -5.0])
    window = base.as_strided((3, 3), (1, 1))
    assert torch._debug_has_internal_overlap(window) == 2  # "too hard": torch runs its kernel anyway
    ascend_acts.leaky_relu(window, 0.5, inplace=True)
    assert torch.equal(base, torch.tensor([-0.5, -1.0, 3.0, -2.0, -2.5]))  # each original value times 0.5 once
    expanded = torch.tensor([-1.0]).expand(3)
    for call in (lambda t: F.leaky_relu_(t, 0.5), lambda t: ascend_acts.leaky_relu(t, 0.5, inplace=True)):
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            call(expanded)
    assert torch.equal(expanded, torch.tensor([-1.0, -1.0, -1.0]))


@pytest.mark.parametrize("make_view", [lambda x: x.split(1)[0], lambda x: x.unbind()[0]], ids=["split", "unbind"])
@pytest.mark.parametrize("op", IN_PLACE)
def test_in_place_on_a_multi_output_view_is_refused_before_writing(backend, make_view, op):
    """torch refuses in-place on an output of split/unbind that requires grad, before it writes (found by the
    adversarial review: ours wrote, then failed)."""
    ours, theirs = IN_PLACE[op]
    for call in (theirs, ours):
        base = torch.tensor([[-1.0, 2.0], [-3.0, 4.0]], requires_grad=True) * 1
        state = torch.get_rng_state()
        with pytest.raises(RuntimeError, match="modified inplace"):
            call(make_view(base))
        assert torch.equal(base, torch.tensor([[-1.0, 2.0], [-3.0, 4.0]])) and base._version == 0
        assert torch.equal(state, torch.get_rng_state())


def test_nan_slope_in_place_backward_raises_as_torch(backend):
    """torch's result-based backward requires slope >= 0, which NaN is not."""
    for call in (lambda t: F.leaky_relu_(t, float("nan")), lambda t: ascend_acts.leaky_relu(t, float("nan"), True)):
        x = torch.tensor([-1.0, 2.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="negative slope"):
            call(x * 1).sum().backward()
    with pytest.raises(RuntimeError, match="negative slope"):
        ops.leaky_relu_backward(torch.ones(2), torch.ones(2), float("nan"), True)


@pytest.mark.parametrize("value", [2**70, -(2**70)])
def test_ints_beyond_a_torch_scalar_raise_overflow_error_as_torch(value):
    x = torch.randn(3)
    with pytest.raises(OverflowError):
        F.leaky_relu(x, value)
    with pytest.raises(OverflowError):
        ascend_acts.leaky_relu(x, value)
    with pytest.raises(OverflowError):
        ascend_acts.rrelu(x, value, value)


def test_fused_bias_scale_beyond_float32_is_silent_inf_as_torch(backend):
    x, bias = torch.randn(2, 3), torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ascend_acts.fused_bias_leaky_relu(x, bias, 0.2, 1e300)
    assert bits_equal(got, composite(x, bias, 0.2, 1e300))
