// How the binding launches a kernel with each tiling struct of op_host/: the tiling buffer the kernel reads,
// the blocks to launch, the GM workspace, and the tile length the counters report. Per struct, not per op.
#pragma once

#include <cstring>
#include <vector>

#include "batch_norm_leaky_relu_tiling.h"
#include "conv_bn_leaky_relu_eval_tiling.h"
#include "elementwise_tiling.h"
#include "fused_bias_leaky_relu_tiling.h"

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

// A MIX kernel (AIC + 2 AIVs per AI core): blockDim AI cores, the GM rings of every AI core as the workspace.
template <>
struct TilingTraits<ascend_acts::ConvBnLeakyReluEvalTiling> {
    using T = ascend_acts::ConvBnLeakyReluEvalTiling;
    static uint32_t Blocks(const T& t) { return t.blockDim; }
    static uint32_t TileLength(const T& t) { return t.tilePositions; }
    static uint64_t WorkspaceBytes(const T& t, uint32_t) { return ascend_acts::WorkspaceBytes(t); }
    static std::vector<uint8_t> Buffer(const T& t) { return BytesOf(t); }
};

}  // namespace ascend_acts_sim
