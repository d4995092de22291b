// Tiling of the fused bias + LeakyReLU kernels (StyleGAN2's fused_leaky_relu): forward, and backward with the
// per-channel grad_bias reduction. Pure function of (shape, dtype size, attrs, platform) -> plain struct; no CANN
// includes, so the CANN TilingFunc, the emulator (both through TilingFor, op_host/common/tiling_request.h) and the
// tests share it. Design: docs/fused_bias_kernels.md.
//
// Split: whole channels per core (blockDim = min(C, vector cores), the first C % cores cores one channel more),
// so each core reads each of its biases once and reduces its channels' grad_bias completely: one launch per
// direction, no cross-core reduction. Tiles: Rows (S > 1) or Columns (S == 1), see the tiling data header; the
// largest tile that fits the UB (less Select's reserve in the backward) with double-buffered GM queues, within
// DataCopyPad's limits. The struct the kernels read is in
// op_kernel/fused_bias_leaky_relu/fused_bias_leaky_relu_tiling_data.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "../../op_kernel/fused_bias_leaky_relu/fused_bias_leaky_relu_tiling_data.h"
#include "../common/tiling_request.h"
#include "../common/ub_budget.h"

namespace ascend_acts {

enum class FusedBiasPass : uint32_t { Forward = 0, Backward = 1 };

namespace fused_bias_tiling {

// DataCopyPad's fields (CANN 8.1 basic_api/impl/dav_c220/kernel_operator_data_copy_impl.h,
// CheckDataCopyPadParams: blockCount 12 bits, blockLen 21 bits; DataCopyExtParams' strides are uint32 bytes
// on the GM side, basic_api/interface/kernel_struct_data_copy.h).
constexpr uint32_t kMaxBlockCount = 4095;
constexpr uint64_t kMaxBlockLen = 2097151;
constexpr uint64_t kMaxGmGap = 0xFFFFFFFFull;
// Channels whose biases / grad_bias a Rows kernel stages at once.
constexpr uint64_t kMaxChannelBlock = 256;
// Columns: the chunk of channels shrinks until this many rows fit in one tile (when N has them).
constexpr uint32_t kMinColumnRows = 8;

// The largest value in [1, high] for which `fits` holds (fits is monotone: true up to some value), or 0.
template <typename Fits>
uint64_t LargestFitting(uint64_t high, Fits&& fits) {
    if (high == 0 || !fits(1)) return 0;
    uint64_t low = 1;  // fits(low) holds
    while (low < high) {
        uint64_t mid = low + (high - low + 1) / 2;
        if (fits(mid)) low = mid;
        else high = mid - 1;
    }
    return low;
}

}  // namespace fused_bias_tiling

// Returns false (tiling unset) when there is nothing to tile (no channels, no cores, a dtype the kernels do not
// take) or the smallest tile does not fit the Unified Buffer. N == 0 or S == 0 tile: the backward then writes
// a zero grad_bias.
inline bool ComputeFusedBiasLeakyReluTiling(FusedBiasPass pass, uint64_t batch, uint64_t channels, uint64_t spatial,
                                            uint32_t elementSize, bool hasBias, float negativeSlope, float scale,
                                            bool savedIsResult, float clamp, bool relu, uint32_t vectorCoreNum,
                                            uint64_t ubBytes, FusedBiasLeakyReluTiling& tiling) {
    using namespace fused_bias_tiling;
    if (channels == 0 || vectorCoreNum == 0 || (elementSize != 2 && elementSize != 4)) return false;
    // a clamp's gradient needs the pre-clamp output (the saved output is ambiguous at +-clamp); NaN: no clamp
    // means a negative one
    if (clamp != clamp || (clamp >= 0.0f && pass == FusedBiasPass::Backward && savedIsResult)) return false;
    const bool backward = pass == FusedBiasPass::Backward;
    FusedBiasLeakyReluTiling t{};
    t.batch = batch;
    t.channels = channels;
    t.spatial = spatial;
    t.usedCoreNum = static_cast<uint32_t>(std::min<uint64_t>(channels, vectorCoreNum));
    t.channelsPerCore = channels / t.usedCoreNum;
    t.bigCoreCount = static_cast<uint32_t>(channels % t.usedCoreNum);
    t.hasBias = hasBias ? 1 : 0;
    t.savedIsResult = savedIsResult ? 1 : 0;
    t.negativeSlope = negativeSlope;
    t.scale = scale;
    t.elementSize = elementSize;
    t.relu = relu ? 1 : 0;
    t.clamp = clamp;
    const uint64_t coreChannels = t.channelsPerCore + (t.bigCoreCount ? 1 : 0);  // the most any core owns
    const uint64_t usable = UsableUbBytes(ubBytes, FusedBiasSelects(t, backward));
    const uint32_t perBlock = kBlockBytes / elementSize;

    // Sets the tile shape; whether its buffers fit the UB and its rows one DataCopyPad.
    auto shape = [&](uint64_t rows, uint64_t width, uint64_t channelBlock) {
        uint64_t pitch = RoundUp(width, perBlock);
        uint64_t length = RoundUp(rows * pitch, kFloatRepeat);
        if (rows > kMaxBlockCount || width * elementSize > kMaxBlockLen || length > usable) return false;
        t.rowsPerTile = static_cast<uint32_t>(rows);
        t.tileWidth = static_cast<uint32_t>(width);
        t.rowPitch = static_cast<uint32_t>(pitch);
        t.tileLength = static_cast<uint32_t>(length);
        t.channelBlock = static_cast<uint32_t>(channelBlock);
        return FusedBiasBuffersOf(t, backward).Total() <= usable;
    };
    // Rows of a tile are one strided DataCopyPad when the GM gap between them fits its uint32 stride.
    auto rowCap = [&](uint64_t gapElements) -> uint64_t {
        bool strided = gapElements <= kMaxGmGap / elementSize;
        return strided ? std::max<uint64_t>(std::min<uint64_t>(batch, kMaxBlockCount), 1) : 1;
    };

    if (spatial == 1) {  // Columns: (N, C) rows, a chunk of the core's channels per tile
        t.mode = static_cast<uint32_t>(FusedBiasMode::Columns);
        uint64_t rowLimit = rowCap(channels - 1);
        uint64_t wantRows = std::min<uint64_t>(rowLimit, kMinColumnRows);
        uint64_t width = LargestFitting(coreChannels, [&](uint64_t w) { return shape(wantRows, w, w); });
        if (width == 0) return false;
        uint64_t rows = LargestFitting(rowLimit, [&](uint64_t k) { return shape(k, width, width); });
        if (rows == 0 || !shape(rows, width, width)) return false;
    } else {  // Rows: N rows of S per channel, whole rows per tile, or chunks of one row when S is too long
        t.mode = static_cast<uint32_t>(FusedBiasMode::Rows);
        uint64_t channelBlock = std::min<uint64_t>(coreChannels, kMaxChannelBlock);
        uint64_t width = std::max<uint64_t>(spatial, 1);
        uint64_t gap = spatial == 0 ? 0
                                    : (channels - 1 > kMaxGmGap / spatial ? kMaxGmGap + 1 : (channels - 1) * spatial);
        if (shape(1, width, channelBlock)) {
            uint64_t rows = LargestFitting(rowCap(gap), [&](uint64_t k) { return shape(k, width, channelBlock); });
            if (!shape(rows, width, channelBlock)) return false;
        } else {  // chunks of whole 256-byte float repeats
            uint64_t repeats = LargestFitting(width / kFloatRepeat,
                                              [&](uint64_t r) { return shape(1, r * kFloatRepeat, channelBlock); });
            if (repeats == 0 || !shape(1, repeats * kFloatRepeat, channelBlock)) return false;
        }
    }
    tiling = t;
    return true;
}

// Inputs (op table): forward x, bias (optional); backward dy, saved, bias (optional), x viewed as (N, C, S).
// Attributes: negative_slope, scale, then (backward only) saved_is_result, then clamp, relu. The variant is the
// FusedBiasPass.
inline bool TilingFor(const TilingRequest& request, FusedBiasLeakyReluTiling& tiling, std::string& why) {
    const auto pass = static_cast<FusedBiasPass>(request.variant);
    const bool backward = pass == FusedBiasPass::Backward;
    uint64_t batch = 0, channels = 0, spatial = 0;
    if (!ChannelLayout(request, 0, batch, channels, spatial, why)) return false;
    const bool hasBias = request.present[backward ? 2 : 1];
    const uint32_t modes = backward ? 3 : 2;  // the index of clamp
    if (!ComputeFusedBiasLeakyReluTiling(pass, batch, channels, spatial, request.elementSize, hasBias, request.Float(0),
                                         request.Float(1), backward ? request.Bool(2) : true, request.Float(modes),
                                         request.Bool(modes + 1), request.platform.vectorCores,
                                         request.platform.ubBytes, tiling)) {
        why = "of shape (" + std::to_string(batch) + ", " + std::to_string(channels) + ", " + std::to_string(spatial) +
              " spatial) with " + std::to_string(request.elementSize) + "-byte elements";
        return false;
    }
    return true;
}

inline uint32_t LaunchBlocks(const FusedBiasLeakyReluTiling& t) { return t.usedCoreNum; }
inline uint32_t LaunchTileLength(const FusedBiasLeakyReluTiling& t) { return t.tileLength; }

}  // namespace ascend_acts
