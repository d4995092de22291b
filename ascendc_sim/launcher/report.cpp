#include <algorithm>
#include <cstring>

#include "abi.h"

extern "C" uint32_t acts_sim_platform_count() { return ascendc_sim::kPlatformCount; }

extern "C" const char* acts_sim_platform_name(uint32_t platform) {
    return platform < ascendc_sim::kPlatformCount ? ascendc_sim::kPlatforms[platform].name : nullptr;
}

namespace ascend_acts_sim {

int Report(const ascendc_sim::LaunchResult& result, ActsSimStats* stats, char* error, uint64_t errorLength,
           int64_t* errorBlock) {
    const auto& c = result.counters;
    if (stats != nullptr) {
        *stats = ActsSimStats{c.gmBytesIn, c.gmBytesOut, c.dataCopyCalls, c.vectorInstructions, c.vectorRepeats,
                              c.peakUbBytes, c.cubeIterations, c.cubeMacs, static_cast<uint32_t>(c.blockBytesIn.size()), 0, {}, {}, {}, {}};
        size_t blocks = std::min<size_t>(c.blockBytesIn.size(), 64);
        std::copy_n(c.blockBytesIn.begin(), blocks, stats->blockBytesIn);
        std::copy_n(c.blockBytesOut.begin(), blocks, stats->blockBytesOut);
        size_t buffers = std::min<size_t>(result.bufferBytesIn.size(), 16);
        std::copy_n(result.bufferBytesIn.begin(), buffers, stats->bufferBytesIn);
        std::copy_n(result.bufferBytesOut.begin(), buffers, stats->bufferBytesOut);
    }
    if (result.ok) return ACTS_SIM_OK;
    std::string text = result.rule + "\t" + result.message;
    if (error != nullptr && errorLength > 0) {
        size_t n = std::min<size_t>(text.size(), errorLength - 1);
        std::memcpy(error, text.data(), n);
        error[n] = '\0';
    }
    if (errorBlock != nullptr) *errorBlock = result.block;
    return ACTS_SIM_RULE;
}

}  // namespace ascend_acts_sim
