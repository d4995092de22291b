// Tiling of the eval kernel of the fused Conv2d + BatchNorm2d + LeakyReLU (cube-side img2col, MIX AIC:AIV 1:2):
// the Cout block Mb, the output tile, the K chunk, the UB passes and the GM rings. The layouts and the work
// decomposition are described in op_kernel/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_tiling_data.h.
//
// Choice, in order:
//   1. Mb in 128, 64, 32, 16 (capped at Cout rounded up to 16): the largest whose W' block
//      (Mb x K1*C0) and two input bands fit L1, so the block stays in L1 (weight-stationary);
//   2. for that Mb, the tallest tile (whole output rows) whose Mb x Npad float result fits L0C twice
//      (else once), whose band fits L1 and the LoadData / Mmad / Fixpipe field widths;
//   3. enough items for every AI core: shorter tiles, then a smaller Mb, until items >= AI cores
//      (else the configuration with the most items);
//   4. kc, the largest multiple of C0 with Mb x kc (L0A) and kc x Npad (L0B) fitting twice.
// Pure function of (geometry, dtype size, platform) -> plain struct; no CANN includes.
#pragma once

#include <cstdint>

#include "../../op_kernel/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_tiling_data.h"

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

// UB bytes of an AIV's epilogue (`rows` output-slot rows of Npad): float in, T out, both double-buffered,
// and the block's biases.
inline uint64_t EpilogueUbBytes(uint32_t rows, uint32_t positions, uint32_t blockRows, uint32_t dtypeSize) {
    return 2ull * rows * positions * 4 + 2ull * rows * positions * dtypeSize + RoundUp(blockRows * 4, 32);
}

// The W' block's slices and two input bands (an item's: one per image).
inline uint64_t L1Bytes(const ConvBnLeakyReluEvalTiling& t, uint32_t dtypeSize) {
    const uint64_t weights = uint64_t(t.blockRows) * t.weightSlices * t.weightSliceK * dtypeSize;
    const uint64_t band = uint64_t(t.channelGroups) * t.c0 * t.bandRows * t.conv.width * dtypeSize;
    return weights + 2 * band * t.imagesPerItem;
}

// Fills the tile-dependent fields for (Mb, tileRows, t.imagesPerItem); false when they do not fit the platform.
inline bool TryShape(ConvBnLeakyReluEvalTiling& t, uint32_t blockRows, uint32_t tileRows, uint32_t dtypeSize,
                     const CubePlatform& p) {
    const ConvGeometry& g = t.conv;
    t.blockRows = blockRows;
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
    // kc: double-buffered L0A (Mb x kc) and L0B (kc x the item's Npad); whole fractals a LoadData 2D repeat moves
    const uint32_t kPadded = t.kFractals * t.c0;
    uint64_t fractals = p.l0aBytes / (2ull * blockRows * t.c0 * dtypeSize);
    const uint64_t byL0b = p.l0bBytes / (2ull * itemPositions * t.c0 * dtypeSize);
    fractals = byL0b < fractals ? byL0b : fractals;
    fractals = fractals < kMaxLoad2dRepeat ? fractals : kMaxLoad2dRepeat;
    fractals = fractals < kMaxMmadSide / t.c0 ? fractals : kMaxMmadSide / t.c0;
    fractals = fractals < t.kFractals ? fractals : t.kFractals;
    if (fractals == 0) return false;
    t.kChunk = static_cast<uint32_t>(fractals) * t.c0;
    const uint32_t chunks = CeilDiv(kPadded, t.kChunk);
    t.weightSliceK = CeilDiv(chunks, kMaxWeightSlices) * t.kChunk;
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
    for (uint32_t rows = CeilDiv(blockRows, 2); rows >= 1; --rows) {
        if (EpilogueUbBytes(rows, t.itemPositions, blockRows, dtypeSize) <= p.ubBytes / 2) {
            t.epilogueRows = rows;
            break;
        }
    }
    if (t.prologueRows == 0 || t.epilogueRows == 0) return false;
    t.workItems = t.coutBlocks * CeilDiv(g.batch, t.imagesPerItem) * t.tilesPerImage;
    return true;
}

// The cube's time for an item of `images` whole images, in cycles at the platform's documented rates (CANN's
// platform_config .ini: l1_to_l0_a_rate=512, l1_to_l0_b_rate=256 bytes per cycle; one 16 x 16 x C0 fractal
// Mmad per cycle): MTE1 moves the W' block into L0A once per item and every image's img2col into L0B, and the
// M pipe's Mmads overlap it.
inline double ItemCubeCycles(const ConvBnLeakyReluEvalTiling& t, uint32_t images, uint32_t dtypeSize) {
    const double kPadded = double(t.kFractals) * t.c0;
    const double mte1 = t.blockRows * kPadded * dtypeSize / 512 + images * kPadded * t.tilePositions * dtypeSize / 256;
    const double mmad = images * double(t.blockRows) * t.tilePositions * kPadded / (256.0 * t.c0);
    return mte1 > mmad ? mte1 : mmad;
}

