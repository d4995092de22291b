// Tiling of the eval kernel of the fused Conv2d + BatchNorm2d + LeakyReLU: one launch, a GEMM on the
// Cube unit per image with the BN-folded weights, bias + LeakyReLU on the vector unit, output written
// once.
//
//   out[n] (C_out x Ho*Wo, NCHW as it is) = W' (C_out x K) * col(x[n]) (K x Ho*Wo) + b', K = C_in*kh*kw
//
// Work item = (image, column tile of `columnTile` output positions). A vector core (AIV) builds the
// column tile of im2col(x[n]) (K x columnTile) in its own GM workspace slab, the Matmul API multiplies
// W' by it on the cube core, and the AIV takes each baseM x baseN block of C into UB (GetTensorC), adds
// b', applies LeakyReLU, casts once and writes it to `out`.
//
// Pure function of (geometry, dtype size, platform) -> plain struct; no CANN includes. The `cube`
// member is the Matmul blocking this tiling chose, under the documented TCubeTiling names. The host
// writes a full TCubeTiling after the struct (at kCubeTilingOffset) with this baseM/baseN, which the
// kernel's Matmul and UB blocks use: filled by CANN's MultiCoreMatmulTiling
// (conv_bn_leaky_relu_eval_op_host.h, which refuses a different blocking) or, on the emulator, copied
// from `cube`. The struct the kernel reads is in op_kernel/conv_bn_leaky_relu_eval/ (same name, _tiling_data.h).
#pragma once

#include <cstdint>

#include "../../op_kernel/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_tiling_data.h"

