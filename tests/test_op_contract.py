"""The op contract: every op of the table (`op_table.TORCH_OPS`), on its sample calls (`op_samples.SAMPLES`), passes
torch.library.opcheck; compiles with fullgraph=True to what eager gives; passes gradcheck and gradgradcheck in
float64 (reference backend) and forward-mode AD where it has it; follows torch.autocast as torch's own functions
do; lays out results as its fake kernel and torch's composite do; saves for backward only what the memory design
says (README, "Memory"); refuses a bad argument by name, changing nothing; and gives on `sim` and `torch` what the
`reference` backend gives (bit for bit, or within the bound stated in BACKEND_BOUND).

Full sweeps run on the reference backend; the other backends run each op's representative (first) samples. The
fast subset runs each check on every op's representative sample (and the other backends in float32 only); the full
suite runs every sample, backend and dtype."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ascend_acts import op_table
from ascend_acts.backends import use_backend
from markers import slow
from op_samples import COMPOSITES, NON_DIFFERENTIABLE, SAMPLES, ops_without_samples

ops = torch.ops.ascend_acts
F64 = torch.float64
OP_NAMES = [op.name for op in op_table.TORCH_OPS]


def test_every_op_of_the_table_has_samples():
    assert not ops_without_samples()
    assert set(SAMPLES) == set(OP_NAMES)


def overload(name):
    return getattr(ops, name).default


def schema_arguments(name):
    return overload(name)._schema.arguments


def mutated(name, index):
    alias = schema_arguments(name)[index].alias_info
    return alias is not None and alias.is_write


def samples_of(name, dtype=torch.float32):
    with use_backend("reference"):  # a backward op's samples are what the reference forward returns
        return SAMPLES[name](dtype, "cpu")


def each_sample(dtype=torch.float32, ops_filter=lambda op: True):
    """(op name, sample index) parameters: the first sample of each op fast, the others slow."""
    params = []
    for op in op_table.TORCH_OPS:
        if not ops_filter(op):
            continue
        for index, sample in enumerate(samples_of(op.name, dtype)):
            params.append(pytest.param(op.name, index, id=f"{op.name}-{sample.name}",
                                       marks=() if index == 0 else slow))
    return params


def clone(t):
    """A copy with t's strides (clone() makes a non-dense tensor contiguous)."""
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)


def clone_args(args):
    return [clone(a) if isinstance(a, torch.Tensor) else a for a in args]


def call(name, args):
    """The op's results as a tuple; an in-place op's is its mutated `self`."""
    result = overload(name)(*args)
    if op_table.torch_op(name).inplace:
        return (args[0],)
    return result if isinstance(result, tuple) else (result,)


def differentiable_indices(name, args):
    return [i for i, (argument, value) in enumerate(zip(schema_arguments(name), args))
            if isinstance(value, torch.Tensor) and value.is_floating_point()
            and not (mutated(name, i) and not op_table.torch_op(name).inplace)
            and argument.name not in NON_DIFFERENTIABLE.get(name, ())]


def with_grad(name, args):
    """(args, leaves): the differentiable arguments replaced by leaves that require grad (an in-place op mutates a
    non-leaf copy of its leaf), the mutable others cloned."""
    args, leaves = clone_args(args), []
    for i in differentiable_indices(name, args):
        leaf = args[i].detach().requires_grad_()
        leaves.append(leaf)
        args[i] = leaf.clone() if mutated(name, i) else leaf
    return args, leaves


def as_function(name, args):
    """The op as a function of its differentiable arguments, for gradcheck: non-empty results only; the train
    backward's `saved`, `mean` and `invstd` recomputed by the forward from the differentiated tensors (the op
    reads them as the forward's results)."""
    indices = differentiable_indices(name, args)

    def fn(*tensors):
        full = clone_args(args)
        for i, t in zip(indices, tensors):
            full[i] = t.clone() if mutated(name, i) else t
        if name == "conv_bn_leaky_relu_train_backward":
            grad, _, saved_is_result, x, weight, bn_weight, bn_bias = full[:7]
            geometry, (slope, *options) = full[9:13], full[13:]  # options: relu, transposed, output_padding...
            # the forward's options: the backward's up to norm_groups, then (no recompute) its padding_mode (after
            # the backward's conv bias; its output_mask follows)
            options = (*options[:4], False, *options[5:6]) if len(options) > 5 else options[:4]
            out, conv_out, mean, invstd = ops.conv_bn_leaky_relu_train(x, weight, None, bn_weight, bn_bias, None, None,
                                                                       *geometry, 0.1, 1e-5, slope, saved_is_result,
                                                                       *options)
            full[1], full[7], full[8] = (out if saved_is_result else conv_out), mean, invstd
        return tuple(t for t in call(name, full) if t is not None and t.numel())

    return fn, [args[i].detach().clone().requires_grad_() for i in indices]


