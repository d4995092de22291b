// The emulator's stand-in for CANN's kernel_operator.h: kernels include this and compile with g++.
#pragma once

#include "sim/core.h"
#include "sim/tensors.h"
#include "sim/datacopy.h"
#include "sim/vector.h"

// CANN selects a kernel branch with the tiling key the host set (TilingContext::SetTilingKey).
#define TILING_KEY_IS(key) (::ascendc_sim::Ctx().tilingKey == static_cast<uint64_t>(key))

// Kernel types (KERNEL_TASK_TYPE_DEFAULT): the emulator runs the vector (AIV) side of a MIX kernel and
// does the cube's work inside the Matmul calls (lib/matmul_intf.h), so the type changes nothing here.
enum KernelMetaType { KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AIC_ONLY, KERNEL_TYPE_MIX_AIC_1_1, KERNEL_TYPE_MIX_AIC_1_2 };
#define KERNEL_TASK_TYPE_DEFAULT(type) static_cast<void>(type)

// Workspace: the emulator reserves no system workspace, so the user's starts at the launch's buffer.
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) { return workspace; }
inline GM_ADDR GetSysWorkSpacePtr() { return nullptr; }
inline void SetSysWorkspace(GM_ADDR) {}
