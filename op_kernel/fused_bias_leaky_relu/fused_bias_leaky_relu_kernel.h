// The fused bias + LeakyReLU kernels, forward and backward: one body over the same walk of a core's channels,
// the direction a template parameter (as InPlace-ABN writes its passes).
//
//   forward:  t = x + bias[c];  u = act(t) * scale;  y = clamp(u)
//   backward: dy' = clamp's gradient (u in [-clamp, clamp] ? dy : 0);  g = dy' * scale;
//             dx = act'(pre, g);  grad_bias[c] = sum of dx over n and s
//             (pre read from saved = y, or pre = saved + bias[c] with saved = x: always with a clamp, whose
//             gradient needs u, which y does not tell at +-clamp)
//   act: LeakyReLU, act(t) = t > 0 ? t : t * slope, act'(pre, g) = pre > 0 ? g : g * slope; or (relu) torch.relu,
//        act(t) = t < 0 ? +0.0 : t (-0.0 and NaN stay), act'(pre, g) = pre <= 0 ? +0.0 : g (torch's threshold_backward);
//   clamp: torch.clamp's values (NaN stays) and gradient; none when the tiling's clamp is negative.
//
// in float32 whatever the dtype (half types cast before, rounded once after, CAST_RINT): the order of
// python/ascend_acts/ops/fused_bias_leaky_relu/reference.py, so y and dx are bit-identical to it. Every choice
// per element is a CompareScalar + Select (never Max/Min, whose NaN result the API leaves unspecified).
//
// A core owns whole channels (FusedBiasChannelRange): it reads each of its biases once, per block of
// `channelBlock` channels, and sums its channels' dx completely, so grad_bias needs no other core and no second
// launch. The sum is compensated (Kahan, float32 per lane over the tiles, then over the tile's rows and, in Rows,
// over the lanes), so its error does not grow with the number of terms. Where that sum is not finite (an inf
// meeting the compensation makes it NaN), the channel is walked again and its dx summed plainly, which gives
// torch's +-inf (NaN only where +inf meets -inf or a NaN): no work in the finite case. The tiles (Rows / Columns)
// are described in fused_bias_leaky_relu_tiling_data.h; their UB rows are 32-byte padded, and the padding lanes,
// whose contents DataCopyPad does not define, only ever meet padding lanes: the reductions read valid lanes.
#pragma once

#include "kernel_operator.h"
#include "../common/compensated_sum.h"
#include "../common/float_compute.h"
#include "../common/read_tiling.h"
#include "fused_bias_leaky_relu_tiling_data.h"

