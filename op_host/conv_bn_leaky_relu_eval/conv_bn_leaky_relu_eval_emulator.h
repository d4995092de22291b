// The eval Conv2d + BatchNorm2d + LeakyReLU family on the emulator (ascend_acts._sim): how a launch reads a
// ConvBnLeakyReluEvalTiling (a MIX launch: blockDim AI cores, the GM rings of every AI core as the workspace), and
// the Python function computing one (conv_bn_leaky_relu_eval_tiling). Emulator-only: the CANN build never includes
// it; the binding includes it through its generated tiling_headers.inc (ascendc_sim/binding/emulator_family.h).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "conv_bn_leaky_relu_eval_tiling.h"
#include "emulator_family.h"

namespace ascend_acts {

inline uint32_t LaunchBlocks(const ConvBnLeakyReluEvalTiling& t) { return t.blockDim; }
inline uint32_t LaunchTileLength(const ConvBnLeakyReluEvalTiling& t) { return t.tilePositions; }
inline uint64_t LaunchWorkspaceBytes(const ConvBnLeakyReluEvalTiling& t) { return WorkspaceBytes(t); }

}  // namespace ascend_acts

namespace ascend_acts_sim {

namespace conv_eval_emulator {
// Output side of a convolution; padding before + after the input.
inline int64_t OutputSide(int64_t size, int64_t kernel, int64_t stride, int64_t before, int64_t after,
                          int64_t dilation) {
    return (size + before + after - dilation * (kernel - 1) - 1) / stride + 1;
}
}  // namespace conv_eval_emulator

inline ascend_acts::ConvBnLeakyReluEvalTiling ConvEvalTilingFor(
    const std::vector<uint32_t>& xShape, const std::vector<uint32_t>& weightShape, const std::vector<uint32_t>& stride,
    const std::vector<uint32_t>& padding, const std::vector<uint32_t>& dilation, uint32_t elementSize,
    const std::string& platformName, float negativeSlope) {
    using namespace ascend_acts;
    using conv_eval_emulator::OutputSide;
    if (xShape.size() != 4 || weightShape.size() != 4 || stride.size() != 2 || padding.size() != 4 ||
        dilation.size() != 2) {
        Refuse("conv_bn_leaky_relu_eval_tiling(): x_shape and weight_shape need 4 sizes, stride and dilation 2, "
               "padding 4 (top, bottom, left, right)");
    }
    const auto& p = PlatformNamed(platformName);
    int64_t oh = stride[0] == 0 ? 0
                                : OutputSide(xShape[2], weightShape[2], stride[0], padding[0], padding[1], dilation[0]);
    int64_t ow = stride[1] == 0 ? 0
                                : OutputSide(xShape[3], weightShape[3], stride[1], padding[2], padding[3], dilation[1]);
    ConvGeometry g{xShape[0],
                   xShape[1],
                   xShape[2],
                   xShape[3],
                   weightShape[0],
                   weightShape[2],
                   weightShape[3],
                   stride[0],
                   stride[1],
                   padding[0],
                   padding[2],
                   dilation[0],
                   dilation[1],
                   uint32_t(std::max<int64_t>(oh, 0)),
                   uint32_t(std::max<int64_t>(ow, 0))};
    CubePlatform cube{p.cubeCores, p.vectorCores, p.ubBytes, p.l1Bytes, p.l0aBytes, p.l0bBytes, p.l0cBytes};
    const std::string layer = "input " + ListText(xShape) + ", weight " + ListText(weightShape) + " on " + platformName;
    if (oh <= 0 || ow <= 0 || weightShape[1] != xShape[1]) {
        Refuse("conv_bn_leaky_relu_eval_tiling(): no output, or weight.shape[1] is not the input's channels "
               "(groups = 1), for " +
               layer);
    }
    ConvBnLeakyReluEvalTiling tiling{};
    if (!ComputeConvBnLeakyReluEvalTiling(g, elementSize, negativeSlope, cube, tiling)) {
        Refuse("conv_bn_leaky_relu_eval_tiling(): no eval tiling for " + layer +
               ": two input bands and two K slices of 16 W' rows do not fit L1, or an output row does not fit L0");
    }
    return tiling;
}

template <>
struct TilingFunction<ascend_acts::ConvBnLeakyReluEvalTiling> {
    static constexpr const char* kName = "conv_bn_leaky_relu_eval_tiling";
    static constexpr auto kFunction = &ConvEvalTilingFor;
    static constexpr auto kArgs = std::make_tuple(Arg("x_shape"), Arg("weight_shape"), Arg("stride"), Arg("padding"),
                                                  Arg("dilation"), Arg("element_size"), Arg("platform", "ascend910b1"),
                                                  Arg("negative_slope", 0.0f));
    static constexpr const char* kDoc =
        "ComputeConvBnLeakyReluEvalTiling (groups = 1; padding top, bottom, left, right). ValueError when it has "
        "none.";
};

}  // namespace ascend_acts_sim
