"""The NPU side's files derived from the op table (scripts/generate_op_files.py runs `files`):

- op_host/<family>/<base>.cpp: the OpDef of each kernel (inputs, outputs, dtypes, formats, attributes with their
  defaults, infer functions, tiling function, AddConfig per PLATFORMS) and its TilingFunc: the generic
  `optiling::RequestTilingFunc` (op_host/common/op_host_common.h, which also holds the infer functions) with the
  kernel's tiling struct, variant, optional inputs and attribute types, over the family's pure TilingFor in
  op_host/<family>/<family>_tiling.h;
- op_host/<family>/<base>.json: its msopgen input (what scripts/build_npu.sh gives msopgen);
- python/ascend_acts/csrc/acts_aclnn_ops.h: the two-phase aclnn API the op package build generates for each
  OpDef, declared by CANN's documented generation rule (included by the hand-written acts_aclnn.h);
- python/ascend_acts/csrc/npu_registrations.inc: the torch_npu extension's private ops (op_table.NPU_NAMESPACE,
  one per Kernel, schema `Kernel.npu_schema`) and their PrivateUse1 kernels, whole: each prepares the inputs,
  checks the preallocated outputs and makes one aclnn call (included at the end of npu_ops.cpp, which holds only
  the shared helpers).
"""

from __future__ import annotations

import json
import re
import struct
import textwrap
from pathlib import Path

CSRC = Path("python/ascend_acts/csrc")
WIDTH = 120


def files(table) -> dict[Path, str]:
    out: dict[Path, str] = {}
    for kernel in table.KERNELS:
        folder = Path("op_host") / kernel.family
        out[folder / f"{kernel.base}.cpp"] = opdef_source(table, kernel)
        out[folder / f"{kernel.base}.json"] = json.dumps([msopgen_entry(table, kernel)], indent=2) + "\n"
    out[CSRC / "acts_aclnn_ops.h"] = aclnn_header(table)
    out[CSRC / "npu_registrations.inc"] = registrations(table)
    return out


def lower_camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(word.capitalize() for word in rest)


def float32_literal(value: float) -> str:
    """The shortest decimal that reads back as the float32 CANN stores (OpDef Float() and msopgen take a float)."""
    (single,) = struct.unpack("f", struct.pack("f", value))
    for digits in range(1, 10):
        text = f"{single:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            return text
    raise AssertionError(value)


# --- OpDef ------------------------------------------------------------------------------------------------
def _cpp_default(attr) -> str:
    if attr.type == "float":
        return f"Float({float32_literal(attr.default)})"
    if attr.type == "bool":
        return f"Bool({'true' if attr.default else 'false'})"
    if attr.type == "int":
        return f"Int({int(attr.default)})"
    if attr.type == "list_int":
        return "ListInt({" + ", ".join(str(int(v)) for v in attr.default) + "})"
    raise ValueError(f"{attr.name}: no OpDef spelling for attribute type {attr.type!r}")


# Attr.type -> ascend_acts::AttrKind
_ATTR_KINDS = {"float": "Float", "bool": "Bool", "int": "Int", "list_int": "ListInt"}


def tiling_function(kernel) -> list[str]:
    """The kernel's TilingFunc: the generic one with what the table says of its tiling, inputs and attributes."""
    optional = ", ".join("true" if t.optional else "false" for t in kernel.inputs)
    kinds = ", ".join(f"AttrKind::{_ATTR_KINDS[a.type]}" for a in kernel.attrs)
    return ["namespace optiling {",
            "// The one TilingFunc (op_host_common.h) with what the op table says of this kernel: its tiling struct",
            "// and variant, which inputs are optional, its attributes' types.",
            f"static ge::graphStatus {kernel.op_type}TilingFunc(gert::TilingContext* context) {{",
            "    using ascend_acts::AttrKind;",
            f"    return RequestTilingFunc<ascend_acts::{kernel.tiling}>(context, uint32_t({kernel.tiling_variant}),",
            f"                                                      /*optionalInputs=*/{{{optional}}},",
            f"                                                      /*attrKinds=*/{{{kinds}}});",
            "}", "}  // namespace optiling", ""]