# --- opcheck and torch.compile ----------------------------------------------------------------------------------
# opcheck's AOT-dispatch trace takes seconds per call (up to 13 s for a fused block backward): every sample gets the
# other utilities, the representative sample (full suite) all of them
QUICK_OPCHECK = ("test_schema", "test_autograd_registration", "test_faketensor")


@pytest.mark.parametrize("name, index, full", [
    *[pytest.param(*p.values, False, id=p.id, marks=p.marks) for p in each_sample()],
    *[pytest.param(op.name, 0, True, id=f"{op.name}-aot-dispatch", marks=slow) for op in op_table.TORCH_OPS]])
def test_opcheck(name, index, full):
    sample = samples_of(name)[index]
    with use_backend("reference"):
        args, _ = with_grad(name, sample.args)
        torch.library.opcheck(overload(name), tuple(args), sample.kwargs,
                              test_utils="ALL" if full else QUICK_OPCHECK)


@slow
@pytest.mark.parametrize("name", OP_NAMES)
def test_compile_fullgraph_matches_eager(name):
    sample = samples_of(name)[0]
    torch._dynamo.reset()  # one code object compiled for every op: no recompile limit across the parameters
    compiled = torch.compile(lambda *a: call(name, list(a)), backend="aot_eager", fullgraph=True)
    with use_backend("reference"):
        want, got = call(name, clone_args(sample.args)), compiled(*clone_args(sample.args))
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


# --- derivatives ------------------------------------------------------------------------------------------------
def is_conv(op):
    return op.name.startswith("conv")


@pytest.mark.parametrize("name, index", [*each_sample(F64, lambda op: not is_conv(op)),
                                         *[pytest.param(*p.values, id=p.id, marks=slow)
                                           for p in each_sample(F64, is_conv)]])
def test_gradcheck_and_gradgradcheck_float64(name, index):
    """First and second order; a fused block backward op's first order is its forward's second (R1, WGAN-GP), its
    second order (third overall, seconds) is not checked. The fused block's checks take seconds: full suite only."""
    sample = samples_of(name, F64)[index]
    with use_backend("reference"):
        fn, inputs = as_function(name, sample.args)
        if not sample.args[0].numel():
            return  # an empty input has no derivatives (opcheck and the layout test run it)
        if name == "leaky_relu_" and sample.args[1] < 0:  # the output does not tell the input's sign: as torch's
            with pytest.raises(RuntimeError, match="negative slope"):
                torch.autograd.gradcheck(fn, inputs, fast_mode=True)
            return
        assert torch.autograd.gradcheck(fn, inputs, fast_mode=True)
        if "backward" not in name or not name.startswith("conv"):
            assert torch.autograd.gradgradcheck(fn, inputs, fast_mode=True)


@pytest.mark.parametrize("name", [name if not name.startswith("conv") else pytest.param(name, marks=slow)
                                  for name in OP_NAMES])
def test_forward_ad_float64(name):
    sample = next(s for s in samples_of(name, F64) if s.args[0].numel())
    with use_backend("reference"):
        fn, inputs = as_function(name, sample.args)
        if name == "conv_bn_leaky_relu_train":  # the output; the batch statistics are not given tangents
            fn = (lambda f: lambda *a: f(*a)[:1])(fn)
        assert torch.autograd.gradcheck(fn, inputs, check_forward_ad=True, check_backward_ad=False,
                                        check_undefined_grad=False, fast_mode=True)


# --- autocast ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", OP_NAMES)
def test_autocast_gives_torchs_dtypes(name):
    """Under CPU autocast (bfloat16) each result has the dtype torch's own functions give for the same float32
    call (the values under autocast: the op files' autocast tests)."""
    functional = op_table.torch_op(name).functional
    sample = samples_of(name)[0]
    with use_backend("reference"), torch.autocast("cpu", dtype=torch.bfloat16):
        ours = call(name, clone_args(sample.args))
        theirs = COMPOSITES[functional](*clone_args(sample.args))
    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
    for o, t in zip(ours, theirs):
        if t is not None and o.numel():
            assert o.dtype == t.dtype, (o.dtype, t.dtype)


# --- memory layout ----------------------------------------------------------------------------------------------
def metadata(results):
    return [(tuple(t.shape), t.dtype, t.stride() if t.numel() else None) for t in results if t is not None]


def layout_params():
    params = []
    for op in op_table.TORCH_OPS:
        for backend, dtype in op_table.valid_backend_dtypes(op):
            fast = (backend, dtype) == ("reference", "float64")
            params.append(pytest.param(op.name, backend, dtype, id=f"{op.name}-{backend}-{dtype}",
                                       marks=() if fast else slow))
    return params