namespace ascend_acts {
namespace fused_bias_kernel {

// `rows` GM rows of `width` elements, the first at element `offset`, `gapBytes` from the end of one row to the
// start of the next; in UB `pitch` elements apart (width rounded up to 32 bytes, as DataCopyPad lays them).
struct Tile {
    uint64_t offset;
    uint32_t rows;
    uint32_t width;
    uint32_t pitch;
    uint32_t gapBytes;
    // Elements from the tile's first to its last valid one in UB: what the vector instructions cover.
    __aicore__ inline uint32_t Span() const { return (rows - 1) * pitch + width; }
};

__aicore__ inline uint32_t PitchOf(uint32_t width, uint32_t elementSize) {
    uint32_t perBlock = fused_bias_tiling::kBlockBytes / elementSize;
    return (width + perBlock - 1) / perBlock * perBlock;
}

// `count` floats rounded up to whole 256-byte repeats (CompareScalar's granularity; the tile buffers are
// multiples of one).
__aicore__ inline uint32_t RepeatLanes(uint32_t count) {
    using fused_bias_tiling::kFloatRepeat;
    return (count + kFloatRepeat - 1) / kFloatRepeat * kFloatRepeat;
}

using compensated_sum::HalfOf;
using compensated_sum::IsFinite;

// Visits the tiles of channel `channel` (Rows mode) in a fixed order: rows front to back.
template <typename Visit>
__aicore__ inline void ForEachRowTile(const FusedBiasLeakyReluTiling& t, uint64_t channel, Visit&& visit) {
    const uint64_t rowStride = t.channels * t.spatial;  // elements from one row of a channel to the next
    if (t.tileWidth >= t.spatial) {                     // whole rows, rowsPerTile at a time
        uint32_t gap = t.rowsPerTile > 1 ? static_cast<uint32_t>((rowStride - t.spatial) * t.elementSize) : 0;
        for (uint64_t n = 0; n < t.batch; n += t.rowsPerTile) {
            uint64_t left = t.batch - n;
            uint32_t rows = left < t.rowsPerTile ? static_cast<uint32_t>(left) : t.rowsPerTile;
            visit(Tile{n * rowStride + channel * t.spatial, rows, static_cast<uint32_t>(t.spatial), t.rowPitch, gap});
        }
        return;
    }
    for (uint64_t n = 0; n < t.batch; ++n) {  // rows longer than a tile: chunks of one row
        uint64_t rowStart = n * rowStride + channel * t.spatial;
        for (uint64_t done = 0; done < t.spatial; done += t.tileWidth) {
            uint64_t left = t.spatial - done;
            uint32_t width = left < t.tileWidth ? static_cast<uint32_t>(left) : t.tileWidth;
            visit(Tile{rowStart + done, 1, width, PitchOf(width, t.elementSize), 0});
        }
    }
}

// Visits the tiles of the column chunk [first, first + width) (Columns mode, S == 1): rows front to back.
template <typename Visit>
__aicore__ inline void ForEachColumnTile(const FusedBiasLeakyReluTiling& t, uint64_t first, uint32_t width,
                                         Visit&& visit) {
    uint32_t gap = t.rowsPerTile > 1 ? static_cast<uint32_t>((t.channels - width) * t.elementSize) : 0;
    uint32_t pitch = PitchOf(width, t.elementSize);
    for (uint64_t n = 0; n < t.batch; n += t.rowsPerTile) {
        uint64_t left = t.batch - n;
        uint32_t rows = left < t.rowsPerTile ? static_cast<uint32_t>(left) : t.rowsPerTile;
        visit(Tile{n * t.channels + first, rows, width, pitch, gap});
    }
}

// GM -> UB: the tile's rows, one DataCopyPad (padding lanes left undefined: never reduced).
template <typename T>
__aicore__ inline void LoadTile(const AscendC::LocalTensor<T>& dst, const AscendC::GlobalTensor<T>& src,
                                const Tile& tile) {
    AscendC::DataCopyExtParams params{static_cast<uint16_t>(tile.rows), static_cast<uint32_t>(tile.width * sizeof(T)),
                                      tile.gapBytes, 0, 0};
    AscendC::DataCopyPad(dst, src[tile.offset], params, AscendC::DataCopyPadExtParams<T>{false, 0, 0, T()});
}

// UB -> GM: the valid elements of the tile's rows, one DataCopyPad.
template <typename T>
__aicore__ inline void StoreTile(const AscendC::GlobalTensor<T>& dst, const AscendC::LocalTensor<T>& src,
                                 const Tile& tile) {
    AscendC::DataCopyExtParams params{static_cast<uint16_t>(tile.rows), static_cast<uint32_t>(tile.width * sizeof(T)),
                                      0, tile.gapBytes, 0};
    AscendC::DataCopyPad(dst[tile.offset], src, params);
}

__aicore__ inline AscendC::DataCopyExtParams OneRow(uint32_t count, uint32_t elementSize) {
    return AscendC::DataCopyExtParams{1, count * elementSize, 0, 0, 0};
}

template <typename T, bool kBackward>
class FusedBiasLeakyReluKernel {
public:
    // Forward: (x, nullptr, bias, y, nullptr); backward: (dy, saved, bias, dx, gradBias). bias may be null.
    __aicore__ inline void Init(GM_ADDR input, GM_ADDR saved, GM_ADDR bias, GM_ADDR output, GM_ADDR gradBias,
                                const FusedBiasLeakyReluTiling& tiling) {
        t_ = tiling;
        FusedBiasChannelRange(t_, AscendC::GetBlockIdx(), firstChannel_, channelCount_);
        columns_ = t_.mode == static_cast<uint32_t>(FusedBiasMode::Columns);
        readsBias_ = FusedBiasReadsBias(t_, kBackward);
        uint64_t total = t_.batch * t_.channels * t_.spatial;
        inputGm_.SetGlobalBuffer((__gm__ T*)input, total);
        outputGm_.SetGlobalBuffer((__gm__ T*)output, total);
        if (readsBias_) biasGm_.SetGlobalBuffer((__gm__ T*)bias + firstChannel_, channelCount_);
        FusedBiasBuffers b = FusedBiasBuffersOf(t_, kBackward);
        pipe_.InitBuffer(inputQueue_, fused_bias_tiling::kBufferNum, b.queue);
        if constexpr (kBackward) {
            savedGm_.SetGlobalBuffer((__gm__ T*)saved, total);
            gradBiasGm_.SetGlobalBuffer((__gm__ T*)gradBias + firstChannel_, channelCount_);
            pipe_.InitBuffer(savedQueue_, fused_bias_tiling::kBufferNum, b.queue);
        }
        pipe_.InitBuffer(outputQueue_, fused_bias_tiling::kBufferNum, b.queue);
        pipe_.InitBuffer(valuesBuf_, b.floatTile);
        relu_ = t_.relu != 0;
        clamps_ = FusedBiasClamps(t_);
        if (relu_ || clamps_) pipe_.InitBuffer(constantBuf_, b.floatTile);
        if (b.mask != 0) pipe_.InitBuffer(maskBuf_, b.mask);
        if constexpr (kBackward) {
            pipe_.InitBuffer(preBuf_, b.floatTile);
            pipe_.InitBuffer(accBuf_, b.floatTile);
            pipe_.InitBuffer(compBuf_, b.floatTile);
            if (clamps_) pipe_.InitBuffer(unclampedBuf_, b.floatTile);
            pipe_.InitBuffer(gradBiasBuf_, b.gradBias);
            if (b.sums != 0) pipe_.InitBuffer(sumsBuf_, b.sums);
        }
        if (readsBias_) {
            pipe_.InitBuffer(biasStageBuf_, b.biasStage);
            pipe_.InitBuffer(biasFloatBuf_, b.biasFloat);
        }
    }

