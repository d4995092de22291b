"""The emulator binding against the op table: everything in ascendc_sim/binding/ that names a kernel, a family or a
tiling struct is generated (scripts/op_files/emulator.py: the launch table, the tiling structs' list, the families'
emulator headers, the structs' Python classes) and current, and no hand-written binding file names one, so a new
family edits no binding file; the tiling-struct parser is strict; the compiled module launches exactly the table's
kernels, binds every field of every tiling struct under its snake_case name and keeps the tiling functions'
signatures; the sim backend implements every functional op the table gives it, and imports first."""

import functools
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from ascend_acts import op_table
from ascend_acts.backends import sim
from ascend_acts.ops._kernels import backend_functions

ROOT = Path(__file__).resolve().parents[1]
BINDING = ROOT / "ascendc_sim/binding"
available = pytest.mark.skipif(sim.unavailable_reason() is not None, reason=str(sim.unavailable_reason()))


@functools.cache
def emulator_generator():
    spec = importlib.util.spec_from_file_location("op_files_emulator", ROOT / "scripts/op_files/emulator.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_binding_files_are_generated_from_the_op_table():
    files = emulator_generator().files(op_table)
    assert {path.as_posix() for path in files} == {
        "ascendc_sim/binding/launch_table.inc", "ascendc_sim/binding/tiling_list.inc",
        "ascendc_sim/binding/tiling_headers.inc", "ascendc_sim/binding/tiling_classes.inc"}
    for path, text in files.items():
        assert (ROOT / path).read_text() == text, f"{path} is stale: python scripts/op_files/emulator.py"


def family_words() -> set[str]:
    """Every name a family brings: family, kernel base names, tiling structs (and the structs they nest), the enum
    of the tiling function's variant, and the family's CamelCase name (ElementwiseOp, BatchNormPass, ...)."""
    generator = emulator_generator()
    words: set[str] = set()
    for kernel in op_table.KERNELS:
        struct, variant = generator.tiling_of(kernel)
        words |= {kernel.family, kernel.base, struct, op_table.camel(kernel.family)}
        if "::" in variant:
            words.add(variant.split("::")[-2])
    for family in generator.families(op_table):
        words |= {s.name for s in generator.structs_of(family)}
    return words


def test_no_hand_written_binding_file_names_a_family():
    """A new family (new tiling struct) edits no file of ascendc_sim/binding/: only the generated ones name one."""
    generated = {ROOT / path for path in emulator_generator().files(op_table)}
    words = family_words()
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, words), key=len, reverse=True)) + r")")
    hand = [path for path in sorted(BINDING.rglob("*")) if path.is_file() and path not in generated]
    assert hand, "no hand-written binding files found"
    for path in hand:
        text = path.read_text()
        assert op_table.GENERATED_MARK not in text, f"{path.name} says it is generated but no generator writes it"
        named = sorted({m.group(1) for m in pattern.finditer(text)})
        assert not named, f"ascendc_sim/binding/{path.name} names {named}: generate it (scripts/op_files/emulator.py)"


def test_the_word_check_sees_a_family_name():
    words = family_words()
    assert {"elementwise", "ElementwiseTiling", "ConvGeometry", "ElementwiseOp", "BatchNormLeakyRelu"} <= words


# --- the tiling-struct parser ------------------------------------------------------------------------------------

HEADER = """\
#pragma once
namespace ascend_acts {

// The geometry.
// Two lines of it.
struct Inner {
    uint32_t a, bC;  // two fields
    float padTop;
};

struct FooTiling {
    Inner inner;
    uint64_t totalLength;   // elements
                            // (a continued comment)
    int32_t l0cBuffers;
    bool weightSliceK;
    uint32_t reserved;      // padding: not bound
};

struct Other {
    uint32_t Method() const { return 0; }
};
}  // namespace ascend_acts
"""


def parse(text: str, name: str = "FooTiling"):
    generator = emulator_generator()
    return generator.parse_structs(text, name, Path("op_kernel/foo/foo_tiling_data.h"))


