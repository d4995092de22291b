"""The emulator binding against the op table: its launch table (ascendc_sim/binding/launch_table.inc) is
generated from python/ascend_acts/op_table.py and current; the compiled module launches exactly the table's
kernels; the sim backend implements every functional op the table gives it, and imports first."""

import importlib.util
from pathlib import Path

import pytest

from ascend_acts import op_table
from ascend_acts.backends import sim

ROOT = Path(__file__).resolve().parents[1]


def emulator_generator():
    spec = importlib.util.spec_from_file_location("op_files_emulator", ROOT / "scripts/op_files/emulator.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_launch_table_is_generated_from_the_op_table():
    for path, text in emulator_generator().files(op_table).items():
        assert (ROOT / path).read_text() == text, f"{path} is stale: python scripts/op_files/emulator.py"


@pytest.mark.skipif(sim.unavailable_reason() is not None, reason=str(sim.unavailable_reason()))
def test_the_module_launches_the_table_kernels():
    from ascend_acts import _sim

    rows = {row["name"]: row for row in _sim.kernels()}
    assert list(rows) == [k.base for k in op_table.KERNELS]
    for k in op_table.KERNELS:
        row = rows[k.base]
        assert row["entry"] == k.entry and row["wraps_integers"] == k.int_wraparound
        assert [name for name, _ in row["params"]] == [t.name for t in k.inputs + k.outputs]
        assert row["tiling"] == emulator_generator().tiling_of(k)[0]


def test_the_backend_implements_every_functional_op_it_is_listed_for():
    ops = [op.name for op in op_table.TORCH_OPS if "sim" in op.backends and not op.inplace]
    assert ops and all(callable(getattr(sim, name, None)) for name in ops)
