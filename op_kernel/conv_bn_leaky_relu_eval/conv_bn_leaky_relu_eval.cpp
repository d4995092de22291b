// Fused Conv2d + BatchNorm2d (eval, folded) + LeakyReLU: one launch, output written once.
//
//   out[n] (C_out x Ho*Wo) = leaky_relu(W' (C_out x K) * col(x[n]) (K x Ho*Wo) + b')
//
// with W' = W * gamma / sqrt(var + eps) per output channel and b' = (b - mean) * gamma / sqrt(var + eps)
// + beta, folded on the host (exact up to one rounding of W'). MIX kernel (AIC:AIV 1:2): each vector
// core (AIV) takes work items (image n, column tile of `columnTile` output positions) in turn:
//   1. im2col on the vector unit: for each input channel, one DataCopyPad of the input rows the tile
//      needs (a band), then one Gather per tap (kh*kw) builds the K rows of the column tile in UB,
//      each written to the AIV's workspace slab (K x columnTile) in GM (L2-resident: small, reused);
//   2. the Matmul high-level API on the cube core: A = W' (GM), B = the slab, C blocks of
//      baseM x columnTile into UB (Iterate + GetTensorC);
//   3. epilogue on the vector unit: + b' per row (output channel), LeakyReLU, cast once to T, and the
//      only write of these outputs to GM.
// groups = 1; any stride, padding, dilation. Zero padding is a zero element at the end of the band
// that out-of-image taps gather from.
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "../common/float_compute.h"
#include "../common/read_tiling.h"
#include "conv_bn_leaky_relu_eval_tiling_data.h"

using namespace AscendC;

namespace ascend_acts {
namespace {

template <typename T>
struct GatherBits;  // Gather moves bits: 16-bit types as uint16_t, float as uint32_t
template <>
struct GatherBits<float> {
    using Type = uint32_t;
};
template <>
struct GatherBits<half> {
    using Type = uint16_t;
};
template <>
struct GatherBits<bfloat16_t> {
    using Type = uint16_t;
};

template <typename T>
class ConvBnLeakyReluEval {
    using AType = matmul::MatmulType<TPosition::GM, CubeFormat::ND, T>;
    using BType = matmul::MatmulType<TPosition::GM, CubeFormat::ND, T>;
    using CType = matmul::MatmulType<TPosition::VECIN, CubeFormat::ND, float>;
    using BiasType = matmul::MatmulType<TPosition::GM, CubeFormat::ND, float>;
    using Bits = typename GatherBits<T>::Type;

public:
    matmul::Matmul<AType, BType, CType, BiasType> mm;
    TPipe pipe;

    // `mm` is registered (REGIST_MATMUL_OBJ) by the kernel entry before Init: see there.
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR weight, GM_ADDR bias, GM_ADDR out, GM_ADDR userWorkspace,
                                const ConvBnLeakyReluEvalTiling& tiling, const TCubeTiling& cubeTiling) {
        t_ = tiling;
        cubeTiling_ = cubeTiling;
        const ConvGeometry& g = t_.conv;
        positions_ = g.outHeight * g.outWidth;
        taps_ = g.kernelH * g.kernelW;
        xGm_.SetGlobalBuffer((__gm__ T*)x, uint64_t(g.batch) * g.inChannels * g.height * g.width);
        weightGm_.SetGlobalBuffer((__gm__ T*)weight, uint64_t(g.outChannels) * t_.reduction);
        biasGm_.SetGlobalBuffer((__gm__ float*)bias, g.outChannels);
        outGm_.SetGlobalBuffer((__gm__ T*)out, uint64_t(g.batch) * g.outChannels * positions_);
        slabGm_.SetGlobalBuffer((__gm__ T*)userWorkspace + GetBlockIdx() * t_.workspaceSlab, t_.workspaceSlab);

        // C blocks as the Matmul tiling the host filled has them (baseM x baseN, baseN == columnTile)
        const uint32_t block = uint32_t(cubeTiling_.baseM) * uint32_t(cubeTiling_.baseN);
        pipe.InitBuffer(cQueue_, 1, block * sizeof(float));
        pipe.InitBuffer(outQueue_, 2, block * sizeof(T));
        pipe.InitBuffer(biasBuf_, Aligned(g.outChannels * sizeof(float)));
        bandElements_ = t_.bandRows * g.width;
        pipe.InitBuffer(bandQueue_, 1, Aligned((bandElements_ + 1) * sizeof(T)));
        pipe.InitBuffer(rowQueue_, 2, Aligned(t_.columnTile * sizeof(T)));
        pipe.InitBuffer(offsetBuf_, taps_ * t_.columnTile * sizeof(uint32_t));
    }