def test_the_parser_reads_fields_nested_structs_and_docs():
    inner, foo = parse(HEADER)
    assert inner.name == "Inner" and inner.doc == "The geometry. Two lines of it."
    assert [(f.name, f.type, f.python) for f in inner.fields] == [
        ("a", "uint32_t", "a"), ("bC", "uint32_t", "b_c"), ("padTop", "float", "pad_top")]
    assert foo.doc == "op_kernel/foo/foo_tiling_data.h's struct."
    assert [(f.name, f.python) for f in foo.fields] == [
        ("inner", "inner"), ("totalLength", "total_length"), ("l0cBuffers", "l0c_buffers"),
        ("weightSliceK", "weight_slice_k")]


@pytest.mark.parametrize("name", ["padTop", "c0", "kFractals", "usedCoreNum", "l0cBuffers"])
def test_python_names_are_snake_case(name):
    expected = {"padTop": "pad_top", "c0": "c0", "kFractals": "k_fractals", "usedCoreNum": "used_core_num",
                "l0cBuffers": "l0c_buffers"}[name]
    assert emulator_generator().snake(name) == expected


@pytest.mark.parametrize(("line", "reason"), [
    ("    uint32_t Method() const { return 0; }", "cannot parse"),
    ("    uint32_t sizes[4];", "cannot parse"),
    ("    uint32_t count = 0;", "cannot parse"),
    ("    static uint32_t count;", "cannot parse"),
    ("    double ratio;", "neither a scalar nor a struct"),
    ("    Missing missing;", "struct Missing is not declared"),
    ("    uint32_t a; /* old */", "a block comment"),
    ("    uint32_t a,\n        b;", "cannot parse"),
    ("    int64_t a;", "neither a scalar nor a struct"),
    ("    uint32_t padH, padTop;  // snake_case: pad_h, pad_top", None),
    ("    uint32_t totalLength, total_length;", "two fields have one snake_case name"),
])
def test_the_parser_refuses_what_it_cannot_read(line, reason):
    text = HEADER.replace("    bool weightSliceK;", line)
    if reason is None:
        parse(text)
        return
    with pytest.raises(emulator_generator().TilingParseError, match=re.escape(reason)) as error:
        parse(text)
    assert str(error.value).startswith("op_kernel/foo/foo_tiling_data.h:")


def test_the_parser_names_the_file_and_line():
    with pytest.raises(emulator_generator().TilingParseError, match=r"foo_tiling_data\.h:21: struct Other: cannot"):
        parse(HEADER, "Other")
    with pytest.raises(emulator_generator().TilingParseError, match="struct Absent is not declared"):
        parse(HEADER, "Absent")
    with pytest.raises(emulator_generator().TilingParseError, match="no `};`"):
        parse("struct FooTiling {\n    uint32_t a;\n")


def test_every_family_has_its_emulator_file_and_parsable_struct():
    generator = emulator_generator()
    for family in generator.families(op_table):
        assert (ROOT / f"op_host/{family.name}/{family.name}_emulator.h").is_file()
        assert generator.structs_of(family)[-1].name == family.struct


def test_the_emulator_files_stay_out_of_the_cann_build():
    """op_host/<family>/<family>_emulator.h is the binding's (through tiling_headers.inc): no file the CANN build
    compiles includes one, and it needs no pybind11."""
    emulator_files = sorted(ROOT.glob("op_host/*/*_emulator.h"))
    assert emulator_files
    include = re.compile(r'#include\s+"[^"]*_emulator\.h"')
    for path in [*ROOT.glob("op_host/**/*"), *ROOT.glob("op_kernel/**/*")]:
        if path.is_file() and path.suffix in (".h", ".cpp"):
            assert not include.search(path.read_text()), f"{path.relative_to(ROOT)} includes an emulator file"
    for path in emulator_files:
        assert "pybind11" not in path.read_text()


# --- the compiled module -----------------------------------------------------------------------------------------

@available
def test_the_module_launches_the_table_kernels():
    from ascend_acts import _sim

    rows = {row["name"]: row for row in _sim.kernels()}
    assert list(rows) == [k.base for k in op_table.KERNELS]
    for k in op_table.KERNELS:
        row = rows[k.base]
        assert row["entry"] == k.entry and row["wraps_integers"] == k.int_wraparound
        assert [name for name, _ in row["params"]] == [t.name for t in k.inputs + k.outputs]
        assert row["tiling"] == emulator_generator().tiling_of(k)[0]


