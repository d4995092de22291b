"""docs/adding_an_op.md lists the files an op needs: every row of its table that names a kernel's `<family>` or
`<base>` is checked against the tree for every kernel of the op table, and every other row names a file or
folder that exists."""

import importlib.util
import re
from pathlib import Path

import pytest

from ascend_acts import op_table

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs/adding_an_op.md"


def listed_files(text: str) -> list[tuple[str, str]]:
    """(path, kind) of each row of the table under "## The files an op needs"."""
    section = text.split("## The files an op needs", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| `")]
    return [(path, kind.strip()) for cell, kind in rows for path in re.findall(r"`([^`]+)`", cell)]


def expand(path: str, kernel) -> Path:
    return ROOT / path.replace("<family>", kernel.family).replace("<base>", kernel.base)


def missing(text: str) -> list[str]:
    files = listed_files(text)
    assert files, "no table of files in docs/adding_an_op.md"
    gone = []
    folder = ""
    for path, _ in files:
        if "/" not in path:  # a second file in the same cell: the folder of the one before
            path = folder + path
        folder = path.rsplit("/", 1)[0] + "/"
        if "<family>" in path or "<base>" in path:
            gone += [str(expand(path, k).relative_to(ROOT)) for k in op_table.KERNELS if not expand(path, k).exists()]
        elif not (ROOT / path).exists():
            gone.append(path)
    return gone


def test_every_listed_file_exists_for_every_kernel():
    assert missing(DOC.read_text()) == []


def test_the_per_kernel_files_are_listed():
    paths = {path for path, _ in listed_files(DOC.read_text())}
    assert {"op_kernel/<family>/<base>.cpp", "op_host/<family>/<base>.cpp", "op_host/<family>/<base>.json",
            "op_kernel/<family>/<family>_tiling_data.h", "op_host/<family>/<family>_tiling.h",
            "op_host/<family>/<family>_op_host.h", "op_host/<family>/<family>_emulator.h",
            "python/ascend_acts/op_table.py"} <= paths


def test_the_generated_rows_are_what_the_generator_writes():
    """A row of kind "generated" names files scripts/generate_op_files.py writes (for every kernel), and every file
    of ascendc_sim/binding/ the generator writes is listed: a new family edits no binding file."""
    script = ROOT / "scripts/generate_op_files.py"
    spec = importlib.util.spec_from_file_location("_generate_op_files_for_the_doc", script)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    written = {path.relative_to(ROOT).as_posix() for path in generator.generated_files(generator.load_table())}
    listed, folder = [], ""
    for path, kind in listed_files(DOC.read_text()):
        path = path if "/" in path else folder + path
        folder = path.rsplit("/", 1)[0] + "/"
        if kind == "generated":
            listed += [expand(path, k).relative_to(ROOT).as_posix() for k in op_table.KERNELS]
    assert listed and set(listed) <= written
    assert {path for path in written if path.startswith("ascendc_sim/binding/")} <= set(listed)


@pytest.mark.parametrize("row", ["| `op_kernel/<family>/<base>_entry.cpp` | write | x |",
                                 "| `python/ascend_acts/no_such_module.py` | edit | x |"])
def test_a_listed_file_that_is_not_there_is_caught(row):
    first = "| `python/ascend_acts/op_table.py` |"
    text = DOC.read_text().replace(first, row + "\n" + first)
    assert missing(text)
