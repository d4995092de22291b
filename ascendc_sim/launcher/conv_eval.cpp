// Host side of the eval kernel of the fused Conv2d + BatchNorm2d + LeakyReLU on the emulator: tiling,
// workspace, launch (a MIX kernel: 2 AIVs per AI core), counters. Weights arrive BN-folded.
#include <cstring>
#include <vector>

#include "../../op_host/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_tiling.h"
#include "abi.h"
#include "lib/matmul_intf.h"

extern "C" void acts_conv_bn_leaky_relu_eval(GM_ADDR x, GM_ADDR weight, GM_ADDR bias, GM_ADDR out, GM_ADDR workspace,
                                             GM_ADDR tiling);

using ascend_acts::ConvBnLeakyReluEvalTiling;
using ascend_acts::ConvGeometry;

namespace {
bool CubePlatformOf(uint32_t platform, ascend_acts::CubePlatform& cube) {
    if (platform >= ascendc_sim::kPlatformCount) return false;
    const auto& p = ascendc_sim::kPlatforms[platform];
    cube = {p.cubeCores, p.vectorCores, p.ubBytes, p.l1Bytes, p.l0aBytes, p.l0bBytes, p.l0cBytes};
    return true;
}

// What CANN's MultiCoreMatmulTiling fills on the NPU: here the emulated TCubeTiling, from the plan.
TCubeTiling CubeTilingOf(const ascend_acts::CubeTilingFields& f) {
    return TCubeTiling{f.usedCoreNum, f.M,      f.N,      f.Ka,     f.Kb,     f.singleCoreM,  f.singleCoreN, f.singleCoreK,
                       f.baseM,       f.baseN,  f.baseK,  f.depthA1, f.depthB1, f.stepM,      f.stepN,       f.stepKa,
                       f.stepKb,      f.isBias, f.iterateOrder, f.dbL0A, f.dbL0B, f.dbL0C};
}
}  // namespace

// geometry: batch, inChannels, height, width, outChannels, kernelH, kernelW, strideH, strideW, padTop,
// padLeft, dilationH, dilationW, outHeight, outWidth (the output size carries any bottom/right padding).
extern "C" int acts_sim_conv_eval_tiling(const uint32_t* geometry, uint32_t elementSize, uint32_t platform,
                                         float slope, ConvBnLeakyReluEvalTiling* tiling) {
    ascend_acts::CubePlatform cube;
    if (!CubePlatformOf(platform, cube)) return ACTS_SIM_BAD_ARGUMENT;
    ConvGeometry g{geometry[0], geometry[1], geometry[2],  geometry[3],  geometry[4],  geometry[5],  geometry[6], geometry[7],
                   geometry[8], geometry[9], geometry[10], geometry[11], geometry[12], geometry[13], geometry[14]};
    return ascend_acts::ComputeConvBnLeakyReluEvalTiling(g, elementSize, slope, cube, *tiling) ? ACTS_SIM_OK
                                                                                             : ACTS_SIM_BAD_ARGUMENT;
}

// Buffers in launch order: x, weight, bias, out, workspace, tiling.
extern "C" int acts_sim_conv_bn_leaky_relu_eval(uint32_t dtype, uint32_t platform, const uint32_t* geometry, void* x,
                                                void* weight, float* bias, void* out, float slope,
                                                ConvBnLeakyReluEvalTiling* tilingOut, ActsSimStats* stats, char* error,
                                                uint64_t errorLength, int64_t* errorBlock) {
    if (dtype > 2) return ACTS_SIM_BAD_ARGUMENT;
    uint32_t size = dtype == 0 ? 4 : 2;
    ConvBnLeakyReluEvalTiling tiling;
    int status = acts_sim_conv_eval_tiling(geometry, size, platform, slope, &tiling);
    if (status != ACTS_SIM_OK) return status;
    if (tilingOut != nullptr) *tilingOut = tiling;
    const ConvGeometry& g = tiling.conv;
    uint64_t xBytes = uint64_t(g.batch) * g.inChannels * g.height * g.width * size;
    uint64_t weightBytes = uint64_t(g.outChannels) * tiling.reduction * size;
    uint64_t outBytes = uint64_t(g.batch) * g.outChannels * g.outHeight * g.outWidth * size;
    uint32_t aivs = 2 * tiling.blockDim;
    // GM holds garbage until written: all-ones bytes (NaN in every float type) expose an unwritten slab row
    std::vector<uint8_t> workspace(uint64_t(aivs) * tiling.workspaceSlab * size, 0xFF);
    // the tiling buffer: the plan, then the Matmul's TCubeTiling
    std::vector<uint8_t> tilingBuffer(ascend_acts::conv_eval_tiling::kCubeTilingOffset + sizeof(TCubeTiling));
    TCubeTiling cube = CubeTilingOf(tiling.cube);
    std::memcpy(tilingBuffer.data(), &tiling, sizeof(tiling));
    std::memcpy(tilingBuffer.data() + ascend_acts::conv_eval_tiling::kCubeTilingOffset, &cube, sizeof(cube));
    uint8_t* t = tilingBuffer.data();
    std::vector<ascendc_sim::LaunchBuffer> buffers = {
        {x, xBytes, false}, {weight, weightBytes, false}, {bias, uint64_t(g.outChannels) * 4, false},
        {out, outBytes, true}, {workspace.data(), workspace.size(), false}, {t, tilingBuffer.size(), false}};
    auto runBlock = [&] {
        acts_conv_bn_leaky_relu_eval(static_cast<uint8_t*>(x), static_cast<uint8_t*>(weight),
                                     reinterpret_cast<uint8_t*>(bias), static_cast<uint8_t*>(out), workspace.data(), t);
    };
    auto result = ascendc_sim::Launch("acts_conv_bn_leaky_relu_eval", ascendc_sim::kPlatforms[platform], aivs, dtype,
                                      buffers, runBlock);
    int reported = ascend_acts_sim::Report(result, stats, error, errorLength, errorBlock);
    if (stats != nullptr) stats->tileLength = tiling.columnTile;
    return reported;
}
