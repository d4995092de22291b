"""Public API: argument errors, backends, convert, pickling."""

import io
import pickle

import pytest
import torch

import ascend_acts


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.complex64])
def test_non_floating_input_rejected(dtype):
    """torch's error type (NotImplementedError: no kernel for the dtype), with the argument named."""
    x = torch.zeros(3, dtype=dtype)
    with pytest.raises(NotImplementedError):
        torch.nn.functional.leaky_relu(x)
    with pytest.raises(NotImplementedError, match="'input' must be a floating-point tensor"):
        ascend_acts.leaky_relu(x)
    with pytest.raises(NotImplementedError, match="'input' must be a floating-point tensor"):
        ascend_acts.rrelu(x, training=True)
    with pytest.raises(NotImplementedError, match="'input' must be a floating-point tensor"):
        ascend_acts.fused_bias_leaky_relu(x.reshape(1, 3), None)


@pytest.mark.parametrize("fn", [ascend_acts.leaky_relu, ascend_acts.rrelu, ascend_acts.fused_bias_leaky_relu])
def test_non_tensor_input_rejected(fn):
    with pytest.raises(TypeError, match="'input' must be a torch.Tensor, got list"):
        fn([1.0, -1.0])


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("training", [False, True])
def test_bad_bounds_rejected_and_input_intact(training, inplace):
    x = torch.randn(10)
    before = x.clone()
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal to the upper bound"):
        torch.nn.functional.rrelu(x.clone(), 0.5, 0.1, training=training, inplace=inplace)
    with pytest.raises(RuntimeError, match="upper bound \\(argument 'lower' 0.5 is greater than 'upper' 0.1\\)"):
        ascend_acts.rrelu(x, 0.5, 0.1, training=training, inplace=inplace)
    for bad in (float("nan"), float("inf"), -float("inf")):
        # torch's type: RuntimeError (its in-place eval rrelu_ skips the check and takes an infinite slope; ours
        # raises for every variant)
        with pytest.raises(RuntimeError, match="upper bound must be finite"):
            torch.nn.functional.rrelu(x.clone(), 0.1, bad, training=training)
        with pytest.raises(RuntimeError, match="'upper' must be finite"):
            ascend_acts.rrelu(x, 0.1, bad, training=training, inplace=inplace)
        with pytest.raises(RuntimeError, match="'lower' must be finite"):
            ascend_acts.rrelu(x, bad, 0.1, training=training, inplace=inplace)
    assert torch.equal(x, before)


def test_bad_scalar_types_rejected():
    x = torch.randn(3)
    with pytest.raises(TypeError, match="'negative_slope' must be a real number, got str"):
        ascend_acts.leaky_relu(x, "0.1")
    with pytest.raises(TypeError, match="'training' must be a bool"):
        ascend_acts.rrelu(x, training="yes")
    with pytest.raises(TypeError, match="must be bool"):  # torch's rrelu takes a bool only (its `inplace`: any truthy)
        torch.nn.functional.rrelu(x, training="yes")


def test_generator_not_a_generator_rejected_and_input_intact():
    y = torch.randn(4)
    before = y.clone()
    with pytest.raises(TypeError, match="'generator' must be a torch.Generator"):
        ascend_acts.rrelu(y, training=True, inplace=True, generator=42)
    assert torch.equal(y, before)


def test_backend_selection():
    assert "reference" in ascend_acts.available_backends()
    with ascend_acts.use_backend("reference") as selected:
        assert ascend_acts.backends.current_backend_name() == "reference" == selected.name
    with pytest.raises(RuntimeError, match="backend 'nope' is not available: unknown backend"):
        ascend_acts.use_backend("nope")


def test_plain_use_backend_call_persists_until_changed():
    previous = ascend_acts.backends.current_backend_name()
    ascend_acts.use_backend("reference")
    try:
        assert ascend_acts.backends.current_backend_name() == "reference"
    finally:
        ascend_acts.use_backend(previous)


def test_convert_replaces_exact_torch_activations_only():
    class MyLeaky(torch.nn.LeakyReLU):
        pass

    model = torch.nn.Sequential(
        torch.nn.Linear(4, 4), torch.nn.LeakyReLU(0.2, inplace=True),
        torch.nn.Sequential(torch.nn.RReLU(0.1, 0.2), MyLeaky(0.3)), torch.nn.ReLU(),
    ).eval()
    x = torch.randn(5, 4)
    expected = model(x)
    weight = model[0].weight
    out = ascend_acts.convert(model)
    assert out is model and model[0].weight is weight
    assert type(model[1]) is ascend_acts.nn.LeakyReLU and model[1].negative_slope == 0.2 and model[1].inplace
    assert type(model[2][0]) is ascend_acts.nn.RReLU and (model[2][0].lower, model[2][0].upper) == (0.1, 0.2)
    assert type(model[2][1]) is MyLeaky and type(model[3]) is torch.nn.ReLU
    assert not model[2][0].training
    torch.testing.assert_close(model(x), expected, rtol=0, atol=0)


def test_convert_root_module_and_bad_argument():
    assert type(ascend_acts.convert(torch.nn.LeakyReLU())) is ascend_acts.nn.LeakyReLU
    with pytest.raises(TypeError, match="'model' must be a torch.nn.Module"):
        ascend_acts.convert("model")


@pytest.mark.parametrize("module", [ascend_acts.nn.LeakyReLU(0.3, True), ascend_acts.nn.RReLU(0.2, 0.4),
                                    ascend_acts.nn.FusedLeakyReLU(3, negative_slope=0.1)])
def test_modules_pickle_and_state_dict(module):
    clone = pickle.loads(pickle.dumps(module))
    assert type(clone) is type(module) and clone.extra_repr() == module.extra_repr()
    buffer = io.BytesIO()
    torch.save(module, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert loaded.extra_repr() == module.extra_repr()
    assert isinstance(module, (torch.nn.LeakyReLU, torch.nn.RReLU, ascend_acts.nn.FusedLeakyReLU))
    assert loaded.state_dict().keys() == module.state_dict().keys()
