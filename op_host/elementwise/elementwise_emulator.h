// The elementwise family on the emulator (ascend_acts._sim): how a launch reads an ElementwiseTiling, and the
// Python function computing one (elementwise_tiling). Emulator-only: the CANN build never includes it; the
// binding includes it through its generated tiling_headers.inc (ascendc_sim/binding/emulator_family.h).
#pragma once

#include <string>

#include "elementwise_tiling.h"
#include "emulator_family.h"

namespace ascend_acts {

inline uint32_t LaunchBlocks(const ElementwiseTiling& t) { return t.blockDim; }  // 0: an empty tensor
inline uint32_t LaunchTileLength(const ElementwiseTiling& t) { return t.tileLength; }

}  // namespace ascend_acts

namespace ascend_acts_sim {

inline ascend_acts::ElementwiseTiling ElementwiseTilingFor(const std::string& kernel, uint64_t totalLength,
                                                           uint32_t elementSize, const std::string& platformName,
                                                           uint32_t vectorCores, float negativeSlope, float lower,
                                                           float span, uint64_t indexBase) {
    using namespace ascend_acts;
    const auto op = static_cast<ElementwiseOp>(VariantOf<ElementwiseTiling>(kernel, "elementwise_tiling"));
    const auto& platform = PlatformNamed(platformName);
    ElementwiseTiling tiling{};
    if (!ComputeElementwiseTiling(op, totalLength, elementSize, vectorCores == 0 ? platform.vectorCores : vectorCores,
                                  platform.ubBytes, tiling)) {
        Refuse("no tiling for " + kernel + " with " + std::to_string(totalLength) + " elements of " +
               std::to_string(elementSize) + " bytes on " + platformName);
    }
    tiling.slope = negativeSlope;
    tiling.lower = lower;
    tiling.span = span;
    tiling.indexBase = indexBase;
    return tiling;
}

template <>
struct TilingFunction<ascend_acts::ElementwiseTiling> {
    static constexpr const char* kName = "elementwise_tiling";
    static constexpr auto kFunction = &ElementwiseTilingFor;
    static constexpr auto kArgs = std::make_tuple(
        Arg("kernel"), Arg("total_length"), Arg("element_size"), Arg("platform", "ascend910b1"), Arg("vector_cores", 0),
        Arg("negative_slope", 0.0f), Arg("lower", 0.0f), Arg("span", 0.0f), Arg("index_base", 0));
    static constexpr const char* kDoc =
        "ComputeElementwiseTiling for `kernel`; vector_cores 0: the platform's. ValueError when it has none.";
};

}  // namespace ascend_acts_sim