    __aicore__ inline void Process() {
        for (uint64_t done = 0; done < channelCount_; done += t_.channelBlock) {
            uint64_t left = channelCount_ - done;
            uint32_t count = left < t_.channelBlock ? static_cast<uint32_t>(left) : t_.channelBlock;
            if (readsBias_) LoadBiases(done, count);
            if (columns_) {
                ColumnChunk(done, count);
            } else {
                for (uint32_t j = 0; j < count; ++j) RowChannel(done + j, j);
                if constexpr (kBackward) StoreGradBias(done, count, sumsBuf_.template Get<float>());
            }
        }
    }

private:
    // The biases of local channels [done, done + count) as float: Rows a vector read by the scalar unit; Columns
    // row 0 of the bias tile, replicated over its rowsPerTile rows (doubling copies; Muls by 1 keeps -0.0).
    __aicore__ inline void LoadBiases(uint64_t done, uint32_t count) {
        AscendC::LocalTensor<T> staged = biasStageBuf_.template Get<T>();
        AscendC::LocalTensor<float> biases = biasFloatBuf_.template Get<float>();
        AscendC::PipeBarrier<PIPE_ALL>();  // the previous block's scalar reads are done
        AscendC::DataCopyPad(staged, biasGm_[done], OneRow(count, sizeof(T)),
                             AscendC::DataCopyPadExtParams<T>{false, 0, 0, T()});
        AscendC::PipeBarrier<PIPE_ALL>();
        ToFloat(biases, staged, count);
        if (columns_) {
            uint32_t pitch = PitchOf(count, sizeof(T));
            for (uint32_t have = 1; have < t_.rowsPerTile; have *= 2) {
                uint32_t copies = t_.rowsPerTile - have < have ? t_.rowsPerTile - have : have;
                AscendC::Muls(biases[have * pitch], biases, 1.0f, copies * pitch);
            }
        }
        AscendC::PipeBarrier<PIPE_ALL>();
    }

