"""The torch_npu extension (python/ascend_acts/csrc/): compiled (syntax only) against the headers of the torch-npu
wheel released for the installed torch, our aclnn declarations compiled together with CANN 8.1's (when an extracted
toolkit is here), and its generated private ops checked against the op table. npu_ops.cpp holds only the shared
helpers; every private op ascend_acts_npu::<kernel> (schema, registration, kernel function) and the aclnn
declarations are generated from the table (scripts/generate_op_files.py; tests/test_generated_files.py checks they
are current). Checked here: one private op per table kernel with the table's schema (inputs, attributes, outputs
as mutable arguments), a kernel function whose C++ signature is the schema's, that prepares every input, checks
every tensor it writes and calls the kernel's aclnn op with the inputs, the attributes and the outputs in the
declared order; and the kernels raise only the device's own errors, the op layer having validated the call.
Linking and running it needs CANN and an NPU (docs/npu.md)."""

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
SOURCE = (CSRC / "npu_ops.cpp").read_text()  # the hand-written helpers
REGISTRATIONS = (CSRC / "npu_registrations.inc").read_text()  # the generated private ops


def functions(source: str) -> dict[str, tuple[str, str]]:
    """name -> (parameters, body) of every `void Name(...) {...}` at the start of a line."""
    return {name: (params, body) for name, params, body in re.findall(
        r"^void (\w+)\(([^)]*)\) \{\n(.*?)^\}", source, re.S | re.M)}


def check(source: str) -> None:
    """Raises AssertionError where the extension's kernel functions disagree with the op table."""
    bodies = functions(source)
    for kernel in op_table.KERNELS:
        assert kernel.op_type in bodies, f"{kernel.base}: no kernel function {kernel.op_type}"
        _, body = bodies[kernel.op_type]
        calls = re.findall(r"ACTS_ACLNN\((\w+), (\w+), ([^;]*)\);", body)
        assert [op_type for op_type, _, _ in calls] == [kernel.op_type], kernel.base
        args = [a.strip() for a in calls[0][2].split(",")]
        written = {t.name for t in kernel.outputs}
        inputs = [f"{t.name}_acl.get()" for t in kernel.inputs]
        attrs = [f"{a.name}_acl.get()" if a.type == "list_int" else a.name for a in kernel.attrs]
        outputs = [f"{t.name}_acl.get()" for t in kernel.outputs if t.name not in kernel.inplace]
        assert args == inputs + attrs + outputs, kernel.base  # inputs, attributes, outputs, as the OpDef
        for t in kernel.inputs:
            if t.name not in written:  # read: prepared for the device (contiguous, aligned)
                assert re.search(rf"\b{t.name}_in = Prepared(Optional)?\({t.name}, ", body), (kernel.base, t.name)
        for name in written:  # written: the caller's tensor, checked, never a copy
            assert f"CheckWritable({name}, " in body, (kernel.base, name)
            assert f"{name}_acl = AsAclShaped({name})" in body, (kernel.base, name)
        if kernel.base == "batch_norm_leaky_relu":  # the kernel updates the running statistics, as the schema says
            assert attrs == ["negative_slope", "eps", "momentum", "update_running_stats", "relu", "norm_groups"], \
                kernel.base


def test_extension_matches_the_op_table():
    check(REGISTRATIONS)


