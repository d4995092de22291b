"""No import cycles: every module of the package imports first in a fresh interpreter, and the backends never
import the op layer (ascend_acts.ops, or the public modules above it)."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import ascend_acts

PACKAGE = Path(ascend_acts.__file__).parent
MODULES = sorted(info.name for info in pkgutil.walk_packages(ascend_acts.__path__, "ascend_acts."))
# what a backend may import from the package: other backends, the NumPy reference, the op table
BACKEND_MAY_IMPORT = ("ascend_acts.backends", "ascend_acts.reference", "ascend_acts.op_table", "ascend_acts._sim")


@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES)
def test_module_imports_first(module):
    result = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def _imports(path: Path, module: str) -> set[str]:
    """The absolute names of the package modules `module` (at `path`) imports."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source = ".".join(part for part in (base, node.module) if part)
            names.update(f"{source}.{alias.name}" if node.module is None else source for alias in node.names)
    return {name for name in names if name.startswith("ascend_acts")}


def test_backends_do_not_import_the_op_layer():
    checked = 0
    for path in sorted((PACKAGE / "backends").rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(relative.parts[:-1] if path.name == "__init__.py" else relative.parts)
        outside = sorted(name for name in _imports(path, module) if not name.startswith(BACKEND_MAY_IMPORT))
        assert not outside, f"{module} imports {outside}"
        checked += 1
    assert checked >= 5
