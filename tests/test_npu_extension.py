"""The torch_npu extension (python/ascend_acts/csrc/npu_ops.cpp + acts_aclnn.h): compiled (syntax only) against
the headers of the torch-npu wheel released for the installed torch, our aclnn declarations compiled together
with CANN 8.1's (when an extracted toolkit is here), and its text checked against the other definitions: it
registers PrivateUse1 kernels for exactly the ops ascend_acts.npu has NPU kernels for, with C++ signatures
matching the torch.library schemas; it declares the aclnn API of each OpDef (op_host/ via the msopgen JSONs) by
the documented generation rule; and each kernel calls the aclnn op of its OpDef with the inputs, the attributes
and the outputs in the declared order (for the elementwise ops: the attributes are the schema's float arguments
and the one output is `out`). Linking and running it needs CANN and an NPU (docs/npu.md)."""

import copy
import json
import re
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension

from ascend_acts import npu
from real_toolchain import cann_toolkit, torch_npu_headers
from test_npu_definitions import OPS, SPEC

ROOT = Path(__file__).resolve().parents[1]
CSRC = ROOT / "python/ascend_acts/csrc"
# the extension's text: our aclnn declarations, then the kernels
SOURCE = (CSRC / "acts_aclnn.h").read_text() + (CSRC / "npu_ops.cpp").read_text()
TORCH_OP = {cann_op: torch_op for cann_op, (_, _, torch_op, _) in OPS.items()}
# every op family's msopgen JSON
SPECS = SPEC + json.loads((ROOT / "op_host/json/acts_conv_bn.json").read_text())
# torch op -> the aclnn op its NPU kernel calls (None: torch_npu's ops only)
CALLS = {**{torch_op: cann_op for cann_op, torch_op in TORCH_OP.items()},
         "conv_bn_leaky_relu_train": "ActsBatchNormLeakyRelu",
         "conv_bn_leaky_relu_train_backward": "ActsBatchNormLeakyReluGrad",
         "conv_bias_leaky_relu": "ActsConvBnLeakyReluEval", "conv_bias_leaky_relu_backward": None}


def cpp_type(argument) -> str:
    kind = argument.type
    if isinstance(kind, torch.TensorType):
        writes = argument.alias_info is not None and argument.alias_info.is_write
        return "at::Tensor&" if writes else "const at::Tensor&"
    if isinstance(kind, torch.OptionalType) and isinstance(kind.getElementType(), torch.TensorType):
        return "const std::optional<at::Tensor>&"
    if isinstance(kind, torch.ListType) and kind.getElementType().kind() == "IntType":
        return "at::IntArrayRef"
    return {"FloatType": "double", "BoolType": "bool", "IntType": "int64_t"}[kind.kind()]


def cpp_return(schema) -> str:
    count = len(schema.returns)
    return "void" if count == 0 else "at::Tensor" if count == 1 else f"std::tuple<{', '.join(['at::Tensor'] * count)}>"


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def params(text: str) -> list[tuple[str, str]]:
    """'const at::Tensor& self, double x' -> [('const at::Tensor&', 'self'), ('double', 'x')]"""
    pairs = [re.match(r"(.+?)\s*\b(\w+)$", " ".join(p.split())).groups() for p in text.split(",") if p.strip()]
    return [(kind.replace(" *", "*").replace(" &", "&"), name) for kind, name in pairs]


def in_place(entry: dict) -> set[str]:
    """Names that are both an input and an output: one tensor updated in place."""
    return {d["name"] for d in entry["input_desc"]} & {d["name"] for d in entry["output_desc"]}


def aclnn_params(entry: dict) -> list[tuple[str, str]]:
    """The documented generation rule: inputs (an in-place one as a non-const `<name>Ref`), attributes (float
    as double, bool, int lists as aclIntArray, lowerCamelCase), then the other outputs, one as `out` or
    several as `<output>Out`, then workspace size and executor."""
    attr_type = {"float": "double", "bool": "bool", "list_int": "const aclIntArray*"}
    refs = in_place(entry)
    outputs = [d for d in entry["output_desc"] if d["name"] not in refs]
    return ([("aclTensor*", camel(d["name"]) + "Ref") if d["name"] in refs else ("const aclTensor*", d["name"])
             for d in entry["input_desc"]]
            + [(attr_type[a["type"]], camel(a["name"])) for a in entry["attr"]]
            + ([("aclTensor*", "out")] if len(outputs) == 1 else [("aclTensor*", camel(d["name"]) + "Out")
                                                                   for d in outputs])
            + [("uint64_t*", "workspaceSize"), ("aclOpExecutor**", "executor")])


