// The eval kernel of the fused Conv2d + BatchNorm2d (folded) + LeakyReLU, the Ascend way: img2col on the cube
// side, MIX AIC:AIV 1:2. Layouts, work items and rings: conv_bn_leaky_relu_eval_tiling_data.h.
//
// Per AI core, per work item j (slots j % kRingSlots of its GM rings):
//   AIV prologue  (both AIVs, half of the C1 channel groups each): the band of input rows the tile reads
//                 (clipped to the image; padding comes from LoadData 3Dv2's padList, not from data), NCHW ->
//                 [rows][W][C0] with TransDataTo5HD, to the input slot as [C1][rows][W][C0]; IN_READY.
//   AIC           the slot -> L1 (double-buffered band), IN_FREE; the item's W' block -> L1 when it differs from
//                 the resident one (slice by slice, each just before its first Mmad), or, streamed, each K slice
//                 into one of two L1 buffers while the cube works on the other; per K chunk: LoadData 3Dv2
//                 (img2col of every image's band) -> L0A as one (G * Npad) x kc matrix, one LoadData 2D (the
//                 chunk's W' fractals) -> L0B, one Mmad into L0C in float32 (positions x channels, as CANN's own
//                 convolutions put the feature map on A: L0A fills at twice L0B's rate, and all G images share
//                 one Mmad); Fixpipe L0C -> the output slot [G * Npad][Mb] row-major float; OUT_READY.
//   AIV epilogue  (both AIVs, half of the block's channels each): the slot's columns -> UB, OUT_FREE;
//                 TransDataTo5HD to channel rows; + b'[channel] (Adds per row, after the float32 sum as torch
//                 adds it, not from the bias table, which would start the sum at b'), LeakyRelu (or torch's ReLU:
//                 compare + Select), one rounding to T, DataCopyPad into y (rows = channels, positions contiguous
//                 in NCHW).
// The AIVs run prologue(j) then epilogue(j - 1), so the cube works on item j while they prepare item j + 1.
//
// `Sync` is the cross-core flag policy: CrossCoreFlags for the product; tests/sim_kernels/ instantiates the
// class with one flag left out to show the emulator's hazard checker catches it.
#pragma once

#include "kernel_operator.h"
#include "../common/float_compute.h"
#include "conv_bn_leaky_relu_eval_tiling_data.h"

namespace ascend_acts {

// Cross-core flags, mode 2: a set by the AIC reaches both of its AIVs; an AIC wait needs a set from both.
struct CrossCoreFlags {
    template <pipe_t pipe>
    __aicore__ static inline void Signal(uint16_t flag) {
        AscendC::CrossCoreSetFlag<2, pipe>(flag);
    }
    __aicore__ static inline void Await(uint16_t flag) { AscendC::CrossCoreWaitFlag<2>(flag); }
};

template <typename T>
struct BitsOf;  // TransDataTo5HD and Duplicate move bits: 16-bit types as uint16_t, float as uint32_t
template <>
struct BitsOf<float> {
    using Type = uint32_t;
};
template <>
struct BitsOf<half> {
    using Type = uint16_t;
};
template <>
struct BitsOf<bfloat16_t> {
    using Type = uint16_t;
};

template <typename T, typename Sync = CrossCoreFlags>
class ConvBnLeakyReluEvalKernel {
    using Bits = typename BitsOf<T>::Type;
    static constexpr uint32_t kC0 = 32 / sizeof(T);
    static constexpr uint32_t kFractal = 16 * kC0;  // elements of a 512-byte fractal
    static constexpr uint32_t kSlots = conv_eval_tiling::kRingSlots;
    static constexpr uint32_t kPositionsPerRepeat = 16;   // TransDataTo5HD: 16 blocks of C0 channels per repeat
    static constexpr uint32_t kMaxRepeats = 255;          // TransDataTo5HDParams::repeatTimes is a uint8_t
    static constexpr uint32_t kChannelsPerTranspose = 8;  // epilogue: float channels of one 32-byte block

public:
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR weight, GM_ADDR bias, GM_ADDR y, GM_ADDR workspace,
                                const ConvBnLeakyReluEvalTiling& tiling) {
        t_ = tiling;
        const ConvGeometry& g = t_.conv;
        xGm_.SetGlobalBuffer((__gm__ T*)x, uint64_t(g.batch) * g.inChannels * g.height * g.width);
        weightGm_.SetGlobalBuffer((__gm__ T*)weight,
                                  uint64_t(conv_eval_tiling::CeilDiv(g.outChannels, 16)) * 16 * t_.kFractals * kC0);
        biasGm_.SetGlobalBuffer((__gm__ float*)bias, g.outChannels);
        yGm_.SetGlobalBuffer((__gm__ T*)y, uint64_t(g.batch) * g.outChannels * g.outHeight * g.outWidth);
        // an AIV's block index is 2 * (its AI core) + its sub-block index
        if ASCEND_IS_AIC {
            core_ = uint32_t(AscendC::GetBlockIdx());
        } else {
            core_ = uint32_t(AscendC::GetBlockIdx() / AscendC::GetTaskRation());
        }
        conv_eval_tiling::ItemRange(t_, core_, firstItem_, itemCount_);
        const uint64_t ring = uint64_t(kSlots) * (t_.inputSlotBytes + t_.outputSlotBytes);
        GM_ADDR mine = workspace + core_ * ring;
        for (uint32_t s = 0; s < kSlots; ++s) {
            inputSlot_[s].SetGlobalBuffer((__gm__ T*)(mine + s * t_.inputSlotBytes), t_.inputSlotBytes / sizeof(T));
            outputSlot_[s].SetGlobalBuffer(
                (__gm__ float*)(mine + uint64_t(kSlots) * t_.inputSlotBytes + s * t_.outputSlotBytes),
                t_.outputSlotBytes / sizeof(float));
        }
        if ASCEND_IS_AIC {
            InitCube();
        } else {
            InitVector();
        }
    }

