// Tiling of the eval kernel of the fused Conv2d + BatchNorm2d + LeakyReLU (cube-side img2col, MIX AIC:AIV 1:2):
// the Cout block Mb, whether its W' stays in L1 or streams, the output tile, the images per item, the K chunk,
// the UB passes and the GM rings. The layouts and the work decomposition are described in
// op_kernel/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_tiling_data.h.
//
// Every shape that fits the platform is a candidate: Mb in 128, 64, 32, 16 (capped at Cout rounded up to 16), W'
// resident (weight-stationary: the block and two input bands fit L1; streamed, two K slices of the block and two
// bands in L1, only when no resident block fits), output tiles of whole rows (several whole images per item where
// a tile is a whole image), L0C double-buffered where two results fit. The candidate with the fewest estimated
// cycles on the busiest AI core wins (EstimatedCycles: per item the slowest of the cube's pipes and the AIVs'
// copies, at the platform's documented rates, times the item rounds; an estimate to rank tilings,
// benchmarks/perf_model.py is the judge). kc: the largest multiple of C0 with the item's positions x kc (L0A) and
// kc x Mb (L0B) fitting twice, and kc / C0 x Mb / 16 fractals within one LoadData 2D.
// Pure function of (geometry, dtype size, platform) -> plain struct; no CANN includes. TilingFor reads the geometry
// from the request (op_host/common/tiling_request.h) that the CANN TilingFunc and the emulator both fill.
#pragma once

#include <cstdint>
#include <string>

#include "../../op_kernel/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_tiling_data.h"
#include "../common/tiling_request.h"
#include "../common/ub_budget.h"