def check(source: str, spec: list) -> None:
    """Raises AssertionError where the extension's text disagrees with the op definitions."""
    impl = re.search(r"TORCH_LIBRARY_IMPL\((\w+), (\w+), m\) \{(.*?)\n\}", source, re.S)
    assert impl and impl.group(1) == "ascend_acts" and impl.group(2) == "PrivateUse1"
    registered = re.findall(r'm\.impl\("(\w+)", TORCH_FN\((\w+)\)\);', impl.group(3))
    assert sorted(op for op, _ in registered) == sorted(npu.KERNELS)
    functions = {name: (returns, params(args), body) for returns, name, args, body in re.findall(
        r"^(at::Tensor|void|std::tuple<[^>]*>) (\w+)\(([^)]*)\) \{\n(.*?)^\}", source, re.S | re.M)}
    kernel_of = dict(registered)

    # the aclnn API, declared by the generation rule from each OpDef (via the msopgen JSON)
    flat = " ".join(source.split())
    declared = {op: params(args)
                for op, args in re.findall(r"aclnnStatus aclnn(\w+)GetWorkspaceSize\(([^)]*)\);", flat)}
    launched = re.findall(r"aclnnStatus aclnn(\w+)\(void\* workspace, uint64_t workspaceSize, "
                          r"aclOpExecutor\* executor, aclrtStream stream\);", flat)
    assert sorted(declared) == sorted(launched) == sorted(entry["op"] for entry in spec)
    for entry in spec:
        assert declared[entry["op"]] == aclnn_params(entry), entry["op"]

    for op, name in registered:
        schema = getattr(torch.ops.ascend_acts, op).default._schema
        returns, signature, body = functions[name]
        assert signature == [(cpp_type(a), a.name) for a in schema.arguments], op
        assert returns == cpp_return(schema), op
        if not schema.returns:  # in-place: torch's overlap check, then the out-of-place kernel's result
            assert "at::assert_no_internal_overlap(self);" in body and f"self.copy_({kernel_of[op[:-1]]}(self" in body
            continue
        calls = re.findall(r"ACTS_ACLNN\((\w+), (\w+), ([^;]*)\);", body)
        if CALLS[op] is None:  # torch_npu's ops only
            assert not calls, op
            continue
        assert len(calls) == 1, op
        cann_op, _, args = calls[0]
        assert cann_op == CALLS[op], (op, cann_op)
        entry = next(e for e in spec if e["op"] == cann_op)
        args = [a.strip() for a in args.split(",")]
        tensors = [a for a in args if a.endswith("_acl.get()")]
        attrs = [a for a in args if not a.endswith("_acl.get()")]
        inputs, outputs = len(entry["input_desc"]), len(entry["output_desc"]) - len(in_place(entry))
        assert len(tensors) == inputs + outputs and len(attrs) == len(entry["attr"]), op
        assert args == tensors[:inputs] + attrs + tensors[inputs:], op  # inputs, attributes, outputs: declared order
        if cann_op in TORCH_OP:  # elementwise: the attributes are the schema's float arguments, one output
            assert tensors[-1] == "out_acl.get()", op
            assert attrs == [a.name for a in schema.arguments if a.type.kind() == "FloatType"] \
                == [a["name"] for a in entry["attr"]], op
        if op == "conv_bn_leaky_relu_train":  # the kernel updates the running statistics, as the schema says
            assert attrs == ["negative_slope", "eps", "momentum", "update"], op


def test_extension_matches_the_op_definitions():
    check(SOURCE, SPECS)


