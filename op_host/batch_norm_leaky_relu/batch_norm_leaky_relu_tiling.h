// Tiling of the training kernels of the fused Conv2d + BatchNorm2d + LeakyReLU (the BN + LeakyReLU
// part; the convolution is the platform's): batch_norm_leaky_relu_forward and _backward.
//
// Pure function of (shape, dtype size, attrs, platform) -> plain struct; no CANN includes, so the CANN
// TilingFunc, the emulator (both through TilingFor, op_host/common/tiling_request.h) and the unit tests share it.
//
// Split: whole channels per core. A channel's statistics then come from one core, so no cross-core
// reduction (no workspace, no barrier) is needed, and each channel is reduced in a fixed order:
// results do not depend on the core count. blockDim = min(C, vector cores); the first
// `bigCoreCount` cores take one channel more than the others.
//
// Within a channel the kernel walks the N planes of H*W contiguous elements (stride C*H*W) in tiles of
// `tileLength` elements (several whole planes when a plane's bytes fill whole 32-byte blocks, else at most
// one plane): the largest multiple of one 256-byte float repeat (64 elements) that fits the
// Unified Buffer (less Select's reserve in the backward) next to the per-core statistics arrays, with
// double-buffered GM queues. The struct the kernels read is in
// op_kernel/batch_norm_leaky_relu/batch_norm_leaky_relu_tiling_data.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "../../op_kernel/batch_norm_leaky_relu/batch_norm_leaky_relu_tiling_data.h"
#include "../common/tiling_request.h"
#include "../common/ub_budget.h"

