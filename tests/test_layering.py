"""The package's layers, read from its source (no interpreter per module): no import cycles (function-level
imports included), no import from a higher layer, no package binding a name that hides one of its submodules.

Layers, lowest first: the op table and the compiled emulator; the shared numerics (`ascend_acts.numerics`); the
backends' infrastructure (selection, the NPU's status, the emulator); the op layer (`ascend_acts.ops`: its machinery
and one folder per op, with the op's semantics and every backend's functions); the public modules (functional, nn,
convert, ...). A module imports from its own
layer and the ones below only. An acyclic graph of explicit imports is what lets every module be imported
first, in any order.
"""

import ast
import sys
from pathlib import Path

import ascend_acts

PACKAGE = Path(ascend_acts.__file__).parent
COMPILED = ("ascend_acts._sim", "ascend_acts._sim_tests", "ascend_acts._cpu", "ascend_acts._npu_ops")
LAYERS = (
    ("ascend_acts.op_table", *COMPILED),
    ("ascend_acts.numerics",),
    ("ascend_acts.backends",),
    ("ascend_acts.ops",),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if path.name == "__init__.py" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
KNOWN = set(MODULES) | set(COMPILED)


def layer(module: str) -> int:
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return len(LAYERS)  # the public modules


def imports(module: str) -> set[str]:
    """The package modules `module` imports anywhere in its source (function bodies too), by absolute name."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source = ".".join(part for part in (base, node.module) if part)
            for alias in node.names:  # `from package import submodule` imports the submodule
                names.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in KNOWN else source)
    return {name for name in names if name == "ascend_acts" or name.startswith("ascend_acts.")}


def test_every_import_names_a_module_of_the_package():
    unknown = {(m, name) for m in MODULES for name in imports(m) if name not in KNOWN}
    assert not unknown, sorted(unknown)


def test_no_import_cycles():
    graph = {m: imports(m) & set(MODULES) for m in MODULES}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycle = path[path.index(target):] + [module, target] if target in path else [module, target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, path + [module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def test_no_cycles_between_subpackages():
    """Collapsed to the package's parts (a subpackage such as `ascend_acts.nn`, or a top-level module) the imports
    are acyclic too: a package's __init__ imports its modules, so a cycle through packages is a cycle at import."""
    def part(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for m in MODULES:
        if m != "ascend_acts":  # the root imports the public API; nothing imports it but for that
            graph.setdefault(part(m), set()).update(part(n) for n in imports(m) & set(MODULES)
                                                    if n != "ascend_acts" and part(n) != part(m))
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        for target in sorted(graph.get(node, ())):
            assert target not in path, "cycle: " + " -> ".join((*path, node, target)[path.index(target):])
            if target not in done:
                visit(target, (*path, node))
        done.add(node)

    for node in sorted(graph):
        visit(node, ())


def test_no_module_imports_from_a_higher_layer():
    upward = sorted(f"{m} -> {name}" for m in MODULES for name in imports(m) if layer(name) > layer(m))
    assert not upward, upward


def test_the_op_table_imports_nothing_but_the_standard_library():
    """Build scripts load it by path, without torch or the package."""
    tree = ast.parse(MODULES["ascend_acts.op_table"].read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_no_package_hides_a_submodule_behind_another_object():
    """`import ascend_acts.x.y as m` must give the module y, not a function the package bound to the name y."""
    hidden = []
    for module, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        submodules = {p.stem for p in path.parent.glob("*.py") if p.name != "__init__.py"}
        submodules |= {p.name for p in path.parent.iterdir() if p.is_dir() and any(p.glob("*.py"))}  # namespace too
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and not (node.level == 1 and node.module is None):
                hidden += [f"{module}.{a.asname or a.name}" for a in node.names if (a.asname or a.name) in submodules]
            elif isinstance(node, (ast.Assign, ast.FunctionDef, ast.ClassDef)):
                targets = node.targets if isinstance(node, ast.Assign) else [node]
                hidden += [f"{module}.{getattr(t, 'id', getattr(t, 'name', ''))}" for t in targets
                           if getattr(t, "id", getattr(t, "name", None)) in submodules]
    assert not hidden, hidden
