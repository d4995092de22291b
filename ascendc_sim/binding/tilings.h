// How the binding launches a kernel with each tiling struct of op_host/: the tiling buffer the kernel reads,
// the blocks to launch, the GM workspace, and the tile length the counters report. Per struct, not per op.
#pragma once

#include <cstring>
#include <vector>

#include "batch_norm_leaky_relu_tiling.h"
#include "conv_bn_leaky_relu_eval_tiling.h"
#include "elementwise_tiling.h"
#include "fused_bias_leaky_relu_tiling.h"
#include "lib/matmul_intf.h"

namespace ascend_acts_sim {

template <class Tiling>
std::vector<uint8_t> BytesOf(const Tiling& tiling) {
    std::vector<uint8_t> bytes(sizeof(Tiling));
    std::memcpy(bytes.data(), &tiling, sizeof(Tiling));
    return bytes;
}

template <class Tiling>
struct TilingTraits;

template <>
struct TilingTraits<ascend_acts::ElementwiseTiling> {
    using T = ascend_acts::ElementwiseTiling;
    static uint32_t Blocks(const T& t) { return t.blockDim; }  // 0: an empty tensor, nothing to launch
    static uint32_t TileLength(const T& t) { return t.tileLength; }
    static uint64_t WorkspaceBytes(const T&, uint32_t) { return 0; }
    static std::vector<uint8_t> Buffer(const T& t) { return BytesOf(t); }
};

template <>
struct TilingTraits<ascend_acts::BatchNormLeakyReluTiling> {
    using T = ascend_acts::BatchNormLeakyReluTiling;
    static uint32_t Blocks(const T& t) { return t.usedCoreNum; }
    static uint32_t TileLength(const T& t) { return t.tileLength; }
    static uint64_t WorkspaceBytes(const T&, uint32_t) { return 0; }
    static std::vector<uint8_t> Buffer(const T& t) { return BytesOf(t); }
};

template <>
struct TilingTraits<ascend_acts::FusedBiasLeakyReluTiling> {
    using T = ascend_acts::FusedBiasLeakyReluTiling;
    static uint32_t Blocks(const T& t) { return t.usedCoreNum; }
    static uint32_t TileLength(const T& t) { return t.tileLength; }
    static uint64_t WorkspaceBytes(const T&, uint32_t) { return 0; }
    static std::vector<uint8_t> Buffer(const T& t) { return BytesOf(t); }
};

// A MIX kernel run as its vector cores (2 AIVs per AI core); each AIV has a workspace slab for its im2col
// tile. The tiling buffer holds the plan, then the Matmul's TCubeTiling (on the NPU filled by CANN's
// MultiCoreMatmulTiling; here copied from the plan's blocking).
template <>
struct TilingTraits<ascend_acts::ConvBnLeakyReluEvalTiling> {
    using T = ascend_acts::ConvBnLeakyReluEvalTiling;
    static uint32_t Blocks(const T& t) { return 2 * t.blockDim; }
    static uint32_t TileLength(const T& t) { return t.columnTile; }
    static uint64_t WorkspaceBytes(const T& t, uint32_t elementSize) {
        return uint64_t(Blocks(t)) * t.workspaceSlab * elementSize;
    }
    static std::vector<uint8_t> Buffer(const T& t) {
        const ascend_acts::CubeTilingFields& f = t.cube;
        TCubeTiling cube{f.usedCoreNum,  f.M,           f.N,     f.Ka,     f.Kb,     f.singleCoreM,
                         f.singleCoreN,  f.singleCoreK, f.baseM, f.baseN,  f.baseK,  f.depthA1,
                         f.depthB1,      f.stepM,       f.stepN, f.stepKa, f.stepKb, f.isBias,
                         f.iterateOrder, f.dbL0A,       f.dbL0B, f.dbL0C};
        std::vector<uint8_t> bytes(ascend_acts::conv_eval_tiling::kCubeTilingOffset + sizeof(TCubeTiling));
        std::memcpy(bytes.data(), &t, sizeof(T));
        std::memcpy(bytes.data() + ascend_acts::conv_eval_tiling::kCubeTilingOffset, &cube, sizeof(cube));
        return bytes;
    }
};

}  // namespace ascend_acts_sim
