"""The emulator binding against the op table: everything in ascendc_sim/binding/ that names a kernel, a family or a
tiling struct is generated (scripts/op_files/emulator.py: the launch table, the tiling structs' list, the families'
pure tiling headers, the structs' Python classes) and current, and no hand-written binding file names one, so a new
family edits no binding file; the tiling-struct parser is strict; the compiled module launches exactly the table's
kernels, binds every field of every tiling struct under its snake_case name and gives every family the one tiling
function signature, the request the CANN TilingFunc fills; the sim backend implements every functional op the table
gives it, and imports first."""

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


def test_every_family_has_its_pure_tiling_file_and_parsable_struct():
    """op_host/<family>/ holds the generated OpDefs and JSONs and one hand-written file, <family>_tiling.h, which
    states the family's TilingFor and Launch* (op_host/common/tiling_request.h) for its struct."""
    generator = emulator_generator()
    for family in generator.families(op_table):
        tiling = ROOT / f"op_host/{family.name}/{family.name}_tiling.h"
        text = tiling.read_text()
        for declaration in (rf"bool TilingFor\(const TilingRequest& \w+, {family.struct}& \w+, std::string& \w+\)",
                            rf"uint32_t LaunchBlocks\(const {family.struct}& \w+\)",
                            rf"uint32_t LaunchTileLength\(const {family.struct}& \w+\)"):
            assert re.search(declaration, text), f"{tiling.relative_to(ROOT)} lacks {declaration}"
        assert generator.structs_of(family)[-1].name == family.struct
        kernels = {k.base for k in op_table.KERNELS if k.family == family.name}
        others = {path.name for path in tiling.parent.iterdir()} - {f"{family.name}_tiling.h"}
        assert others == {f"{base}.{suffix}" for base in kernels for suffix in ("cpp", "json")}


def test_the_tilings_are_pure():
    """The tiling headers the CANN TilingFunc and the emulator share include neither CANN nor pybind11, and no
    op_host file includes a binding header."""
    pure = [ROOT / "op_host/common/tiling_request.h", ROOT / "op_host/common/ub_budget.h",
            *ROOT.glob("op_host/*/*_tiling.h")]
    foreign = re.compile(r'#include\s+[<"](register/|tiling/|exe_graph/|graph/|pybind11|sim/|emulator)')
    for path in pure:
        assert not foreign.search(path.read_text()), f"{path.relative_to(ROOT)} is not pure"
    for path in ROOT.glob("op_host/**/*"):
        if path.is_file() and path.suffix in (".h", ".cpp"):
            assert "pybind11" not in path.read_text() and "ascendc_sim" not in path.read_text()


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


# every family's Python tiling function takes what the CANN TilingFunc reads from its context
SIGNATURE = "kernel, inputs, element_size, attrs={}, platform='ascend910b1', vector_cores=0, first_element=0"


def signature_of(function) -> str:
    """`name, name=default, ...` from the first line of a pybind11 docstring (types dropped)."""
    first = function.__doc__.splitlines()[0]
    inside = first[first.index("(") + 1:first.rindex(") ->")]
    parts = re.split(r", (?=\w+:)", inside)
    return ", ".join(re.sub(r": [^=]+?( = |$)", lambda m: "=" if m.group(1) else "", p) for p in parts)


@available
def test_every_family_has_the_one_tiling_function_signature():
    from ascend_acts import _sim

    generator = emulator_generator()
    families = generator.families(op_table)
    assert families
    for family in families:
        function = getattr(_sim, f"{family.name}_tiling")
        assert signature_of(function) == SIGNATURE
        assert function.__doc__.splitlines()[0].endswith(f"-> ascend_acts._sim.{family.struct}")


@available
def test_a_tiling_function_refuses_a_kernel_of_another_family():
    from ascend_acts import _sim

    with pytest.raises(ValueError, match=r"elementwise_tiling\(\): kernel must be one of leaky_relu, leaky_relu_grad, "
                                         r"rrelu, rrelu_grad, got 'batch_norm_leaky_relu'"):
        _sim.elementwise_tiling("batch_norm_leaky_relu", [(5,)], 4)
    x = np.zeros(8, np.float32)
    channels = [(2,)] * 4
    with pytest.raises(TypeError, match="leaky_relu: tiling must be a ElementwiseTiling, got BatchNormLeakyReluTiling"):
        _sim.launch("leaky_relu", {"x": x, "y": x.copy()},
                    _sim.batch_norm_leaky_relu_tiling("batch_norm_leaky_relu", [(1, 2, 3), *channels], 4,
                                                      {"negative_slope": 0.1, "eps": 1e-5, "momentum": 0.1,
                                                       "update_running_stats": True, "relu": False,
                                                       "norm_groups": 0}))