    // Every AIV reaches End(): the cube core serves both of its AIVs, also one without work items.
    __aicore__ inline void Process() {
        if (GetBlockIdx() < t_.usedCoreNum) {
            LocalTensor<float> bias = biasBuf_.Get<float>();
            DataCopyPad(bias, biasGm_, DataCopyExtParams{1, uint32_t(t_.conv.outChannels * sizeof(float)), 0, 0, 0},
                        DataCopyPadExtParams<float>{false, 0, 0, 0});
        }
        for (uint32_t item = GetBlockIdx(); item < t_.workItems; item += t_.usedCoreNum) {
            uint32_t image = item / t_.tilesPerImage;
            uint32_t first = (item % t_.tilesPerImage) * t_.columnTile;
            uint32_t columns = positions_ - first < t_.columnTile ? positions_ - first : t_.columnTile;
            BuildColumnTile(image, first, columns);
            MultiplyAndStore(image, first, columns);
        }
        mm.End();
    }

private:
    __aicore__ inline static uint32_t Aligned(uint32_t bytes) { return (bytes + 31) / 32 * 32; }

    // --- 1. im2col of output positions [first, first + columns) into the slab ------------------------
    __aicore__ inline void BuildColumnTile(uint32_t image, uint32_t first, uint32_t columns) {
        const ConvGeometry& g = t_.conv;
        int32_t firstRow = 0, rows = 0;
        InputRows(first, columns, firstRow, rows);
        FillGatherOffsets(first, columns, firstRow);
        LocalTensor<uint32_t> offsets = offsetBuf_.Get<uint32_t>();
        for (uint32_t channel = 0; channel < g.inChannels; ++channel) {
            LocalTensor<T> band = bandQueue_.template AllocTensor<T>();
            if (rows > 0) {
                uint64_t start = ((uint64_t(image) * g.inChannels + channel) * g.height + firstRow) * g.width;
                DataCopyPad(band, xGm_[start], DataCopyExtParams{1, uint32_t(rows * g.width * sizeof(T)), 0, 0, 0},
                            DataCopyPadExtParams<T>{false, 0, 0, T()});
            }
            bandQueue_.EnQue(band);
            band = bandQueue_.template DeQue<T>();
            PipeBarrier<PIPE_ALL>();
            band.SetValue(bandElements_, static_cast<T>(0.0f));  // what padding taps gather
            PipeBarrier<PIPE_ALL>();
            LocalTensor<Bits> bandBits = band.template ReinterpretCast<Bits>();
            for (uint32_t tap = 0; tap < taps_; ++tap) {
                LocalTensor<Bits> row = rowQueue_.template AllocTensor<Bits>();
                Gather(row, bandBits, offsets[tap * t_.columnTile], 0u, t_.columnTile);
                rowQueue_.EnQue(row);
                row = rowQueue_.template DeQue<Bits>();
                uint64_t slabRow = (uint64_t(channel) * taps_ + tap) * t_.columnTile;
                DataCopy(slabGm_[slabRow], row.template ReinterpretCast<T>(), t_.columnTile);
                rowQueue_.FreeTensor(row);
            }
            bandQueue_.FreeTensor(band);
        }
    }

