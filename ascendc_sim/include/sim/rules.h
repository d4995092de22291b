// The rules the emulator checks, by their stable names: what `ascend_acts._sim.Rule` lists, what an
// EmulatorError carries, and what docs/emulator.md documents row by row (tests/test_emulator_rules.py
// checks that every rule has a broken kernel in tests/sim_kernels/ and a docs row).
#pragma once

#include <cstdint>

// X(name): one entry per rule; the name is the stable spelling users match on.
// clang-format off
#define ASCENDC_SIM_RULES(X) \
    X(ub_overflow) \
    X(ub_reserved) \
    X(unaligned_local) \
    X(not_in_ub) \
    X(ub_out_of_bounds) \
    X(unaligned_datacopy) \
    X(datacopy_params) \
    X(gm_out_of_bounds) \
    X(queue_depth) \
    X(deque_empty) \
    X(foreign_free) \
    X(leaked_tensor) \
    X(unsupported_dtype) \
    X(unsupported_mode) \
    X(vector_alignment) \
    X(vec_index_precision) \
    X(integer_overflow) \
    X(unspecified_nan) \
    X(block_dim) \
    X(overlapping_core_writes) \
    X(unwritten_output) \
    X(matmul_capacity) \
    X(matmul) \
    X(matmul_scope) \
    X(cube_buffer_overflow) \
    X(wrong_core) \
    X(cube_position) \
    X(cube_alignment) \
    X(cube_out_of_bounds) \
    X(load3d_params) \
    X(mmad_params) \
    X(fixpipe_params) \
    X(cube_params) \
    X(cross_core_hazard) \
    X(cross_core_deadlock) \
    X(cross_core_flag) \
    X(transdata_params)
// clang-format on

namespace ascendc_sim {

#define ASCENDC_SIM_RULE_ENUMERATOR(name) name,
enum class Rule : uint8_t { ASCENDC_SIM_RULES(ASCENDC_SIM_RULE_ENUMERATOR) };
#undef ASCENDC_SIM_RULE_ENUMERATOR

inline const char* RuleName(Rule rule) {
#define ASCENDC_SIM_RULE_CASE(name) \
    case ascendc_sim::Rule::name: return #name;
    switch (rule) { ASCENDC_SIM_RULES(ASCENDC_SIM_RULE_CASE) }
#undef ASCENDC_SIM_RULE_CASE
    return "?";
}

}  // namespace ascendc_sim