namespace ascend_acts {

struct CubePlatform {
    uint32_t cubeCoreNum;    // AIC
    uint32_t vectorCoreNum;  // AIV, two per AIC on 910B
    uint64_t ubBytes, l1Bytes, l0aBytes, l0bBytes, l0cBytes;
};

namespace conv_eval_tiling {

constexpr uint32_t kFractal = 16;  // cube fractal edge: base sizes are multiples of 16
constexpr uint32_t kMaxBase = 128;
constexpr uint32_t kBufferNum = 2;  // double-buffered output staging
constexpr uint32_t kBlockBytes = 32;

inline uint64_t RoundUp(uint64_t value, uint64_t multiple) { return (value + multiple - 1) / multiple * multiple; }
inline uint64_t CeilDiv(uint64_t value, uint64_t divisor) { return (value + divisor - 1) / divisor; }

// Input rows (per channel) that output positions [p, p + columnTile) reach, for the worst alignment:
// a tile spans at most ceil((columnTile - 1) / Wo) + 1 output rows.
inline uint32_t BandRows(const ConvGeometry& g, uint32_t columnTile) {
    uint64_t outRows = CeilDiv(columnTile - 1, g.outWidth) + 1;
    if (outRows > g.outHeight) outRows = g.outHeight;
    return static_cast<uint32_t>((outRows - 1) * g.strideH + uint64_t(g.kernelH - 1) * g.dilationH + 1);
}

// UB bytes of one AIV (must match the kernel's InitBuffer calls):
//   C block from GetTensorC (float, baseM x baseN); the output block in T, double-buffered;
//   the folded bias (C_out floats); im2col: one input band (+ one zero element) and one gathered row
//   in T, double-buffered, and the kh*kw gather offset tables (uint32 per column).
inline uint64_t UbBytes(const ConvGeometry& g, uint32_t dtypeSize, uint32_t baseM, uint32_t columnTile) {
    uint64_t block = uint64_t(baseM) * columnTile;
    uint64_t band = RoundUp((uint64_t(BandRows(g, columnTile)) * g.width + 1) * dtypeSize, kBlockBytes);
    return block * sizeof(float) + kBufferNum * block * dtypeSize +
           RoundUp(uint64_t(g.outChannels) * sizeof(float), kBlockBytes) + band +
           kBufferNum * RoundUp(uint64_t(columnTile) * dtypeSize, kBlockBytes) +
           uint64_t(g.kernelH) * g.kernelW * columnTile * sizeof(uint32_t);
}

// L1 bytes of the Matmul: depthA1 A blocks (baseM x baseK) and depthB1 B blocks (baseK x baseN). The
// two AIVs of an AI core share its cube core, so each gets half of L1.
inline uint64_t L1Bytes(const CubeTilingFields& c, uint32_t dtypeSize) {
    return (uint64_t(c.depthA1) * c.baseM * c.baseK + uint64_t(c.depthB1) * c.baseN * c.baseK) * dtypeSize;
}

}  // namespace conv_eval_tiling

// Returns false when the geometry is empty or cannot be tiled (a band of one channel does not fit UB).
inline bool ComputeConvBnLeakyReluEvalTiling(const ConvGeometry& g, uint32_t dtypeSize, float negativeSlope,
                                             const CubePlatform& p, ConvBnLeakyReluEvalTiling& t) {
    using namespace conv_eval_tiling;
    if (g.batch == 0 || g.outChannels == 0 || g.outHeight == 0 || g.outWidth == 0 || g.inChannels == 0 ||
        dtypeSize == 0 || p.vectorCoreNum == 0)
        return false;
    const uint64_t positions = uint64_t(g.outHeight) * g.outWidth;
    const uint32_t reduction = g.inChannels * g.kernelH * g.kernelW;
    const uint32_t baseM = static_cast<uint32_t>(
        RoundUp(g.outChannels, kFractal) < kMaxBase ? RoundUp(g.outChannels, kFractal) : kMaxBase);

    uint32_t columnTile = static_cast<uint32_t>(RoundUp(positions, kFractal) < kMaxBase ? RoundUp(positions, kFractal)
                                                                                        : kMaxBase);
    while (columnTile > kFractal && UbBytes(g, dtypeSize, baseM, columnTile) > p.ubBytes) columnTile -= kFractal;
    if (UbBytes(g, dtypeSize, baseM, columnTile) > p.ubBytes) return false;

    // baseK: double-buffered L0A (baseM x baseK) and L0B (baseK x baseN) halves.
    uint64_t kAligned = RoundUp(reduction, kFractal);
    uint64_t baseK = kFractal;
    while (baseK + kFractal <= kAligned && uint64_t(baseM) * (baseK + kFractal) * dtypeSize <= p.l0aBytes / 2 &&
           uint64_t(columnTile) * (baseK + kFractal) * dtypeSize <= p.l0bBytes / 2)
        baseK += kFractal;

    CubeTilingFields c{};
    c.M = static_cast<int32_t>(g.outChannels);
    c.N = static_cast<int32_t>(columnTile);  // B is the AIV's slab: K x columnTile
    c.Ka = c.Kb = static_cast<int32_t>(reduction);
    c.singleCoreM = c.M;
    c.singleCoreN = static_cast<int32_t>(columnTile);
    c.singleCoreK = static_cast<int32_t>(reduction);
    c.baseM = static_cast<int32_t>(baseM);
    c.baseN = static_cast<int32_t>(columnTile);
    c.baseK = static_cast<int32_t>(baseK);
    c.stepM = c.stepN = 1;
    c.isBias = 0;  // b' is added on the vector unit, per row (C_out), after GetTensorC
    c.iterateOrder = 0;
    c.dbL0A = c.dbL0B = c.dbL0C = 2;
    // Keep all of K of the current A and B blocks in L1 when half of L1 holds them (then the slab
    // is read from GM once per work item); otherwise stream K in as many steps as fit.
    uint32_t kSteps = static_cast<uint32_t>(CeilDiv(reduction, baseK));
    uint32_t steps = kSteps;
    for (;; --steps) {
        c.stepKa = c.stepKb = static_cast<int32_t>(steps);
        c.depthA1 = c.depthB1 = static_cast<int32_t>(steps);
        if (L1Bytes(c, dtypeSize) <= p.l1Bytes / 2 || steps == 1) break;
    }

    t.conv = g;
    t.reduction = reduction;
    t.columnTile = columnTile;
    t.tilesPerImage = static_cast<uint32_t>(CeilDiv(positions, columnTile));
    t.workItems = g.batch * t.tilesPerImage;
    uint32_t aivs = p.vectorCoreNum < 2 * p.cubeCoreNum ? p.vectorCoreNum : 2 * p.cubeCoreNum;
    t.usedCoreNum = t.workItems < aivs ? t.workItems : aivs;
    t.blockDim = static_cast<uint32_t>(CeilDiv(t.usedCoreNum, 2));
    t.bandRows = BandRows(g, columnTile);
    t.workspaceSlab = uint64_t(reduction) * columnTile;
    t.negativeSlope = negativeSlope;
    c.usedCoreNum = static_cast<int32_t>(t.usedCoreNum);
    t.cube = c;
    return true;
}

}  // namespace ascend_acts
