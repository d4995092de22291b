"""The emulator catches what it promises: one deliberately broken kernel per rule raises that rule,
naming the kernel and the block; every rule of the emulator (ascend_acts._sim.Rule) has such a kernel and
a row in docs/emulator.md."""

import re
from pathlib import Path

import numpy as np
import pytest

from ascend_acts.backends import sim
from test_emulator_cube import BROKEN_CUBE_KERNELS

pytestmark = pytest.mark.skipif(sim.unavailable_reason() is not None, reason=str(sim.unavailable_reason()))

DOCS = Path(__file__).resolve().parents[1] / "docs" / "emulator.md"

# (test kernel of tests/sim_kernels/broken_kernels.cpp, the rule it breaks, the block named, blocks launched)
BROKEN_KERNELS = [
    ("ub_overflow", "ub_overflow", 0, 2),
    ("unaligned_datacopy", "unaligned_datacopy", 0, 2),
    ("datacopy_pad_too_many_blocks", "datacopy_params", 0, 2),
    ("gm_read_out_of_bounds", "gm_out_of_bounds", 0, 2),
    ("gm_write_out_of_bounds", "gm_out_of_bounds", 0, 2),
    ("alloc_past_depth", "queue_depth", 0, 2),
    ("deque_empty", "deque_empty", 0, 2),
    ("leaked_tensor", "leaked_tensor", 0, 2),
    ("foreign_free", "foreign_free", 0, 2),
    ("overlapping_core_writes", "overlapping_core_writes", 1, 2),
    ("unwritten_output", "unwritten_output", None, 2),
    ("unsupported_dtype", "unsupported_dtype", 0, 2),
    ("unaligned_local", "unaligned_local", 0, 2),
    ("matmul_l0_overflow", "matmul_capacity", 0, 2),
    ("matmul_without_iterate", "matmul", 0, 2),
    ("matmul_after_initbuffer", "matmul", 0, 2),
    ("matmul_without_end", "leaked_tensor", 0, 2),
    ("matmul_registered_in_init", "matmul_scope", 0, 2),
    ("matmul_after_its_scope", "matmul_scope", 0, 2),
    ("gather_out_of_bounds", "ub_out_of_bounds", 0, 2),
    ("select_in_reserved_ub", "ub_reserved", 0, 2),
    ("allocation_after_select_in_reserved_ub", "ub_reserved", 0, 2),
    ("vec_index_past_2_24", "vec_index_precision", 0, 2),
    ("integer_wraparound", "integer_overflow", 0, 2),
    ("maxs_of_nan", "unspecified_nan", 0, 2),
    ("rng_without_declared_wraparound", "integer_overflow", 0, 2),
    ("not_in_ub", "not_in_ub", 0, 2),
    ("compare_scalar_partial_repeat", "vector_alignment", 0, 2),
    ("select_in_scalar_mode", "unsupported_mode", 0, 2),
    ("flag_outside_mix", "cross_core_flag", 0, 2),
    ("transdata_zero_repeats", "transdata_params", 0, 8),
    ("transdata_high_half", "transdata_params", 0, 8),
    ("transdata_past_buffer", "ub_out_of_bounds", 0, 8),
    ("transdata_unaligned", "unaligned_local", 0, 8),
    ("correct", "block_dim", None, 49),  # 910B1 has 48 vector cores
]


def kernels_module():
    from ascend_acts import _sim_tests

    return _sim_tests


def run_test_kernel(name: str, blocks: int = 2):
    data = np.arange(64 * blocks, dtype=np.float32)
    out = np.zeros_like(data)
    launch = kernels_module().launch(name, {"x": data, "y": out}, block_dim=blocks)
    return data, out, launch


@pytest.mark.parametrize("kernel, rule, block, blocks", BROKEN_KERNELS)
def test_broken_kernel_raises_its_rule(kernel, rule, block, blocks):
    with pytest.raises(sim.EmulatorError) as caught:
        run_test_kernel(kernel, blocks)
    assert (caught.value.kernel, caught.value.rule, caught.value.block) == (kernel, sim.Rule[rule], block)
    assert kernel in str(caught.value) and f"[{rule}]" in str(caught.value)


