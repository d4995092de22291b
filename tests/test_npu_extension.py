"""The torch_npu extension (python/ascend_acts/csrc/): compiled (syntax only) against the headers of the torch-npu
wheel released for the installed torch, our aclnn declarations compiled together with CANN 8.1's (when an extracted
toolkit is here), and what of it is hand-written checked against the op table. The private ops' schemas and
registrations, each kernel function's declaration from its schema and the aclnn declarations are generated from the
table (scripts/generate_op_files.py; tests/test_generated_files.py checks they are current), so the compile rejects
a kernel whose signature differs from its schema. Checked here: the private ops are the functional ops with the
public schemas; each kernel calls the aclnn op of the table kernel its torch op runs on the NPU, with the inputs,
the attributes and the outputs in the declared order (for the elementwise ops: the attributes are the schema's float
arguments and the one output is `out`); and the kernels raise only the device's own errors, the op layer having
validated the call. Linking and running it needs CANN and an NPU (docs/npu.md)."""

import re
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch
import torch.utils.cpp_extension

from ascend_acts import op_table
from real_toolchain import cann_toolkit, torch_npu_headers

ROOT = Path(__file__).resolve().parents[1]
CSRC = ROOT / "python/ascend_acts/csrc"
SOURCE = (CSRC / "npu_ops.cpp").read_text()  # the hand-written kernels
REGISTRATIONS = (CSRC / "npu_registrations.inc").read_text()
FUNCTIONAL_OPS = [op for op in op_table.TORCH_OPS if not op.inplace]  # the op layer runs `X_` as X(..., out=self)


def schema(op) -> torch.FunctionSchema:
    return torch._C.parse_schema(op.qualified_name + op.schema)


def check(source: str) -> None:
    """Raises AssertionError where the extension's kernels disagree with the op table."""
    bodies = {name: body for name, body in re.findall(
        r"^(?:at::Tensor|void|std::tuple<[^>]*>) (\w+)\([^)]*\) \{\n(.*?)^\}", source, re.S | re.M)}
    for op in FUNCTIONAL_OPS:
        assert op.npu_function in bodies, f"{op.name}: no kernel {op.npu_function} in npu_ops.cpp"
        body = bodies[op.npu_function]
        calls = re.findall(r"ACTS_ACLNN\((\w+), (\w+), ([^;]*)\);", body)
        kernels = [op_table.kernel(base) for base in op.npu_kernels]
        assert [op_type for op_type, _, _ in calls] == [k.op_type for k in kernels], op.name
        for (_, _, args), kernel in zip(calls, kernels):
            args = [a.strip() for a in args.split(",")]
            tensors = [a for a in args if a.endswith("_acl.get()")]
            attrs = [a for a in args if not a.endswith("_acl.get()")]
            inputs = len(kernel.inputs)
            outputs = len([t for t in kernel.outputs if t.name not in kernel.inplace])
            assert len(tensors) == inputs + outputs and len(attrs) == len(kernel.attrs), op.name
            assert args == tensors[:inputs] + attrs + tensors[inputs:], op.name  # inputs, attributes, outputs
            if kernel.family == "elementwise":  # the attributes are the schema's float arguments, one output
                assert tensors[-1] == "out_acl.get()", op.name
                floats = [a.name for a in schema(op).arguments if a.type.kind() == "FloatType"]
                assert attrs == floats == [a.name for a in kernel.attrs], op.name
            if kernel.family == "fused_bias_leaky_relu":  # the attributes by name, the optional bias in its place
                assert attrs == [a.name for a in kernel.attrs] and tensors[2 if kernel.outputs[1:] else 1] == \
                    "bias_acl.get()", op.name
            if op.name == "conv_bn_leaky_relu_train":  # the kernel updates the running statistics, as the schema says
                assert attrs == ["negative_slope", "eps", "momentum", "update"], op.name


def test_extension_matches_the_op_table():
    check(SOURCE)