    __aicore__ inline void RowChannel(uint64_t local, uint32_t inBlock) {
        float bias = readsBias_ ? biasFloatBuf_.template Get<float>().GetValue(inBlock) : 0.0f;
        if constexpr (kBackward) ZeroSums();
        ForEachRowTile(t_, firstChannel_ + local, [&](const Tile& tile) ACTS_AICORE_LAMBDA { Step(tile, bias); });
        if constexpr (kBackward) {
            FoldRows(t_.rowPitch, t_.tileWidth);
            float sum = TotalOfLanes(t_.tileWidth);
            if (!IsFinite(sum)) sum = PlainRowChannelSum(local, bias);
            sumsBuf_.template Get<float>().SetValue(inBlock, sum);
        }
    }

    __aicore__ inline void ColumnChunk(uint64_t done, uint32_t count) {
        if constexpr (kBackward) ZeroSums();
        ForEachColumnTile(t_, firstChannel_ + done, count,
                          [&](const Tile& tile) ACTS_AICORE_LAMBDA { Step(tile, 0.0f); });
        if constexpr (kBackward) {
            FoldRows(PitchOf(count, sizeof(T)), count);
            AscendC::LocalTensor<float> acc = accBuf_.template Get<float>();
            AscendC::Sub(acc, acc, compBuf_.template Get<float>(), count);  // apply the pending corrections
            if (!AllFinite(acc, count)) PlainWhereNotFinite(done, count);
            StoreGradBias(done, count, acc);
        }
    }

    // Sums that are not finite. Once a term or a partial sum is +-inf, the compensation (t - acc) - y is inf - inf
    // = NaN (or inf, which the next step makes NaN) and poisons the lane, where torch's float32 sum gives +-inf
    // (NaN only where +inf and -inf, or a NaN, meet): a plain sum. So a channel (Rows) or chunk (Columns) whose
    // compensated sum is not finite is walked again, its dx recomputed and added plainly (and not stored again);
    // the compensated result is finite whenever no partial sum overflowed, so finite channels cost nothing more.
    __aicore__ inline bool AllFinite(const AscendC::LocalTensor<float>& sums, uint32_t count) {
        AscendC::PipeBarrier<PIPE_ALL>();
        for (uint32_t i = 0; i < count; ++i) {
            if (!IsFinite(sums.GetValue(i))) return false;
        }
        return true;
    }

    // The plain float32 sum of channel `local`'s dx (Rows): per lane in acc over the tiles, then the rows, the
    // lanes and the last <= 8 on the scalar unit, each plainly.
    __aicore__ inline float PlainRowChannelSum(uint64_t local, float bias) {
        AscendC::LocalTensor<float> plain = accBuf_.template Get<float>();
        AscendC::PipeBarrier<PIPE_ALL>();
        AscendC::Duplicate(plain, 0.0f, t_.tileLength);
        ForEachRowTile(t_, firstChannel_ + local,
                       [&](const Tile& tile) ACTS_AICORE_LAMBDA { Step(tile, bias, &plain); });
        PlainFoldRows(plain, t_.rowPitch, t_.tileWidth);
        uint32_t lanes = t_.tileWidth;
        while (lanes > fused_bias_tiling::kFloatsPerBlock) {
            uint32_t half = HalfOf(lanes);
            AscendC::Add(plain, plain, plain[half], lanes - half);
            lanes = half;
        }
        AscendC::PipeBarrier<PIPE_ALL>();
        float sum = plain.GetValue(0);
        for (uint32_t i = 1; i < lanes; ++i) sum += plain.GetValue(i);
        return sum;
    }

