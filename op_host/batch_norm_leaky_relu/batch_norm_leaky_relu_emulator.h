// The BatchNorm + LeakyReLU training family on the emulator (ascend_acts._sim): how a launch reads a
// BatchNormLeakyReluTiling, and the Python function computing one (batch_norm_leaky_relu_tiling). Emulator-only:
// the CANN build never includes it; the binding includes it through its generated tiling_headers.inc
// (ascendc_sim/binding/emulator_family.h).
#pragma once

#include <string>

#include "batch_norm_leaky_relu_tiling.h"
#include "emulator_family.h"

namespace ascend_acts {

inline uint32_t LaunchBlocks(const BatchNormLeakyReluTiling& t) { return t.usedCoreNum; }
inline uint32_t LaunchTileLength(const BatchNormLeakyReluTiling& t) { return t.tileLength; }

}  // namespace ascend_acts

namespace ascend_acts_sim {

inline ascend_acts::BatchNormLeakyReluTiling BatchNormTilingFor(const std::string& kernel, uint32_t batch,
                                                                uint32_t channels, uint64_t planeSize,
                                                                uint32_t elementSize, const std::string& platformName,
                                                                uint32_t vectorCores, float negativeSlope, float eps,
                                                                float momentum, bool updateRunningStats, bool relu) {
    using namespace ascend_acts;
    const auto pass = static_cast<BatchNormPass>(
        VariantOf<BatchNormLeakyReluTiling>(kernel, "batch_norm_leaky_relu_tiling"));
    const auto& platform = PlatformNamed(platformName);
    BatchNormLeakyReluTiling tiling{};
    if (!ComputeBatchNormLeakyReluTiling(
            pass, batch, channels, planeSize, elementSize, negativeSlope, eps, momentum, updateRunningStats, relu,
            vectorCores == 0 ? platform.vectorCores : vectorCores, platform.ubBytes, tiling)) {
        Refuse("no tiling for " + kernel + " of shape (" + std::to_string(batch) + ", " + std::to_string(channels) +
               ", " + std::to_string(planeSize) + " per plane) with " + std::to_string(elementSize) +
               "-byte elements on " + platformName);
    }
    return tiling;
}

template <>
struct TilingFunction<ascend_acts::BatchNormLeakyReluTiling> {
    static constexpr const char* kName = "batch_norm_leaky_relu_tiling";
    static constexpr auto kFunction = &BatchNormTilingFor;
    static constexpr auto kArgs = std::make_tuple(
        Arg("kernel"), Arg("batch"), Arg("channels"), Arg("plane_size"), Arg("element_size"),
        Arg("platform", "ascend910b1"), Arg("vector_cores", 0), Arg("negative_slope", 0.0f), Arg("eps", 0.0f),
        Arg("momentum", 0.0f), Arg("update_running_stats", false), Arg("relu", false));
    static constexpr const char* kDoc =
        "ComputeBatchNormLeakyReluTiling for `kernel`; vector_cores 0: the platform's. ValueError when it has none.";
};

}  // namespace ascend_acts_sim
