"""docs/adding_an_op.md lists the files an op needs: every row of its table that names a kernel's `<family>` or
`<base>` is checked against the tree for every kernel of the op table, every row naming `<op>` for every op folder
of the table (`TorchOp.folder`), and every other row names a file or folder that exists."""

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


FOLDERS = sorted({op.folder for op in op_table.TORCH_OPS})


def expand(path: str, kernel) -> Path:
    return ROOT / path.replace("<family>", kernel.family).replace("<base>", kernel.base)


def expansions(path: str) -> list[Path]:
    """The files a row names: one per kernel (`<family>`, `<base>`), one per op folder (`<op>`), or the path."""
    if "<op>" in path:
        return [ROOT / path.replace("<op>", folder) for folder in FOLDERS]
    if "<family>" in path or "<base>" in path:
        return [expand(path, k) for k in op_table.KERNELS]
    return [ROOT / path]


def missing(text: str) -> list[str]:
    files = listed_files(text)
    assert files, "no table of files in docs/adding_an_op.md"
    gone = []
    folder = ""
    for path, _ in files:
        if "/" not in path:  # a second file in the same cell: the folder of the one before
            path = folder + path
        folder = path.rsplit("/", 1)[0] + "/"
        gone += [str(file.relative_to(ROOT)) for file in expansions(path) if not file.exists()]
    return gone


def test_every_listed_file_exists_for_every_kernel():
    assert missing(DOC.read_text()) == []


def test_the_per_kernel_files_are_listed():
    paths = {path for path, _ in listed_files(DOC.read_text())}
    assert {"op_kernel/<family>/<base>.cpp", "op_host/<family>/<base>.cpp", "op_host/<family>/<base>.json",
            "op_kernel/<family>/<family>_tiling_data.h", "op_host/<family>/<family>_tiling.h",
            "python/ascend_acts/op_table.py", "python/ascend_acts/ops/<op>/semantics.py",
            "python/ascend_acts/ops/<op>/reference.py", "python/ascend_acts/ops/<op>/torch_ops.py",
            "python/ascend_acts/ops/<op>/kernels.py"} <= paths


def test_every_op_folder_is_the_folder_of_an_op_of_the_table():
    """ops/ holds the op layer's machinery (`_*.py`) and one folder per op of the table, nothing else: a folder no
    op names would never be imported."""
    ops = ROOT / "python/ascend_acts/ops"
    folders = {p.name for p in ops.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(FOLDERS)
    assert all(p.name.startswith("_") for p in ops.glob("*.py"))


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


def hand_written(folder: Path, generated: set[Path]) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file() and "__pycache__" not in path.parts
            and path not in generated]


def test_the_fused_bias_family_is_twelve_hand_written_files():
    """Issue 24: a new op family (the fused bias one, with its nn module) is at most 12 hand-written files, at most
    2 outside its own folders besides the table row, and no file of the emulator binding or CANN glue; the doc
    states the count."""
    script = ROOT / "scripts/generate_op_files.py"
    spec = importlib.util.spec_from_file_location("_generate_op_files_for_the_count", script)
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    generated = set(generator.generated_files(generator.load_table()))
    family = "fused_bias_leaky_relu"
    own = [path for folder in (f"op_kernel/{family}", f"op_host/{family}", f"python/ascend_acts/ops/{family}")
           for path in hand_written(ROOT / folder, generated)]
    assert [p.name for p in hand_written(ROOT / f"op_host/{family}", generated)] == [f"{family}_tiling.h"]
    outside = ["python/ascend_acts/functional.py", "python/ascend_acts/nn/activation.py"]
    assert all(family in (ROOT / path).read_text() or "FusedLeakyReLU" in (ROOT / path).read_text()
               for path in outside)
    assert len(own) + 1 + len(outside) == 12  # + the table row
    assert "12 hand-written files, 2 outside its folders" in " ".join(DOC.read_text().split())


@pytest.mark.parametrize("row", ["| `op_kernel/<family>/<base>_entry.cpp` | write | x |",
                                 "| `python/ascend_acts/ops/<op>/no_such_module.py` | write | x |",
                                 "| `python/ascend_acts/no_such_module.py` | edit | x |"])
def test_a_listed_file_that_is_not_there_is_caught(row):
    first = "| `python/ascend_acts/op_table.py` |"
    text = DOC.read_text().replace(first, row + "\n" + first)
    assert missing(text)