    __aicore__ inline void Process() {
        if ASCEND_IS_AIC {
            RunCube();
        } else {
            RunVector();
        }
    }

private:
    // ---------------------------------------------------------------- cube core (AIC) ------------------------
    __aicore__ inline void InitCube() {
        const uint32_t weightSlice = t_.blockRows * t_.weightSliceK * sizeof(T);
        pipe_.InitBuffer(weightL1_, conv_eval_tiling::WeightBuffers(t_), weightSlice);
        pipe_.InitBuffer(bandL1_, 2, t_.inputSlotBytes);
        pipe_.InitBuffer(columnsL0_, 2, t_.itemPositions * t_.kChunk * sizeof(T));
        pipe_.InitBuffer(weightL0_, 2, t_.kChunk * t_.blockRows * sizeof(T));
        pipe_.InitBuffer(resultL0c_, t_.l0cBuffers, t_.blockRows * t_.itemPositions * sizeof(float));
    }

    __aicore__ inline void RunCube() {
        if (itemCount_ == 0) return;
        // the first W' slice before the first wait for the AIVs: its copy overlaps their first prologue
        const conv_eval_tiling::ConvTile first = conv_eval_tiling::TileOf(t_, firstItem_);
        if (t_.weightStreamed) {
            streamed_[0] = LoadWeightSlice(first.block, 0, conv_eval_tiling::CeilDiv(first.channels, 16));
        } else {
            ReleaseWeights(first.block);
            for (uint32_t s = 0; s < t_.weightSlices; ++s) {
                weightSlice_[s] = LoadWeightSlice(first.block, s, conv_eval_tiling::CeilDiv(first.channels, 16));
                sliceLoaded_[s] = true;
            }
        }
        FetchBand(0);
        const uint32_t kPadded = t_.kFractals * kC0;
        for (uint32_t j = 0; j < itemCount_; ++j) {
            AscendC::LocalTensor<T> band = bandL1_.template DeQue<T>();
            const conv_eval_tiling::ConvTile tile = conv_eval_tiling::TileOf(t_, firstItem_ + j);
            if (!t_.weightStreamed && tile.block != residentBlock_) ReleaseWeights(tile.block);
            AscendC::LocalTensor<float> result = resultL0c_.template AllocTensor<float>();
            for (uint32_t s = 0; s < t_.weightSlices; ++s) {
                const AscendC::LocalTensor<T> slice = t_.weightStreamed ? StreamSlice(j, s) : ResidentSlice(tile, s);
                const uint32_t sliceEnd = (s + 1) * t_.weightSliceK < kPadded ? (s + 1) * t_.weightSliceK : kPadded;
                for (uint32_t kStart = s * t_.weightSliceK; kStart < sliceEnd; kStart += t_.kChunk) {
                    MultiplyChunk(result, band, slice, s, tile, kStart, kStart == 0);
                }
            }
            bandL1_.FreeTensor(band);
            // after this item's Mmads are issued, so its wait for the next band holds none of them; the copy
            // still overlaps them (the other L1 band buffer is free)
            if (j + 1 < itemCount_) FetchBand(j + 1);
            resultL0c_.EnQue(result);
            result = resultL0c_.template DeQue<float>();
            WriteResult(result, tile, j);
            resultL0c_.FreeTensor(result);
        }
        if (t_.weightStreamed) {
            weightL1_.FreeTensor(streamed_[(itemCount_ * t_.weightSlices - 1) % conv_eval_tiling::kStreamBuffers]);
        } else {
            ReleaseWeights(residentBlock_);
        }
    }

