// What the BatchNorm + LeakyReLU training kernels read from the host's tiling (the plain struct, the
// buffer constants their InitBuffer calls share with the tiling, a core's range of statistics groups). In op_kernel/
// because CANN's source package ships only op_kernel/ to the kernel build; the pure tiling function,
// op_host/batch_norm_leaky_relu/batch_norm_leaky_relu_tiling.h, includes it from here.
#pragma once

#include <cstdint>

#include "../common/execution_space.h"

namespace ascend_acts {

struct BatchNormLeakyReluTiling {
    uint32_t batch;          // N
    uint32_t channels;       // C
    uint64_t planeSize;      // spatial elements (H * W)
    uint32_t usedCoreNum;    // blockDim
    uint32_t groupsPerCore;  // statistics groups (BatchNorm: channels) of a small core; big cores take one more
    uint32_t bigCoreCount;
    uint32_t tileLength;        // elements per UB tile, a multiple of kFloatRepeat
    uint32_t statsLength;       // floats per per-core statistics array: channels of a big core, 8-aligned
    uint32_t reduceWorkLength;  // floats of the ReduceSum work buffer for one tile
    float negativeSlope;
    float eps;
    float momentum;               // running = (1 - momentum) * running + momentum * batch statistic
    uint32_t updateRunningStats;  // 0 or 1
    float inverseCount;           // 1 / the values sharing one mean: N * H * W (BatchNorm), C/G * H * W (grouped)
    float unbiasFactor;           // n / (n - 1) for those n: the running variance is the unbiased one
    uint32_t relu;                // 0 or 1: torch's ReLU, z < 0 ? +0 : z (backward: z <= 0 ? 0 : dy), not LeakyReLU
    uint32_t normGroups;          // 0: BatchNorm; G: per-sample statistics over groups of C/G channels (GroupNorm)
    uint32_t channelsPerGroup;    // C / G (BatchNorm: 1)
    float inverseBatch;           // 1 / N: the running statistics of instance norm average the N instances'
    uint32_t savedIsResult;       // backward: 1 saved is the output (InPlace-ABN), 0 the conv output (+ save_mean)
    uint32_t rowMode;             // 1: BatchNorm of short planes by rows of samples (the tiling's rule), else 0
    uint32_t rowSamples;          // row mode: samples per DMA and per partial-sum row (from the shape alone)
    uint32_t rowChannels;         // row mode: channels per chunk (a row segment of a chunk is contiguous in GM)
    uint32_t rowLanes;            // row mode: floats per tile buffer (rowSamples padded rows), a multiple of 64
};

namespace batch_norm_tiling {

constexpr uint32_t kMaxTileLength = 16384;  // elements
constexpr uint32_t kFloatRepeat = 64;       // floats per 256-byte vector repeat
constexpr uint32_t kFloatsPerBlock = 8;     // floats per 32-byte block
// GM double buffering: two UB buffers per queue.
constexpr uint32_t kBufferNum = 2;
// A channel's sums: kSumArrays arrays (two sums, each with its compensation) of kSumLanes floats, the lanes each
// tile is halved down to.
constexpr uint32_t kSumLanes = 256;
constexpr uint32_t kSumArrays = 4;
// Per-core channel arrays (the kernels' StatsSlot enums): forward 12, backward 10; sized for 12.
constexpr uint32_t kStatsArrays = 12;
// Row mode: a row segment in UB starts every kRowAlign elements (64 bytes of float, 32 of half: DataCopyPad's UB
// blocks and the float copies both stay 32-byte aligned); the per-lane sums are kRowSumArrays arrays (two
// compensated sums and their corrections, the two plain sums a non-finite channel falls back on).
constexpr uint32_t kRowAlign = 16;
constexpr uint32_t kRowSumArrays = 6;

}  // namespace batch_norm_tiling

// First statistics group (BatchNorm: channel; grouped: group of channelsPerGroup channels) and group count of core
// `blockIdx`.
__aicore__ inline void BatchNormGroupRange(const BatchNormLeakyReluTiling& tiling, uint32_t blockIdx, uint32_t& first,
                                           uint32_t& count) {
    bool big = blockIdx < tiling.bigCoreCount;
    count = tiling.groupsPerCore + (big ? 1 : 0);
    first = blockIdx * tiling.groupsPerCore + (big ? blockIdx : tiling.bigCoreCount);
}

}  // namespace ascend_acts