@available
def test_every_tiling_struct_field_is_a_python_attribute():
    from ascend_acts import _sim

    generator = emulator_generator()
    for family in generator.families(op_table):
        for struct in generator.structs_of(family):
            cls = getattr(_sim, struct.name)
            extra = ["workspace_bytes"] if struct.name == "ConvBnLeakyReluEvalTiling" else []
            assert [k for k in vars(cls) if not k.startswith("_")] == [f.python for f in struct.fields] + extra


# today's signatures, which the package and the tests call with keywords
SIGNATURES = {
    "elementwise_tiling": "kernel, total_length, element_size, platform='ascend910b1', vector_cores=0, "
                          "negative_slope=0.0, lower=0.0, span=0.0, index_base=0",
    "batch_norm_leaky_relu_tiling": "kernel, batch, channels, plane_size, element_size, platform='ascend910b1', "
                                    "vector_cores=0, negative_slope=0.0, eps=0.0, momentum=0.0, "
                                    "update_running_stats=False",
    "fused_bias_leaky_relu_tiling": "kernel, batch, channels, spatial, element_size, has_bias=True, "
                                    "platform='ascend910b1', vector_cores=0, negative_slope=0.20000000298023224, "
                                    "scale=1.4142135381698608, saved_is_result=True, clamp=-1.0, relu=False",
    "conv_bn_leaky_relu_eval_tiling": "x_shape, weight_shape, stride, padding, dilation, element_size, "
                                      "platform='ascend910b1', negative_slope=0.0",
}


def signature_of(function) -> str:
    """`name, name=default, ...` from the first line of a pybind11 docstring (types dropped)."""
    first = function.__doc__.splitlines()[0]
    inside = first[first.index("(") + 1:first.rindex(") ->")]
    parts = re.split(r", (?=\w+:)", inside)
    return ", ".join(re.sub(r": [^=]+?( = |$)", lambda m: "=" if m.group(1) else "", p) for p in parts)


@available
@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_tiling_functions_keep_their_signatures(name):
    from ascend_acts import _sim

    assert signature_of(getattr(_sim, name)) == SIGNATURES[name]
    assert getattr(_sim, name).__doc__.splitlines()[0].endswith(
        "-> ascend_acts._sim." + {"elementwise_tiling": "ElementwiseTiling",
                                  "batch_norm_leaky_relu_tiling": "BatchNormLeakyReluTiling",
                                  "fused_bias_leaky_relu_tiling": "FusedBiasLeakyReluTiling",
                                  "conv_bn_leaky_relu_eval_tiling": "ConvBnLeakyReluEvalTiling"}[name])


@available
def test_a_tiling_function_refuses_a_kernel_of_another_family():
    from ascend_acts import _sim

    with pytest.raises(ValueError, match=r"elementwise_tiling\(\): kernel must be one of leaky_relu, leaky_relu_grad, "
                                         r"rrelu, rrelu_grad, got 'batch_norm_leaky_relu'"):
        _sim.elementwise_tiling("batch_norm_leaky_relu", 5, 4)
    with pytest.raises(ValueError, match=r"for input \[1, 3, 2, 2\], weight \[8, 4, 1, 1\] on ascend910b1"):
        _sim.conv_bn_leaky_relu_eval_tiling((1, 3, 2, 2), (8, 4, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 4)
    x = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match="leaky_relu: tiling must be a ElementwiseTiling, got BatchNormLeakyReluTiling"):
        _sim.launch("leaky_relu", {"x": x, "y": x.copy()},
                    _sim.batch_norm_leaky_relu_tiling("batch_norm_leaky_relu", 1, 2, 3, 4))


def test_the_backend_implements_every_functional_op_it_is_listed_for():
    ops = [op.name for op in op_table.TORCH_OPS if "sim" in op.backends and not op.inplace]
    assert ops and all(callable(getattr(backend_functions("sim"), name, None)) for name in ops)