MUTATIONS = {
    "attributes swapped in a call": ("seed_acl.get(), lower, upper, y_acl.get()",
                                     "seed_acl.get(), upper, lower, y_acl.get()"),
    "an input missing in a call": ("ACTS_ACLNN(ActsRreluGrad, dy, dy_acl.get(), saved_acl.get(), seed_acl.get(),",
                                   "ACTS_ACLNN(ActsRreluGrad, dy, dy_acl.get(), saved_acl.get(),"),
    "the wrong aclnn op": ("ACTS_ACLNN(ActsLeakyRelu, x,", "ACTS_ACLNN(ActsLeakyReluGrad, x,"),
    "an attribute missing in a list-attribute call": ("dilations_acl.get(), negative_slope, relu, y_acl.get());",
                                                      "dilations_acl.get(), relu, y_acl.get());"),
    "running statistics not updated by the training kernel": ("momentum, update_running_stats, relu, norm_groups,",
                                                               "momentum, false, relu, norm_groups,"),
    "the optional bias left out of the fused gradient call": ("saved_acl.get(), bias_acl.get(), negative_slope",
                                                              "saved_acl.get(), negative_slope"),
    "an output written through a copy": ("grad_weight_acl = AsAclShaped(grad_weight)",
                                        "grad_weight_acl = AsAclShaped(grad_weight.contiguous())"),
    "an input not prepared": ("seed_in = Prepared(seed, x)", "seed_in = seed"),
    "a kernel function not named by the rule": ("void ActsRrelu(", "void RandomizedRelu("),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_disagreement_is_detected(mutation):
    old, new = MUTATIONS[mutation]
    assert REGISTRATIONS.count(old) == 1
    with pytest.raises(AssertionError):
        check(REGISTRATIONS.replace(old, new))


def test_one_private_op_per_kernel_with_the_tables_schema():
    """npu_registrations.inc defines ascend_acts_npu::<base> for each kernel with its schema (inputs, attributes,
    outputs as mutable arguments, nothing returned) and registers its kernel function there, and registers nothing
    on the public namespace (the op layer does)."""
    definitions = [re.sub(r'"\s*"', "", text) for text in re.findall(r'm\.def\(("[^;]*")\);', REGISTRATIONS)]
    assert [d.strip('"') for d in definitions] == [k.base + k.npu_schema for k in op_table.KERNELS]
    assert re.findall(r'm\.impl\("(\w+)", TORCH_FN\((\w+)\)\);', REGISTRATIONS) == \
        [(k.base, k.op_type) for k in op_table.KERNELS]
    assert re.findall(r"TORCH_LIBRARY\w*\(([^)]*)\)", REGISTRATIONS) == [f"{op_table.NPU_NAMESPACE}, m",
                                                                       f"{op_table.NPU_NAMESPACE}, PrivateUse1, m"]
    for kernel in op_table.KERNELS:  # the input written in place appears once, mutable
        schema = torch._C.parse_schema(f"{op_table.NPU_NAMESPACE}::{kernel.base}{kernel.npu_schema}")
        assert not schema.returns
        mutable = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        assert mutable == [t.name for t in kernel.npu_arguments if t.name in {o.name for o in kernel.outputs}]
        assert len({a.name for a in schema.arguments}) == len(schema.arguments)


def cpp_type(argument) -> str:
    """The C++ parameter type torch's dispatcher passes a schema argument as."""
    kind = str(argument.type)
    if kind == "Tensor":
        written = argument.alias_info is not None and argument.alias_info.is_write
        return "at::Tensor&" if written else "const at::Tensor&"
    return {"Optional[Tensor]": "const std::optional<at::Tensor>&", "float": "double", "bool": "bool",
            "int": "int64_t", "List[int]": "at::IntArrayRef"}[kind]


def test_each_kernel_function_has_its_schemas_signature():
    """TORCH_FN checks the signature against the schema only when the extension is loaded: on an NPU. Here, text."""
    bodies = functions(REGISTRATIONS)
    for kernel in op_table.KERNELS:
        params = re.sub(r"\s+", " ", bodies[kernel.op_type][0])
        schema = torch._C.parse_schema(f"x::{kernel.base}{kernel.npu_schema}")
        assert params == ", ".join(f"{cpp_type(a)} {a.name}" for a in schema.arguments), kernel.base


# The only errors the kernels raise: what the device cannot do or failed to do, and outputs the caller did not
# allocate as the kernel writes them. Every argument check is the op layer's, made before any launch, the same for
# every device.
DEVICE_ERRORS = ("failed with status", "the NPU kernels take float32, float16 or bfloat16 tensors",
                 "aclCreateTensor failed", "aclCreateIntArray failed", "every tensor of a launch must be on",
                 "must be preallocated by the caller")


def check_device_errors_only(source: str) -> None:
    for check_call in re.findall(r"TORCH_CHECK\w*\((.*?)\);", source, re.S):
        assert sum(error in check_call for error in DEVICE_ERRORS) == 1, check_call


def test_the_kernels_raise_only_the_devices_errors():
    check_device_errors_only(SOURCE + REGISTRATIONS)
    old = "at::Tensor Prepared(const at::Tensor& t, const at::Tensor& first) {\n"
    repeated = SOURCE.replace(old, old + '    TORCH_CHECK_VALUE(t.numel() > 0, "rrelu: seed must not be empty");\n')
    assert repeated != SOURCE
    with pytest.raises(AssertionError):
        check_device_errors_only(repeated)


def test_the_cpp_chooses_nothing():
    """Which kernels run (ASCEND_ACTS_EVAL_KERNEL, the fallbacks) is the launch sequence's choice, in Python, the
    same for the emulator and the NPU (tests/test_npu_launch.py): the C++ reads no environment."""
    assert "getenv" not in SOURCE + REGISTRATIONS


def test_the_hand_written_file_names_no_kernel():
    """A new kernel edits no C++ here: npu_ops.cpp holds the shared helpers only."""
    for kernel in op_table.KERNELS:
        assert kernel.op_type not in SOURCE and f'"{kernel.base}"' not in SOURCE, kernel.base


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
