// Tiling of the training kernels of the fused Conv2d + BatchNorm2d + LeakyReLU (the BN + LeakyReLU
// part; the convolution is the platform's): batch_norm_leaky_relu_forward and _backward.
//
// Pure function of (shape, dtype size, attrs, platform) -> plain struct; no CANN includes, so the CANN
// TilingFunc, the emulator (both through TilingFor, op_host/common/tiling_request.h) and the unit tests share it.
//
// Split: whole statistics groups per core: BatchNorm's channels, or (norm_groups = G > 0, GroupNorm, InstanceNorm for
// G = C) the G groups of C/G consecutive channels, each core looping over the N samples inside. Every statistic and
// every per-channel gradient sum (over N too) then comes from one core, so no cross-core reduction (no workspace, no
// barrier) is needed, and each is reduced in a fixed order: results do not depend on the core count.
// blockDim = min(groups, vector cores); the first `bigCoreCount` cores take one group more than the others.
//
// A unit is the values sharing one mean: a channel's N planes of H*W contiguous elements (stride C*H*W), or a
// sample's C/G planes of a group (contiguous). The kernels walk a unit in tiles of `tileLength` elements (several
// whole planes when a plane's bytes fill whole 32-byte blocks, else at most one plane): the largest multiple of one 256-byte float repeat (64 elements) that fits the
// Unified Buffer (less Select's reserve in the backward) next to the per-core statistics arrays, with
// double-buffered GM queues. The struct the kernels read is in
// op_kernel/batch_norm_leaky_relu/batch_norm_leaky_relu_tiling_data.h.
//
// Row mode (BatchNorm only). A plane whose bytes do not fill whole 32-byte blocks goes one per DMA in the walk above,
// so BatchNorm1d over (N, F) (planes of one value, F apart) or (N, C, L) with a short L moves a few bytes per DMA. So
// BatchNorm with planes of fewer than kRowModePlaneBytes bytes that are not a multiple of 32 (RowModeFor) is walked by
// rows instead: row n of the (N, C * plane) view is contiguous, so a core's block of channels is a contiguous segment
// of every row, and one DMA moves that segment (of a chunk of `rowChannels` channels) for `rowSamples` samples. Sums
// are per UB lane (a sample row of the tile, a position of a channel's plane) across the tiles, compensated, then
// folded over the rows and the plane positions in a fixed order: `rowSamples` depends on the shape only (never on
// the core count or the UB), so every channel's sums, and the results, do not depend on the core split.
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

// Row mode: planes below this many bytes (and not whole 32-byte blocks) are walked by rows; see the top. Below it a
// one-plane DMA costs more in its fixed issue than in its bytes (the timeline's 32 issue cycles against 1 KiB at
// ~47 B per cycle), besides its latency, and each vector instruction of the plane walk covers at most 4 repeats.
constexpr uint64_t kRowModePlaneBytes = 1024;
// Row mode: at most this many samples per tile, and rowSamples * (a plane's padded row) at most kRowSampleLanes: one
// channel's tile then fits UB beside the statistics of up to about 2000 channels per core.
constexpr uint32_t kRowSamples = 32, kRowSampleLanes = 1024;
constexpr uint32_t kMaxRowLanes = 16384;
// Row mode buffers besides the dtype queues: forward values, squares, the shift rows and the kRowSumArrays sums;
// backward dy, centered, dz, a product, the sums and four per-lane rows of channel values (mean, invstd, gamma,
// beta), the sums' arrays holding the three coefficient rows in pass 2.
constexpr uint32_t kForwardRowFloatBuffers = 3 + kRowSumArrays, kBackwardRowFloatBuffers = 8 + kRowSumArrays;

inline bool RowModeFor(uint32_t normGroups, uint64_t planeSize, uint32_t dtypeSize, uint32_t channels) {
    const uint64_t planeBytes = planeSize * dtypeSize;
    // a row's GM gap is a 32-bit byte count
    return normGroups == 0 && planeBytes < kRowModePlaneBytes && planeBytes % 32 != 0 &&
           uint64_t(channels) * planeBytes <= UINT32_MAX;
}

inline uint32_t RowSamplesFor(uint32_t batch, uint64_t planeSize) {
    uint64_t byLanes = kRowSampleLanes / RoundUp(planeSize, kRowAlign);
    return static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>({batch, kRowSamples, byLanes})));
}

