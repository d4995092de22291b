// What the eval kernel of the fused Conv2d + BatchNorm2d + LeakyReLU reads from the host's tiling, and the
// work decomposition both sides share. In op_kernel/ because CANN's source package ships only op_kernel/ to the
// kernel build; the pure tiling function, op_host/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_tiling.h,
// includes it from here.
//
//   y[n][co][p] = act(sum_k W'[co][k] * col(x[n])[k][p] + b'[co]),  k = (c1, kh, kw, c0)
//   act: leaky_relu(., negativeSlope), or torch's relu (z < 0 ? +0 : z) when `relu` is set
//
// GM inputs (T = float / half / bfloat16_t, C0 = 32 / sizeof(T)):
//   x      (N, Cin, H, W), NCHW.
//   weight W' (BN folded) packed by the host in CANN's FRACTAL_Z order, shape (C1, kh, kw, M1, 16, C0):
//          element [c1][i][j][mi][r][c] = W'[mi*16 + r][c1*C0 + c][i][j], zero where mi*16 + r >= Cout or
//          c1*C0 + c >= Cin; M1 = ceil(Cout / 16), C1 = ceil(Cin / C0). Fractal (kf, mi), kf = (c1*kh + i)*kw + j,
//          is 16 x C0 contiguous elements at (kf * M1 + mi) * 16 * C0: K in the order (c1, kh, kw, c0) of
//          LoadData 3Dv2's img2col, each fractal already L0B's (16 Cout columns x C0 of K), K-fractal-major as
//          L0B's ZN order, so one DataCopy moves a K slice of a Cout block to L1 and one LoadData 2D a K chunk
//          of it to L0B.
//   bias   b' (Cout,) float32.   y (N, Cout, Ho, Wo), T, written exactly once.
//
// Work item = (Cout block b of `blockRows` rows, images [n, n + G) (G = imagesPerItem, fewer in the batch's
// last item; G > 1 only when a tile is a whole image), tile t of `tileRows` whole output rows), numbered b-major,
// then n, then t; AI core c takes the contiguous range ItemRange(c) (balanced to one item). Where the W' block
// (Mb x K) fits L1 beside two bands it stays there, reloaded only when the range enters the next Cout block
// (weight-stationary); else (no block of 16 rows fits: a large K) its K slices stream through two L1 buffers
// for every item, the next slice loading while the cube works on the current one.
//
// GM workspace, per AI core: kRingSlots input slots (an item's input bands, [G][C1][rows][W][C0] in T, written
// by the AIVs, read by the AIC) and kRingSlots output slots (C = img2col * W'^T, [itemPositions][blockRows]
// float32: a row per position, image i's rows from i * tilePositions; written by the AIC's Fixpipe, read by the
// AIVs); item j of a core uses slots j % kRingSlots.
#pragma once

#include <cstdint>

#include "../common/execution_space.h"

