"""The op table is the one list of ops: every op of op_table.TORCH_OPS is registered with its schema and every
kernel (CPU, NPU, fake, autograd), nothing else is in the namespace, and every backend implements the table's
functional ops under the backend protocol (a function of the op's name with the schema's arguments)."""

import inspect

import pytest
import torch

import ascend_acts  # noqa: F401  (registers the ops)
from ascend_acts import backends, op_table
from ascend_acts.backends import npu
from ascend_acts.ops._kernels import backend_functions
from ascend_acts.ops._semantics import SEMANTICS

KEYS = ("CPU", "PrivateUse1", "Meta", "Autograd")  # Meta: the fake kernel


@pytest.mark.parametrize("op", op_table.TORCH_OPS, ids=lambda op: op.name)
def test_every_table_op_has_its_schema_and_every_kernel(op):
    overload = getattr(torch.ops.ascend_acts, op.name).default
    assert str(overload._schema) == op.qualified_name + op.schema
    missing = [key for key in KEYS if not torch._C._dispatch_has_kernel_for_dispatch_key(op.qualified_name, key)]
    assert not missing, f"{op.name} has no {missing} kernel"
    assert npu.has_npu_kernel(op.name)
    assert torch._library.simple_registry.singleton.find(op.qualified_name).fake_impl.kernel is not None


def test_the_namespace_holds_the_table_ops_only():
    registered = {name for name in torch._C._dispatch_get_all_op_names() if name.startswith("ascend_acts::")}
    assert registered == {op.qualified_name for op in op_table.TORCH_OPS}
    assert set(SEMANTICS) == {op.name for op in op_table.TORCH_OPS}


def test_the_backend_registry_is_the_tables():
    assert set(backends.known_backends()) == set(op_table.BACKEND_DTYPES)


def _schema_arguments(op):
    return [argument.name for argument in getattr(torch.ops.ascend_acts, op.name).default._schema.arguments]


@pytest.mark.parametrize("name", op_table.BACKEND_DTYPES)
def test_every_backend_implements_its_table_ops_under_the_protocol(name):
    if backends.unavailable_reason(name) is not None:
        pytest.skip(backends.unavailable_reason(name))
    module = backend_functions(name)
    for op in op_table.functional_ops():
        if name not in op.backends:
            continue
        function = getattr(module, op.name, None)
        assert callable(function), f"backend {name!r} has no {op.name}"
        parameters = inspect.signature(function).parameters
        positional = [p.name for p in parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
        # schema order (the sim bridge's array API takes one more positional argument until the sim package)
        assert len(positional) >= len(_schema_arguments(op)), (name, op.name, positional)
        has_out = "out" in parameters and parameters["out"].kind is inspect.Parameter.KEYWORD_ONLY
        assert has_out == any(other.inplace and other.functional == op.name for other in op_table.TORCH_OPS), \
            (name, op.name)