namespace ascend_acts {

// The AI core's resources, as CANN's PlatformAscendC reports them (GetCoreNumAic, GetCoreMemSize).
struct CubePlatform {
    uint32_t cubeCoreNum;    // AIC (AI cores)
    uint32_t vectorCoreNum;  // AIV, two per AIC on 910B
    uint64_t ubBytes, l1Bytes, l0aBytes, l0bBytes, l0cBytes;
};

namespace conv_eval_tiling {

constexpr uint32_t kMaxBlockRows = 128;
constexpr uint32_t kMaxLoad2dRepeat = 255;  // LoadData2DParams::repeatTimes is a uint8_t
constexpr uint32_t kMaxMmadSide = 4095;     // Mmad m, n, k; Fixpipe nSize
constexpr uint32_t kMaxU16 = 65535;
constexpr uint32_t kMaxU8 = 255;
constexpr uint32_t kMaxPadBlocks = 4095;  // DataCopyExtParams::blockCount of DataCopyPad (12 bits)

inline uint64_t Effective(uint32_t kernel, uint32_t dilation) { return uint64_t(kernel - 1) * dilation + 1; }

// Most input rows (clipped to the image) a tile of `tileRows` output rows reads.
inline uint32_t BandRowsFor(const ConvBnLeakyReluEvalTiling& t) {
    uint32_t most = 0;
    for (uint32_t tile = 0; tile < t.tilesPerImage; ++tile) {
        uint32_t rows = TileOf(t, tile).inRows;
        most = rows > most ? rows : most;
    }
    return most;
}

// UB bytes of an AIV's prologue (interleaving `rows` input rows of `groups` groups of C0 channels): the channel
// rows and the interleaved rows, double-buffered.
inline uint64_t PrologueUbBytes(uint32_t rows, uint32_t groups, uint32_t width, uint32_t c0, uint32_t dtypeSize) {
    const uint64_t pitch = ProloguePitch(rows * width);
    return 4ull * groups * c0 * pitch * dtypeSize;
}

// UB bytes of an AIV's epilogue (`rows` channels of `positions`): the slot's columns in (whole 32-byte blocks of
// float per position) double-buffered, their transpose, T out double-buffered, and the block's biases.
inline uint64_t EpilogueUbBytes(uint32_t rows, uint32_t positions, uint32_t blockRows, uint32_t dtypeSize) {
    const uint64_t columns = RoundUp(rows, 8);
    return 3ull * columns * positions * 4 + 2ull * rows * positions * dtypeSize + RoundUp(blockRows * 4, 32);
}

// The W' block's slice buffers and two input bands (an item's: one per image).
inline uint64_t L1Bytes(const ConvBnLeakyReluEvalTiling& t, uint32_t dtypeSize) {
    const uint64_t weights = uint64_t(t.blockRows) * WeightBuffers(t) * t.weightSliceK * dtypeSize;
    const uint64_t band = uint64_t(t.channelGroups) * t.c0 * t.bandRows * t.conv.width * dtypeSize;
    return weights + 2 * band * t.imagesPerItem;
}

// Fills the tile-dependent fields for (Mb, W' streamed or not, tileRows, t.imagesPerItem); false when they do not
// fit the platform.
inline bool TryShape(ConvBnLeakyReluEvalTiling& t, uint32_t blockRows, bool streamed, uint32_t tileRows,
                     uint32_t dtypeSize, const CubePlatform& p) {
    const ConvGeometry& g = t.conv;
    t.blockRows = blockRows;
    t.weightStreamed = streamed ? 1 : 0;
    t.coutBlocks = CeilDiv(g.outChannels, blockRows);
    t.tileRows = tileRows;
    t.tilesPerImage = CeilDiv(g.outHeight, tileRows);
    t.tilePositions = RoundUp(tileRows * g.outWidth, kFractalRows);
    if (t.imagesPerItem > 1 && t.tilesPerImage > 1) return false;  // several images: whole images only
    const uint64_t itemPositions = uint64_t(t.imagesPerItem) * t.tilePositions;
    if (uint64_t(tileRows) * g.outWidth > kMaxMmadSide || itemPositions > kMaxMmadSide) return false;
    t.itemPositions = static_cast<uint32_t>(itemPositions);
    t.bandRows = BandRowsFor(t);
    if (uint64_t(t.bandRows) * g.width > kMaxU16 || uint64_t(t.bandRows) > kMaxU16) return false;
    if (uint64_t(blockRows) * itemPositions * 4 > p.l0cBytes) return false;
    t.l0cBuffers = 2 * uint64_t(blockRows) * itemPositions * 4 <= p.l0cBytes ? 2 : 1;
    // kc: double-buffered L0A (the item's positions x kc) and L0B (kc x Mb); one LoadData 2D moves a chunk's
    // kc / C0 x Mb / 16 W' fractals
    const uint32_t kPadded = t.kFractals * t.c0;
    uint64_t fractals = p.l0aBytes / (2ull * itemPositions * t.c0 * dtypeSize);
    const uint64_t byL0b = p.l0bBytes / (2ull * blockRows * t.c0 * dtypeSize);
    fractals = byL0b < fractals ? byL0b : fractals;
    fractals = fractals < kMaxLoad2dRepeat / (blockRows / 16) ? fractals : kMaxLoad2dRepeat / (blockRows / 16);
    fractals = fractals < kMaxMmadSide / t.c0 ? fractals : kMaxMmadSide / t.c0;
    fractals = fractals < t.kFractals ? fractals : t.kFractals;
    if (fractals == 0) return false;
    t.kChunk = static_cast<uint32_t>(fractals) * t.c0;
    const uint32_t chunks = CeilDiv(kPadded, t.kChunk);
    if (streamed) {  // the longest slices two buffers of which fit L1 beside the bands
        const uint64_t bands = 2ull * t.channelGroups * t.c0 * t.bandRows * g.width * dtypeSize * t.imagesPerItem;
        const uint64_t chunkBytes = uint64_t(kStreamBuffers) * blockRows * t.kChunk * dtypeSize;
        uint64_t perSlice = bands < p.l1Bytes ? (p.l1Bytes - bands) / chunkBytes : 0;
        perSlice = perSlice < chunks ? perSlice : chunks;
        if (perSlice == 0) return false;
        t.weightSliceK = static_cast<uint32_t>(perSlice) * t.kChunk;
    } else {
        t.weightSliceK = CeilDiv(chunks, kMaxWeightSlices) * t.kChunk;
    }
    t.weightSlices = CeilDiv(kPadded, t.weightSliceK);
    if (L1Bytes(t, dtypeSize) > p.l1Bytes) return false;
    // UB: half for the prologue, half for the epilogue, each in as many passes as it takes
    // (the most rows, then the most of an AIV's channel groups per pass: fewer, longer copies)
    t.prologueRows = 0;
    for (uint32_t rows = t.bandRows; rows >= 1; --rows) {
        if (PrologueUbBytes(rows, 1, g.width, t.c0, dtypeSize) <= p.ubBytes / 2) {
            t.prologueRows = rows;
            break;
        }
    }
    t.prologueGroups = 1;
    const uint32_t perAiv = CeilDiv(t.channelGroups, 2);
    while (t.prologueRows > 0 && t.prologueGroups < perAiv && (t.prologueGroups + 1) * t.c0 <= kMaxPadBlocks &&
           PrologueUbBytes(t.prologueRows, t.prologueGroups + 1, g.width, t.c0, dtypeSize) <= p.ubBytes / 2) {
        ++t.prologueGroups;
    }
    t.epilogueRows = 0;
    for (uint32_t rows = RoundUp(CeilDiv(blockRows, 2), 8); rows >= 1; --rows) {
        if (EpilogueUbBytes(rows, t.itemPositions, blockRows, dtypeSize) <= p.ubBytes / 2) {
            t.epilogueRows = rows;
            break;
        }
    }
    if (t.prologueRows == 0 || t.epilogueRows == 0) return false;
    t.workItems = t.coutBlocks * CeilDiv(g.batch, t.imagesPerItem) * t.tilesPerImage;
    return true;
}

// Rates for ranking tilings, per cycle of one AI core, from CANN 8.1's platform_config/Ascend910B1.ini
// [AICoreMemoryRates] (l1_to_l0_a_rate, l1_to_l0_b_rate, l2_read_rate, l2_write_rate, ub_to_l2_rate) and one
// 16 x 16 x C0 fractal Mmad per cycle; the per-instruction issue cost and the cube's efficiency are assumptions
// (the perf model's).
constexpr double kL0aBytesPerCycle = 512, kL0bBytesPerCycle = 256, kL2ReadBytesPerCycle = 110, kHbmBytesPerCycle = 32;
constexpr double kFixpipeBytesPerCycle = 86, kUbToGmBytesPerCycle = 64, kIssueCycles = 16, kCubeEfficiency = 0.8;
// L2 bytes per cycle the whole chip moves: an assumption (no .ini gives it), the perf model's 4 TB/s at 1.85 GHz
constexpr double kChipL2BytesPerCycle = 2160;

inline double Larger(double a, double b) { return a > b ? a : b; }

// Estimated cycles of the busiest AI core: item rounds times an item's slowest pipe (the cube's MTE1 / M / MTE2 /
// FIX, the AIVs' copies, each with its instructions' issue cost), plus one item's AIV work (the ring's fill and
// drain) and, weight-stationary, the W' blocks a core's range loads. A core's first W' block comes from HBM
// (ddr_read_rate): every core starts at once, nothing is in L2 yet. Single-buffered L0C serialises Fixpipe with
// the next item's Mmads. Never less than the launch's GM bytes at the chip's L2 rate.
inline double EstimatedCycles(const ConvBnLeakyReluEvalTiling& t, uint32_t dtypeSize, uint32_t cores) {
    const ConvGeometry& g = t.conv;
    const double images = t.imagesPerItem, npad = t.tilePositions, mb = t.blockRows, size = dtypeSize;
    const double kPadded = double(t.kFractals) * t.c0, chunks = CeilDiv(t.kFractals * t.c0, t.kChunk);
    const double blockBytes = mb * kPadded * size;
    const double bandBytes = images * t.channelGroups * t.c0 * double(t.bandRows) * g.width * size;
    const double resultBytes = mb * images * npad * 4;
    const double mmad = images * mb * npad * kPadded / (256.0 * t.c0 * kCubeEfficiency) + chunks * kIssueCycles;
    // img2col into L0A (one LoadData 3Dv2 per image and chunk), W' into L0B (one LoadData 2D per chunk)
    const double mte1 = images * kPadded * npad * size / kL0aBytesPerCycle + blockBytes / kL0bBytesPerCycle +
                        chunks * (images + 1) * kIssueCycles;
    const double mte2 = (bandBytes + (t.weightStreamed ? blockBytes : 0)) / kL2ReadBytesPerCycle +
                        (1 + (t.weightStreamed ? t.weightSlices * mb / 16 : 0)) * kIssueCycles;
    const double fix = resultBytes / kFixpipeBytesPerCycle;
    // each AIV: half the band in and out (prologue), half the result in and half of y out (epilogue)
    const double aivIn = (bandBytes + resultBytes) / 2 / kL2ReadBytesPerCycle;
    const double aivOut = (bandBytes + mb * images * npad * size) / 2 / kUbToGmBytesPerCycle;
    const double aiv = Larger(aivIn, aivOut);
    double item = Larger(Larger(mmad, mte1), Larger(Larger(mte2, fix), aiv));
    if (t.l0cBuffers == 1) item += fix;
    const uint32_t rounds = CeilDiv(t.workItems, cores);
    double weights = blockBytes / kHbmBytesPerCycle - (t.weightStreamed ? blockBytes / kL2ReadBytesPerCycle : 0);
    if (!t.weightStreamed) {  // a range of `rounds` items touches at most this many blocks
        const uint32_t perBlock = t.workItems / t.coutBlocks;
        weights += CeilDiv(rounds, perBlock) * blockBytes / kL2ReadBytesPerCycle;
    }
    // every GM byte: x in and the slot out and in (AIVs, AIC), W', the result ring out and in, y out
    const double items = t.workItems;
    const double gmBytes = items * (3 * bandBytes + 2 * resultBytes) +
                           (t.weightStreamed ? items : double(cores)) * blockBytes +
                           double(g.batch) * g.outChannels * g.outHeight * g.outWidth * size;
    return Larger(rounds * item + aiv + weights, gmBytes / kChipL2BytesPerCycle);
}

// The cheapest shape for (Mb, W' streamed or not) over the tile heights and images per item; false when none fits.
inline bool CheapestShape(ConvBnLeakyReluEvalTiling& t, uint32_t blockRows, bool streamed, uint32_t dtypeSize,
                          const CubePlatform& p) {
    bool found = false;
    double bestCost = 0;
    ConvBnLeakyReluEvalTiling best{};
    for (uint32_t rows = t.conv.outHeight; rows >= 1; --rows) {
        for (uint32_t images = 1; images <= t.conv.batch; ++images) {
            ConvBnLeakyReluEvalTiling candidate = t;
            candidate.imagesPerItem = images;
            // larger G needs only more of everything; several images only as whole-image tiles
            if (!TryShape(candidate, blockRows, streamed, rows, dtypeSize, p)) break;
            const double cost = EstimatedCycles(candidate, dtypeSize, p.cubeCoreNum);
            if (!found || cost < bestCost) {
                best = candidate;
                bestCost = cost;
                found = true;
            }
        }
    }
    if (found) t = best;
    return found;
}

}  // namespace conv_eval_tiling

// Returns false when the geometry is empty, outside the field widths of LoadData 3Dv2 / Mmad / Fixpipe, pads a
// whole filter height (a tile would read no input row), or cannot be tiled on the platform. `relu`: the epilogue
// selects (torch's ReLU), so the AIVs' buffers leave Select's temporary at the top of UB free.
inline bool ComputeConvBnLeakyReluEvalTiling(const ConvGeometry& g, uint32_t dtypeSize, float negativeSlope,
                                             const CubePlatform& platform, ConvBnLeakyReluEvalTiling& t,
                                             bool relu = false) {
    using namespace conv_eval_tiling;
    CubePlatform p = platform;
    p.ubBytes = UsableUbBytes(platform.ubBytes, relu);
    if (g.batch == 0 || g.outChannels == 0 || g.outHeight == 0 || g.outWidth == 0 || g.inChannels == 0 ||
        g.height == 0 || g.width == 0 || g.kernelH == 0 || g.kernelW == 0 || p.cubeCoreNum == 0 ||
        (dtypeSize != 2 && dtypeSize != 4))
        return false;
    // LoadData3DParamsV2 field widths: strides 1..63, filter and dilation uint8, padding uint8, l1W uint16
    if (g.strideH < 1 || g.strideH > 63 || g.strideW < 1 || g.strideW > 63 || g.kernelH > kMaxU8 ||
        g.kernelW > kMaxU8 || g.dilationH < 1 || g.dilationH > kMaxU8 || g.dilationW < 1 || g.dilationW > kMaxU8 ||
        g.width > kMaxU16)
        return false;
    const uint64_t effH = Effective(g.kernelH, g.dilationH), effW = Effective(g.kernelW, g.dilationW);
    const int64_t bottom = int64_t(g.outHeight - 1) * g.strideH + int64_t(effH) - g.height - g.padTop;
    const int64_t right = int64_t(g.outWidth - 1) * g.strideW + int64_t(effW) - g.width - g.padLeft;
    if (g.padTop >= effH || bottom >= int64_t(effH) || g.padTop > kMaxU8 || g.padLeft > kMaxU8 || bottom > kMaxU8 ||
        right > kMaxU8)
        return false;
    ConvBnLeakyReluEvalTiling plan{};
    plan.conv = g;
    plan.padBottom = bottom > 0 ? uint32_t(bottom) : 0;
    plan.padRight = right > 0 ? uint32_t(right) : 0;
    plan.c0 = 32 / dtypeSize;
    plan.channelGroups = CeilDiv(g.inChannels, plan.c0);
    if (uint64_t(plan.channelGroups) * plan.c0 > kMaxU16) return false;  // LoadData 3Dv2 channelSize
    plan.kFractals = plan.channelGroups * g.kernelH * g.kernelW;
    if (uint64_t(plan.kFractals) * plan.c0 > kMaxU16) return false;  // kStartPt / kExtension
    // a W' slice's DataCopy steps over the other Cout fractals of a K fractal in 32-byte blocks: uint16_t srcStride
    if (uint64_t(CeilDiv(g.outChannels, kFractalRows)) * 16 > kMaxU16) return false;
    plan.negativeSlope = negativeSlope;
    plan.relu = relu ? 1 : 0;
    plan.imagesPerItem = 1;

    bool found = false;
    double bestCost = 0;
    ConvBnLeakyReluEvalTiling best{};
    uint32_t first = RoundUp(g.outChannels, kFractalRows);
    first = first < kMaxBlockRows ? first : kMaxBlockRows;
    for (int streamed = 0; streamed < 2 && !found; ++streamed) {  // streamed W' only where no block fits L1
        for (uint32_t rows = first; rows >= kFractalRows; rows = rows == kFractalRows ? 0 : RoundUp(rows / 2, 16)) {
            ConvBnLeakyReluEvalTiling candidate = plan;
            if (!CheapestShape(candidate, rows, streamed == 1, dtypeSize, p)) continue;
            const double cost = EstimatedCycles(candidate, dtypeSize, p.cubeCoreNum);
            if (!found || cost < bestCost) {  // ties keep the earlier: resident W', larger Mb
                best = candidate;
                bestCost = cost;
                found = true;
            }
        }
    }
    if (!found) return false;
    best.blockDim = best.workItems < p.cubeCoreNum ? best.workItems : p.cubeCoreNum;
    best.inputSlotBytes = RoundUp(
        best.imagesPerItem * best.channelGroups * best.c0 * best.bandRows * g.width * dtypeSize, kSlotAlign);
    best.outputSlotBytes = best.blockRows * best.itemPositions * 4;
    t = best;
    return true;
}

// User workspace bytes (GM): the kRingSlots input and output slots of every AI core.
inline uint64_t WorkspaceBytes(const ConvBnLeakyReluEvalTiling& t) {
    return uint64_t(t.blockDim) * conv_eval_tiling::kRingSlots * (uint64_t(t.inputSlotBytes) + t.outputSlotBytes);
}

namespace conv_eval_tiling {

// Output side of a convolution; padding before + after the input.
inline int64_t OutputSide(int64_t size, int64_t kernel, int64_t stride, int64_t before, int64_t after,
                          int64_t dilation) {
    return stride <= 0 ? 0 : (size + before + after - dilation * (kernel - 1) - 1) / stride + 1;
}

// The packed weight's shape is the one the geometry implies, (C1, kh, kw, M1, 16, C0) (a 4-D W' or another
// packing is an error, not a silent misread of its bytes).
inline bool PackedWeightMatches(const std::vector<int64_t>& w, const ConvGeometry& g, uint32_t dtypeSize) {
    const int64_t c0 = 32 / dtypeSize;
    const int64_t expected[6] = {(int64_t(g.inChannels) + c0 - 1) / c0,
                                 int64_t(g.kernelH),
                                 int64_t(g.kernelW),
                                 (int64_t(g.outChannels) + 15) / 16,
                                 16,
                                 c0};
    if (w.size() != 6) return false;
    for (size_t i = 0; i < 6; ++i) {
        if (w[i] != expected[i]) return false;
    }
    return true;
}

}  // namespace conv_eval_tiling

// Inputs (op table): x (N, C_in, H, W), weight W' packed in FRACTAL_Z order (C1, kh, kw, M1, 16, C0), bias (C_out,)
// float (C_out from it, as the OpDef's infer shape); attributes: strides (h, w), pads (top, bottom, left, right),
// dilations (h, w), negative_slope, relu; groups = 1.
inline bool TilingFor(const TilingRequest& request, ConvBnLeakyReluEvalTiling& tiling, std::string& why) {
    using namespace conv_eval_tiling;
    const std::vector<int64_t>&x = request.shapes[0], &w = request.shapes[1], &b = request.shapes[2];
    const std::vector<int64_t>&strides = request.Ints(0), &pads = request.Ints(1), &dilations = request.Ints(2);
    why = "of input " + ShapeText(x) + ", packed weight " + ShapeText(w) + ", bias " + ShapeText(b);
    if (x.size() != 4 || w.size() != 6 || b.size() != 1 || strides.size() != 2 || pads.size() != 4 ||
        dilations.size() != 2 || (request.elementSize != 2 && request.elementSize != 4)) {
        why += " (needs an input of 4 sizes, a weight of 6, a bias of 1, 2 strides, 4 pads, 2 dilations and 2- or "
               "4-byte elements)";
        return false;
    }
    const int64_t outHeight = OutputSide(x[2], w[1], strides[0], pads[0], pads[1], dilations[0]);
    const int64_t outWidth = OutputSide(x[3], w[2], strides[1], pads[2], pads[3], dilations[1]);
    if (outHeight <= 0 || outWidth <= 0) {
        why += " (no output)";
        return false;
    }
    auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
    const ConvGeometry g{u(x[0]),    u(x[1]),         u(x[2]),         u(x[3]),       u(b[0]),
                         u(w[1]),    u(w[2]),         u(strides[0]),   u(strides[1]), u(pads[0]),
                         u(pads[2]), u(dilations[0]), u(dilations[1]), u(outHeight),  u(outWidth)};
    if (!PackedWeightMatches(w, g, request.elementSize)) {
        why += " (the weight is not the FRACTAL_Z packing of (C_out, C_in, kh, kw) = (" +
               std::to_string(g.outChannels) + ", " + std::to_string(g.inChannels) + ", " + std::to_string(w[1]) +
               ", " + std::to_string(w[2]) + "))";
        return false;
    }
    const PlatformLimits& p = request.platform;
    const CubePlatform cube{p.cubeCores, p.vectorCores, p.ubBytes, p.l1Bytes, p.l0aBytes, p.l0bBytes, p.l0cBytes};
    if (!ComputeConvBnLeakyReluEvalTiling(g, request.elementSize, request.Float(3), cube, tiling, request.Bool(4))) {
        why += " (two input bands and two K slices of 16 W' rows do not fit L1, or an output row does not fit L0)";
        return false;
    }
    return true;
}

// A MIX launch: blockDim AI cores, each running one AIC and two AIVs; the GM rings of every AI core as workspace.
inline uint32_t LaunchBlocks(const ConvBnLeakyReluEvalTiling& t) { return t.blockDim; }
inline uint32_t LaunchTileLength(const ConvBnLeakyReluEvalTiling& t) { return t.tilePositions; }
inline uint64_t LaunchWorkspaceBytes(const ConvBnLeakyReluEvalTiling& t) { return WorkspaceBytes(t); }

}  // namespace ascend_acts
