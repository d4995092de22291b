"""The emulator catches what it promises: one deliberately broken kernel per rule raises that rule,
naming the kernel and the block."""

import ctypes

import numpy as np
import pytest

from ascend_acts.backends import sim

pytestmark = pytest.mark.skipif(sim.unavailable_reason() is not None, reason=str(sim.unavailable_reason()))


def run_test_kernel(name: str, blocks: int = 2):
    lib = sim.load_library("_sim_tests")
    data = np.arange(64 * blocks, dtype=np.float32)
    out = np.zeros_like(data)
    stats, error, block = sim.Stats(), ctypes.create_string_buffer(1024), ctypes.c_int64(-1)
    status = lib.acts_sim_test_kernel(name.encode(), ctypes.c_uint32(blocks), ctypes.c_void_p(data.ctypes.data),
                                      ctypes.c_void_p(out.ctypes.data), ctypes.byref(stats), error,
                                      ctypes.c_uint64(1024), ctypes.byref(block))
    sim.raise_for_status(status, name, error, block)
    return data, out, sim.launch_from_stats(name, stats)


@pytest.mark.parametrize("kernel, rule, block", [
    ("ub_overflow", "ub_overflow", 0),
    ("unaligned_datacopy", "unaligned_datacopy", 0),
    ("gm_read_out_of_bounds", "gm_out_of_bounds", 0),
    ("gm_write_out_of_bounds", "gm_out_of_bounds", 0),
    ("alloc_past_depth", "queue_depth", 0),
    ("deque_empty", "deque_empty", 0),
    ("leaked_tensor", "leaked_tensor", 0),
    ("foreign_free", "foreign_free", 0),
    ("overlapping_core_writes", "overlapping_core_writes", 1),
    ("unwritten_output", "unwritten_output", None),
    ("unsupported_dtype", "unsupported_dtype", 0),
    ("unaligned_local", "unaligned_local", 0),
    ("matmul_l0_overflow", "matmul_capacity", 0),
    ("matmul_without_iterate", "matmul", 0),
    ("matmul_after_initbuffer", "matmul", 0),
    ("matmul_without_end", "leaked_tensor", 0),
    ("matmul_registered_in_init", "matmul_scope", 0),
    ("matmul_after_its_scope", "matmul_scope", 0),
    ("gather_out_of_bounds", "ub_out_of_bounds", 0),
    ("select_in_reserved_ub", "ub_reserved", 0),
    ("allocation_after_select_in_reserved_ub", "ub_reserved", 0),
    ("vec_index_past_2_24", "vec_index_precision", 0),
    ("integer_wraparound", "integer_overflow", 0),
    ("rng_without_declared_wraparound", "integer_overflow", 0),
])
def test_broken_kernel_raises_its_rule(kernel, rule, block):
    with pytest.raises(sim.EmulatorError) as caught:
        run_test_kernel(kernel)
    assert (caught.value.kernel, caught.value.rule, caught.value.block) == (kernel, rule, block)
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


def test_block_dim_beyond_the_vector_cores_is_rejected():
    with pytest.raises(sim.EmulatorError) as caught:
        run_test_kernel("correct", blocks=49)  # 910B1 has 48 vector cores
    assert caught.value.rule == "block_dim" and caught.value.block is None