    // acc[i] (the compensated sums of the chunk at local channel `done`, Columns) = the plain sum where acc[i] is
    // not finite: the plain sums in comp (free by then), acc - acc (0 exactly where acc is finite, NaN elsewhere)
    // compared with 0, Select.
    __aicore__ inline void PlainWhereNotFinite(uint64_t done, uint32_t count) {
        AscendC::LocalTensor<float> acc = accBuf_.template Get<float>();
        AscendC::LocalTensor<float> plain = compBuf_.template Get<float>();
        AscendC::Duplicate(plain, 0.0f, t_.tileLength);
        ForEachColumnTile(t_, firstChannel_ + done, count,
                          [&](const Tile& tile) ACTS_AICORE_LAMBDA { Step(tile, 0.0f, &plain); });
        PlainFoldRows(plain, PitchOf(count, sizeof(T)), count);
        AscendC::LocalTensor<float> difference = valuesBuf_.template Get<float>();
        AscendC::LocalTensor<uint8_t> finite = maskBuf_.template Get<uint8_t>();
        AscendC::Sub(difference, acc, acc, count);
        AscendC::CompareScalar(finite, difference, 0.0f, AscendC::CMPMODE::EQ, RepeatLanes(count));
        AscendC::Select(acc, finite, acc, plain, AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, count);
    }

    // Row 0 of `plain` += its other rows (those the tiles reached), over the first `width` lanes, plainly.
    __aicore__ inline void PlainFoldRows(const AscendC::LocalTensor<float>& plain, uint32_t pitch, uint32_t width) {
        uint64_t reached = t_.batch < t_.rowsPerTile ? t_.batch : t_.rowsPerTile;
        for (uint32_t k = 1; k < reached; ++k) AscendC::Add(plain, plain, plain[k * pitch], width);
    }

    // Per-lane compensated sums (op_kernel/common/compensated_sum.h) in accBuf_ and compBuf_; valuesBuf_ (free
    // by then) is the scratch of a tile's step.
    __aicore__ inline void ZeroSums() {
        AscendC::Duplicate(accBuf_.template Get<float>(), 0.0f, t_.tileLength);
        AscendC::Duplicate(compBuf_.template Get<float>(), 0.0f, t_.tileLength);
    }

    __aicore__ inline void CompensatedAdd(const AscendC::LocalTensor<float>& term, uint32_t count) {
        compensated_sum::Add(accBuf_.template Get<float>(), compBuf_.template Get<float>(), term,
                             valuesBuf_.template Get<float>(), count);
    }

    // Row 0 of the sums += their other rows (those the tiles reached), over the first `width` lanes.
    __aicore__ inline void FoldRows(uint32_t pitch, uint32_t width) {
        uint64_t reached = t_.batch < t_.rowsPerTile ? t_.batch : t_.rowsPerTile;
        for (uint32_t k = 1; k < reached; ++k) {
            compensated_sum::FoldInto0(accBuf_.template Get<float>(), compBuf_.template Get<float>(), k * pitch, width);
        }
    }

    // The sum of row 0's first `lanes` sums.
    __aicore__ inline float TotalOfLanes(uint32_t lanes) {
        return compensated_sum::Total(accBuf_.template Get<float>(), compBuf_.template Get<float>(), lanes);
    }

    // grad_bias of local channels [done, done + count), from floats, rounded once to T.
    __aicore__ inline void StoreGradBias(uint64_t done, uint32_t count, const AscendC::LocalTensor<float>& sums) {
        AscendC::LocalTensor<T> staged = gradBiasBuf_.template Get<T>();
        AscendC::PipeBarrier<PIPE_ALL>();
        FromFloat(staged, sums, count);
        AscendC::PipeBarrier<PIPE_ALL>();
        AscendC::DataCopyPad(gradBiasGm_[done], staged, OneRow(count, sizeof(T)));
    }