// Whole-image tiles: the images per item G that minimise the busiest AI core's cube time (its item rounds times
// an item's time: more images per item share one trip of the W' block into L0A), keeping L0C double-buffered
// when it was and an item for every AI core that had one. Fewer items also mean fewer, longer instructions and
// flag round trips everywhere.
inline void ChooseImagesPerItem(ConvBnLeakyReluEvalTiling& t, uint32_t dtypeSize, const CubePlatform& p) {
    if (t.tilesPerImage != 1) return;
    ConvBnLeakyReluEvalTiling best = t;
    double bestCost = CeilDiv(t.workItems, p.cubeCoreNum) * ItemCubeCycles(t, 1, dtypeSize);
    for (uint32_t images = 2; images <= t.conv.batch; ++images) {
        ConvBnLeakyReluEvalTiling candidate = t;
        candidate.imagesPerItem = images;
        if (!TryShape(candidate, t.blockRows, t.tileRows, dtypeSize, p)) break;  // larger G only needs more
        if (candidate.l0cBuffers < t.l0cBuffers) break;
        const uint32_t enough = t.workItems < p.cubeCoreNum ? t.workItems : p.cubeCoreNum;
        if (candidate.workItems < enough) break;  // every AI core keeps an item
        const double cost = CeilDiv(candidate.workItems, p.cubeCoreNum) * ItemCubeCycles(candidate, images, dtypeSize);
        if (cost < bestCost) {
            best = candidate;
            bestCost = cost;
        }
    }
    t = best;
}

// The tallest tile that fits for Mb, preferring a double-buffered L0C; false when none fits.
inline bool TallestTile(ConvBnLeakyReluEvalTiling& t, uint32_t blockRows, uint32_t dtypeSize, const CubePlatform& p) {
    uint32_t single = 0;
    for (uint32_t rows = t.conv.outHeight; rows >= 1; --rows) {
        if (!TryShape(t, blockRows, rows, dtypeSize, p)) continue;
        if (t.l0cBuffers == 2) return true;
        single = single == 0 ? rows : single;
    }
    return single != 0 && TryShape(t, blockRows, single, dtypeSize, p);
}

}  // namespace conv_eval_tiling

// Returns false when the geometry is empty, outside the field widths of LoadData 3Dv2 / Mmad / Fixpipe, pads a
// whole filter height (a tile would read no input row), or cannot be tiled on the platform.
inline bool ComputeConvBnLeakyReluEvalTiling(const ConvGeometry& g, uint32_t dtypeSize, float negativeSlope,
                                             const CubePlatform& p, ConvBnLeakyReluEvalTiling& t) {
    using namespace conv_eval_tiling;
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
    const int64_t bottom = int64_t(g.outHeight - 1) * g.strideH + int64_t(effH) - g.height - g.padH;
    const int64_t right = int64_t(g.outWidth - 1) * g.strideW + int64_t(effW) - g.width - g.padW;
    if (g.padH >= effH || bottom >= int64_t(effH) || g.padH > kMaxU8 || g.padW > kMaxU8 || bottom > kMaxU8 ||
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
    plan.negativeSlope = negativeSlope;
    plan.imagesPerItem = 1;

    bool found = false;
    ConvBnLeakyReluEvalTiling best{};
    uint32_t first = RoundUp(g.outChannels, kFractalRows);
    first = first < kMaxBlockRows ? first : kMaxBlockRows;
    for (uint32_t rows = first; rows >= kFractalRows; rows = rows == kFractalRows ? 0 : RoundUp(rows / 2, 16)) {
        ConvBnLeakyReluEvalTiling candidate = plan;
        if (!TallestTile(candidate, rows, dtypeSize, p)) continue;
        // shorter tiles until every AI core has an item
        for (uint32_t tileRows = candidate.tileRows; candidate.workItems < p.cubeCoreNum && tileRows > 1;) {
            ConvBnLeakyReluEvalTiling shorter = candidate;
            if (TryShape(shorter, rows, --tileRows, dtypeSize, p)) candidate = shorter;
        }
        if (!found || candidate.workItems > best.workItems) best = candidate;
        found = true;
        if (best.workItems >= p.cubeCoreNum) break;
    }
    if (!found) return false;
    ChooseImagesPerItem(best, dtypeSize, p);
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

}  // namespace ascend_acts