def opdef_source(table, kernel) -> str:
    def tensor(kind: str, t) -> list[str]:
        dtypes = ", ".join(table.GE_DTYPE[d] for d in t.dtypes)
        formats = ", ".join(["ge::FORMAT_ND"] * len(t.dtypes))
        return [f'        this->{kind}("{t.name}")',
                f"            .ParamType({'OPTIONAL' if t.optional else 'REQUIRED'})",
                f"            .DataType({{{dtypes}}})",
                f"            .Format({{{formats}}});"]

    summary = f"{kernel.op_type}: {kernel.summary}" if kernel.summary else kernel.op_type
    lines = [f"// {table.GENERATED_MARK}", *textwrap.wrap(summary, WIDTH, initial_indent="// ",
                                                         subsequent_indent="// "),
             f"// Hand-written: its tiling in {kernel.family}_tiling.h (TilingFor), the infer functions in "
             "op_host_common.h,", "// its kernel in op_kernel/.",
             '#include "../common/op_host_common.h"', f'#include "{kernel.family}_tiling.h"', "",
             *tiling_function(kernel), "namespace ops {",
             f"class {kernel.op_type} : public OpDef {{", "public:",
             f"    explicit {kernel.op_type}(const char* name) : OpDef(name) {{"]
    for t in kernel.inputs:
        lines += tensor("Input", t)
    for t in kernel.outputs:
        lines += tensor("Output", t)
    lines += [f'        this->Attr("{a.name}").AttrType(OPTIONAL).{_cpp_default(a)};' for a in kernel.attrs]
    lines.append(f"        this->SetInferShape({kernel.infer_shape}).SetInferDataType({kernel.infer_dtype});")
    lines.append(f"        this->AICore().SetTiling(optiling::{kernel.op_type}TilingFunc);")
    lines += [f'        this->AICore().AddConfig("{platform}");' for platform in table.PLATFORMS]
    lines += ["    }", "};", f"OP_ADD({kernel.op_type});", "}  // namespace ops", ""]
    return "\n".join(lines)


# --- msopgen JSON -----------------------------------------------------------------------------------------
def _json_default(attr):
    if attr.type == "float":
        return float32_literal(attr.default)
    if attr.type == "bool":
        return "true" if attr.default else "false"
    if attr.type == "int":
        return int(attr.default)
    if attr.type == "list_int":
        return [int(v) for v in attr.default]
    raise ValueError(f"{attr.name}: no msopgen spelling for attribute type {attr.type!r}")


def msopgen_entry(table, kernel) -> dict:
    def tensor(t) -> dict:
        return {"name": t.name, "param_type": "optional" if t.optional else "required",
                "format": ["ND"] * len(t.dtypes), "type": [table.CANN_DTYPE[d] for d in t.dtypes]}

    return {"op": kernel.op_type, "input_desc": [tensor(t) for t in kernel.inputs],
            "output_desc": [tensor(t) for t in kernel.outputs],
            "attr": [{"name": a.name, "param_type": "optional", "type": a.type, "default_value": _json_default(a)}
                     for a in kernel.attrs]}


# --- aclnn API --------------------------------------------------------------------------------------------
ACLNN_ATTR_TYPES = {"float": "double", "bool": "bool", "int": "int64_t", "list_int": "const aclIntArray*"}