    // pre-activation or forward input + the biases of the tile (a scalar in Rows, the bias tile in Columns).
    __aicore__ inline void AddBias(const AscendC::LocalTensor<float>& values, uint32_t span, float bias) {
        if (!readsBias_) return;
        if (columns_) AscendC::Add(values, values, biasFloatBuf_.template Get<float>(), span);
        else AscendC::Adds(values, values, bias, span);
    }

    // dst[i] = bit i of mask ? value : src[i] (dst may be src), through the constant tile.
    __aicore__ inline void SelectConstant(const AscendC::LocalTensor<float>& dst, float value,
                                          const AscendC::LocalTensor<float>& src, uint32_t span) {
        AscendC::LocalTensor<float> constant = constantBuf_.template Get<float>();
        AscendC::Duplicate(constant, value, span);
        AscendC::Select(dst, maskBuf_.template Get<uint8_t>(), constant, src, AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE,
                        span);
    }

    // dst = (t < 0 ? +0.0 : t) * scale (relu: -0.0 stays, as torch.relu's) or (t > 0 ? t : t * slope) * scale; dst may be t.
    __aicore__ inline void Activate(const AscendC::LocalTensor<float>& dst, const AscendC::LocalTensor<float>& t,
                                    uint32_t span) {
        if (relu_) {
            AscendC::CompareScalar(maskBuf_.template Get<uint8_t>(), t, 0.0f, AscendC::CMPMODE::LT, RepeatLanes(span));
            SelectConstant(dst, 0.0f, t, span);
        } else {
            AscendC::LeakyRelu(dst, t, t_.negativeSlope, span);
        }
        AscendC::Muls(dst, dst, t_.scale, span);
    }

    // values = torch.clamp(values, -clamp, clamp): a bound where values is beyond it (a NaN compares false: kept).
    __aicore__ inline void Clamp(const AscendC::LocalTensor<float>& values, uint32_t span) {
        AscendC::LocalTensor<uint8_t> beyond = maskBuf_.template Get<uint8_t>();
        AscendC::CompareScalar(beyond, values, t_.clamp, AscendC::CMPMODE::GT, RepeatLanes(span));
        SelectConstant(values, t_.clamp, values, span);
        AscendC::CompareScalar(beyond, values, -t_.clamp, AscendC::CMPMODE::LT, RepeatLanes(span));
        SelectConstant(values, -t_.clamp, values, span);
    }

    // grad = torch.clamp's gradient: grad where -clamp <= unclamped <= clamp, +0.0 elsewhere (NaN included).
    __aicore__ inline void ClampGradient(const AscendC::LocalTensor<float>& grad,
                                         const AscendC::LocalTensor<float>& unclamped, uint32_t span) {
        AscendC::LocalTensor<uint8_t> inside = maskBuf_.template Get<uint8_t>();
        AscendC::LocalTensor<float> zero = constantBuf_.template Get<float>();
        AscendC::Duplicate(zero, 0.0f, span);
        AscendC::CompareScalar(inside, unclamped, t_.clamp, AscendC::CMPMODE::LE, RepeatLanes(span));
        AscendC::Select(grad, inside, grad, zero, AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, span);
        AscendC::CompareScalar(inside, unclamped, -t_.clamp, AscendC::CMPMODE::GE, RepeatLanes(span));
        AscendC::Select(grad, inside, grad, zero, AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, span);
    }