def test_correct_kernel_runs_and_is_counted():
    data, out, launch = run_test_kernel("correct", blocks=3)
    assert np.array_equal(out, data * 2)
    assert launch.gm_bytes_in == launch.gm_bytes_out == data.nbytes
    assert launch.block_bytes_out == (256, 256, 256) and launch.peak_ub_bytes == 256
    assert launch.datacopy_calls == 6 and launch.vector_instructions == 3


def test_matmul_registered_in_the_entry_runs():
    """The control of the scope rule: registered in the entry, every call inside its scope."""
    data, out, launch = run_test_kernel("matmul_correct", blocks=1)
    a, b = data[:16].reshape(4, 4).astype(np.float64), data.reshape(4, 16).astype(np.float64)
    assert np.array_equal(out.reshape(4, 16), a @ b)
    assert launch.cube_iterations == 1 and launch.cube_macs == 4 * 16 * 4


def transdata_oracle(rows: np.ndarray) -> np.ndarray:
    """Huawei's TransDataTo5HD rule, repeat by repeat: 16 source rows (one block per repeat) -> 16 blocks.
    16-bit: destination block i = element i of each source block; 32-bit: element i of sources 0..7 ->
    destination block 2i, of sources 8..15 -> block 2i + 1."""
    block = 32 // rows.itemsize
    repeats = rows.shape[1] // block
    out = np.empty((repeats, 16, block), rows.dtype)
    for r in range(repeats):
        src = rows[:, r * block:(r + 1) * block]  # 16 blocks
        for i in range(block):
            if block == 16:
                out[r, i] = src[:, i]
            else:
                out[r, 2 * i], out[r, 2 * i + 1] = src[:8, i], src[8:, i]
    return out.reshape(-1)


@pytest.mark.parametrize("kernel, dtype", [("transdata_float", np.float32), ("transdata_half", np.uint16)])
def test_transdata_to_5hd_matches_the_documented_rule(kernel, dtype):
    x = np.random.default_rng(5).standard_normal(512).astype(np.float32)
    y = np.zeros_like(x)
    launch = kernels_module().launch(kernel, {"x": x, "y": y}, block_dim=1)
    expected = transdata_oracle(x.view(dtype).reshape(16, -1))
    assert np.array_equal(y.view(dtype), expected)
    assert launch.vector_instructions == 1


def documented_rules() -> set[str]:
    """The rule names of the first column of docs/emulator.md's run-time table ("| `a`, `b` | ...")."""
    text = DOCS.read_text()
    table = text[text.index("| rule | when | models |"):text.index("Checked when the kernels compile")]
    return {name for line in table.splitlines()[2:] if line.startswith("|")
            for name in re.findall(r"`([a-z0-9_]+)`", line.split("|")[1])}


def test_every_rule_has_a_broken_kernel_and_a_docs_row():
    rules = {rule.name for rule in sim.Rule}
    triggered = {rule for _, rule, *_ in BROKEN_KERNELS + BROKEN_CUBE_KERNELS}
    assert rules - triggered == set(), "rules without a broken kernel in tests/sim_kernels/"
    assert triggered - rules == set(), "expected rules the emulator does not have"
    assert documented_rules() == rules


def test_launch_refuses_bad_buffers_before_running():
    data, out = np.zeros(128, np.float32), np.zeros(128, np.float32)
    with pytest.raises(ValueError, match="no GM parameter 'z'"):
        kernels_module().launch("correct", {"x": data, "y": out, "z": out}, block_dim=2)
    with pytest.raises(ValueError, match="buffer 'y' missing"):
        kernels_module().launch("correct", {"x": data}, block_dim=2)
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        kernels_module().launch("nope", {"x": data, "y": out}, block_dim=2)
    with pytest.raises(TypeError, match="buffer 'x' has dtype float64"):
        kernels_module().launch("correct", {"x": data.astype(np.float64), "y": out}, block_dim=2)
    read_only = out.copy()
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="buffer 'y' is written but read-only"):
        kernels_module().launch("correct", {"x": data, "y": read_only}, block_dim=2)