    // The AIVs' input slot of item j (its images' bands) -> an L1 band buffer (queued for the LoadData 3Dv2s).
    __aicore__ inline void FetchBand(uint32_t j) {
        const conv_eval_tiling::ConvTile tile = conv_eval_tiling::TileOf(t_, firstItem_ + j);
        const uint32_t slot = j % kSlots;
        Sync::Await(conv_eval_tiling::kInputReady + slot);
        AscendC::LocalTensor<T> band = bandL1_.template AllocTensor<T>();
        // one 32-byte-block run per image and channel group: rows * W * C0 elements of T = rows * W blocks
        AscendC::DataCopy(band, inputSlot_[slot],
                          AscendC::DataCopyParams(uint16_t(t_.channelGroups * tile.images),
                                                  uint16_t(tile.inRows * t_.conv.width), 0, 0));
        bandL1_.EnQue(band);
        // the copy is in the MTE2 pipe's order before the flag; an item nobody refills needs no release
        if (j + kSlots < itemCount_) Sync::template Signal<PIPE_MTE2>(conv_eval_tiling::kInputFree + slot);
    }

    // Drops the resident W' block; `block`'s slices load as the next K loop reaches them.
    __aicore__ inline void ReleaseWeights(uint32_t block) {
        for (uint32_t s = 0; s < t_.weightSlices; ++s) {
            if (sliceLoaded_[s]) weightL1_.FreeTensor(weightSlice_[s]);
            sliceLoaded_[s] = false;
        }
        residentBlock_ = block;
    }

    // Slice s of the resident block (loaded on its first use).
    __aicore__ inline AscendC::LocalTensor<T> ResidentSlice(const conv_eval_tiling::ConvTile& tile, uint32_t s) {
        if (!sliceLoaded_[s]) {
            weightSlice_[s] = LoadWeightSlice(tile.block, s, conv_eval_tiling::CeilDiv(tile.channels, 16));
            sliceLoaded_[s] = true;
        }
        return weightSlice_[s];
    }

    // Slice s of item j's block, streamed: slice q = j * slices + s of the core's stream is in buffer q % 2 (loaded
    // while q - 1 was in use); q - 1's buffer is free once q starts, and q + 1 (the next item's first slice after
    // an item's last) loads into it now, behind the Mmads of q.
    __aicore__ inline AscendC::LocalTensor<T> StreamSlice(uint32_t j, uint32_t s) {
        constexpr uint32_t kBuffers = conv_eval_tiling::kStreamBuffers;
        const uint32_t q = j * t_.weightSlices + s;
        if (q > 0) weightL1_.FreeTensor(streamed_[(q - 1) % kBuffers]);
        const uint32_t nextItem = s + 1 < t_.weightSlices ? j : j + 1;
        if (nextItem < itemCount_) {
            const conv_eval_tiling::ConvTile next = conv_eval_tiling::TileOf(t_, firstItem_ + nextItem);
            streamed_[(q + 1) % kBuffers] = LoadWeightSlice(next.block, (q + 1) % t_.weightSlices,
                                                            conv_eval_tiling::CeilDiv(next.channels, 16));
        }
        return streamed_[q % kBuffers];
    }

    // Slice s of `block`'s W' (K elements [s * sliceK, ...)) -> L1, laid out [slice fractals][row fractals]: B's
    // ZN order (K-fractal-major), so a K chunk of it is one run of whole fractals for LoadData 2D.
    __aicore__ inline AscendC::LocalTensor<T> LoadWeightSlice(uint32_t block, uint32_t s, uint32_t rowFractals) {
        const uint32_t sliceFractals = t_.weightSliceK / kC0, first = s * sliceFractals;
        const uint32_t width = t_.kFractals - first < sliceFractals ? t_.kFractals - first : sliceFractals;
        AscendC::LocalTensor<T> slice = weightL1_.template AllocTensor<T>();
        // a fractal is 512 bytes = 16 blocks of 32; per K fractal, the block's row fractals are contiguous in GM
        // (M1 apart from the next K fractal's) and land contiguous in L1
        const uint32_t m1 = conv_eval_tiling::CeilDiv(t_.conv.outChannels, 16);
        const uint64_t origin = (uint64_t(first) * m1 + block * (t_.blockRows / 16)) * kFractal;
        AscendC::DataCopy(
            slice, weightGm_[origin],
            AscendC::DataCopyParams(uint16_t(width), uint16_t(rowFractals * 16), uint16_t((m1 - rowFractals) * 16), 0));
        weightL1_.EnQue(slice);
        return weightL1_.template DeQue<T>();
    }