// UB bytes of the row mode for tile buffers of `lanes` floats (must match the kernels' InitBuffer calls).
inline uint64_t RowUbBytes(BatchNormPass pass, uint32_t dtypeSize, uint32_t lanes, uint32_t statsLength) {
    uint32_t queues = pass == BatchNormPass::Forward ? kForwardQueues : kBackwardQueues;
    uint32_t floats = pass == BatchNormPass::Forward ? kForwardRowFloatBuffers : kBackwardRowFloatBuffers;
    return uint64_t(queues) * kBufferNum * lanes * dtypeSize + uint64_t(floats) * lanes * sizeof(float) +
           uint64_t(kStatsArrays) * statsLength * sizeof(float);
}

}  // namespace batch_norm_tiling

// What the kernels do besides the shape (the op table's attributes).
struct BatchNormOptions {
    float negativeSlope = 0.0f;
    float eps = 0.0f;                 // forward
    float momentum = 0.0f;            // forward
    bool updateRunningStats = false;  // forward
    bool relu = false;
    bool savedIsResult = true;  // backward
    uint32_t normGroups = 0;    // 0: BatchNorm; G: statistics per sample and group of C/G channels
};

// Returns false (tiling unset) when the shape cannot be tiled: empty, or the statistics of one core's
// channels alone do not fit the Unified Buffer. `options.normGroups` must divide `channels`.
inline bool ComputeBatchNormLeakyReluTiling(BatchNormPass pass, uint32_t batch, uint32_t channels, uint64_t planeSize,
                                            uint32_t dtypeSize, const BatchNormOptions& options, uint32_t vectorCoreNum,
                                            uint64_t ubBytes, BatchNormLeakyReluTiling& tiling) {
    using namespace batch_norm_tiling;
    if (batch == 0 || channels == 0 || planeSize == 0 || vectorCoreNum == 0 || dtypeSize == 0) return false;
    // cores own whole statistics groups: BatchNorm's channels, or the groups of C/G channels
    const bool grouped = options.normGroups > 0;
    const uint32_t groups = grouped ? options.normGroups : channels;
    const uint32_t perGroup = channels / groups;
    uint32_t cores = std::min(groups, vectorCoreNum);
    uint32_t perCore = groups / cores;
    uint32_t big = groups % cores;
    // one value per channel of a core (grouped: also one per group of the core, fewer)
    uint32_t statsLength = static_cast<uint32_t>(
        RoundUp(uint64_t(perCore + (big ? 1 : 0)) * perGroup, kFloatsPerBlock));

    // the backward selects dz, and the forward's ReLU its output, with Select (tensor-tensor mode), which needs its
    // UB reserve
    uint64_t usable = UsableUbBytes(ubBytes, pass == BatchNormPass::Backward || options.relu);
    tiling.rowMode = tiling.rowSamples = tiling.rowChannels = tiling.rowLanes = 0;
    if (RowModeFor(options.normGroups, planeSize, dtypeSize, channels)) {
        // tile buffers of rowSamples rows of a chunk's channels, each row padded to kRowAlign elements
        const uint32_t samples = RowSamplesFor(batch, planeSize);
        const uint64_t coreChannels = perCore + (big ? 1 : 0);
        const uint64_t oneChannel = samples * RoundUp(planeSize, kRowAlign);
        uint64_t lanes = std::min<uint64_t>(
            RoundUp(samples * RoundUp(coreChannels * planeSize, kRowAlign), kFloatRepeat), kMaxRowLanes);
        while (lanes >= oneChannel && RowUbBytes(pass, dtypeSize, static_cast<uint32_t>(lanes), statsLength) > usable) {
            lanes -= kFloatRepeat;
        }
        // else the per-core statistics leave too little UB (thousands of channels per core): the plane walk
        if (lanes >= oneChannel) {
            const uint64_t row = lanes / samples / kRowAlign * kRowAlign;  // lanes of one sample's row segment
            tiling.rowMode = 1;
            tiling.rowSamples = samples;
            tiling.rowChannels = static_cast<uint32_t>(std::min<uint64_t>(coreChannels, row / planeSize));
            tiling.rowLanes = static_cast<uint32_t>(lanes);
        }
    }
    // A tile holds whole planes of a unit (the values sharing statistics: a channel's N planes, or a sample's C/G
    // planes of a group) when their bytes fill whole 32-byte blocks (the kernels then move several per DMA), else
    // at most one plane: no use for a tile longer than that.
    const bool wholePlanes = planeSize * dtypeSize % 32 == 0;
    const uint64_t unitPlanes = grouped ? perGroup : batch;
    uint64_t longest = std::min<uint64_t>(RoundUp(wholePlanes ? planeSize * unitPlanes : planeSize, kFloatRepeat),
                                          kMaxTileLength);
    uint32_t tile = static_cast<uint32_t>(longest);
    if (tiling.rowMode) {  // its tile buffers hold rows
        tile = tiling.rowLanes;
    } else {
        while (tile >= kFloatRepeat && UbBytes(pass, dtypeSize, tile, statsLength) > usable) tile -= kFloatRepeat;
        if (tile < kFloatRepeat) return false;
    }

    tiling.batch = batch;
    tiling.channels = channels;
    tiling.planeSize = planeSize;
    tiling.usedCoreNum = cores;
    tiling.groupsPerCore = perCore;
    tiling.bigCoreCount = big;
    tiling.tileLength = tile;
    tiling.statsLength = statsLength;
    tiling.reduceWorkLength = tiling.rowMode ? 0 : ReduceWorkLength(tile);
    tiling.negativeSlope = options.negativeSlope;
    tiling.eps = options.eps;
    tiling.momentum = options.momentum;
    tiling.updateRunningStats = options.updateRunningStats ? 1 : 0;
    tiling.relu = options.relu ? 1 : 0;
    tiling.normGroups = options.normGroups;
    tiling.channelsPerGroup = perGroup;
    tiling.savedIsResult = options.savedIsResult ? 1 : 0;
    double count = double(grouped ? perGroup : batch) * double(planeSize);
    tiling.inverseCount = static_cast<float>(1.0 / count);
    tiling.unbiasFactor = count > 1 ? static_cast<float>(count / (count - 1)) : 1.0f;
    tiling.inverseBatch = static_cast<float>(1.0 / batch);
    return true;
}

