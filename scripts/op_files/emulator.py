"""Everything in the emulator binding (ascendc_sim/binding/) that names a kernel, a family or a tiling struct, derived
from the op table and from each family's own files. The hand-written binding sources are generic; a new family
adds its files to op_kernel/<family>/ and op_host/<family>/ and edits nothing in ascendc_sim/binding/.

- launch_table.inc: one `KernelEntry` per `op_table.Kernel`: its base name (what `ascend_acts._sim.launch` takes),
  its entry (`acts_<base>`, the name the emulator reports), the tiling struct and variant its host tiling function
  fills, whether it relies on integer wraparound, its GM parameters in the entry's order (inputs, then outputs; an
  in-place tensor appears in both under one name), its attributes (name, `ascend_acts::AttrKind`) and a runner
  calling the entry.
- tiling_list.inc: `ACTS_SIM_TILINGS(X)`, `X(<Struct>)` for each tiling struct the table's kernels fill: the
  `TilingKind` values (kernel_table.h) and the launch's switch (launch.cpp) expand it.
- tiling_headers.inc: each family's pure tiling, op_host/<family>/<family>_tiling.h (its `TilingFor`, the one the
  CANN TilingFunc runs too, and how a launch reads the family's struct: `LaunchBlocks`, `LaunchTileLength`,
  optionally `LaunchWorkspaceBytes`; op_host/common/tiling_request.h).
- tiling_classes.inc: the Python class of each tiling struct (and of the plain structs it nests), one read-only
  attribute per field, named as the field in snake_case, parsed from op_kernel/<family>/<family>_tiling_data.h
  (`parse_structs`); then each family's Python tiling function `<family>_tiling`, the same generic one for every
  struct (module.cpp's DefineTilingFunction).

The tiling struct is `Kernel.tiling` (ascend_acts::<Struct>, the plain struct declared in
op_kernel/<family>/<family>_tiling_data.h that the pure TilingFor of op_host/ fills) and its variant
`Kernel.tiling_variant`.

scripts/generate_op_files.py imports `files` (paths relative to the repository root); running this module as a
script writes its files alone.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BINDING = Path("ascendc_sim/binding")
OUTPUT = BINDING / "launch_table.inc"
TILING_LIST = BINDING / "tiling_list.inc"
TILING_HEADERS = BINDING / "tiling_headers.inc"
TILING_CLASSES = BINDING / "tiling_classes.inc"
# Attr.type -> ascend_acts::AttrKind
_ATTR_KINDS = {"float": "Float", "bool": "Bool", "int": "Int", "list_int": "ListInt"}


def tiling_of(kernel) -> tuple[str, str]:
    """(struct, variant expression) of a kernel's tiling."""
    if not re.fullmatch(r"[A-Z]\w*", kernel.tiling):
        raise ValueError(f"{kernel.base}: tiling {kernel.tiling!r} is not the name of a struct of ascend_acts")
    return kernel.tiling, kernel.tiling_variant


# --- the tiling structs, parsed from op_kernel/<family>/<family>_tiling_data.h -----------------------------------

SCALARS = ("uint32_t", "int32_t", "uint64_t", "float", "bool")
_STRUCT_OPEN = re.compile(r"struct (?P<name>\w+) \{")
_FIELDS = re.compile(r"(?P<type>\w+) (?P<names>\w+(?:, \w+)*);")
_PADDING = re.compile(r"reserved\d*")  # fields that only pad the struct: not bound


class TilingParseError(ValueError):
    """A tiling struct the parser cannot read: its file and line, and why."""


@dataclass(frozen=True)
class Field:
    name: str  # the C++ field
    type: str  # one of SCALARS, or a plain struct of the same file

    @property
    def python(self) -> str:
        """The Python attribute: the field's name in snake_case (padH -> pad_h, l0cBuffers -> l0c_buffers)."""
        return snake(self.name)


@dataclass(frozen=True)
class Struct:
    name: str
    fields: tuple[Field, ...]
    doc: str  # the `//` comment right above the struct, else where it is declared
    path: Path  # relative to the repository root


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def tiling_data_header(family: str) -> Path:
    return Path("op_kernel") / family / f"{family}_tiling_data.h"