    // C (+)= img2col(band)[positions][kStart, kStart + kc) * W'[block rows][kStart, kStart + kc)^T for all of the
    // item's images at once: image i's img2col fills m-fractal rows [i * Npad / 16, ...) of L0A (ZZ is
    // m-fractal-major, so the images' regions are one (G * Npad) x kc matrix), the W' chunk is L0B's kc x Mb.
    __aicore__ inline void MultiplyChunk(const AscendC::LocalTensor<float>& result, const AscendC::LocalTensor<T>& band,
                                         const AscendC::LocalTensor<T>& slice, uint32_t s,
                                         const conv_eval_tiling::ConvTile& tile, uint32_t kStart, bool first) {
        const uint32_t kPadded = t_.kFractals * kC0;
        const uint32_t k = kPadded - kStart < t_.kChunk ? kPadded - kStart : t_.kChunk;
        const uint32_t rowFractals = conv_eval_tiling::CeilDiv(tile.channels, 16);
        const uint32_t npad = tile.paddedPositions;
        const uint32_t bandElements = t_.channelGroups * kC0 * tile.inRows * t_.conv.width;
        AscendC::LocalTensor<T> columns = columnsL0_.template AllocTensor<T>();
        for (uint32_t i = 0; i < tile.images; ++i)
            LoadColumns(columns[i * npad * k], band[i * bandElements], tile, kStart, k);
        columnsL0_.EnQue(columns);
        AscendC::LocalTensor<T> weights = weightL0_.template AllocTensor<T>();
        LoadWeights(weights, slice, s, rowFractals, kStart, k);
        weightL0_.EnQue(weights);
        columns = columnsL0_.template DeQue<T>();
        weights = weightL0_.template DeQue<T>();
        AscendC::MmadParams params;
        params.m = uint16_t(tile.images * npad);
        params.n = uint16_t(rowFractals * 16);
        params.k = uint16_t(k);
        params.cmatrixInitVal = first;  // the first chunk starts C at 0, the others accumulate
        AscendC::Mmad(result, columns, weights, params);
        columnsL0_.FreeTensor(columns);
        weightL0_.FreeTensor(weights);
    }

    // img2col of the band into L0A (M x K, ZZ): the tile's padding rows and the image's padding columns from
    // padList, K order (c1, kh, kw, c0) as W' is packed.
    __aicore__ inline void LoadColumns(const AscendC::LocalTensor<T>& columns, const AscendC::LocalTensor<T>& band,
                                       const conv_eval_tiling::ConvTile& tile, uint32_t kStart, uint32_t k) {
        const ConvGeometry& g = t_.conv;
        uint8_t padList[AscendC::PAD_SIZE] = {uint8_t(g.padLeft), uint8_t(t_.padRight), uint8_t(tile.padTop),
                                              uint8_t(tile.padBottom)};
        AscendC::LoadData3DParamsV2<T> params(
            padList, uint16_t(tile.inRows), uint16_t(g.width), uint16_t(t_.channelGroups * kC0), uint16_t(k),
            uint16_t(tile.paddedPositions), uint16_t(kStart), 0, uint8_t(g.strideW), uint8_t(g.strideH),
            uint8_t(g.kernelW), uint8_t(g.kernelH), uint8_t(g.dilationW), uint8_t(g.dilationH), false, false, T(0));
        AscendC::LoadData(columns, band, params);
    }

    // W' rows of the block, K [kStart, kStart + k) -> L0B (K x N, ZN): the chunk's fractals are one contiguous
    // run of slice s ([slice fractals][row fractals]), one LoadData 2D.
    __aicore__ inline void LoadWeights(const AscendC::LocalTensor<T>& weights, const AscendC::LocalTensor<T>& slice,
                                       uint32_t s, uint32_t rowFractals, uint32_t kStart, uint32_t k) {
        const uint32_t sliceStart = s * (t_.weightSliceK / kC0), firstFractal = kStart / kC0;
        AscendC::LoadData(weights, slice,
                          AscendC::LoadData2DParams(uint16_t((firstFractal - sliceStart) * rowFractals),
                                                    uint8_t(k / kC0 * rowFractals), 1, 0, 0, false, 0));
    }

    // L0C -> output slot j % kSlots (row-major float: a row per position, image i's at i * Npad, Mb channels
    // each), once the AIVs have taken its previous contents.
    __aicore__ inline void WriteResult(const AscendC::LocalTensor<float>& result,
                                       const conv_eval_tiling::ConvTile& tile, uint32_t j) {
        const uint32_t slot = j % kSlots;
        if (j >= kSlots) Sync::Await(conv_eval_tiling::kOutputFree + slot);
        const uint32_t rows = conv_eval_tiling::CeilDiv(tile.channels, 16) * 16;
        const uint32_t positions = tile.images * tile.paddedPositions;
        AscendC::FixpipeParamsV220 params(static_cast<uint16_t>(rows), static_cast<uint16_t>(positions),
                                          static_cast<uint16_t>(positions), t_.blockRows, false);
        AscendC::Fixpipe<float, float, AscendC::CFG_ROW_MAJOR>(outputSlot_[slot], result, params);
        Sync::template Signal<PIPE_FIX>(conv_eval_tiling::kOutputReady + slot);
    }