def aclnn_parameters(kernel) -> list[str]:
    """aclnn<OpType>GetWorkspaceSize's parameters by the documented rule: the inputs in order as const aclTensor*
    (an optional one named <name>Optional; one that is also an output, updated in place, as a non-const
    <name>Ref), the attributes in order (float as double, int lists as const aclIntArray*), the other outputs
    (one: out; several: <name>Out), then the workspace size and the executor; names in lowerCamelCase."""
    params = []
    for t in kernel.inputs:
        if t.name in kernel.inplace:
            params.append(f"aclTensor* {lower_camel(t.name)}Ref")
        else:
            params.append(f"const aclTensor* {lower_camel(t.name)}{'Optional' if t.optional else ''}")
    params += [f"{ACLNN_ATTR_TYPES[a.type]} {lower_camel(a.name)}" for a in kernel.attrs]
    outputs = [t for t in kernel.outputs if t.name not in kernel.inplace]
    if len(outputs) == 1:
        params.append("aclTensor* out")
    else:
        params += [f"aclTensor* {lower_camel(t.name)}Out" for t in outputs]
    return params + ["uint64_t* workspaceSize", "aclOpExecutor** executor"]


def _declaration(head: str, params: list[str], tail: str = ";") -> list[str]:
    """`head(params)tail`, wrapped at WIDTH with continuation lines aligned after the parenthesis (or indented by
    four on the next line when the head is long)."""
    if len(head) + 1 <= WIDTH // 2:
        indent, lines, line = " " * (len(head) + 1), [], head + "("
    else:
        indent, lines, line = " " * 4, [head + "("], " " * 4
    for i, param in enumerate(params):
        piece = param + (", " if i + 1 < len(params) else ")" + tail)
        if len(line) + len(piece.rstrip()) > WIDTH and line.strip() not in (head + "(", ""):
            lines.append(line.rstrip())
            line = indent
        line += piece
    return lines + [line]


def aclnn_header(table) -> str:
    lines = [f"// {table.GENERATED_MARK}",
             "// The two-phase aclnn API the op package build generates for each OpDef (acts_aclnn.h includes this).",
             "#pragma once", "", 'extern "C" {']
    for kernel in table.KERNELS:
        lines += _declaration(f"aclnnStatus {kernel.aclnn}GetWorkspaceSize", aclnn_parameters(kernel))
        lines += _declaration(f"aclnnStatus {kernel.aclnn}", ["void* workspace", "uint64_t workspaceSize",
                                                               "aclOpExecutor* executor", "aclrtStream stream"])
    lines += ["}", ""]
    return "\n".join(lines)


# --- the extension's private ops ------------------------------------------------------------------------
_SCHEMA = re.compile(r"^\((?P<args>.*)\) -> (?P<returns>.*)$")


def _schema_arguments(schema: str) -> list[tuple[str, str]]:
    """'(Tensor self, float x) -> ()' -> [('Tensor', 'self'), ('float', 'x')]"""
    args = _SCHEMA.match(schema).group("args")
    return [tuple(arg.strip().rsplit(" ", 1)) for arg in args.split(",") if arg.strip()]


def cpp_argument_type(schema_type: str) -> str:
    """The C++ type torch's dispatcher passes a schema argument as (c10's schema-to-C++ rules)."""
    if schema_type.startswith("Tensor"):
        if schema_type.endswith("?"):
            return "const std::optional<at::Tensor>&"
        return "at::Tensor&" if "!" in schema_type else "const at::Tensor&"
    if re.fullmatch(r"int\[\d*\]", schema_type):
        return "at::IntArrayRef"
    return {"float": "double", "int": "int64_t", "bool": "bool"}[schema_type]


def _string_call(head: str, text: str, tail: str) -> list[str]:
    """`head"text"tail`, the string split after commas into adjacent literals aligned under the first one, each line
    at most WIDTH."""
    indent, lines, line = " " * len(head), [], head + '"'
    pieces = re.split(r"(?<=, )", text)
    for i, piece in enumerate(pieces):
        closing = '"' + (tail if i + 1 == len(pieces) else "")
        if i and len(line) + len(piece) + len(closing) > WIDTH:
            lines.append(line + '"')
            line = indent + '"'
        line += piece
    return lines + [line + '"' + tail]


