"""What of the NPU definitions is not generated from the op table (scripts/generate_op_files.py writes the OpDefs,
the msopgen JSONs, the aclnn declarations and the extension's registrations; tests/test_generated_files.py checks
they are current): each table kernel's entry, hand-written in op_kernel/<family>/<base>.cpp, takes the table's
inputs and outputs in its order under the name msopgen gives the op type; the tiling structs the kernels read
agree with their Python mirrors; and the build scripts fail fast and clearly without the toolkit."""

import os
import re
import subprocess
from pathlib import Path

import pytest

from ascend_acts import op_table
from ascend_acts.backends import sim

ROOT = Path(__file__).resolve().parents[1]
ENTRY = re.compile(r'extern "C" __global__ __aicore__ void (\w+)\(([^)]*)\)')


def msopgen_name(op_type: str) -> str:
    """The name msopgen 8.1 gives an op's files and kernel entry (op_gen/interface/utils.py
    fix_name_lower_with_under, as its docstring specifies): lower case, "_" before a capital that follows a
    lower-case letter or digit, or that follows a capital and precedes a lower-case letter."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", op_type).lower()


def test_msopgen_name_follows_the_documented_examples():
    examples = {"Abc": "abc", "AbcDef": "abc_def", "ABCDef": "abc_def", "Abc2DEf": "abc2_d_ef",
                "Abc2DEF": "abc2_def", "ABC2dEF": "abc2d_ef", "ActsRrelu": "acts_rrelu"}
    assert {name: msopgen_name(name) for name in examples} == examples


@pytest.mark.parametrize("kernel", op_table.KERNELS, ids=lambda k: k.base)
def test_the_table_spells_the_entry_as_msopgen_names_it(kernel):
    """scripts/build_npu.sh replaces each template msopgen generates with our kernel of the same entry name."""
    assert msopgen_name(kernel.op_type) == kernel.entry


def lower_camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(word.capitalize() for word in rest)


def entry_parameters(kernel) -> list[str]:
    """The GM addresses the launch passes, in the OpDef's order: inputs, outputs (one that is also an input, updated
    in place, as <name>Out), workspace, tiling; named as the table names them, in lowerCamelCase."""
    inputs = [t.name for t in kernel.inputs]
    outputs = [lower_camel(t.name) + ("Out" if t.name in inputs else "") for t in kernel.outputs]
    return [lower_camel(name) for name in inputs] + outputs + ["workspace", "tiling"]


def check_entry(kernel, source: str) -> None:
    """Raises AssertionError unless `source` defines the kernel's entry with the table's parameters."""
    entries = {name: [p.split()[-1] for p in params.split(",")] for name, params in ENTRY.findall(source)}
    assert list(entries) == [kernel.entry], (kernel.base, list(entries))
    params = re.findall(rf'void {kernel.entry}\(([^)]*)\)', source)[0]
    assert all(p.split()[:-1] == ["GM_ADDR"] for p in params.split(",")), params
    assert entries[kernel.entry] == entry_parameters(kernel), kernel.base


@pytest.mark.parametrize("kernel", op_table.KERNELS, ids=lambda k: k.base)
def test_each_kernel_entry_takes_the_tables_tensors_in_order(kernel):
    check_entry(kernel, (ROOT / "op_kernel" / kernel.family / f"{kernel.base}.cpp").read_text())


def test_no_kernel_entry_outside_the_table():
    defined = {name for path in (ROOT / "op_kernel").rglob("*.cpp") for name, _ in ENTRY.findall(path.read_text())}
    assert defined == {kernel.entry for kernel in op_table.KERNELS}


@pytest.mark.parametrize("alter", ["swap_inputs", "drop_output", "rename_entry"])
def test_a_disagreeing_entry_is_detected(alter):
    kernel = op_table.kernel("batch_norm_leaky_relu_grad")
    source = (ROOT / "op_kernel" / kernel.family / f"{kernel.base}.cpp").read_text()
    altered = {"swap_inputs": source.replace("(GM_ADDR dy, GM_ADDR saved,", "(GM_ADDR saved, GM_ADDR dy,"),
               "drop_output": source.replace(" GM_ADDR gradBias,", ""),
               "rename_entry": source.replace("void acts_batch_norm_leaky_relu_grad(",
                                              "void acts_batch_norm_leaky_relu_backward(")}[alter]
    assert altered != source
    with pytest.raises(AssertionError):
        check_entry(kernel, altered)


@pytest.mark.skipif(sim.unavailable_reason() is not None, reason=str(sim.unavailable_reason()))
def test_tiling_struct_is_seen_from_python_field_by_field():
    from ascend_acts import _sim

    header = (ROOT / "op_kernel/elementwise/elementwise_tiling_data.h").read_text()
    body = re.search(r"struct ElementwiseTiling \{(.*?)\};", header, re.S).group(1)
    fields = re.findall(r"^\s*(uint64_t|uint32_t|float)\s+(\w+);", body, re.M)
    snake = {re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower() for _, name in fields}
    assert {n for n in dir(_sim.ElementwiseTiling) if not n.startswith("_")} == snake



# --- the build scripts without CANN ---------------------------------------------------------------------------
def run_script(name, *args, env_overrides=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND")}
    env.update(env_overrides or {})
    return subprocess.run(["bash", str(ROOT / "scripts" / name), *args], capture_output=True, text=True, env=env,
                          timeout=60)


def test_build_script_fails_fast_without_cann(tmp_path):
    before = (ROOT / "build_out").exists()
    result = run_script("build_npu.sh")
    assert result.returncode == 3 and "CANN toolkit not found" in result.stderr
    result = run_script("build_npu.sh", env_overrides={"ASCEND_HOME_PATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 4 and "msopgen not on PATH" in result.stderr
    assert (ROOT / "build_out").exists() == before  # nothing created


def test_install_script_fails_fast(tmp_path):
    assert run_script("install_npu.sh").returncode == 3
    result = run_script("install_npu.sh", env_overrides={"ASCEND_HOME_PATH": str(tmp_path)})
    assert result.returncode == 4 and "run scripts/build_npu.sh first" in result.stderr
    result = run_script("install_npu.sh", "--bogus")
    assert result.returncode == 2
