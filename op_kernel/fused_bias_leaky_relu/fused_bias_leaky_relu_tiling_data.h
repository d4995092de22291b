// What the fused bias + LeakyReLU kernels read from the host's tiling: the plain struct, the UB buffers their
// InitBuffer calls share with the tiling, a core's channel range. In op_kernel/ because CANN's source package
// ships only op_kernel/ to the kernel build; the pure tiling function,
// op_host/fused_bias_leaky_relu/fused_bias_leaky_relu_tiling.h, includes it from here.
//
// x is viewed as (N, C, S), S = prod(shape[2:]) (1 for a rank-2 input); element (n, c, s) is at (n * C + c) * S + s.
// Each core owns whole channels (a contiguous range), so the backward reduces its channels' grad_bias alone.
#pragma once

#include <cstdint>

#include "../common/execution_space.h"

namespace ascend_acts {

// Rows (S > 1): a tile is `rowsPerTile` rows of S elements of one channel (stride C * S), or, for an S too long
// for the UB, one chunk of `tileWidth` elements of one row; the channel's bias is a scalar for the tile.
// Columns (S == 1): a tile is `rowsPerTile` rows of `tileWidth` consecutive channels (stride C), with their
// biases replicated over the tile's rows once per column chunk.
enum class FusedBiasMode : uint32_t { Rows = 0, Columns = 1 };

struct FusedBiasLeakyReluTiling {
    uint64_t batch;            // N
    uint64_t channels;         // C
    uint64_t spatial;          // S
    uint64_t channelsPerCore;  // channels of a small core; the first bigCoreCount cores take one more
    uint32_t bigCoreCount;
    uint32_t usedCoreNum;    // blockDim
    uint32_t mode;           // FusedBiasMode
    uint32_t rowsPerTile;    // K: GM rows per DataCopyPad (blockCount <= 4095)
    uint32_t tileWidth;      // W: Rows: elements of a row per tile (S, or a chunk of it); Columns: channels per chunk
    uint32_t rowPitch;       // UB elements between the tile's rows: W rounded up to 32 bytes of the dtype
    uint32_t tileLength;     // elements per UB tile buffer: K * rowPitch rounded up to whole 256-byte float repeats
    uint32_t channelBlock;   // G: channels whose biases (and grad_bias) are staged in UB at once (Columns: W)
    uint32_t hasBias;        // 0 or 1: the optional bias was given
    uint32_t savedIsResult;  // backward: 1 when `saved` is the output y, 0 when it is the input x
    float negativeSlope;     // unused when relu
    float scale;
    uint32_t elementSize;  // bytes of the data dtype
    uint32_t relu;         // 1: the activation is torch.relu (t < 0 gives +0.0; -0.0 and NaN stay), not LeakyReLU
    float clamp;           // >= 0: y clamped to [-clamp, clamp] after the scale (torch.clamp); < 0: no clamp
    uint32_t reserved;     // keeps the struct whole 64-bit words
};

namespace fused_bias_tiling {

constexpr uint32_t kBufferNum = 2;       // GM queues are double-buffered
constexpr uint32_t kFloatRepeat = 64;    // floats per 256-byte vector repeat
constexpr uint32_t kFloatsPerBlock = 8;  // floats per 32-byte block
constexpr uint32_t kBlockBytes = 32;

__aicore__ inline uint64_t RoundUp(uint64_t value, uint64_t multiple) {
    return (value + multiple - 1) / multiple * multiple;
}

__aicore__ inline uint32_t WholeBlocks(uint64_t bytes) { return static_cast<uint32_t>(RoundUp(bytes, kBlockBytes)); }

}  // namespace fused_bias_tiling

// The UB buffers of one kernel (bytes, each a whole number of 32-byte blocks; 0: not allocated). The kernels'
// InitBuffer calls and the tiling's budget both come from here, so they cannot disagree.
struct FusedBiasBuffers {
    uint32_t queue;       // one buffer of a GM queue (tileLength elements of the dtype); kBufferNum per queue
    uint32_t queues;      // GM queues: forward x, y; backward dy, saved, dx
    uint32_t floatTile;   // one float work tile (tileLength floats)
    uint32_t floatTiles;  // forward: values; backward: gradient, pre-activation / dx, accumulator, compensation;
                          // relu or clamp: + a constant tile (Select's 0 or +-clamp); backward with clamp: + the
                          // recomputed pre-clamp output
    uint32_t mask;        // backward, relu or clamp: CompareScalar's bit mask over a tile
    uint32_t biasStage;   // the staged biases in the dtype (channelBlock elements)
    uint32_t biasFloat;   // the biases as float: Rows channelBlock floats; Columns the replicated tile
    uint32_t sums;        // backward, Rows: grad_bias of a channel block, float
    uint32_t gradBias;    // backward: grad_bias of a channel block in the dtype
    uint64_t Total() const {
        return uint64_t(queue) * queues * fused_bias_tiling::kBufferNum + uint64_t(floatTile) * floatTiles + mask +
               biasStage + biasFloat + sums + gradBias;
    }
};

__aicore__ inline bool FusedBiasClamps(const FusedBiasLeakyReluTiling& t) { return t.clamp >= 0.0f; }

// Whether a kernel Selects (compares and picks per element): the backward always; the forward for relu or clamp.
__aicore__ inline bool FusedBiasSelects(const FusedBiasLeakyReluTiling& t, bool backward) {
    return backward || t.relu != 0 || FusedBiasClamps(t);
}

// Whether a kernel reads the biases: the forward whenever given; the backward only to rebuild the
// pre-activation from the input (saved_is_result false).
__aicore__ inline bool FusedBiasReadsBias(const FusedBiasLeakyReluTiling& t, bool backward) {
    return t.hasBias != 0 && (!backward || t.savedIsResult == 0);
}

__aicore__ inline FusedBiasBuffers FusedBiasBuffersOf(const FusedBiasLeakyReluTiling& t, bool backward) {
    using namespace fused_bias_tiling;
    bool columns = t.mode == static_cast<uint32_t>(FusedBiasMode::Columns);
    FusedBiasBuffers b{};
    b.queue = WholeBlocks(uint64_t(t.tileLength) * t.elementSize);
    b.queues = backward ? 3 : 2;
    b.floatTile = WholeBlocks(uint64_t(t.tileLength) * sizeof(float));
    b.floatTiles = (backward ? 4 : 1) + (t.relu != 0 || FusedBiasClamps(t) ? 1 : 0) +
                   (backward && FusedBiasClamps(t) ? 1 : 0);
    if (FusedBiasSelects(t, backward)) b.mask = WholeBlocks(t.tileLength / 8);
    if (FusedBiasReadsBias(t, backward)) {
        b.biasStage = WholeBlocks(uint64_t(t.channelBlock) * t.elementSize);
        b.biasFloat = columns ? b.floatTile : WholeBlocks(uint64_t(t.channelBlock) * sizeof(float));
    }
    if (backward) {
        b.gradBias = WholeBlocks(uint64_t(t.channelBlock) * t.elementSize);
        if (!columns) b.sums = WholeBlocks(uint64_t(t.channelBlock) * sizeof(float));
    }
    return b;
}

// First channel and channel count of core `blockIdx`.
__aicore__ inline void FusedBiasChannelRange(const FusedBiasLeakyReluTiling& t, uint32_t blockIdx, uint64_t& first,
                                             uint64_t& count) {
    bool big = blockIdx < t.bigCoreCount;
    count = t.channelsPerCore + (big ? 1 : 0);
    first = uint64_t(blockIdx) * t.channelsPerCore + (big ? blockIdx : t.bigCoreCount);
}

}  // namespace ascend_acts
