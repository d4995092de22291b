"""The files generated from the op table are current (`python scripts/generate_op_files.py --check`), and the check
catches a stale, a missing and a leftover generated file."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts/generate_op_files.py"


def run(*args: str, root: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / "scripts/generate_op_files.py"), *args], capture_output=True,
                          text=True, timeout=120)


def test_generated_files_are_current():
    result = run("--check")
    assert result.returncode == 0, result.stderr


def load_generator():
    spec = importlib.util.spec_from_file_location("_generate_op_files_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_kernel_and_torch_op_has_its_generated_files():
    generator = load_generator()
    table = generator.load_table()
    files = {path.relative_to(ROOT).as_posix() for path in generator.generated_files(table)}
    for kernel in table.KERNELS:
        assert {f"op_host/{kernel.family}/{kernel.base}.cpp", f"op_host/{kernel.family}/{kernel.base}.json"} <= files
    assert {"python/ascend_acts/csrc/acts_aclnn_ops.h", "python/ascend_acts/csrc/npu_registrations.inc"} <= files


@pytest.fixture
def copy_of_the_tree(tmp_path):
    """The generator, the table and the generated files' folders, copied: the check runs on the copy."""
    for folder in ("scripts", "op_host", "op_kernel", "python/ascend_acts/csrc", "ascendc_sim"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "python/ascend_acts/op_table.py", tmp_path / "python/ascend_acts/op_table.py")
    assert run("--check", root=tmp_path).returncode == 0
    return tmp_path


def test_stale_missing_and_leftover_files_are_named_and_fixed(copy_of_the_tree):
    root = copy_of_the_tree
    opdef = root / "op_host/elementwise/leaky_relu.cpp"
    opdef.write_text(opdef.read_text().replace("Float(0.01)", "Float(0.2)"))
    (root / "op_host/elementwise/rrelu.json").unlink()
    leftover = root / "op_host/elementwise/old_op.json"
    leftover.write_text("[]\n")
    result = run("--check", root=root)
    assert result.returncode == 1
    assert "stale: op_host/elementwise/leaky_relu.cpp" in result.stderr
    assert "stale: op_host/elementwise/rrelu.json" in result.stderr
    assert "no longer generated: op_host/elementwise/old_op.json" in result.stderr
    assert run(root=root).returncode == 0  # writing fixes all three
    assert run("--check", root=root).returncode == 0 and not leftover.exists()


def test_a_table_change_makes_the_files_stale(copy_of_the_tree):
    root = copy_of_the_tree
    table = root / "python/ascend_acts/op_table.py"
    table.write_text(table.read_text().replace('Attr("eps", "float", 1e-5)', 'Attr("eps", "float", 1e-3)'))
    result = run("--check", root=root)
    assert result.returncode == 1
    assert "stale: op_host/batch_norm_leaky_relu/batch_norm_leaky_relu.cpp" in result.stderr
    assert "stale: op_host/batch_norm_leaky_relu/batch_norm_leaky_relu.json" in result.stderr


NEW_FAMILY_KERNEL = """\
    Kernel("foo", family="foo", inputs=(Tensor("x"),), outputs=(Tensor("y"),), attrs=(),
           tiling="FooTiling", tiling_variant="ascend_acts::FooPass::Forward", infer_shape="ge::SameShapeAsInput0",
           infer_dtype="ge::SameTypeAsInput0"),
"""
NEW_FAMILY_STRUCT = """\
#pragma once
#include <cstdint>
namespace ascend_acts {
enum class FooPass : uint32_t { Forward = 0 };
struct FooTiling {
    uint64_t totalLength;
    uint32_t usedCoreNum, tileLength;
    float scale;
};
}  // namespace ascend_acts
"""


def add_family(root: Path, struct: str = NEW_FAMILY_STRUCT) -> None:
    """A kernel of a new family in the table, and the family's tiling struct: what the emulator binding needs."""
    table = root / "python/ascend_acts/op_table.py"
    opening = "KERNELS: tuple[Kernel, ...] = (\n"
    assert opening in table.read_text()
    table.write_text(table.read_text().replace(opening, opening + NEW_FAMILY_KERNEL))
    (root / "op_kernel/foo").mkdir()
    (root / "op_kernel/foo/foo_tiling_data.h").write_text(struct)


def test_a_new_family_edits_no_binding_file(copy_of_the_tree):
    """Adding a family (a new tiling struct) regenerates the binding's generated files; every other file of
    ascendc_sim/binding/ stays as it is (tests/test_sim_binding.py: none of them names a family)."""
    root = copy_of_the_tree
    binding = root / "ascendc_sim/binding"
    before = {path.name: path.read_text() for path in binding.iterdir()}
    add_family(root)
    assert run("--check", root=root).returncode == 1
    result = run(root=root)
    assert result.returncode == 0, result.stderr
    after = {path.name: path.read_text() for path in binding.iterdir()}
    assert after.keys() == before.keys()
    changed = sorted(name for name in after if after[name] != before[name])
    assert changed == ["launch_table.inc", "tiling_classes.inc", "tiling_headers.inc", "tiling_list.inc"]
    generator = load_generator()
    assert all(generator.load_table().GENERATED_MARK in after[name] for name in changed)
    assert "TilingKind::FooTiling, uint32_t(ascend_acts::FooPass::Forward)" in after["launch_table.inc"]
    assert "    X(FooTiling)" in after["tiling_list.inc"]
    assert '#include "foo_tiling.h"' in after["tiling_headers.inc"]
    assert 'c.def_readonly("used_core_num", &ascend_acts::FooTiling::usedCoreNum);' in after["tiling_classes.inc"]
    assert 'DefineTilingFunction<ascend_acts::FooTiling>(m, "foo_tiling");' in after["tiling_classes.inc"]
    # the CANN side too: the OpDef names the one generic TilingFunc with the kernel's struct, variant and inputs
    opdef = (root / "op_host/foo/foo.cpp").read_text()
    assert '#include "foo_tiling.h"' in opdef and "SetTiling(optiling::ActsFooTilingFunc)" in opdef
    assert ("RequestTilingFunc<ascend_acts::FooTiling>(context, uint32_t(ascend_acts::FooPass::Forward)" in opdef
            and "/*optionalInputs=*/{false}" in opdef)


@pytest.mark.parametrize(("struct", "message"), [
    (NEW_FAMILY_STRUCT.replace("    float scale;", "    float scale[2];"),
     "op_kernel/foo/foo_tiling_data.h:8: struct FooTiling: cannot parse 'float scale[2];'"),
    (NEW_FAMILY_STRUCT.replace("FooTiling", "BarTiling"),
     "op_kernel/foo/foo_tiling_data.h: struct FooTiling is not declared"),
])
def test_a_tiling_struct_the_generator_cannot_read_is_named(copy_of_the_tree, struct, message):
    root = copy_of_the_tree
    add_family(root, struct)
    result = run(root=root)
    assert result.returncode == 1
    assert f"generate_op_files.py: emulator.py: {message}" in result.stderr
    assert "Traceback" not in result.stderr