    // ---------------------------------------------------------------- vector cores (AIV) --------------------
    __aicore__ inline void InitVector() {
        const uint32_t pitch = conv_eval_tiling::ProloguePitch(t_.prologueRows * t_.conv.width);
        pitch_ = pitch;
        pipe_.InitBuffer(channelRows_, 2, t_.prologueGroups * kC0 * pitch * sizeof(T));
        pipe_.InitBuffer(interleaved_, 2, t_.prologueGroups * pitch * kC0 * sizeof(T));
        const uint32_t columns = conv_eval_tiling::RoundUp(t_.epilogueRows, kChannelsPerTranspose);
        pipe_.InitBuffer(resultRows_, 2, t_.itemPositions * columns * sizeof(float));
        pipe_.InitBuffer(channelMajor_, columns * t_.itemPositions * sizeof(float));
        pipe_.InitBuffer(outputRows_, 2, t_.epilogueRows * t_.itemPositions * sizeof(T));
        pipe_.InitBuffer(biasBuf_, conv_eval_tiling::RoundUp(t_.blockRows * sizeof(float), 32));
        const uint32_t half = conv_eval_tiling::CeilDiv(t_.channelGroups, 2), sub = uint32_t(AscendC::GetSubBlockIdx());
        firstGroup_ = sub * half < t_.channelGroups ? sub * half : t_.channelGroups;
        lastGroup_ = firstGroup_ + half < t_.channelGroups ? firstGroup_ + half : t_.channelGroups;
    }

    // A flag wait holds the whole core, so the waits come in the order their flags arrive: item j + kSlots's
    // input slot is freed when the cube fetches item j's band, before item j's result is ready.
    __aicore__ inline void RunVector() {
        for (uint32_t j = 0; j < itemCount_ && j < kSlots; ++j) PrepareInput(j);
        for (uint32_t j = 0; j < itemCount_; ++j) {
            if (j + kSlots < itemCount_) PrepareInput(j + kSlots);
            FinishOutput(j);
        }
    }

    // Prologue of item j: this AIV's channel groups of the band -> input slot j % kSlots.
    __aicore__ inline void PrepareInput(uint32_t j) {
        const conv_eval_tiling::ConvTile tile = conv_eval_tiling::TileOf(t_, firstItem_ + j);
        const uint32_t slot = j % kSlots;
        if (j >= kSlots) Sync::Await(conv_eval_tiling::kInputFree + slot);
        for (uint32_t image = 0; image < tile.images; ++image) {
            for (uint32_t group = firstGroup_; group < lastGroup_; group += t_.prologueGroups) {
                const uint32_t groups = lastGroup_ - group < t_.prologueGroups ? lastGroup_ - group : t_.prologueGroups;
                for (uint32_t row = 0; row < tile.inRows; row += t_.prologueRows) {
                    const uint32_t rows = tile.inRows - row < t_.prologueRows ? tile.inRows - row : t_.prologueRows;
                    InterleaveRows(tile, image, group, groups, row, rows, slot);
                }
            }
        }
        Sync::template Signal<PIPE_MTE3>(conv_eval_tiling::kInputReady + slot);
    }

    // Input rows [firstInRow + row, ... + rows) of channel groups [group, group + groups) of the item's image
    // `image` -> [rows][W][C0] per group at the slot's [image][group][row] (the band's rows are tile.inRows per
    // group): one copy in of every channel row, one TransDataTo5HD per group, one copy out.
    __aicore__ inline void InterleaveRows(const conv_eval_tiling::ConvTile& tile, uint32_t image, uint32_t group,
                                          uint32_t groups, uint32_t row, uint32_t rows, uint32_t slot) {
        const ConvGeometry& g = t_.conv;
        const uint32_t firstChannel = group * kC0, padded = groups * kC0;
        const uint32_t channels = g.inChannels - firstChannel < padded ? g.inChannels - firstChannel : padded;
        const uint32_t elements = rows * g.width, plane = g.height * g.width;
        AscendC::LocalTensor<T> planes = channelRows_.template AllocTensor<T>();
        const uint64_t origin = (uint64_t(tile.image + image) * g.inChannels + firstChannel) * plane +
                                (tile.firstInRow + row) * g.width;
        const uint32_t gapBlocks = (pitch_ - conv_eval_tiling::RoundUp(elements, kC0)) / kC0;
        AscendC::DataCopyPad(planes, xGm_[origin],
                             AscendC::DataCopyExtParams{uint16_t(channels), uint32_t(elements * sizeof(T)),
                                                        uint32_t((plane - elements) * sizeof(T)), gapBlocks, 0},
                             AscendC::DataCopyPadExtParams<T>{false, 0, 0, T(0)});
        channelRows_.EnQue(planes);
        planes = channelRows_.template DeQue<T>();
        AscendC::LocalTensor<Bits> planeBits = planes.template ReinterpretCast<Bits>();
        // channels past Cin must be zeros, never garbage: NaN * 0 is NaN in Mmad
        if (channels < padded) AscendC::Duplicate(planeBits[channels * pitch_], Bits(0), (padded - channels) * pitch_);
        AscendC::LocalTensor<Bits> packed = interleaved_.template AllocTensor<Bits>();
        for (uint32_t k = 0; k < groups; ++k) {
            Interleave(packed[k * pitch_ * kC0], planeBits[k * kC0 * pitch_],
                       conv_eval_tiling::CeilDiv(elements, kPositionsPerRepeat));
        }
        channelRows_.FreeTensor(planes);
        interleaved_.EnQue(packed);
        packed = interleaved_.template DeQue<Bits>();
        // a C0-channel position is one 32-byte block: groups runs of `elements` blocks, pitch apart in UB and a
        // band of a group apart in the slot
        const uint64_t at = ((uint64_t(image) * t_.channelGroups + group) * tile.inRows + row) * g.width * kC0;
        AscendC::DataCopyPad(inputSlot_[slot][at], packed.template ReinterpretCast<T>(),
                             AscendC::DataCopyExtParams{uint16_t(groups), uint32_t(elements * 32),
                                                        (pitch_ - elements) * uint32_t(sizeof(T)) * kC0 / 32,
                                                        uint32_t((tile.inRows - rows) * g.width * 32), 0});
        interleaved_.FreeTensor(packed);
    }