namespace ascend_acts {

// The eval kernel's convolution (padding: top and left; the output size carries bottom/right).
struct ConvGeometry {
    uint32_t batch, inChannels, height, width;
    uint32_t outChannels, kernelH, kernelW;
    uint32_t strideH, strideW, padTop, padLeft, dilationH, dilationW;
    uint32_t outHeight, outWidth;  // carry the bottom / right padding
};

struct ConvBnLeakyReluEvalTiling {
    ConvGeometry conv;
    uint32_t blockDim;         // AI cores launched (1 AIC + 2 AIVs each), every one with at least one item
    uint32_t workItems;        // coutBlocks * batch * tilesPerImage
    uint32_t blockRows;        // Mb: Cout rows per block, a multiple of 16
    uint32_t coutBlocks;       // ceil(Cout / Mb)
    uint32_t channelGroups;    // C1
    uint32_t c0;               // C0 = 32 / sizeof(T)
    uint32_t kFractals;        // K1 = C1 * kh * kw (K padded to K1 * C0)
    uint32_t kChunk;           // kc: K elements per Mmad (L0A / L0B double-buffered), a multiple of C0
    uint32_t weightSliceK;     // K elements per L1 slice of the W' block (a multiple of kc): it loads slice by slice
    uint32_t weightSlices;     // ceil(K1 * C0 / weightSliceK)
    uint32_t weightStreamed;   // 0: the W' block stays in L1 across items (weightSlices buffers, weight-stationary);
                               // 1: it does not fit, its slices stream through two L1 buffers, every item
    uint32_t tileRows;         // output rows per tile
    uint32_t tilesPerImage;    // ceil(Ho / tileRows)
    uint32_t tilePositions;    // Npad: tileRows * Wo rounded up to 16 (the Mmad's n, an image's slot columns)
    uint32_t imagesPerItem;    // G: images of one item (their Mmads side by side in L0C, one Fixpipe)
    uint32_t itemPositions;    // G * Npad: an output slot row, the Fixpipe's n
    uint32_t bandRows;         // most input rows a tile reads (clipped to the image)
    uint32_t padBottom;        // padding rows below the image the last output row reaches
    uint32_t padRight;         // padding columns right of the image the last output column reaches
    uint32_t l0cBuffers;       // 2 when two Mb x Npad float results fit L0C, else 1
    uint32_t prologueRows;     // input rows an AIV interleaves per pass (UB)
    uint32_t prologueGroups;   // channel groups an AIV interleaves per pass (UB): one copy in and out for all
    uint32_t epilogueRows;     // channels (output-slot columns) an AIV finishes per pass (UB)
    uint32_t inputSlotBytes;   // one input slot: G * C1 * C0 * bandRows * W * sizeof(T), rounded up to 512
    uint32_t outputSlotBytes;  // one output slot: G * Npad * Mb * 4
    float negativeSlope;
    uint32_t relu;  // 0 or 1: torch's ReLU instead of LeakyReLU (compare + Select: the tiling leaves Select's UB)
};

namespace conv_eval_tiling {

constexpr uint32_t kFractalRows = 16;     // cube fractal: 16 rows of C0 elements (512 bytes)
constexpr uint32_t kMaxWeightSlices = 8;  // L1 slices of a resident W' block (TQue buffers)
constexpr uint32_t kStreamBuffers = 2;    // L1 slice buffers of a streamed W' block

__aicore__ inline uint32_t WeightBuffers(const ConvBnLeakyReluEvalTiling& t) {
    return t.weightStreamed ? kStreamBuffers : t.weightSlices;
}
constexpr uint32_t kSlotAlign = 512;
// Slots per GM ring: the AIVs prepare up to this many items ahead of the cube, so a flag's and a copy's latency
// hide behind other items' work. Four flags per slot must fit the 16 cross-core flag ids.
constexpr uint32_t kRingSlots = 4;
// cross-core flag ids (mode 2): slot s of a ring uses id + s
constexpr uint16_t kInputReady = 0;                // AIVs -> AIC: input slot written
constexpr uint16_t kInputFree = kRingSlots;        // AIC -> AIVs: input slot copied to L1
constexpr uint16_t kOutputReady = 2 * kRingSlots;  // AIC -> AIVs: output slot written by Fixpipe
constexpr uint16_t kOutputFree = 3 * kRingSlots;   // AIVs -> AIC: output slot copied to UB
static_assert(kOutputFree + kRingSlots <= 16, "cross-core flag ids are 0..15");

__aicore__ inline uint32_t CeilDiv(uint32_t value, uint32_t divisor) { return (value + divisor - 1) / divisor; }
__aicore__ inline uint32_t RoundUp(uint32_t value, uint32_t multiple) { return CeilDiv(value, multiple) * multiple; }
// Elements between two channel rows of an AIV's prologue buffer: whole TransDataTo5HD repeats of 16 positions.
__aicore__ inline uint32_t ProloguePitch(uint32_t positions) { return RoundUp(positions, 16); }

// Work items [first, first + count) of AI core `core`: contiguous, balanced to within one item.
__aicore__ inline void ItemRange(const ConvBnLeakyReluEvalTiling& t, uint32_t core, uint32_t& first, uint32_t& count) {
    const uint32_t base = t.workItems / t.blockDim, extra = t.workItems % t.blockDim;
    first = core * base + (core < extra ? core : extra);
    count = base + (core < extra ? 1 : 0);
}

// One work item: its Cout block, images and output rows, the input band it reads and the padding around it.
struct ConvTile {
    uint32_t block, image, images;        // images [image, image + images)
    uint32_t firstOutRow, outRows;        // output rows [firstOutRow, firstOutRow + outRows)
    uint32_t positions, paddedPositions;  // outRows * Wo, rounded up to 16
    uint32_t firstInRow, inRows;          // the band: input rows [firstInRow, firstInRow + inRows), inside the image
    uint32_t padTop, padBottom;           // padding rows above / below the band the tile reads
    uint32_t channels;                    // Cout rows of the block (the last block may be short)
};

__aicore__ inline ConvTile TileOf(const ConvBnLeakyReluEvalTiling& t, uint32_t item) {
    const ConvGeometry& g = t.conv;
    ConvTile tile;
    const uint32_t perBlock = CeilDiv(g.batch, t.imagesPerItem) * t.tilesPerImage;
    tile.block = item / perBlock;
    tile.image = item % perBlock / t.tilesPerImage * t.imagesPerItem;
    tile.images = g.batch - tile.image < t.imagesPerItem ? g.batch - tile.image : t.imagesPerItem;
    tile.firstOutRow = item % t.tilesPerImage * t.tileRows;
    const uint32_t left = g.outHeight - tile.firstOutRow;
    tile.outRows = left < t.tileRows ? left : t.tileRows;
    tile.positions = tile.outRows * g.outWidth;
    tile.paddedPositions = RoundUp(tile.positions, kFractalRows);
    const int32_t top = int32_t(tile.firstOutRow * g.strideH) - int32_t(g.padTop);
    const int32_t bottom = top + int32_t((tile.outRows - 1) * g.strideH + (g.kernelH - 1) * g.dilationH);
    const int32_t first = top < 0 ? 0 : top;
    const int32_t last = bottom >= int32_t(g.height) ? int32_t(g.height) - 1 : bottom;
    tile.firstInRow = uint32_t(first);
    tile.inRows = uint32_t(last - first + 1);  // >= 1: the tiling refuses padding a whole filter tall
    tile.padTop = uint32_t(first - top);
    tile.padBottom = uint32_t(bottom - last);
    const uint32_t firstChannel = tile.block * t.blockRows;
    tile.channels = g.outChannels - firstChannel < t.blockRows ? g.outChannels - firstChannel : t.blockRows;
    return tile;
}

}  // namespace conv_eval_tiling
}  // namespace ascend_acts