    // The input rows (clipped to the image) that output positions [first, first + columns) read.
    __aicore__ inline void InputRows(uint32_t first, uint32_t columns, int32_t& firstRow, int32_t& rows) const {
        const ConvGeometry& g = t_.conv;
        int32_t top = int32_t(first / g.outWidth) * int32_t(g.strideH) - int32_t(g.padH);
        int32_t bottom = int32_t((first + columns - 1) / g.outWidth) * int32_t(g.strideH) - int32_t(g.padH) +
                         int32_t((g.kernelH - 1) * g.dilationH);
        firstRow = top < 0 ? 0 : top;
        int32_t last = bottom >= int32_t(g.height) ? int32_t(g.height) - 1 : bottom;
        rows = last >= firstRow ? last - firstRow + 1 : 0;
    }

    // offsets[tap][q] = byte offset in the band of the input element that column q, tap (i, j) reads,
    // or of the zero element past the band (padding, and columns past the end of the image).
    __aicore__ inline void FillGatherOffsets(uint32_t first, uint32_t columns, int32_t firstRow) {
        const ConvGeometry& g = t_.conv;
        LocalTensor<uint32_t> offsets = offsetBuf_.Get<uint32_t>();
        const uint32_t zero = bandElements_ * sizeof(T);
        for (uint32_t i = 0; i < g.kernelH; ++i) {
            for (uint32_t j = 0; j < g.kernelW; ++j) {
                uint32_t base = (i * g.kernelW + j) * t_.columnTile;
                for (uint32_t q = 0; q < t_.columnTile; ++q) {
                    uint32_t offset = zero;
                    if (q < columns) {
                        uint32_t p = first + q;
                        int32_t hi = int32_t(p / g.outWidth * g.strideH + i * g.dilationH) - int32_t(g.padH);
                        int32_t wi = int32_t(p % g.outWidth * g.strideW + j * g.dilationW) - int32_t(g.padW);
                        if (hi >= 0 && hi < int32_t(g.height) && wi >= 0 && wi < int32_t(g.width))
                            offset = uint32_t((hi - firstRow) * int32_t(g.width) + wi) * sizeof(T);
                    }
                    offsets.SetValue(base + q, offset);
                }
            }
        }
        PipeBarrier<PIPE_ALL>();
    }

    // --- 2. + 3. GEMM on the cube, epilogue on the vector unit ---------------------------------------
    __aicore__ inline void MultiplyAndStore(uint32_t image, uint32_t first, uint32_t columns) {
        PipeBarrier<PIPE_ALL>();  // the slab is in GM before the cube core reads it
        mm.SetTensorA(weightGm_);
        mm.SetTensorB(slabGm_);
        const uint32_t baseM = cubeTiling_.baseM;
        for (uint32_t rowStart = 0; mm.Iterate(); rowStart += baseM) {
            LocalTensor<float> block = cQueue_.template AllocTensor<float>();
            mm.GetTensorC(block);
            cQueue_.EnQue(block);
            block = cQueue_.template DeQue<float>();
            uint32_t rows = t_.conv.outChannels - rowStart < baseM ? t_.conv.outChannels - rowStart : baseM;
            StoreBlock(block, image, rowStart, rows, first, columns);
            cQueue_.FreeTensor(block);
        }
    }

