// The emulator's stand-in for CANN's kernel_operator.h: kernels include this and compile with g++.
#pragma once

#include "sim/core.h"
#include "sim/tensors.h"
#include "sim/datacopy.h"
#include "sim/vector.h"
#include "sim/cube.h"
#include "sim/transpose.h"

// CANN selects a kernel branch with the tiling key the host set (TilingContext::SetTilingKey), and finds
// the keys a kernel has by a regex over the preprocessed kernel that only reads integer literals
// (python/site-packages/tbe/tikcpp/compile_op.py, KernelInfoInfer.find_tilingkey: `g_tilingKey ==
// \((-?\d+)`; anything else is a "can not be processed as numeric variables" error). The key is
// stringized after macro expansion, as the preprocessed kernel shows it, and must be such a literal.
namespace ascendc_sim {
constexpr bool IsIntegerLiteral(const char* text) {
    const char* p = text;
    if (*p == '-') ++p;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') ++p;
    while (*p == 'u' || *p == 'U' || *p == 'l' || *p == 'L') ++p;
    return *p == '\0';
}
template <bool kLiteral>
constexpr bool LiteralTilingKey() {
    static_assert(kLiteral, "TILING_KEY_IS needs an integer literal: CANN collects tiling keys with a regex over "
                            "the preprocessed kernel (tbe/tikcpp/compile_op.py) and rejects anything else");
    return true;
}
}  // namespace ascendc_sim
#define TILING_KEY_IS(key) ACTS_SIM_TILING_KEY_IS_EXPANDED(key)
#define ACTS_SIM_TILING_KEY_IS_EXPANDED(key)                                     \
    (::ascendc_sim::LiteralTilingKey<::ascendc_sim::IsIntegerLiteral(#key)>() && \
     ::ascendc_sim::Ctx().tilingKey == static_cast<uint64_t>(key))

// Kernel types (KERNEL_TASK_TYPE_DEFAULT): the launcher decides how a kernel runs (Launch: vector cores
// only, the Matmul API doing the cube's work inside its calls; LaunchMix: cube and vector programs).
enum KernelMetaType { KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AIC_ONLY, KERNEL_TYPE_MIX_AIC_1_1, KERNEL_TYPE_MIX_AIC_1_2 };
#define KERNEL_TASK_TYPE_DEFAULT(type) static_cast<void>(type)

// Workspace: the emulator reserves no system workspace, so the user's starts at the launch's buffer.
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) { return workspace; }
inline GM_ADDR GetSysWorkSpacePtr() { return nullptr; }
inline void SetSysWorkspace(GM_ADDR) {}
