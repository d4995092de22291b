// The emulator's stand-in for CANN's kernel_operator.h: kernels include this and compile with g++.
#pragma once

#include "sim/core.h"
#include "sim/tensors.h"
#include "sim/datacopy.h"
#include "sim/vector.h"

// CANN selects a kernel branch with the tiling key the host set (TilingContext::SetTilingKey).
#define TILING_KEY_IS(key) (::ascendc_sim::Ctx().tilingKey == static_cast<uint64_t>(key))