    // + b'[channel] per row, LeakyReLU, one rounding to T, one write.
    __aicore__ inline void StoreBlock(const LocalTensor<float>& block, uint32_t image, uint32_t rowStart, uint32_t rows,
                                      uint32_t first, uint32_t columns) {
        const uint32_t width = t_.columnTile;
        LocalTensor<float> bias = biasBuf_.Get<float>();
        PipeBarrier<PIPE_ALL>();
        for (uint32_t r = 0; r < rows; ++r)
            Adds(block[r * width], block[r * width], bias.GetValue(rowStart + r), width);
        LeakyRelu(block, block, t_.negativeSlope, rows * width);
        LocalTensor<T> staged = outQueue_.template AllocTensor<T>();
        FromFloat(staged, block, rows * width);
        outQueue_.EnQue(staged);
        staged = outQueue_.template DeQue<T>();
        uint64_t outRow = (uint64_t(image) * t_.conv.outChannels + rowStart) * positions_ + first;
        DataCopyPad(outGm_[outRow], staged,
                    DataCopyExtParams{uint16_t(rows), uint32_t(columns * sizeof(T)),
                                      uint32_t((width * sizeof(T) - Aligned(columns * sizeof(T))) / 32),
                                      uint32_t((positions_ - columns) * sizeof(T)), 0});
        outQueue_.FreeTensor(staged);
    }

    ConvBnLeakyReluEvalTiling t_;
    TCubeTiling cubeTiling_;
    uint32_t positions_ = 0, taps_ = 0, bandElements_ = 0;
    TQue<QuePosition::VECIN, 1> cQueue_, bandQueue_;
    TQue<QuePosition::VECOUT, 2> outQueue_, rowQueue_;
    TBuf<TPosition::VECCALC> biasBuf_, offsetBuf_;
    GlobalTensor<T> xGm_, weightGm_, outGm_, slabGm_;
    GlobalTensor<float> biasGm_;
};

}  // namespace
}  // namespace ascend_acts

// MIX kernel: the AIVs run this body; the Matmul object drives the cube core (AIC) for them.
// Tiling buffer: our ConvBnLeakyReluEvalTiling, then the TCubeTiling the host's Matmul tiling filled
// (kCubeTilingOffset bytes in).
//
// REGIST_MATMUL_OBJ is expanded here, in the entry, as CANN requires: on the AIC it runs the cube
// service and then `return`s (which must leave the kernel), and on the AIV it declares the client whose
// destructor ends that service, so every Matmul call must come before the end of its scope. It comes
// before any InitBuffer (910B's separate cube and vector cores). Literal tiling keys: 0 float32,
// 1 float16, 2 bfloat16.
extern "C" __global__ __aicore__ void acts_conv_bn_leaky_relu_eval(GM_ADDR x, GM_ADDR weight, GM_ADDR bias, GM_ADDR y,
                                                                   GM_ADDR workspace, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    ascend_acts::ConvBnLeakyReluEvalTiling t;
    ascend_acts::ReadTiling(t, tiling);
    TCubeTiling cubeTiling;
    ascend_acts::ReadTiling(cubeTiling, tiling + ascend_acts::conv_eval_tiling::kCubeTilingOffset);
    SetSysWorkspace(workspace);
    GM_ADDR userWorkspace = GetUserWorkspace(workspace);
    if (TILING_KEY_IS(0)) {
        ascend_acts::ConvBnLeakyReluEval<float> op;
        REGIST_MATMUL_OBJ(&op.pipe, GetSysWorkSpacePtr(), op.mm, &cubeTiling);
        op.Init(x, weight, bias, y, userWorkspace, t, cubeTiling);
        op.Process();
    } else if (TILING_KEY_IS(1)) {
        ascend_acts::ConvBnLeakyReluEval<half> op;
        REGIST_MATMUL_OBJ(&op.pipe, GetSysWorkSpacePtr(), op.mm, &cubeTiling);
        op.Init(x, weight, bias, y, userWorkspace, t, cubeTiling);
        op.Process();
    } else if (TILING_KEY_IS(2)) {
        ascend_acts::ConvBnLeakyReluEval<bfloat16_t> op;
        REGIST_MATMUL_OBJ(&op.pipe, GetSysWorkSpacePtr(), op.mm, &cubeTiling);
        op.Init(x, weight, bias, y, userWorkspace, t, cubeTiling);
        op.Process();
    }
}