def _statement(head: str, items: list[str], tail: str = ";") -> list[str]:
    """`    head item, item...tail`, wrapped at WIDTH with continuation lines indented by eight."""
    lines, line = [], "    " + head
    for i, item in enumerate(items):
        piece = item + (", " if i + 1 < len(items) else tail)
        if len(line) + len(piece.rstrip()) > WIDTH and not line.endswith(head):
            lines.append(line.rstrip())
            line = " " * 8
        line += piece
    return lines + [line]


def kernel_function(table, kernel) -> list[str]:
    """The PrivateUse1 kernel of NPU_NAMESPACE::<base>: one launch of the AscendC kernel through its aclnn API, the
    tensors as the caller gave them (inputs prepared for the device, outputs checked: the caller allocates them)."""
    written = {t.name for t in kernel.outputs}
    tensors = [a for a in kernel.npu_arguments if isinstance(a, table.Tensor)]
    first = tensors[0].name
    params = [f"{cpp_argument_type(kind)} {name}" for kind, name in _schema_arguments(kernel.npu_schema)]
    summary = f"{kernel.op_type}: {kernel.summary}" if kernel.summary else kernel.op_type
    lines = textwrap.wrap(summary, WIDTH, initial_indent="// ", subsequent_indent="// ")
    lines += _declaration(f"void {kernel.op_type}", params, " {")
    lines.append(f"    c10::OptionalDeviceGuard guard(at::device_of({first}));")
    read = [t for t in tensors if t.name not in written]
    required = [f"{t.name}_in = Prepared({t.name}, {first})" for t in read if not t.optional]
    if required:
        lines += _statement("const at::Tensor ", required)
    for t in read:
        if t.optional:
            lines.append(f"    const std::optional<at::Tensor> {t.name}_in = PreparedOptional({t.name}, {first});")
    for t in tensors:
        if t.name in written:
            lines.append(f'    CheckWritable({t.name}, {first}, "{kernel.base}", "{t.name}");')
    lines.append(f"    if ({first}.numel() == 0) return;  // no launch over an empty grid")

    def acl(t) -> str:
        source = t.name if t.name in written else f"{t.name}_in"
        return f"{t.name}_acl = {'AsAclOptional' if t.optional else 'AsAclShaped'}({source})"

    lines += _statement("const AclTensor ", [acl(t) for t in tensors])
    lists = [a for a in kernel.attrs if a.type == "list_int"]
    if lists:
        lines += _statement("const AclIntArray ", [f"{a.name}_acl = AsAclList({a.name})" for a in lists])
    call = [f"{a.name}_acl.get()" if isinstance(a, table.Tensor) or a.type == "list_int" else a.name
            for a in kernel.npu_arguments]
    lines += _statement("ACTS_ACLNN(", [kernel.op_type, tensors[0].name, *call], ");")
    lines += ["}", ""]
    return lines


def registrations(table) -> str:
    namespace = table.NPU_NAMESPACE
    lines = [f"// {table.GENERATED_MARK}",
             f"// Included at the end of npu_ops.cpp (its helpers): the private op {namespace}::<base> of every",
             "// AscendC kernel of the op table (schema: op_table.Kernel.npu_schema) and its PrivateUse1 kernel, one",
             "// aclnn launch with the inputs, attributes and outputs in the OpDef's order. The op layer's launch",
             "// sequence (python/ascend_acts/ops/<op>/kernels.py, through backends/launch.py) allocates the outputs",
             "// and calls it.",
             "namespace {"]
    for kernel in table.KERNELS:
        lines += kernel_function(table, kernel)
    lines += ["}  // namespace", "", f"TORCH_LIBRARY({namespace}, m) {{"]
    for kernel in table.KERNELS:
        lines += _string_call("    m.def(", f"{kernel.base}{kernel.npu_schema}", ");")
    lines += ["}", "", f"TORCH_LIBRARY_IMPL({namespace}, PrivateUse1, m) {{"]
    lines += [f'    m.impl("{kernel.base}", TORCH_FN({kernel.op_type}));' for kernel in table.KERNELS]
    lines += ["}", ""]
    return "\n".join(lines)
