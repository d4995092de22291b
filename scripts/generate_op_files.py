"""Writes the files derived from the op table (python/ascend_acts/op_table.py), or checks that they are current.

    python scripts/generate_op_files.py           # write the stale ones, delete the ones no longer generated
    python scripts/generate_op_files.py --check   # exit 1 naming every stale file (tests/test_generated_files.py)

Every module scripts/op_files/*.py has `files(table) -> dict[Path, str]`: paths relative to the repository root,
and their whole text. Generated files are checked in and carry op_table.GENERATED_MARK (JSON, which has no comments, is
recognised by its folder instead). Needs neither torch nor the package: the table is loaded by path.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
GENERATOR_DIR = Path(__file__).resolve().parent / "op_files"
# where generated files live, to find the ones no table entry makes any more
SEARCHED = ("op_host", "op_kernel", "python/ascend_acts/csrc", "ascendc_sim")
SEARCHED_SUFFIXES = (".cpp", ".h", ".inc", ".json")


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def load_table() -> ModuleType:
    return _load(ROOT / "python/ascend_acts/op_table.py", "_ascend_acts_op_table")


def generated_files(table: ModuleType) -> dict[Path, str]:
    """Every generated file (absolute path) and its text, from every module of scripts/op_files/."""
    files: dict[Path, str] = {}
    for module_path in sorted(GENERATOR_DIR.glob("*.py")):
        module = _load(module_path, f"_op_files_{module_path.stem}")
        try:
            made = module.files(table)
        except ValueError as error:  # a table entry or a family's file the generator cannot read: name it
            raise SystemExit(f"generate_op_files.py: {module_path.name}: {error}") from error
        for relative, text in made.items():
            path = ROOT / relative
            if path in files:
                raise SystemExit(f"generate_op_files.py: {relative} is generated twice ({module_path.name})")
            files[path] = text
    return files


def _looks_generated(path: Path, mark: str) -> bool:
    if path.suffix == ".json":
        return path.parts[len(ROOT.parts)] == "op_host"  # the msopgen JSON of op_host/<family>/
    try:
        return mark in path.read_text()
    except (UnicodeDecodeError, OSError):
        return False


def orphans(files: dict[Path, str], mark: str) -> list[Path]:
    """Files that look generated but no module generates (an op removed from the table)."""
    found = [path for folder in SEARCHED if (ROOT / folder).is_dir() for path in (ROOT / folder).rglob("*")
             if path.suffix in SEARCHED_SUFFIXES and path.is_file() and path not in files]
    return sorted(path for path in found if _looks_generated(path, mark))


def stale(files: dict[Path, str]) -> list[Path]:
    return [path for path, text in files.items() if not path.is_file() or path.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a generated file is stale")
    args = parser.parse_args(argv)
    table = load_table()
    files = generated_files(table)
    outdated, extra = stale(files), orphans(files, table.GENERATED_MARK)
    relative = lambda path: path.relative_to(ROOT).as_posix()  # noqa: E731
    if args.check:
        for path in outdated:
            print(f"stale: {relative(path)}", file=sys.stderr)
        for path in extra:
            print(f"no longer generated: {relative(path)}", file=sys.stderr)
        if outdated or extra:
            print("generate_op_files.py: generated files are not current: run python scripts/generate_op_files.py",
                  file=sys.stderr)
            return 1
        return 0
    for path in outdated:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[path])
        print(f"wrote {relative(path)}")
    for path in extra:
        path.unlink()
        print(f"deleted {relative(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