MUTATIONS = {
    "register one op less": ('    m.impl("rrelu_with_seed_", TORCH_FN(RReluInplace));\n', ""),
    "wrong dispatch key": ("TORCH_LIBRARY_IMPL(ascend_acts, PrivateUse1, m)",
                           "TORCH_LIBRARY_IMPL(ascend_acts, CPU, m)"),
    "float instead of double": ("at::Tensor LeakyRelu(const at::Tensor& self, double negative_slope)",
                                "at::Tensor LeakyRelu(const at::Tensor& self, float negative_slope)"),
    "in-place takes a const tensor": ("void RReluInplace(at::Tensor& self,",
                                      "void RReluInplace(const at::Tensor& self,"),
    "attributes swapped in a declaration": ("const aclTensor* seed, double lower, double upper,\n",
                                            "const aclTensor* seed, double upper, double lower,\n"),
    "attributes swapped in a call": ("ACTS_ACLNN(ActsRRelu, x, x_acl.get(), seed_acl.get(), lower, upper,",
                                     "ACTS_ACLNN(ActsRRelu, x, x_acl.get(), seed_acl.get(), upper, lower,"),
    "an input missing in a call": ("ACTS_ACLNN(ActsRReluGrad, saved, dy_acl.get(), saved_acl.get(), seed_acl.get(),",
                                   "ACTS_ACLNN(ActsRReluGrad, saved, dy_acl.get(), saved_acl.get(),"),
    "the wrong aclnn op": ("ACTS_ACLNN(ActsLeakyRelu, x,", "ACTS_ACLNN(ActsLeakyReluGrad, x,"),
    "a fused kernel calls the wrong aclnn op": ("ACTS_ACLNN(ActsBatchNormLeakyReluGrad, y,",
                                                "ACTS_ACLNN(ActsBatchNormLeakyRelu, y,"),
    "an attribute missing in a fused call": ("dilations.get(), negative_slope, out_acl.get());",
                                             "dilations.get(), out_acl.get());"),
    "int instead of int64_t": ("int64_t groups, double momentum, double eps, double negative_slope, bool save_output)",
                               "int groups, double momentum, double eps, double negative_slope, bool save_output)"),
    "running statistics not updated by the training kernel": ("negative_slope, eps, momentum, update, out_acl.get()",
                                                               "negative_slope, eps, 0.0, false, out_acl.get()"),
    "outputs not named by the rule": ("aclTensor* dxOut, aclTensor* gradWeightOut,",
                                      "aclTensor* dx, aclTensor* gradWeightOut,"),
    "in-place without the overlap check": ("void LeakyReluInplace(at::Tensor& self, double negative_slope) {\n"
                                           "    at::assert_no_internal_overlap(self);\n",
                                           "void LeakyReluInplace(at::Tensor& self, double negative_slope) {\n"),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_disagreement_is_detected(mutation):
    old, new = MUTATIONS[mutation]
    assert SOURCE.count(old) == 1
    with pytest.raises(AssertionError):
        check(SOURCE.replace(old, new), SPECS)


def test_a_changed_opdef_is_detected():
    spec = copy.deepcopy(SPECS)
    next(e for e in spec if e["op"] == "ActsRRelu")["attr"].reverse()
    with pytest.raises(AssertionError):
        check(SOURCE, spec)


def test_the_file_says_it_was_never_linked_or_run():
    assert "COMPILED, NEVER LINKED OR RUN" in (CSRC / "npu_ops.cpp").read_text().split("#include")[0]


@pytest.mark.slow
def test_extension_compiles_against_the_torch_npu_wheel_headers():
    """The whole extension against torch's headers and the wheel's (torch_npu/include and its bundled acl/), as
    setup.py would build it (C++20, torch's ABI flag) minus CANN: the aclnn declarations come from acts_aclnn.h."""
    wheel = torch_npu_headers() / "torch_npu/include"
    command = ["g++", "-std=c++20", "-fsyntax-only", "-w", "-DTORCH_EXTENSION_NAME=_npu_ops",
               "-DTORCH_API_INCLUDE_EXTENSION_H", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
               *(f"-I{path}" for path in torch.utils.cpp_extension.include_paths()),
               f"-I{sysconfig.get_paths()['include']}", f"-I{wheel}", f"-I{wheel / 'third_party/acl/inc'}",
               str(CSRC / "npu_ops.cpp")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]


def compile_with_cann_declarations(toolkit: Path, header: str) -> subprocess.CompletedProcess:
    """Compiles `header` (our acts_aclnn.h, or an altered copy) with CANN 8.1's aclnn/acl_meta.h before and after
    it: C++ rejects an extern "C" function or typedef declared twice with different types."""
    include = toolkit / "aarch64-linux/include"
    results = []
    for first, second in [("aclnn/acl_meta.h", "acts_aclnn.h"), ("acts_aclnn.h", "aclnn/acl_meta.h")]:
        unit = f'#include "{first}"\n#include "{second}"\n'
        results.append(subprocess.run(
            ["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", "-", f"-I{header.parent}", f"-I{include}"],
            input=unit, capture_output=True, text=True, timeout=120))
    return next((r for r in results if r.returncode != 0), results[0])


@pytest.mark.slow
def test_our_aclnn_declarations_agree_with_cann_8_1(tmp_path):
    toolkit = cann_toolkit()
    result = compile_with_cann_declarations(toolkit, CSRC / "acts_aclnn.h")
    assert result.returncode == 0, result.stderr[-4000:]
    # an altered declaration is caught
    altered = tmp_path / "acts_aclnn.h"
    text = (CSRC / "acts_aclnn.h").read_text()
    for old, new in [("aclnnStatus aclDestroyTensor(const aclTensor* tensor);",
                      "aclnnStatus aclDestroyTensor(aclTensor* tensor);"),
                     ("typedef int32_t aclnnStatus;", "typedef int64_t aclnnStatus;"),
                     ("aclIntArray* aclCreateIntArray(const int64_t* value, uint64_t size);",
                      "aclIntArray* aclCreateIntArray(const int64_t* value, uint32_t size);")]:
        assert text.count(old) == 1
        altered.write_text(text.replace(old, new))
        assert compile_with_cann_declarations(toolkit, altered).returncode != 0, new
