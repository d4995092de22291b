// What the eval kernel of the fused Conv2d + BatchNorm2d + LeakyReLU reads from the host's tiling: the
// plan (geometry, column tiles, work items) and where the Matmul's TCubeTiling follows it in the tiling
// buffer. In op_kernel/ because CANN's source package ships only op_kernel/ to the kernel build; the
// pure tiling function, op_host/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_tiling.h, includes it from here.
#pragma once

#include <cstdint>

namespace ascend_acts {

struct ConvGeometry {
    uint32_t batch, inChannels, height, width;
    uint32_t outChannels, kernelH, kernelW;
    uint32_t strideH, strideW, padH, padW, dilationH, dilationW;
    uint32_t outHeight, outWidth;
};

// The TCubeTiling fields (documented names and meanings) of one AIV's Matmul: C (M x N) = A (M x K) * B.
struct CubeTilingFields {
    int32_t usedCoreNum;
    int32_t M, N, Ka, Kb;
    int32_t singleCoreM, singleCoreN, singleCoreK;
    int32_t baseM, baseN, baseK;
    int32_t depthA1, depthB1;
    int32_t stepM, stepN, stepKa, stepKb;
    int32_t isBias;
    int32_t iterateOrder;         // 0: along M first, then N
    int32_t dbL0A, dbL0B, dbL0C;  // 2 = double-buffered
};

struct ConvBnLeakyReluEvalTiling {
    ConvGeometry conv;
    uint32_t reduction;      // K = C_in * kh * kw
    uint32_t columnTile;     // output positions per work item (= baseN), a multiple of 16
    uint32_t tilesPerImage;  // ceil(Ho*Wo / columnTile)
    uint32_t workItems;      // batch * tilesPerImage
    uint32_t usedCoreNum;    // AIVs that take work items (blockIdx, blockIdx + usedCoreNum, ...)
    uint32_t blockDim;       // AI cores (AIC + 2 AIV) to launch: ceil(usedCoreNum / 2)
    uint32_t bandRows;       // input rows one column tile needs (all taps), per input channel
    uint64_t workspaceSlab;  // elements of one AIV's workspace slab: K * columnTile
    float negativeSlope;
    CubeTilingFields cube;
};

namespace conv_eval_tiling {
// where the host puts the Matmul's TCubeTiling in the tiling buffer
constexpr uint32_t kCubeTilingOffset = 256;
}  // namespace conv_eval_tiling

static_assert(sizeof(ConvBnLeakyReluEvalTiling) <= conv_eval_tiling::kCubeTilingOffset,
              "the TCubeTiling follows the plan in the tiling buffer");

}  // namespace ascend_acts
