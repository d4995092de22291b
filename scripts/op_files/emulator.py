"""The emulator's launch table (ascendc_sim/binding/launch_table.inc), derived from the op table.

One `KernelEntry` per `op_table.Kernel`: its base name (what `ascend_acts._sim.launch` takes), its entry
(`acts_<base>`, the name the emulator reports), the tiling struct and variant its host tiling function
fills, whether it relies on integer wraparound, its GM parameters in the entry's order (inputs, then
outputs; an in-place tensor appears in both under one name) and a runner calling the entry.

The tiling struct and variant come from `Kernel.tiling` by one rule: the OpDef's tiling function is
`optiling::<Struct>Func` or `optiling::<Struct>Func<variant>`, and `<Struct>` (ascend_acts::<Struct>) is the
plain struct the pure tiling function of op_host/ fills.

scripts/generate_op_files.py imports `files` (paths relative to the repository root); running this module as a
script writes its file alone.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = Path("ascendc_sim/binding/launch_table.inc")
_TILING_FUNC = re.compile(r"optiling::(?P<struct>\w+)Func(?:<(?P<variant>[\w:]+)>)?")


def tiling_of(kernel) -> tuple[str, str]:
    """(struct, variant expression) of a kernel's tiling; variant "0" when the function has none."""
    match = _TILING_FUNC.fullmatch(kernel.tiling)
    if match is None:
        raise ValueError(f"{kernel.base}: tiling {kernel.tiling!r} is not optiling::<Struct>Func[<variant>]")
    return match["struct"], match["variant"] or "0"


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
    return (f'    {{"{kernel.base}", "{kernel.entry}", TilingKind::{struct}, uint32_t({variant}), '
            f"/*wrapsIntegers=*/{str(kernel.int_wraparound).lower()}, /*mix=*/{str(kernel.mix).lower()},\n"
            f"     {{{listed}}},\n"
            "     [](GM_ADDR const* gm, GM_ADDR workspace, GM_ADDR tiling) "
            f"{{ {kernel.entry}({gm}, workspace, tiling); }}}},")


def files(table) -> dict[Path, str]:
    lines = [f"// {table.GENERATED_MARK}",
             "// The kernels of the op table on the emulator (scripts/op_files/emulator.py, ascendc_sim/binding/"
             "kernel_table.h).", ""]
    lines += [_declaration(k) for k in table.KERNELS]
    lines += ["", "namespace ascend_acts_sim {", "", "const KernelEntry kOpKernels[] = {"]
    lines += [_entry(k) for k in table.KERNELS]
    lines += ["};", "", "}  // namespace ascend_acts_sim", ""]
    return {OUTPUT: "\n".join(lines)}


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
