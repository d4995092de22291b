// The fused bias + LeakyReLU family on the emulator (ascend_acts._sim): how a launch reads a
// FusedBiasLeakyReluTiling, and the Python function computing one (fused_bias_leaky_relu_tiling). Emulator-only:
// the CANN build never includes it; the binding includes it through its generated tiling_headers.inc
// (ascendc_sim/binding/emulator_family.h).
#pragma once

#include <string>

#include "emulator_family.h"
#include "fused_bias_leaky_relu_tiling.h"

namespace ascend_acts {

inline uint32_t LaunchBlocks(const FusedBiasLeakyReluTiling& t) { return t.usedCoreNum; }
inline uint32_t LaunchTileLength(const FusedBiasLeakyReluTiling& t) { return t.tileLength; }

}  // namespace ascend_acts

namespace ascend_acts_sim {

inline ascend_acts::FusedBiasLeakyReluTiling FusedBiasTilingFor(const std::string& kernel, uint64_t batch,
                                                                uint64_t channels, uint64_t spatial,
                                                                uint32_t elementSize, bool hasBias,
                                                                const std::string& platformName, uint32_t vectorCores,
                                                                float negativeSlope, float scale, bool savedIsResult,
                                                                float clamp, bool relu) {
    using namespace ascend_acts;
    const auto pass = static_cast<FusedBiasPass>(
        VariantOf<FusedBiasLeakyReluTiling>(kernel, "fused_bias_leaky_relu_tiling"));
    const auto& platform = PlatformNamed(platformName);
    FusedBiasLeakyReluTiling tiling{};
    if (!ComputeFusedBiasLeakyReluTiling(
            pass, batch, channels, spatial, elementSize, hasBias, negativeSlope, scale, savedIsResult, clamp, relu,
            vectorCores == 0 ? platform.vectorCores : vectorCores, platform.ubBytes, tiling)) {
        Refuse("no tiling for " + kernel + " of shape (" + std::to_string(batch) + ", " + std::to_string(channels) +
               ", " + std::to_string(spatial) + " spatial) with " + std::to_string(elementSize) + "-byte elements on " +
               platformName);
    }
    return tiling;
}

template <>
struct TilingFunction<ascend_acts::FusedBiasLeakyReluTiling> {
    static constexpr const char* kName = "fused_bias_leaky_relu_tiling";
    static constexpr auto kFunction = &FusedBiasTilingFor;
    static constexpr auto kArgs = std::make_tuple(
        Arg("kernel"), Arg("batch"), Arg("channels"), Arg("spatial"), Arg("element_size"), Arg("has_bias", true),
        Arg("platform", "ascend910b1"), Arg("vector_cores", 0), Arg("negative_slope", 0.2f), Arg("scale", 1.4142135f),
        Arg("saved_is_result", true), Arg("clamp", -1.0f), Arg("relu", false));
    static constexpr const char* kDoc =
        "ComputeFusedBiasLeakyReluTiling for `kernel` over x viewed as (batch, channels, spatial); mode 0 Rows, "
        "1 Columns; vector_cores 0: the platform's. ValueError when it has none.";
};

}  // namespace ascend_acts_sim
