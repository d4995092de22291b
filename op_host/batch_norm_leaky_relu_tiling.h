// Tiling of the training kernels of the fused Conv2d + BatchNorm2d + LeakyReLU (the BN + LeakyReLU
// part; the convolution is the platform's): batch_norm_leaky_relu_forward and _backward.
//
// Pure function of (shape, dtype size, attrs, platform) -> plain struct; no CANN includes, so the CANN
// TilingFunc, the emulator and the unit tests share it.
//
// Split: whole channels per core. A channel's statistics then come from one core, so no cross-core
// reduction (no workspace, no barrier) is needed, and each channel is reduced in a fixed order:
// results do not depend on the core count. blockDim = min(C, vector cores); the first
// `bigCoreCount` cores take one channel more than the others.
//
// Within a channel the kernel walks the N planes of H*W contiguous elements (stride C*H*W) in tiles of
// `tileLength` elements: the largest multiple of one 256-byte float repeat (64 elements) that fits the
// Unified Buffer next to the per-core statistics arrays, with double-buffered GM queues.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ascend_acts {

enum class BatchNormPass : uint32_t { Forward = 0, Backward = 1 };

struct BatchNormLeakyReluTiling {
    uint32_t batch;           // N
    uint32_t channels;        // C
    uint64_t planeSize;       // H * W elements
    uint32_t usedCoreNum;     // blockDim
    uint32_t channelsPerCore; // channels of a small core; big cores take one more
    uint32_t bigCoreCount;
    uint32_t tileLength;      // elements per UB tile, a multiple of kFloatRepeat
    uint32_t statsLength;     // floats per per-core statistics array: channels of a big core, 8-aligned
    uint32_t reduceWorkLength; // floats of the ReduceSum work buffer for one tile
    float negativeSlope;
    float eps;
    float momentum;           // running = (1 - momentum) * running + momentum * batch statistic
    uint32_t updateRunningStats; // 0 or 1
    float inverseCount;       // 1 / (N * H * W)
    float unbiasFactor;       // n / (n - 1), n = N * H * W: the running variance is the unbiased one
};

namespace batch_norm_tiling {

constexpr uint32_t kFloatRepeat = 64;     // floats per 256-byte vector repeat
constexpr uint32_t kFloatsPerBlock = 8;   // floats per 32-byte block
constexpr uint32_t kMaxTileLength = 16384;
// GM double buffering: two UB buffers per queue.
constexpr uint32_t kBufferNum = 2;
// Forward: x in, out out (dtype-sized, double-buffered); x as float, x squared, two accumulators.
constexpr uint32_t kForwardQueues = 2, kForwardFloatBuffers = 4;
// Backward: grad_out and output in, grad_input out; their float copies (dy, a -> z), dz, a scratch
// product and two accumulators.
constexpr uint32_t kBackwardQueues = 3, kBackwardFloatBuffers = 6;
// Per-core channel arrays (the kernels' StatsSlot enums): forward 12, backward 10; sized for 12.
constexpr uint32_t kStatsArrays = 12;

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
           uint64_t(ReduceWorkLength(tile)) * sizeof(float) + uint64_t(kStatsArrays) * statsLength * sizeof(float);
}

}  // namespace batch_norm_tiling

// Returns false (tiling unset) when the shape cannot be tiled: empty, or the statistics of one core's
// channels alone do not fit the Unified Buffer.
inline bool ComputeBatchNormLeakyReluTiling(BatchNormPass pass, uint32_t batch, uint32_t channels,
                                            uint64_t planeSize, uint32_t dtypeSize, float negativeSlope,
                                            float eps, float momentum, bool updateRunningStats,
                                            uint32_t vectorCoreNum, uint64_t ubBytes,
                                            BatchNormLeakyReluTiling& tiling) {
    using namespace batch_norm_tiling;
    if (batch == 0 || channels == 0 || planeSize == 0 || vectorCoreNum == 0 || dtypeSize == 0) return false;
    uint32_t cores = std::min(channels, vectorCoreNum);
    uint32_t perCore = channels / cores;
    uint32_t big = channels % cores;
    uint32_t statsLength = static_cast<uint32_t>(RoundUp(perCore + (big ? 1 : 0), kFloatsPerBlock));

    // No use for a tile longer than a plane (tiles never cross planes).
    uint64_t longest = std::min<uint64_t>(RoundUp(planeSize, kFloatRepeat), kMaxTileLength);
    uint32_t tile = static_cast<uint32_t>(longest);
    while (tile >= kFloatRepeat && UbBytes(pass, dtypeSize, tile, statsLength) > ubBytes) tile -= kFloatRepeat;
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
    double count = double(batch) * double(planeSize);
    tiling.inverseCount = static_cast<float>(1.0 / count);
    tiling.unbiasFactor = count > 1 ? static_cast<float>(count / (count - 1)) : 1.0f;
    return true;
}

// First channel and channel count of core `blockIdx` (also called by the kernels: no std:: here).
inline void BatchNormChannelRange(const BatchNormLeakyReluTiling& tiling, uint32_t blockIdx, uint32_t& first,
                                  uint32_t& count) {
    bool big = blockIdx < tiling.bigCoreCount;
    count = tiling.channelsPerCore + (big ? 1 : 0);
    first = blockIdx * tiling.channelsPerCore + (big ? blockIdx : tiling.bigCoreCount);
}

}  // namespace ascend_acts