@pytest.mark.parametrize("name, backend, dtype", layout_params())
def test_results_laid_out_as_the_fake_kernel_and_torch(name, backend, dtype):
    """Real results have the shape, dtype and strides the fake kernel promises (what torch.compile plans with) and
    the strides torch's own functions give (empty results' strides carry no data and are not compared)."""
    functional = op_table.torch_op(name).functional
    for sample in samples_of(name, getattr(torch, dtype)):
        with use_backend(backend):
            real = call(name, clone_args(sample.args))
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake_args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in sample.args]
            fake = call(name, fake_args)
        assert metadata(real) == metadata(fake), sample.name
        if op_table.torch_op(name).inplace:
            continue  # the result is `self`, in its own layout
        theirs = COMPOSITES[functional](*clone_args(sample.args))
        theirs = theirs if isinstance(theirs, tuple) else (theirs,)
        for ours, torchs in zip(real, theirs):
            if torchs is not None and ours.numel() and ours.dim() == torchs.dim() > 1:
                assert ours.stride() == torchs.stride(), (sample.name, ours.stride(), torchs.stride())


# --- what autograd saves ----------------------------------------------------------------------------------------
def expected_saved(name, args, results):
    """What README's memory table says the op keeps for backward: the output where it tells the input's sign (slope
    >= 0; the fused bias op also needs scale >= 1), else the input (and the bias); RReLU its 8-byte seed too (an
    in-place one with a negative lower bound its input's signs as bits); the fused block (InPlace-ABN) its inputs,
    O(C) statistics and one of the BN output and the conv output, never both. The backward ops' own derivatives
    are torch composites (not listed)."""
    out = results[0]
    if name in ("leaky_relu", "leaky_relu_"):
        return [out if args[1] >= 0 or name.endswith("_") else args[0]]
    if name in ("rrelu", "rrelu_"):
        x, seed, lower, _ = args
        if lower >= 0:
            return [out, seed]
        return [x, seed] if name == "rrelu" else [("bits", (x.numel() + 7) // 8), seed]
    if name == "fused_bias_leaky_relu":
        x, bias, slope, scale, clamp, relu = (*args, -1.0, False)[:6]
        # a clamped output does not tell the bound from beyond it: the input then
        tells_sign = (relu or slope >= 0) and scale >= 1 and clamp < 0
        return [out] if tells_sign else [x] + ([bias] if bias is not None else [])
    if name == "conv_bn_leaky_relu_train":
        # recompute: no conv output, the conv bias instead (to recompute it); a padding_mode keeps the unpadded input
        x, weight, bias, bn_weight, bn_bias = args[:5]
        save_output, relu = args[14:16]
        norm_groups, recompute = (*args[18:20], 0, False)[:2] if len(args) > 18 else (0, False)
        assert not (relu and save_output), "relu is not invertible: the conv output must be kept"
        kept = [] if recompute else [out if save_output else results[1]]
        # a conv bias that shifts group statistics is kept to differentiate: a copy of its values (an in-place change
        # of the bias before the backward is no error, as torch's convolution keeps no bias)
        shifts = 0 < norm_groups < out.shape[1]
        kept_bias = [("copy", bias)] if bias is not None and (recompute or shifts) else []
        # recompute reads the conv weight and bias as the forward used them: copies of them
        snapshot = [("copy", t) for t in (weight, bias) if t is not None] if recompute else []
        return [*kept, x, weight, bn_weight, bn_bias, results[2], results[3], *kept_bias, *snapshot]
    if name == "conv_bn_leaky_relu_eval":  # and the affine (O(C)); the biases as copies, as torch keeps none
        bn_weight, bn_bias = (*args[12:14], None, None)[:2]
        return [*args[:2], ("copy", args[2]), *([bn_weight] if bn_weight is not None else []),
                *([("copy", bn_bias)] if bn_bias is not None else [])]
    return None


@pytest.mark.parametrize("name, index", each_sample(ops_filter=lambda op: "backward" not in op.name))
def test_autograd_saves_what_the_memory_design_says(name, index):
    sample = samples_of(name)[index]
    with use_backend("reference"):
        args, _ = with_grad(name, sample.args)
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
            results = call(name, args)
    expected = expected_saved(name, args, results)

    def same(t, e):
        if isinstance(e, tuple) and e[0] == "copy":  # a copy of a tensor, not the tensor itself
            return torch.equal(t, e[1].detach()) and t.data_ptr() != e[1].data_ptr()
        if isinstance(e, tuple):  # ("bits", bytes)
            return t.dtype == torch.uint8 and t.numel() == e[1]
        return t.shape == e.shape and t.dtype == e.dtype and t.data_ptr() == e.data_ptr()

    assert len(saved) == len(expected), [tuple(t.shape) for t in saved]
    for t, e in zip(saved, expected):
        assert same(t, e), (tuple(t.shape), e if isinstance(e, tuple) else tuple(e.shape))


# --- bad input --------------------------------------------------------------------------------------------------
SHAPED_LIKE_ANOTHER = {"grad_output", "grad_out", "saved"}


def bad_calls():
    """(op, argument, how, bad value maker): an integer tensor for every floating argument; a floating argument in
    another dtype than the one that sets it; a per-channel or gradient tensor of the wrong shape."""
    params = []
    for op in op_table.TORCH_OPS:
        args = samples_of(op.name)[0].args
        first = next(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
        for i, (argument, value) in enumerate(zip(schema_arguments(op.name), args)):
            if not (isinstance(value, torch.Tensor) and value.is_floating_point()):
                continue
            cases = [("int64", lambda t: t.long())]
            if i != first and not (op.name.startswith("conv") and argument.name == "input"):
                cases.append(("float16", lambda t: t.half()))
            if value.dim() == 1 or argument.name in SHAPED_LIKE_ANOTHER:
                cases.append(("shape", lambda t: t[..., :-1]))
            for how, make in cases:
                for backend in op.backends:
                    # one validation for every backend: the others in the full suite
                    marks = [] if backend == "reference" else [slow]
                    params.append(pytest.param(op.name, i, make, backend, marks=marks,
                                               id=f"{op.name}-{argument.name}-{how}-{backend}"))
    return params


@pytest.mark.parametrize("name, index, make_bad, backend", bad_calls())
def test_bad_argument_is_refused_by_name_and_changes_nothing(name, index, make_bad, backend):
    args = clone_args(samples_of(name)[0].args)
    args[index] = make_bad(args[index])
    argument_names = [a.name for a in schema_arguments(name)]
    before = [(a.clone(), a._version) if isinstance(a, torch.Tensor) else None for a in args]
    rng = torch.get_rng_state()
    with use_backend(backend), pytest.raises(RuntimeError) as error:  # TypeError too: see below
        try:
            overload(name)(*args)
        except TypeError as type_error:  # torch's own type for an integer conv input
            raise RuntimeError(str(type_error)) from type_error
    message = str(error.value)
    assert any(argument in message for argument in argument_names), message
    for a, b in zip(args, before):
        if b is not None:
            assert a._version == b[1] and torch.equal(a, b[0])
    assert torch.equal(torch.get_rng_state(), rng)


# --- backends ---------------------------------------------------------------------------------------------------
# Largest difference from the reference allowed, in units of the dtype's eps times the largest magnitude among the
# op's results; 0: bit for bit. The fused block rounds its float32 convolution and statistics differently (NumPy,
# torch, the emulated cube); grad_bias is a compensated float32 sum on sim, float32 on torch, float64 on reference.
BACKEND_BOUND = {"fused_bias_leaky_relu_backward": 1.0, "conv_bn_leaky_relu_train": 16.0,
                 "conv_bn_leaky_relu_train_backward": 16.0, "conv_bn_leaky_relu_eval": 16.0,
                 "conv_bn_leaky_relu_eval_backward": 16.0}


def backend_params():
    params = []
    for op in op_table.TORCH_OPS:
        for backend, dtype in op_table.valid_backend_dtypes(op):
            if backend != "reference":
                params.append(pytest.param(op.name, backend, dtype, id=f"{op.name}-{backend}-{dtype}",
                                           marks=() if dtype == "float32" else slow))
    return params


@pytest.mark.parametrize("name, backend, dtype", backend_params())
def test_backend_matches_the_reference(name, backend, dtype):
    dtype = getattr(torch, dtype)
    bound = BACKEND_BOUND.get(name, 0.0)
    samples = samples_of(name, dtype)
    for sample in [*samples[:2], *(s for s in samples[2:]
                                   if s.name.startswith(("transposed", "norm-groups", "padding")))]:
        with use_backend("reference"):
            want = call(name, clone_args(sample.args))
        with use_backend(backend):
            got = call(name, clone_args(sample.args))
        scale = max(float(w.double().abs().max()) for w in want if w is not None and w.numel())
        for g, w in zip(got, want):
            if w is None:
                assert g is None
                continue
            assert g.shape == w.shape and g.dtype == w.dtype
            if bound == 0.0:
                assert torch.equal(g, w), (sample.name, (g.double() - w.double()).abs().max())
            else:
                error = float((g.double() - w.double()).abs().max()) if w.numel() else 0.0
                assert error <= bound * torch.finfo(dtype).eps * scale, (sample.name, error, scale)
