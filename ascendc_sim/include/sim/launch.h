// Host side of the emulator: run a kernel on blocks 0..blockDim-1 with every launch-level rule checked.
#pragma once

#include <functional>

#include "core.h"

namespace ascendc_sim {

extern const Platform kPlatforms[];
extern const uint32_t kPlatformCount;

struct LaunchBuffer {
    void* data;
    uint64_t bytes;
    bool output;                // poisoned before the launch; every byte must be written by exactly one block
    bool keepContents = false;  // an output the kernel also reads (updated in place): not poisoned
};

struct LaunchResult {
    bool ok = true;
    Rule rule = Rule::block_dim;  // meaningful when !ok
    std::string message;
    int64_t block = -1;  // -1: a launch-level check
    Counters counters;
    std::vector<uint64_t> bufferBytesIn, bufferBytesOut;  // per LaunchBuffer, in launch order
};

// `wrapsIntegers`: the kernel relies on integer vector results wrapping (documented for Ascend 950, not
// for 910B: a hardware check). Without it a wrapping result is an `integer_overflow` error.
LaunchResult Launch(const char* kernel, const Platform& platform, uint32_t blockDim, uint64_t tilingKey,
                    const std::vector<LaunchBuffer>& buffers, const std::function<void()>& runBlock,
                    bool wrapsIntegers = false);

// A MIX kernel (KERNEL_TYPE_MIX_AIC_1_2): `blockDim` AI cores, each a cube core (AIC, GetBlockIdx() = c)
// and two vector cores (AIV, GetBlockIdx() = 2c + GetSubBlockIdx()), every one running `runCore` (the
// kernel entry), which branches with ASCEND_IS_AIC / ASCEND_IS_AIV. Per-core counters: AIC c at c, AIV v
// at blockDim + v. sim/mix.h has the flags and the hazard check.
LaunchResult LaunchMix(const char* kernel, const Platform& platform, uint32_t blockDim, uint64_t tilingKey,
                       const std::vector<LaunchBuffer>& buffers, const std::function<void()>& runCore);

// The launch frame both use: buffers, poisoning, counters, output checks; `body` runs the cores.
LaunchResult LaunchCores(const char* kernel, const Platform& platform, uint32_t cores, uint64_t tilingKey,
                         const std::vector<LaunchBuffer>& buffers, const std::function<void()>& body,
                         bool wrapsIntegers = false);

}  // namespace ascendc_sim