@available
def test_a_tiling_function_names_what_its_request_lacks():
    """The request is checked against the kernel's table row: its inputs, and every attribute by name and type."""
    from ascend_acts import _sim

    slope = {"negative_slope": 0.1}
    with pytest.raises(ValueError, match=r"elementwise_tiling\(\): leaky_relu_grad takes the shapes of its inputs "
                                         r"dy, saved, got 1"):
        _sim.elementwise_tiling("leaky_relu_grad", [(5,)], 4, slope)
    with pytest.raises(ValueError, match=r"leaky_relu: attribute 'negative_slope' missing \(its attributes: "
                                         r"negative_slope\)"):
        _sim.elementwise_tiling("leaky_relu", [(5,)], 4)
    with pytest.raises(ValueError, match=r"leaky_relu has no attribute 'upper' \(its attributes: negative_slope\)"):
        _sim.elementwise_tiling("leaky_relu", [(5,)], 4, slope | {"upper": 1.0})
    with pytest.raises(TypeError, match=r"attribute 'negative_slope' must be a float, got 'x'"):
        _sim.elementwise_tiling("leaky_relu", [(5,)], 4, {"negative_slope": "x"})
    with pytest.raises(TypeError, match=r"the shape of x must be a sequence of ints or None, got 5"):
        _sim.elementwise_tiling("leaky_relu", [5], 4, slope)
    with pytest.raises(ValueError, match=r"platform: unknown platform 'tpu'"):
        _sim.elementwise_tiling("leaky_relu", [(5,)], 4, slope, platform="tpu")
    # sizes a TilingContext cannot hold are refused, not wrapped or cut to the struct's 32-bit fields
    with pytest.raises(ValueError, match=r"the shape of x has a negative size: \[-7, 3\]"):
        _sim.elementwise_tiling("leaky_relu", [[-7, 3]], 4, slope)
    bn = {"negative_slope": 0.1, "eps": 1e-5, "momentum": 0.1, "update_running_stats": False, "relu": False,
          "norm_groups": 0}
    channels = [(3,)] * 4
    with pytest.raises(ValueError, match=r"N and C must each be below 2\*\*32"):
        _sim.batch_norm_leaky_relu_tiling("batch_norm_leaky_relu", [(2**32 + 2, 3, 4, 4), *channels], 4, bn)
    for size in (1, 3, 8):
        with pytest.raises(ValueError, match=rf"with {size}-byte elements \(2 or 4 only\)"):
            _sim.batch_norm_leaky_relu_tiling("batch_norm_leaky_relu", [(2, 3, 4, 4), *channels], size, bn)


@available
def test_a_refusal_says_what_had_no_tiling_and_where():
    from ascend_acts import _sim
    from ascend_acts.ops.conv_bn_leaky_relu import kernels as conv_bn

    with pytest.raises(ValueError, match=r"no tiling for fused_bias_leaky_relu of shape \(2, 0, 3 spatial\) with "
                                         r"4-byte elements on ascend910b3"):
        _sim.fused_bias_leaky_relu_tiling("fused_bias_leaky_relu", [(2, 0, 3), None], 4,
                                          {"negative_slope": 0.2, "scale": 1.0, "clamp": -1.0, "relu": False},
                                          "ascend910b3")
    attrs = {"strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1], "negative_slope": 0.1, "relu": False}
    with pytest.raises(ValueError, match=r"no tiling for conv_bn_leaky_relu_eval of input \(1, 9, 2, 2\), packed "
                                         r"weight \(1, 1, 1, 1, 16, 8\), bias \(8,\) \(the weight is not the "
                                         r"FRACTAL_Z packing of \(C_out, C_in, kh, kw\) = \(8, 9, 1, 1\)\) on "
                                         r"ascend910b1"):  # 9 input channels take two groups of C0 = 8
        _sim.conv_bn_leaky_relu_eval_tiling("conv_bn_leaky_relu_eval", [(1, 9, 2, 2), (1, 1, 1, 1, 16, 8), (8,)], 4,
                                            attrs)
    with pytest.raises(ValueError, match=r"\(no output\) on ascend910b1"):
        _sim.conv_bn_leaky_relu_eval_tiling("conv_bn_leaky_relu_eval", [(1, 8, 2, 2), (1, 3, 3, 1, 16, 8), (8,)], 4,
                                            attrs)
    with pytest.raises(ValueError, match=r"for input \[1, 3, 2, 2\], weight \[8, 4, 1, 1\] on ascend910b1"):
        conv_bn.conv_bn_leaky_relu_eval_tiling((1, 3, 2, 2), (8, 4, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 4)


def test_the_backend_implements_every_functional_op_it_is_listed_for():
    ops = [op.name for op in op_table.TORCH_OPS if "sim" in op.backends and not op.inplace]
    assert ops and all(callable(getattr(backend_functions("sim"), name, None)) for name in ops)
