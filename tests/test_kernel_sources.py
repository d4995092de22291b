"""The kernel sources against rules of the CANN 8.1 toolchain that g++ and the emulator's runtime do not
see: the kernel entry names msopgen generates, op_kernel/ being self-contained (the source package ships
only op_kernel/, with its folders), literal tiling keys, and bisheng's execution spaces (functions and lambdas
device code calls must be marked for the AI Core). Each check has a broken kernel in tests/sim_kernels/compile_checks/
that it must reject."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ascend_acts import op_table

ROOT = Path(__file__).resolve().parents[1]
KERNEL_DIR = ROOT / "op_kernel"
CHECKS = Path(__file__).parent / "sim_kernels" / "compile_checks"
KERNELS = sorted(KERNEL_DIR.rglob("*.cpp"))
KERNEL_SOURCES = sorted(KERNEL_DIR.rglob("*.h")) + KERNELS
EMULATOR_INCLUDES = ["-I", str(ROOT / "ascendc_sim" / "include"), "-I", str(ROOT / "ascendc_sim")]
ENTRY = re.compile(r'extern "C" __global__ __aicore__ void (\w+)\(')


def msopgen_kernel_name(op_type: str) -> str:
    """The file and kernel name msopgen 8.1 gives an op type (op_gen/interface/utils.py,
    fix_name_lower_with_under): lower case, with `_` before an upper-case letter that follows a
    non-upper-case one, or that follows an upper-case one and precedes a lower-case one."""
    name = ""
    for i, char in enumerate(op_type):
        previous, following = op_type[i - 1] if i else "", op_type[i + 1] if i + 1 < len(op_type) else ""
        if i and char.isupper() and previous != "_" and (not previous.isupper() or following.islower()):
            name += "_"
        name += char.lower()
    return name


@pytest.mark.parametrize("op_type, name", [  # utils.py's own examples, and ours
    ("Abc", "abc"), ("AbcDef", "abc_def"), ("ABCDef", "abc_def"), ("Abc2DEf", "abc2_d_ef"), ("Abc2DEF", "abc2_def"),
    ("ABC2dEF", "abc2d_ef"), ("ActsRRelu", "acts_r_relu"), ("ActsRrelu", "acts_rrelu"),
    ("ActsRreluGrad", "acts_rrelu_grad")])
def test_msopgen_name_rule(op_type, name):
    assert msopgen_kernel_name(op_type) == name


def test_every_op_type_has_the_kernel_entry_msopgen_names():
    op_types = [kernel.op_type for kernel in op_table.KERNELS]
    entries = {name for kernel in KERNELS for name in ENTRY.findall(kernel.read_text())}
    assert sorted(msopgen_kernel_name(op) for op in op_types) == sorted(entries)
    assert "acts_rrelu" in entries and "acts_r_relu" not in entries  # ActsRrelu: one name, rrelu, everywhere


def outside_includes(source: Path, text: str) -> list[str]:
    """The quoted includes of `source` that are neither an AscendC header nor, relative to it, a file of op_kernel/."""
    ascendc = {"kernel_operator.h", "lib/matmul_intf.h"}
    return [include for include in re.findall(r'#include "([^"]+)"', text)
            if include not in ascendc and not ((source.parent / include).is_file()
                                               and (source.parent / include).resolve().is_relative_to(KERNEL_DIR))]


def test_op_kernel_is_self_contained():
    """Every quoted include of op_kernel/ is a file of op_kernel/ (relative to the includer) or an AscendC header."""
    assert {str(s.relative_to(KERNEL_DIR)): outside_includes(s, s.read_text()) for s in KERNEL_SOURCES} == \
           {str(s.relative_to(KERNEL_DIR)): [] for s in KERNEL_SOURCES}


def test_an_include_leaving_op_kernel_is_caught():
    source = KERNEL_DIR / "elementwise/elementwise_tiling_data.h"
    leaving = "../../op_host/common/ub_budget.h"
    assert outside_includes(source, f'#include "{leaving}"\n') == [leaving]
    assert outside_includes(source, '#include "dtype_key.h"\n') == ["dtype_key.h"]  # not next to the includer
    assert outside_includes(source, '#include "../common/dtype_key.h"\n') == []


def syntax_check(source: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(["g++", "-std=c++17", "-fsyntax-only", *EMULATOR_INCLUDES, *flags, str(source)],
                          capture_output=True, text=True)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("key, literal", [
    ("2u", True), ("ACTS_FLOAT_KEY", True),  # a macro is a literal once preprocessed, as CANN reads it
    ("static_cast<uint32_t>(Dtype::Float32)", False), ("1 + 1", False)])
def test_tiling_keys_must_be_integer_literals(key, literal):
    result = syntax_check(CHECKS / "non_literal_tiling_key.cpp", f"-DACTS_KEY_EXPR={key}")
    assert (result.returncode == 0) == literal, result.stderr
    assert literal or "TILING_KEY_IS needs an integer literal" in result.stderr


# --- execution spaces -----------------------------------------------------------------------------------
# clang's CUDA rules stand in for bisheng's: __aicore__ compiles as __device__ (the prelude), so calling
# an unmarked function from device code is an error. clang makes unannotated lambdas host+device, so the
# lambda half is checked on the source text instead (lambdas_without_annotation).

CLANG = shutil.which("clang++")
if CLANG is None and os.environ.get("CI") == "true":
    raise RuntimeError(".ci/run installs clang++ for the kernels' execution-space check; it is missing")
needs_clang = pytest.mark.skipif(CLANG is None, reason="needs clang++ (apt-get install clang): the execution-space "
                                                       "check of the kernels")


def clang_device_check(*sources: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CLANG, "-x", "hip", "--cuda-device-only", "-nogpuinc", "-nogpulib", "--offload-arch=gfx906", "-std=c++17",
         "-fsyntax-only", "-fno-exceptions", "-Xclang", "-fcuda-allow-variadic-functions", *EMULATOR_INCLUDES,
         "-include", str(CHECKS / "device_prelude.h"), *map(str, sources)], capture_output=True, text=True)


@pytest.mark.slow
@needs_clang
def test_device_code_calls_only_aicore_functions():
    result = clang_device_check(*KERNELS)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
@needs_clang
def test_a_host_helper_called_from_device_code_is_caught():
    result = clang_device_check(CHECKS / "host_helper_in_device_code.cpp")
    assert result.returncode != 0 and "call to __host__ function from __device__ function" in result.stderr


def lambdas_without_annotation(text: str) -> list[int]:
    """Lines of lambda expressions without ACTS_AICORE_LAMBDA between their parameters and body."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\])*\"", lambda m: re.sub(r"[^\n]", " ", m.group()), text,
                  flags=re.S)
    lines = []
    for match in re.finditer(r"\[[^\[\]]*\]\s*[({]", code):
        before = code[:match.start()].rstrip()
        if not (before.endswith(("(", ",", "=", "{", ";")) or before.endswith("return")):
            continue  # a subscript, not a lambda introducer
        body = code.index("{", match.end() - 1)
        if "ACTS_AICORE_LAMBDA" not in code[match.end() - 1:body]:
            lines.append(code.count("\n", 0, match.start()) + 1)
    return lines


def test_device_lambdas_are_annotated():
    assert {str(s): lambdas_without_annotation(s.read_text()) for s in KERNEL_SOURCES} == \
           {str(s): [] for s in KERNEL_SOURCES}
    assert any("ACTS_AICORE_LAMBDA" in source.read_text() for source in KERNELS)  # the check has lambdas to see


def test_an_unannotated_lambda_is_caught():
    broken = (CHECKS / "unannotated_lambda.cpp").read_text()
    assert lambdas_without_annotation(broken) == [13]
    assert lambdas_without_annotation(broken.replace("(uint32_t b) {", "(uint32_t b) ACTS_AICORE_LAMBDA {")) == []