    // [C0][pitch] channel rows -> [positions][C0], 16 positions per TransDataTo5HD repeat. 16-bit: source i is
    // channel i's block of the repeat's 16 positions, destination i position i. 32-bit (a block holds 8
    // positions): sources i and 8 + i are channel i's two blocks, and destination blocks 2i and 2i + 1 (element
    // i of sources 0..7 and of 8..15) are positions i and 8 + i.
    __aicore__ inline void Interleave(const AscendC::LocalTensor<Bits>& packed,
                                      const AscendC::LocalTensor<Bits>& planes, uint32_t repeats) {
        constexpr uint32_t kBlock = 32 / sizeof(Bits), kBlocksPerPosition = kPositionsPerRepeat / kBlock;
        AscendC::LocalTensor<Bits> src[AscendC::NCHW_CONV_ADDR_LIST_SIZE], dst[AscendC::NCHW_CONV_ADDR_LIST_SIZE];
        for (uint32_t done = 0; done < repeats; done += kMaxRepeats) {
            const uint32_t n = repeats - done < kMaxRepeats ? repeats - done : kMaxRepeats;
            const uint32_t position = done * kPositionsPerRepeat;
            for (uint32_t i = 0; i < AscendC::NCHW_CONV_ADDR_LIST_SIZE; ++i) {
                const uint32_t channel = i % kC0, half = i / kC0;  // half: 0 for 16-bit types
                src[i] = planes[channel * pitch_ + position + half * kBlock];
                const uint32_t at = kBlock == 16 ? i : (i % 2) * 8 + i / 2;  // the position block i holds
                dst[i] = packed[(position + at) * kC0];
            }
            AscendC::TransDataTo5HD(dst, src,
                                    AscendC::TransDataTo5HDParams(false, false, uint8_t(n),
                                                                  uint16_t(kPositionsPerRepeat * kC0 / kBlock),
                                                                  uint16_t(kBlocksPerPosition)));
        }
    }

    // [width positions][columns] floats -> [columns][width]: per TransDataTo5HD repeat, 16 positions x 8 channels
    // (32-bit: element i of source blocks 0..7 -> destination block 2i, of 8..15 -> 2i + 1; sources e and 8 + e are
    // positions e and 8 + e's blocks of the 8 channels, destinations 2i and 2i + 1 channel i's two blocks of 8
    // positions).
    __aicore__ inline void ToChannelRows(const AscendC::LocalTensor<float>& channelMajor,
                                         const AscendC::LocalTensor<float>& positionMajor, uint32_t width,
                                         uint32_t columns) {
        AscendC::LocalTensor<uint32_t> from = positionMajor.template ReinterpretCast<uint32_t>();
        AscendC::LocalTensor<uint32_t> to = channelMajor.template ReinterpretCast<uint32_t>();
        AscendC::LocalTensor<uint32_t> src[AscendC::NCHW_CONV_ADDR_LIST_SIZE], dst[AscendC::NCHW_CONV_ADDR_LIST_SIZE];
        const uint32_t repeats = width / kPositionsPerRepeat;
        for (uint32_t channel = 0; channel < columns; channel += kChannelsPerTranspose) {
            for (uint32_t done = 0; done < repeats; done += kMaxRepeats) {
                const uint32_t n = repeats - done < kMaxRepeats ? repeats - done : kMaxRepeats;
                const uint32_t position = done * kPositionsPerRepeat;
                for (uint32_t e = 0; e < kChannelsPerTranspose; ++e) {
                    src[e] = from[(position + e) * columns + channel];
                    src[8 + e] = from[(position + 8 + e) * columns + channel];
                    dst[2 * e] = to[(channel + e) * width + position];
                    dst[2 * e + 1] = to[(channel + e) * width + position + 8];
                }
                AscendC::TransDataTo5HD(
                    dst, src, AscendC::TransDataTo5HDParams(false, false, uint8_t(n), 2, uint16_t(2 * columns)));
            }
        }
    }