namespace ascend_acts {

enum class BatchNormPass : uint32_t { Forward = 0, Backward = 1 };

namespace batch_norm_tiling {

// Forward: x in, out out (dtype-sized, double-buffered); x as float, x squared.
constexpr uint32_t kForwardQueues = 2, kForwardFloatBuffers = 2;
// Backward: grad_out and output in, grad_input out; their float copies (dy, a -> z), dz and a scratch
// product. Both passes also hold a channel's sums (kSumArrays x kSumLanes floats).
constexpr uint32_t kBackwardQueues = 3, kBackwardFloatBuffers = 4;

inline uint64_t RoundUp(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

inline uint32_t ReduceWorkLength(uint32_t count) {
    // ReduceSum over `count` floats keeps one partial per repeat, 32-byte aligned.
    uint64_t repeats = (count + kFloatRepeat - 1) / kFloatRepeat;
    return static_cast<uint32_t>(RoundUp(std::max<uint64_t>(repeats, 1), kFloatsPerBlock));
}

// UB bytes the kernel allocates for tile length `tile` (must match the kernels' InitBuffer calls).
inline uint64_t UbBytes(BatchNormPass pass, uint32_t dtypeSize, uint32_t tile, uint32_t statsLength) {
    uint32_t queues = pass == BatchNormPass::Forward ? kForwardQueues : kBackwardQueues;
    uint32_t floats = pass == BatchNormPass::Forward ? kForwardFloatBuffers : kBackwardFloatBuffers;
    return uint64_t(queues) * kBufferNum * tile * dtypeSize + uint64_t(floats) * tile * sizeof(float) +
           uint64_t(kSumArrays) * kSumLanes * sizeof(float) + uint64_t(ReduceWorkLength(tile)) * sizeof(float) +
           uint64_t(kStatsArrays) * statsLength * sizeof(float);
}

}  // namespace batch_norm_tiling

// Returns false (tiling unset) when the shape cannot be tiled: empty, or the statistics of one core's
// channels alone do not fit the Unified Buffer.
inline bool ComputeBatchNormLeakyReluTiling(BatchNormPass pass, uint32_t batch, uint32_t channels, uint64_t planeSize,
                                            uint32_t dtypeSize, float negativeSlope, float eps, float momentum,
                                            bool updateRunningStats, bool relu, uint32_t vectorCoreNum,
                                            uint64_t ubBytes, BatchNormLeakyReluTiling& tiling) {
    using namespace batch_norm_tiling;
    if (batch == 0 || channels == 0 || planeSize == 0 || vectorCoreNum == 0 || dtypeSize == 0) return false;
    uint32_t cores = std::min(channels, vectorCoreNum);
    uint32_t perCore = channels / cores;
    uint32_t big = channels % cores;
    uint32_t statsLength = static_cast<uint32_t>(RoundUp(perCore + (big ? 1 : 0), kFloatsPerBlock));

    // A tile holds whole planes when their bytes fill whole 32-byte blocks (the kernels then move several per
    // DMA), else at most one plane: no use for a tile longer than that.
    const bool wholePlanes = planeSize * dtypeSize % 32 == 0;
    uint64_t longest = std::min<uint64_t>(RoundUp(wholePlanes ? planeSize * batch : planeSize, kFloatRepeat),
                                          kMaxTileLength);
    uint32_t tile = static_cast<uint32_t>(longest);
    // the backward selects dz, and the forward's ReLU its output, with Select (tensor-tensor mode), which needs its
    // UB reserve
    uint64_t usable = UsableUbBytes(ubBytes, pass == BatchNormPass::Backward || relu);
    while (tile >= kFloatRepeat && UbBytes(pass, dtypeSize, tile, statsLength) > usable) tile -= kFloatRepeat;
    if (tile < kFloatRepeat) return false;

    tiling.batch = batch;
    tiling.channels = channels;
    tiling.planeSize = planeSize;
    tiling.usedCoreNum = cores;
    tiling.channelsPerCore = perCore;
    tiling.bigCoreCount = big;
    tiling.tileLength = tile;
    tiling.statsLength = statsLength;
    tiling.reduceWorkLength = ReduceWorkLength(tile);
    tiling.negativeSlope = negativeSlope;
    tiling.eps = eps;
    tiling.momentum = momentum;
    tiling.updateRunningStats = updateRunningStats ? 1 : 0;
    tiling.relu = relu ? 1 : 0;
    double count = double(batch) * double(planeSize);
    tiling.inverseCount = static_cast<float>(1.0 / count);
    tiling.unbiasFactor = count > 1 ? static_cast<float>(count / (count - 1)) : 1.0f;
    return true;
}

// The request's input 0 as (N, C, plane); attributes (op table): negative_slope, then (forward only) eps, momentum,
// update_running_stats, relu. The variant is the BatchNormPass.
inline bool TilingFor(const TilingRequest& request, BatchNormLeakyReluTiling& tiling, std::string& why) {
    const auto pass = static_cast<BatchNormPass>(request.variant);
    uint64_t batch = 0, channels = 0, plane = 0;
    if (!ChannelLayout(request, 0, batch, channels, plane, why)) return false;
    const bool forward = pass == BatchNormPass::Forward;
    if (batch > UINT32_MAX || channels > UINT32_MAX) {  // the struct's 32-bit fields would keep the low bits
        why = "of shape " + ShapeText(request.shapes[0]) + ": N and C must each be below 2**32";
        return false;
    }
    if (request.elementSize != 2 && request.elementSize != 4) {  // float16/bfloat16 or float32 data
        why = "with " + std::to_string(request.elementSize) + "-byte elements (2 or 4 only)";
        return false;
    }
    if (!ComputeBatchNormLeakyReluTiling(pass, static_cast<uint32_t>(batch), static_cast<uint32_t>(channels), plane,
                                         request.elementSize, request.Float(0), forward ? request.Float(1) : 0.0f,
                                         forward ? request.Float(2) : 0.0f, forward && request.Bool(3),
                                         forward && request.Bool(4), request.platform.vectorCores,
                                         request.platform.ubBytes, tiling)) {
        why = "of shape (" + std::to_string(static_cast<uint32_t>(batch)) + ", " +
              std::to_string(static_cast<uint32_t>(channels)) + ", " + std::to_string(plane) + " per plane) with " +
              std::to_string(request.elementSize) + "-byte elements";
        return false;
    }
    return true;
}

inline uint32_t LaunchBlocks(const BatchNormLeakyReluTiling& t) { return t.usedCoreNum; }
inline uint32_t LaunchTileLength(const BatchNormLeakyReluTiling& t) { return t.tileLength; }

}  // namespace ascend_acts