def parse_structs(text: str, name: str, path: Path) -> list[Struct]:
    """Struct `name` of a tiling-data header and the plain structs it nests, nested ones first (each once).

    Strict: a struct is `struct <Name> {` at the start of a line, closed by `};` at the start of a line, and holds
    only lines `<type> <field>[, <field>...];` (each may end in a `//` comment; comment-only and empty lines are
    allowed), with <type> one of SCALARS or another such struct of the same file. Anything else (methods, arrays,
    initialisers, block comments, a field over two lines, a type from elsewhere) raises TilingParseError."""
    lines = text.splitlines()
    found: dict[str, Struct] = {}
    order: list[Struct] = []

    def fail(line: int, message: str):
        where = f"{path}:{line}" if line else f"{path}"
        raise TilingParseError(f"{where}: {message} (scripts/op_files/emulator.py reads tiling structs of "
                               f"fields `<type> <name>[, <name>...];`, types {', '.join(SCALARS)} or a plain "
                               "struct of the same file)")

    def parse(struct_name: str, used_at: int, seen: tuple[str, ...]) -> None:
        if struct_name in found:
            return
        if struct_name in seen:
            fail(used_at, f"struct {struct_name} contains itself")
        opening = [i for i, line in enumerate(lines) if _STRUCT_OPEN.fullmatch(line.rstrip())
                   and _STRUCT_OPEN.fullmatch(line.rstrip())["name"] == struct_name]
        if len(opening) != 1:
            where = "is not declared" if not opening else "is declared more than once"
            fail(used_at, f"struct {struct_name} {where} as `struct {struct_name} {{` at the start of a line")
        first = opening[0]
        doc: list[str] = []
        for line in reversed(lines[:first]):
            if not line.startswith("//"):
                break
            doc.insert(0, line[2:].strip())
        fields: list[Field] = []
        for number, line in enumerate(lines[first + 1:], start=first + 2):
            if line.rstrip() == "};":
                break
            if "/*" in line:
                fail(number, f"struct {struct_name}: a block comment")
            code = line.split("//", 1)[0].strip()
            if not code:
                continue
            match = _FIELDS.fullmatch(code)
            if match is None:
                fail(number, f"struct {struct_name}: cannot parse {code!r}")
            kind = match["type"]
            if kind not in SCALARS:
                if not re.fullmatch(r"[A-Z]\w*", kind):
                    fail(number, f"struct {struct_name}: field type {kind!r} is neither a scalar nor a struct")
                parse(kind, number, seen + (struct_name,))
            fields += [Field(field, kind) for field in match["names"].split(", ") if not _PADDING.fullmatch(field)]
        else:
            fail(first + 1, f"struct {struct_name}: no `}};` at the start of a line closes it")
        if not fields:
            fail(first + 1, f"struct {struct_name} has no fields")
        names = [f.python for f in fields]
        if len(set(names)) != len(names):
            fail(first + 1, f"struct {struct_name}: two fields have one snake_case name")
        struct = Struct(struct_name, tuple(fields), " ".join(doc) or f"{path.as_posix()}'s struct.", path)
        found[struct_name] = struct
        order.append(struct)

    parse(name, 0, ())
    return order


@dataclass(frozen=True)
class Family:
    name: str
    struct: str  # the tiling struct its kernels fill


def families(table) -> list[Family]:
    """The tiling families of the table, in the order of their first kernel: one struct per family."""
    out: dict[str, Family] = {}
    owner: dict[str, str] = {}
    for kernel in table.KERNELS:
        struct, _ = tiling_of(kernel)
        family = out.setdefault(kernel.family, Family(kernel.family, struct))
        if family.struct != struct:
            raise ValueError(f"{kernel.base}: family {kernel.family} fills {family.struct}, this kernel {struct}: "
                             "a family has one tiling struct")
        if owner.setdefault(struct, kernel.family) != kernel.family:
            raise ValueError(f"{kernel.base}: tiling struct {struct} belongs to family {owner[struct]}, not "
                             f"{kernel.family}")
    return list(out.values())


def structs_of(family: Family, root: Path = ROOT) -> list[Struct]:
    path = tiling_data_header(family.name)
    if not (root / path).is_file():
        raise TilingParseError(f"{path}: missing (family {family.name}'s tiling struct {family.struct} is declared "
                               "there)")
    return parse_structs((root / path).read_text(), family.struct, path)


# --- the generated files ------------------------------------------------------------------------------------------

def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _declaration(kernel) -> str:
    names = [t.name for t in kernel.inputs] + [f"{t.name}Out" if t.name in kernel.inplace else t.name
                                               for t in kernel.outputs]
    return f'extern "C" void {kernel.entry}({", ".join(f"GM_ADDR {n}" for n in names)}, GM_ADDR workspace, ' \
           "GM_ADDR tiling);"