    // Epilogue of item j: this AIV's channels (columns) of output slot j % kSlots -> + b', activation, T -> y.
    // The first AIV's share is whole 32-byte blocks of a slot row, so both read from block boundaries.
    __aicore__ inline void FinishOutput(uint32_t j) {
        const conv_eval_tiling::ConvTile tile = conv_eval_tiling::TileOf(t_, firstItem_ + j);
        const uint32_t slot = j % kSlots;
        const uint32_t half = conv_eval_tiling::RoundUp(conv_eval_tiling::CeilDiv(tile.channels, 2),
                                                        kChannelsPerTranspose);
        const uint32_t sub = uint32_t(AscendC::GetSubBlockIdx());
        const uint32_t first = sub * half < tile.channels ? sub * half : tile.channels;
        const uint32_t count = tile.channels - first < half ? tile.channels - first : half;
        Sync::Await(conv_eval_tiling::kOutputReady + slot);
        if (count > 0 && tile.block != biasBlock_) LoadBias(tile.block, first, count);
        for (uint32_t row = 0; row < count; row += t_.epilogueRows) {
            const uint32_t rows = count - row < t_.epilogueRows ? count - row : t_.epilogueRows;
            const bool last = row + rows == count;
            FinishRows(tile, first + row, row, rows, slot, last && j + kSlots < itemCount_);
        }
        if (count == 0 && j + kSlots < itemCount_)
            Sync::template Signal<PIPE_MTE2>(conv_eval_tiling::kOutputFree + slot);
    }

    // b' of this AIV's rows of the block -> UB, read by the scalar unit.
    __aicore__ inline void LoadBias(uint32_t block, uint32_t first, uint32_t count) {
        AscendC::LocalTensor<float> bias = biasBuf_.template Get<float>();
        AscendC::DataCopyPad(bias, biasGm_[block * t_.blockRows + first],
                             AscendC::DataCopyExtParams{1, uint32_t(count * sizeof(float)), 0, 0, 0},
                             AscendC::DataCopyPadExtParams<float>{false, 0, 0, 0.0f});
        AscendC::PipeBarrier<PIPE_ALL>();  // the copy lands before GetValue reads it
        biasBlock_ = block;
    }

    // Slot columns [slotRow, slotRow + rows) (block channels; biasRow = the first one's index among this AIV's),
    // every image of the item, -> y: the columns in (a row of whole 32-byte blocks per position), transposed to
    // channel rows, one Adds per row over all the images' positions, then one copy out per image. `release`: the
    // last reads of the slot are issued, so the AIC may overwrite it.
    __aicore__ inline void FinishRows(const conv_eval_tiling::ConvTile& tile, uint32_t slotRow, uint32_t biasRow,
                                      uint32_t rows, uint32_t slot, bool release) {
        const ConvGeometry& g = t_.conv;
        const uint32_t npad = tile.paddedPositions, width = tile.images * npad;
        const uint32_t columns = conv_eval_tiling::RoundUp(rows, kChannelsPerTranspose);
        AscendC::LocalTensor<float> positionMajor = resultRows_.template AllocTensor<float>();
        AscendC::DataCopyPad(positionMajor, outputSlot_[slot][slotRow],
                             AscendC::DataCopyExtParams{uint16_t(width), uint32_t(rows * sizeof(float)),
                                                        uint32_t((t_.blockRows - rows) * sizeof(float)), 0, 0},
                             AscendC::DataCopyPadExtParams<float>{true, 0, uint8_t(columns - rows), 0.0f});
        if (release) Sync::template Signal<PIPE_MTE2>(conv_eval_tiling::kOutputFree + slot);
        resultRows_.EnQue(positionMajor);
        positionMajor = resultRows_.template DeQue<float>();
        AscendC::LocalTensor<float> values = channelMajor_.template Get<float>();
        ToChannelRows(values, positionMajor, width, columns);
        AscendC::LocalTensor<float> bias = biasBuf_.template Get<float>();
        for (uint32_t r = 0; r < rows; ++r) {
            AscendC::Adds(values[r * width], values[r * width], bias.GetValue(biasRow + r), width);
        }
        AscendC::LocalTensor<T> out = outputRows_.template AllocTensor<T>();
        Activate(values, rows * width, positionMajor, out);
        resultRows_.FreeTensor(positionMajor);
        FromFloat(out, values, rows * width);
        outputRows_.EnQue(out);
        out = outputRows_.template DeQue<T>();
        const uint32_t planeOut = g.outHeight * g.outWidth;
        const uint32_t rowBytes = tile.positions * sizeof(T);
        for (uint32_t i = 0; i < tile.images; ++i) {
            const uint64_t origin = (uint64_t(tile.image + i) * g.outChannels + tile.block * t_.blockRows + slotRow) *
                                        planeOut +
                                    tile.firstOutRow * g.outWidth;
            AscendC::DataCopyPad(
                yGm_[origin], out[i * npad],
                AscendC::DataCopyExtParams{uint16_t(rows), rowBytes,
                                           (width * uint32_t(sizeof(T)) - conv_eval_tiling::RoundUp(rowBytes, 32)) / 32,
                                           uint32_t((planeOut - tile.positions) * sizeof(T)), 0});
        }
        outputRows_.FreeTensor(out);
    }