MUTATIONS = {
    "attributes swapped in a call": ("ACTS_ACLNN(ActsRrelu, x, x_acl.get(), seed_acl.get(), lower, upper,",
                                     "ACTS_ACLNN(ActsRrelu, x, x_acl.get(), seed_acl.get(), upper, lower,"),
    "an input missing in a call": ("ACTS_ACLNN(ActsRreluGrad, saved, dy_acl.get(), saved_acl.get(), seed_acl.get(),",
                                   "ACTS_ACLNN(ActsRreluGrad, saved, dy_acl.get(), saved_acl.get(),"),
    "the wrong aclnn op": ("ACTS_ACLNN(ActsLeakyRelu, x,", "ACTS_ACLNN(ActsLeakyReluGrad, x,"),
    "a fused kernel calls the wrong aclnn op": ("ACTS_ACLNN(ActsBatchNormLeakyReluGrad, y,",
                                                "ACTS_ACLNN(ActsBatchNormLeakyRelu, y,"),
    "an attribute missing in a fused call": ("dilations.get(), negative_slope, out_acl.get());",
                                             "dilations.get(), out_acl.get());"),
    "running statistics not updated by the training kernel": ("negative_slope, eps, momentum, update, out_acl.get()",
                                                               "negative_slope, eps, 0.0, false, out_acl.get()"),
    "fused bias attributes swapped": ("bias_acl.get(), negative_slope, scale, out_acl.get());",
                                      "bias_acl.get(), scale, negative_slope, out_acl.get());"),
    "the optional bias left out of the fused gradient call": ("saved_acl.get(), bias_acl.get(), negative_slope",
                                                              "saved_acl.get(), negative_slope"),
    "a kernel not named by the rule": ("at::Tensor Rrelu(const at::Tensor& self,",
                                       "at::Tensor RandomizedRelu(const at::Tensor& self,"),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_disagreement_is_detected(mutation):
    old, new = MUTATIONS[mutation]
    assert SOURCE.count(old) == 1
    with pytest.raises(AssertionError):
        check(SOURCE.replace(old, new))


def test_the_private_ops_are_the_functional_ops_with_their_public_schemas():
    """npu_registrations.inc (generated) defines ascend_acts_npu::<op> for each functional op with the public op's
    schema and registers its kernel there, and registers nothing on the public namespace (the op layer does)."""
    definitions = [re.sub(r'"\s*"', "", text) for text in re.findall(r'm\.def\(("[^;]*")\);', REGISTRATIONS)]
    assert [d.strip('"') for d in definitions] == [op.name + op.schema for op in FUNCTIONAL_OPS]
    assert re.findall(r'm\.impl\("(\w+)", TORCH_FN\((\w+)\)\);', REGISTRATIONS) == \
        [(op.name, op.npu_function) for op in FUNCTIONAL_OPS]
    assert re.findall(r"TORCH_LIBRARY\w*\(([^)]*)\)", REGISTRATIONS) == [f"{op_table.NPU_NAMESPACE}, m",
                                                                       f"{op_table.NPU_NAMESPACE}, PrivateUse1, m"]


# The only errors the kernels raise: what the device cannot do or failed to do. Every argument check is the op
# layer's, made before the private op runs, the same for every device.
DEVICE_ERRORS = ("failed with status", "the NPU kernels take float32, float16 or bfloat16 tensors",
                 "aclCreateTensor failed", "aclCreateIntArray failed", "training needs at least one value per channel",
                 "ASCEND_ACTS_EVAL_KERNEL must be")


def check_device_errors_only(source: str) -> None:
    for check_call in re.findall(r"TORCH_CHECK\w*\((.*?)\);", source, re.S):
        assert sum(error in check_call for error in DEVICE_ERRORS) == 1, check_call


def test_the_kernels_raise_only_the_devices_errors():
    check_device_errors_only(SOURCE)
    repeated = SOURCE.replace("at::Tensor SeedOn(const at::Tensor& seed, const at::Tensor& like) {\n",
                              "at::Tensor SeedOn(const at::Tensor& seed, const at::Tensor& like) {\n"
                              '    TORCH_CHECK_VALUE(seed.numel() == 1, "rrelu: seed must be a one-element tensor");\n')
    assert repeated != SOURCE
    with pytest.raises(AssertionError):
        check_device_errors_only(repeated)


def test_the_eval_kernel_runs_only_on_request():
    """Issue: the fused eval kernel is modelled, never measured on an NPU (benchmarks/fused_traffic.py), so the NPU's
    eval is torch_npu's convolution + our LeakyReLU unless ASCEND_ACTS_EVAL_KERNEL=fused, and a misspelt value is
    an error. Static (no NPU here): the default branch returns before the fused call."""
    body = SOURCE[SOURCE.index("at::Tensor ConvBnLeakyReluEval("):]
    body = body[:body.index("\n}\n")]
    default = body.index("if (groups != 1 || !FusedEvalKernelRequested()) {")
    leaky_relu = body.index("ACTS_ACLNN(ActsLeakyRelu,")
    fused = body.index("ACTS_ACLNN(ActsConvBnLeakyReluEval,")
    assert default < leaky_relu < body.index("return out;", leaky_relu) < fused
    selector = SOURCE[SOURCE.index("bool FusedEvalKernelRequested() {"):]
    selector = selector[:selector.index("\n}\n")]
    assert 'getenv("ASCEND_ACTS_EVAL_KERNEL")' in selector and "TORCH_CHECK_VALUE" in selector


def test_the_file_says_it_was_never_linked_or_run():
    assert "COMPILED, NEVER LINKED OR RUN" in (CSRC / "npu_ops.cpp").read_text().split("#include")[0]


def compile_extension(source: Path) -> subprocess.CompletedProcess:
    """`source` (npu_ops.cpp or an altered copy) against torch's headers and the wheel's (torch_npu/include and its
    bundled acl/), as setup.py would build it (C++20, torch's ABI flag) minus CANN: the aclnn declarations come
    from acts_aclnn.h, the rest of csrc/ from its folder."""
    wheel = torch_npu_headers() / "torch_npu/include"
    command = ["g++", "-std=c++20", "-fsyntax-only", "-w", "-DTORCH_EXTENSION_NAME=_npu_ops",
               "-DTORCH_API_INCLUDE_EXTENSION_H", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
               *(f"-I{path}" for path in torch.utils.cpp_extension.include_paths()),
               f"-I{sysconfig.get_paths()['include']}", f"-I{wheel}", f"-I{wheel / 'third_party/acl/inc'}",
               f"-I{CSRC}", str(source)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_extension_compiles_against_the_torch_npu_wheel_headers():
    result = compile_extension(CSRC / "npu_ops.cpp")
    assert result.returncode == 0, result.stderr[-4000:]


@pytest.mark.slow
def test_a_kernel_whose_signature_differs_from_its_schema_does_not_compile(tmp_path):
    """npu_registrations.inc declares each kernel from its schema: float for a schema float (double) leaves that
    declaration an undefined overload, and TORCH_FN cannot pick one."""
    old = "at::Tensor LeakyRelu(const at::Tensor& self, double negative_slope) {"
    assert SOURCE.count(old) == 1
    altered = tmp_path / "npu_ops.cpp"
    altered.write_text(SOURCE.replace(old, old.replace("double", "float")))
    result = compile_extension(altered)
    assert result.returncode != 0 and "LeakyRelu" in result.stderr, result.stderr[-4000:]


def compile_with_cann_declarations(toolkit: Path, header: str) -> subprocess.CompletedProcess:
    """Compiles `header` (our acts_aclnn.h, or an altered copy) with CANN 8.1's aclnn/acl_meta.h before and after
    it: C++ rejects an extern "C" function or typedef declared twice with different types."""
    include = toolkit / "aarch64-linux/include"
    results = []
    for first, second in [("aclnn/acl_meta.h", "acts_aclnn.h"), ("acts_aclnn.h", "aclnn/acl_meta.h")]:
        unit = f'#include "{first}"\n#include "{second}"\n'
        results.append(subprocess.run(
            ["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", "-", f"-I{header.parent}", f"-I{CSRC}", f"-I{include}"],
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