    // One tile: the forward's y, or the backward's dx, stored and added to the compensated sums; with `plain`
    // (the backward's walk again of a sum that was not finite) dx added plainly into *plain and not stored.
    __aicore__ inline void Step(const Tile& tile, float bias, const AscendC::LocalTensor<float>* plain = nullptr) {
        const uint32_t span = tile.Span();
        AscendC::LocalTensor<float> values = valuesBuf_.template Get<float>();
        AscendC::LocalTensor<T> input = inputQueue_.template AllocTensor<T>();
        LoadTile(input, inputGm_, tile);
        inputQueue_.EnQue(input);
        if constexpr (kBackward) {
            AscendC::LocalTensor<T> saved = savedQueue_.template AllocTensor<T>();
            LoadTile(saved, savedGm_, tile);
            savedQueue_.EnQue(saved);
        }
        input = inputQueue_.template DeQue<T>();
        ToFloat(values, input, span);
        inputQueue_.FreeTensor(input);
        AscendC::LocalTensor<float> result = values;
        if constexpr (kBackward) {
            // pre from saved; values = dy, zeroed outside the clamp (u recomputed from pre), then g = values *
            // scale; result = act'(pre, g) (in preBuf_)
            AscendC::LocalTensor<T> saved = savedQueue_.template DeQue<T>();
            result = preBuf_.template Get<float>();
            ToFloat(result, saved, span);
            savedQueue_.FreeTensor(saved);
            AddBias(result, span, bias);
            if (clamps_) {
                AscendC::LocalTensor<float> unclamped = unclampedBuf_.template Get<float>();
                Activate(unclamped, result, span);
                ClampGradient(values, unclamped, span);
            }
            AscendC::Muls(values, values, t_.scale, span);
            AscendC::LocalTensor<uint8_t> mask = maskBuf_.template Get<uint8_t>();
            if (relu_) {  // pre <= 0 ? +0.0 : g
                AscendC::CompareScalar(mask, result, 0.0f, AscendC::CMPMODE::LE, RepeatLanes(span));
                SelectConstant(result, 0.0f, values, span);
            } else {  // pre > 0 ? g : g * slope
                AscendC::CompareScalar(mask, result, 0.0f, AscendC::CMPMODE::GT, RepeatLanes(span));
                AscendC::Muls(result, values, t_.negativeSlope, span);
                AscendC::Select(result, mask, values, result, AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, span);
            }
            if (plain != nullptr) {
                AscendC::Add(*plain, *plain, result, span);
                return;
            }
            CompensatedAdd(result, span);
        } else {
            AddBias(values, span, bias);
            Activate(values, values, span);
            if (clamps_) Clamp(values, span);
        }
        AscendC::LocalTensor<T> output = outputQueue_.template AllocTensor<T>();
        FromFloat(output, result, span);
        outputQueue_.EnQue(output);
        output = outputQueue_.template DeQue<T>();
        StoreTile(outputGm_, output, tile);
        outputQueue_.FreeTensor(output);
    }

    FusedBiasLeakyReluTiling t_;
    uint64_t firstChannel_ = 0, channelCount_ = 0;
    bool columns_ = false, readsBias_ = false, relu_ = false, clamps_ = false;
    AscendC::TPipe pipe_;
    AscendC::TQue<AscendC::QuePosition::VECIN, fused_bias_tiling::kBufferNum> inputQueue_, savedQueue_;
    AscendC::TQue<AscendC::QuePosition::VECOUT, fused_bias_tiling::kBufferNum> outputQueue_;
    AscendC::TBuf<AscendC::TPosition::VECCALC> valuesBuf_, preBuf_, accBuf_, compBuf_, maskBuf_, constantBuf_,
        unclampedBuf_, biasStageBuf_, biasFloatBuf_, sumsBuf_, gradBiasBuf_;
    AscendC::GlobalTensor<T> inputGm_, savedGm_, outputGm_, biasGm_, gradBiasGm_;
};

}  // namespace fused_bias_kernel

template <typename T>
using FusedBiasLeakyReluForward = fused_bias_kernel::FusedBiasLeakyReluKernel<T, false>;
template <typename T>
using FusedBiasLeakyReluBackward = fused_bias_kernel::FusedBiasLeakyReluKernel<T, true>;

}  // namespace ascend_acts