def _entry(kernel) -> str:
    struct, variant = tiling_of(kernel)
    params = [(t.name, "In") for t in kernel.inputs] + [
        (t.name, "InOut" if t.name in kernel.inplace else "Out") for t in kernel.outputs]
    gm = ", ".join(f"gm[{i}]" for i in range(len(params)))
    listed = ", ".join(f'{{"{name}", Direction::{direction}}}' for name, direction in params)
    attrs = ", ".join(f'{{"{a.name}", ascend_acts::AttrKind::{_ATTR_KINDS[a.type]}}}' for a in kernel.attrs)
    return (f'    {{"{kernel.base}", "{kernel.entry}", TilingKind::{struct}, uint32_t({variant}), '
            f"/*wrapsIntegers=*/{str(kernel.int_wraparound).lower()}, /*mix=*/{str(kernel.mix).lower()},\n"
            f"     {{{listed}}},\n"
            "     [](GM_ADDR const* gm, GM_ADDR workspace, GM_ADDR tiling) "
            f"{{ {kernel.entry}({gm}, workspace, tiling); }},\n"
            f"     /*rawWorkspaceBytes=*/nullptr, {{{attrs}}}}},")


def launch_table(table) -> str:
    lines = [f"// {table.GENERATED_MARK}",
             "// The kernels of the op table on the emulator (scripts/op_files/emulator.py, ascendc_sim/binding/"
             "kernel_table.h).", ""]
    lines += [_declaration(k) for k in table.KERNELS]
    lines += ["", "namespace ascend_acts_sim {", "", "const KernelEntry kOpKernels[] = {"]
    lines += [_entry(k) for k in table.KERNELS]
    lines += ["};", "", "}  // namespace ascend_acts_sim", ""]
    return "\n".join(lines)


def tiling_list(table, found: list[Family]) -> str:
    lines = [f"// {table.GENERATED_MARK}",
             "// The tiling structs of the op table's kernels (Kernel.tiling), one X(Struct) each: kernel_table.h's",
             "// TilingKind and launch.cpp's switch expand it (scripts/op_files/emulator.py).",
             "#define ACTS_SIM_TILINGS(X) \\"]
    lines += [f"    X({family.struct})" + (" \\" if i + 1 < len(found) else "") for i, family in enumerate(found)]
    return "\n".join(lines + [""])


def tiling_headers(table, found: list[Family]) -> str:
    lines = [f"// {table.GENERATED_MARK}",
             "// Each tiling family's pure tiling: its TilingFor and how a launch reads its struct (LaunchBlocks,",
             "// LaunchTileLength, LaunchWorkspaceBytes; op_host/common/tiling_request.h); scripts/op_files/"
             "emulator.py."]
    lines += [f'#include "{family.name}_tiling.h"' for family in found]
    return "\n".join(lines + [""])


def _class(struct: Struct) -> list[str]:
    cls = f"ascend_acts::{struct.name}"
    lines = [f"    DefineTilingClass<{cls}>(m, {_c_string(struct.name)}, {_c_string(struct.doc)}, [](auto& c) {{"]
    lines += [f'        c.def_readonly("{f.python}", &{cls}::{f.name});' for f in struct.fields]
    return lines + ["    });"]


def tiling_classes(table, found: list[Family], root: Path = ROOT) -> str:
    lines = [f"// {table.GENERATED_MARK}",
             "// The Python classes of the tiling structs (a nested struct's first), a read-only attribute per field "
             "as",
             "// op_kernel/<family>/<family>_tiling_data.h declares it, in snake_case; then each family's tiling "
             "function",
             "// <family>_tiling (its TilingFor). Included by module.cpp, which defines DefineTilingClass and",
             "// DefineTilingFunction (scripts/op_files/emulator.py).", "",
             "namespace {", "", "void DefineTilings(pybind11::module_& m) {"]
    defined: set[str] = set()
    for family in found:
        for struct in structs_of(family, root):
            if struct.name not in defined:
                defined.add(struct.name)
                lines += _class(struct)
    lines += [f'    DefineTilingFunction<ascend_acts::{family.struct}>(m, "{family.name}_tiling");' for family in found]
    lines += ["}", "", "}  // namespace", ""]
    return "\n".join(lines)


def files(table, root: Path = ROOT) -> dict[Path, str]:
    found = families(table)
    return {OUTPUT: launch_table(table), TILING_LIST: tiling_list(table, found),
            TILING_HEADERS: tiling_headers(table, found), TILING_CLASSES: tiling_classes(table, found, root)}


def _load_table():
    spec = importlib.util.spec_from_file_location("op_table", ROOT / "python/ascend_acts/op_table.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    for path, text in files(_load_table()).items():
        (ROOT / path).write_text(text)
        print(f"wrote {path}")