    // LeakyReLU, or ReLU as torch's (z < 0 ? +0 : z: -0.0, NaN and +inf stay, -inf gives +0), which LeakyRelu
    // with slope 0 is not (-0 for a negative z, NaN for -inf) and Maxs leaves unspecified for NaN: CompareScalar
    // + Select decide every value. Both buffers are idle here: `scratch` (the slot's columns, already transposed:
    // columns * width >= count floats) takes the zeros, `out` (written only after, count * sizeof(T) bytes) the
    // mask. CANN 8.1 (ascendc/include/basic_api/impl/): CompareScalar drops a partial 256-byte repeat
    // (dav_c220/kernel_operator_vec_cmp_impl.h:292, sumRepeat = calCount * sizeof(T) / ONE_REPEAT_BYTE_SIZE), so
    // it compares `lanes`, count rounded up to 64 floats (within the transposed rows: columns * width is a
    // multiple of 128); Select in tensor-tensor mode writes a temporary at TMP_UB_OFFSET
    // (dav_c220/kernel_operator_vec_cmpsel_impl.h:167-177; 184 KiB on 910B, utils/kernel_utils_constants.h:138),
    // which the tiling leaves free (UsableUbBytes).
    __aicore__ inline void Activate(const AscendC::LocalTensor<float>& values, uint32_t count,
                                    const AscendC::LocalTensor<float>& scratch, const AscendC::LocalTensor<T>& out) {
        if (!t_.relu) {
            AscendC::LeakyRelu(values, values, t_.negativeSlope, count);
            return;
        }
        constexpr uint32_t kFloatsPerRepeat = 64;
        const uint32_t lanes = conv_eval_tiling::RoundUp(count, kFloatsPerRepeat);
        AscendC::LocalTensor<uint8_t> negative = out.template ReinterpretCast<uint8_t>();
        AscendC::CompareScalar(negative, values, 0.0f, AscendC::CMPMODE::LT, lanes);
        AscendC::Duplicate(scratch, 0.0f, count);
        AscendC::Select(values, negative, scratch, values, AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, count);
    }

    ConvBnLeakyReluEvalTiling t_;
    AscendC::TPipe pipe_;
    AscendC::GlobalTensor<T> xGm_, weightGm_, yGm_;
    AscendC::GlobalTensor<float> biasGm_;
    AscendC::GlobalTensor<T> inputSlot_[conv_eval_tiling::kRingSlots];
    AscendC::GlobalTensor<float> outputSlot_[conv_eval_tiling::kRingSlots];
    uint32_t core_ = 0, firstItem_ = 0, itemCount_ = 0;
    // cube core
    AscendC::TQue<AscendC::TPosition::A1, 1> bandL1_;
    AscendC::TQue<AscendC::TPosition::B1, 1> weightL1_;
    AscendC::TQue<AscendC::TPosition::A2, 1> columnsL0_;
    AscendC::TQue<AscendC::TPosition::B2, 1> weightL0_;
    AscendC::TQue<AscendC::TPosition::CO1, 1> resultL0c_;
    AscendC::LocalTensor<T> weightSlice_[conv_eval_tiling::kMaxWeightSlices];  // resident block
    AscendC::LocalTensor<T> streamed_[conv_eval_tiling::kStreamBuffers];       // streamed block
    bool sliceLoaded_[conv_eval_tiling::kMaxWeightSlices] = {};
    uint32_t residentBlock_ = 0xFFFFFFFFu;
    // vector cores
    AscendC::TQue<AscendC::TPosition::VECIN, 1> channelRows_, resultRows_;
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> interleaved_, outputRows_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> biasBuf_, channelMajor_;
    uint32_t pitch_ = 0, firstGroup_ = 0, lastGroup_ = 0, biasBlock_ = 0xFFFFFFFFu;
};

}  // namespace ascend_acts