// The request's input 0 as (N, C, plane); attributes (op table): forward negative_slope, eps, momentum,
// update_running_stats, relu, norm_groups; backward negative_slope, saved_is_result, relu, norm_groups. The variant
// is the BatchNormPass.
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
    BatchNormOptions options;
    options.negativeSlope = request.Float(0);
    const int64_t groups = request.Int(forward ? 5 : 3);
    if (forward) {
        options.eps = request.Float(1);
        options.momentum = request.Float(2);
        options.updateRunningStats = request.Bool(3);
        options.relu = request.Bool(4);
    } else {
        options.savedIsResult = request.Bool(1);
        options.relu = request.Bool(2);
    }
    if (groups < 0 || (groups > 0 && channels % static_cast<uint64_t>(groups) != 0)) {
        why = "of shape " + ShapeText(request.shapes[0]) + ": norm_groups " + std::to_string(groups) +
              " must be 0 or divide the channels";
        return false;
    }
    options.normGroups = static_cast<uint32_t>(groups);
    if (options.updateRunningStats && groups > 0 && static_cast<uint64_t>(groups) != channels) {
        why = "of shape " + ShapeText(request.shapes[0]) + " with norm_groups " + std::to_string(groups) +
              ": running statistics are per channel, so grouped statistics update them only for norm_groups == C "
              "(instance norm)";
        return false;
    }
    if (!forward && options.savedIsResult && (options.relu || !(options.negativeSlope > 0.0f))) {
        why = "from the output: only LeakyReLU with a slope > 0 is invertible (saved_is_result false takes the conv "
              "output and save_mean)";
        return false;
    }
    if (!forward && !options.savedIsResult && !request.present[4]) {
        why = "from the conv output (saved_is_result false): save_mean missing";
        return false;
    }
    if (!ComputeBatchNormLeakyReluTiling(pass, static_cast<uint32_t>(batch), static_cast<uint32_t>(channels), plane,
                                         request.elementSize, options, request.platform.vectorCores,
                                         request.platform.ubBytes, tiling)) {
        why = "of shape (" + std::to_string(static_cast<uint32_t>(batch)) + ", " +
              std::to_string(static_cast<uint32_t>(channels)) + ", " + std::to_string(plane) + " per plane) with " +
              std::to_string(request.elementSize) + "-byte elements" +
              (groups > 0 ? " and norm_groups " + std::to_string(groups) : std::string());
        return false;
    }
    return true;
}

inline uint32_t LaunchBlocks(const BatchNormLeakyReluTiling& t) { return t.usedCoreNum; }
inline uint32_t LaunchTileLength(const BatchNormLeakyReluTiling& t) { return t.tileLength; }

}  // namespace ascend_acts
