// BatchNorm2d (training: batch statistics) + LeakyReLU forward, on the output of the convolution; with
// norm_groups = G > 0 GroupNorm (InstanceNorm for G = C) + LeakyReLU instead.
//
//   out = leaky_relu((x - mean) * invstd * gamma[c] + beta[c], slope),  mean/var over N, H, W per channel
//   (grouped: over the C/G channels of a group and H, W, per sample; gamma, beta still per channel)
//   (or, with tiling.relu, torch's relu: z < 0 ? +0 : z, so -0, NaN and +inf stay and -inf gives +0)
//
// Each core owns whole statistics groups (see op_host/batch_norm_leaky_relu/batch_norm_leaky_relu_tiling.h), so the
// reduction needs no cross-core step. Two passes over a unit (the values sharing one mean): (1) sums of x - shift and
// (x - shift)^2, with shift the mean of the unit's first tile (the shifted-data variance: no cancellation when |mean|
// >> std), pairwise within a tile and compensated across tiles so their error does not grow with the unit's size;
// (2) normalise, centred first ((x - mean) * gamma * invstd + beta; torch's uncentred form where gamma * invstd is 0
// or infinite: batch_norm_kernel::AffineCentre), + LeakyReLU and the single write of `out`. GM
// traffic: x read twice, out written once, O(C) floats of statistics (O(N * G) grouped). Half types are computed in
// float32 and rounded once (RINT).
//
// Row mode (the tiling's rowMode: BatchNorm of short planes, e.g. (N, F) after a Linear): the same two passes over a
// chunk of the core's channels at a time, each DMA moving the chunk's row segment for rowSamples samples; the sums
// per UB lane across the tiles (compensated), then folded over the rows and each channel's plane positions, and the
// per-channel values (shift, mean, scale, beta) spread over the lanes as rows (batch_norm_kernel::ChannelRows).
//
// Outputs besides `out`: save_mean, save_invstd (C floats, or N * G, n-major) and, when updateRunningStats,
// running_mean / running_var (unbiased variance; grouped only for G = C, from the mean over n of each instance's
// statistics, as torch's instance_norm): in-place outputs, the same GM as the inputs of those names (an aclnn "Ref"
// pair), read and then written by the channel's core.
#include "batch_norm_leaky_relu_common.h"

using namespace AscendC;

namespace ascend_acts {
namespace {

using batch_norm_kernel::ChannelStats;
using batch_norm_kernel::PlaneTile;
using batch_norm_kernel::RowChunk;
using batch_norm_kernel::RowTile;
using batch_norm_kernel::Unit;

// Per unit (BatchNorm: per channel; grouped: per group of the core for the current sample) or per channel (Gamma,
// Beta, the running statistics and, grouped, their sums over the samples).
enum class ForwardSlot : uint32_t {
    SumShifted,
    SumSquaresShifted,
    Shift,
    Gamma,
    Beta,
    RunningMean,
    RunningVar,  // grouped: the sum over samples of each instance's variance until the update
    Mean,
    Variance,
    InvStd,
    Scale,
    MeanSum,  // grouped: the sum over samples of each instance's mean
};
static_assert(static_cast<uint32_t>(ForwardSlot::MeanSum) < batch_norm_tiling::kStatsArrays, "stats buffer too small");

template <typename T>
class BatchNormLeakyReluForward {
public:
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR gamma, GM_ADDR beta, GM_ADDR runningMean, GM_ADDR runningVar,
                                GM_ADDR out, GM_ADDR saveMean, GM_ADDR saveInvStd, GM_ADDR runningMeanOut,
                                GM_ADDR runningVarOut, const BatchNormLeakyReluTiling& tiling) {
        tiling_ = tiling;
        BatchNormGroupRange(tiling_, GetBlockIdx(), firstGroup_, groupCount_);
        firstChannel_ = firstGroup_ * tiling_.channelsPerGroup;
        channelCount_ = groupCount_ * tiling_.channelsPerGroup;
        uint64_t total = uint64_t(tiling_.batch) * tiling_.channels * tiling_.planeSize;
        xGm_.SetGlobalBuffer((__gm__ T*)x, total);
        outGm_.SetGlobalBuffer((__gm__ T*)out, total);
        gammaGm_.SetGlobalBuffer((__gm__ float*)gamma + firstChannel_, channelCount_);
        betaGm_.SetGlobalBuffer((__gm__ float*)beta + firstChannel_, channelCount_);
        // grouped: row n of the (N, G) statistics at n * G + firstGroup_
        const uint64_t saved = tiling_.normGroups ? uint64_t(tiling_.batch) * tiling_.normGroups : tiling_.channels;
        saveMeanGm_.SetGlobalBuffer((__gm__ float*)saveMean, saved);
        saveInvStdGm_.SetGlobalBuffer((__gm__ float*)saveInvStd, saved);
        if (tiling_.updateRunningStats) {
            runningMeanGm_.SetGlobalBuffer((__gm__ float*)runningMean + firstChannel_, channelCount_);
            runningVarGm_.SetGlobalBuffer((__gm__ float*)runningVar + firstChannel_, channelCount_);
            runningMeanOutGm_.SetGlobalBuffer((__gm__ float*)runningMeanOut + firstChannel_, channelCount_);
            runningVarOutGm_.SetGlobalBuffer((__gm__ float*)runningVarOut + firstChannel_, channelCount_);
        }
        uint32_t tile = tiling_.tileLength;
        pipe_.InitBuffer(inQueue_, batch_norm_tiling::kBufferNum, tile * sizeof(T));
        pipe_.InitBuffer(outQueue_, batch_norm_tiling::kBufferNum, tile * sizeof(T));
        pipe_.InitBuffer(valuesBuf_, tile * sizeof(float));
        pipe_.InitBuffer(squaresBuf_, tile * sizeof(float));
        if (tiling_.rowMode) {  // the shift rows, the per-lane sums (op_host's RowUbBytes)
            pipe_.InitBuffer(reduceWorkBuf_, tile * sizeof(float));
            pipe_.InitBuffer(sumsBuf_, batch_norm_tiling::kRowSumArrays * tile * sizeof(float));
        } else {
            pipe_.InitBuffer(sumsBuf_, batch_norm_tiling::kSumArrays * batch_norm_tiling::kSumLanes * sizeof(float));
            pipe_.InitBuffer(reduceWorkBuf_, tiling_.reduceWorkLength * sizeof(float));
        }
        stats_.Init(pipe_, tiling_.statsLength);
    }

    __aicore__ inline void Process() {
        if (tiling_.normGroups != 0) {
            ProcessGrouped();
        } else if (tiling_.rowMode) {
            ProcessRows();
        } else {
            ProcessBatchNorm();
        }
    }

private:
    // One unit per channel of the core: all channels' sums, their statistics vectorised over the channels, then
    // each channel normalised.
    __aicore__ inline void ProcessBatchNorm() {
        for (uint32_t local = 0; local < channelCount_; ++local) AccumulateUnit(ChannelUnit(local), local);
        ChannelStatistics();
        for (uint32_t local = 0; local < channelCount_; ++local) NormalizeChannel(local);
    }

    // Row mode: the core's channels chunk by chunk, each chunk's sums over all samples, then the statistics, then
    // each chunk normalised.
    __aicore__ inline void ProcessRows() {
        batch_norm_kernel::ForEachRowChunk(
            tiling_, channelCount_, [&](const RowChunk& chunk) ACTS_AICORE_LAMBDA { AccumulateRowChunk(chunk); });
        ChannelStatistics();
        batch_norm_kernel::ForEachRowChunk(tiling_, channelCount_,
                                           [&](const RowChunk& chunk) ACTS_AICORE_LAMBDA { NormalizeRowChunk(chunk); });
    }

    // BatchNorm, once every channel's sums are in: mean, invstd, scale vectorised over the core's channels; the
    // saved and running statistics written.
    __aicore__ inline void ChannelStatistics() {
        const uint32_t n = channelCount_;
        batch_norm_kernel::CopyIn(stats_[ForwardSlot::Gamma], gammaGm_, n);
        batch_norm_kernel::CopyIn(stats_[ForwardSlot::Beta], betaGm_, n);
        PipeBarrier<PIPE_ALL>();
        LocalTensor<float> mean = stats_[ForwardSlot::Mean];
        LocalTensor<float> invStd = stats_[ForwardSlot::InvStd];
        MeanAndInvStd(n);
        // out = (x - mean) * scale + beta with scale = gamma * invstd: centred first, no cancellation of a large
        // x * scale against beta - mean * scale
        Mul(stats_[ForwardSlot::Scale], stats_[ForwardSlot::Gamma], invStd, n);
        PipeBarrier<PIPE_ALL>();
        batch_norm_kernel::CopyOut(saveMeanGm_[firstChannel_], mean, n);
        batch_norm_kernel::CopyOut(saveInvStdGm_[firstChannel_], invStd, n);
        if (tiling_.updateRunningStats) UpdateRunningStats(mean, stats_[ForwardSlot::Variance]);
        // pass 2's centre (into the Shift slot, free once the statistics are in) and beta (AffineCentre)
        PipeBarrier<PIPE_ALL>();
        for (uint32_t c = 0; c < n; ++c) {
            float beta = stats_[ForwardSlot::Beta].GetValue(c);
            float centre = batch_norm_kernel::AffineCentre(mean.GetValue(c), stats_[ForwardSlot::Scale].GetValue(c),
                                                           beta);
            stats_[ForwardSlot::Shift].SetValue(c, centre);
            stats_[ForwardSlot::Beta].SetValue(c, beta);
        }
    }

    // Row mode pass 1: the chunk's sums of x - shift and (x - shift)^2 per lane over the samples, folded over the
    // rows, then each channel's lanes summed (RowSums); the shift is each channel's mean over sample 0.
    __aicore__ inline void AccumulateRowChunk(const RowChunk& chunk) {
        LocalTensor<float> values = valuesBuf_.Get<float>();
        LocalTensor<float> squares = squaresBuf_.Get<float>();
        LocalTensor<float> shift = reduceWorkBuf_.Get<float>();
        batch_norm_kernel::RowSums sums(sumsBuf_.Get<float>(), tiling_.rowLanes);
        const uint32_t samples = tiling_.rowSamples;
        sums.Clear(samples * chunk.stride);
        bool first = true;
        batch_norm_kernel::ForEachRowTile(
            tiling_, firstChannel_ + chunk.first, [&](const RowTile& tile) ACTS_AICORE_LAMBDA {
                LoadRowsAsFloat(values, chunk, tile);
                if (first) {
                    RowShifts(values, chunk);
                    batch_norm_kernel::ChannelRows(tiling_, shift, stats_[ForwardSlot::Shift], chunk, samples);
                    first = false;
                }
                const uint32_t count = tile.rows * chunk.stride;
                Sub(values, values, shift, count);
                Mul(squares, values, values, count);
                sums.Add(values, squares, count);
            });
        sums.FoldRows(samples, chunk.stride);
        PipeBarrier<PIPE_ALL>();
        sums.StoreTotals(chunk.channels, static_cast<uint32_t>(tiling_.planeSize), stats_[ForwardSlot::SumShifted],
                         stats_[ForwardSlot::SumSquaresShifted], chunk.first);
    }

    // Each channel's shift: the mean of its plane in sample 0 (row 0 of `values`); not finite: 0 (FirstTileMean).
    __aicore__ inline void RowShifts(const LocalTensor<float>& values, const RowChunk& chunk) {
        PipeBarrier<PIPE_ALL>();
        const uint32_t plane = static_cast<uint32_t>(tiling_.planeSize);
        for (uint32_t c = 0; c < chunk.channels; ++c) {
            float sum = values.GetValue(c * plane);
            for (uint32_t p = 1; p < plane; ++p) sum += values.GetValue(c * plane + p);
            float mean = sum / static_cast<float>(plane);
            stats_[ForwardSlot::Shift].SetValue(chunk.first + c, compensated_sum::IsFinite(mean) ? mean : 0.0f);
        }
    }

    // Row mode pass 2: out = leaky_relu((x - centre) * scale + beta) (or relu) with per-lane rows of the channels'
    // centre, scale and beta (ChannelStatistics; in the sums' idle arrays), rounded once to T.
    __aicore__ inline void NormalizeRowChunk(const RowChunk& chunk) {
        PipeBarrier<PIPE_ALL>();
        batch_norm_kernel::RowSums sums(sumsBuf_.Get<float>(), tiling_.rowLanes);
        LocalTensor<float> centre = sums.Array(0), scale = sums.Array(1), beta = sums.Array(2);
        const uint32_t samples = tiling_.rowSamples;
        batch_norm_kernel::ChannelRows(tiling_, centre, stats_[ForwardSlot::Shift], chunk, samples);
        batch_norm_kernel::ChannelRows(tiling_, scale, stats_[ForwardSlot::Scale], chunk, samples);
        batch_norm_kernel::ChannelRows(tiling_, beta, stats_[ForwardSlot::Beta], chunk, samples);
        LocalTensor<float> values = valuesBuf_.Get<float>();
        batch_norm_kernel::ForEachRowTile(
            tiling_, firstChannel_ + chunk.first, [&](const RowTile& tile) ACTS_AICORE_LAMBDA {
                LoadRowsAsFloat(values, chunk, tile);
                const uint32_t count = tile.rows * chunk.stride;
                Sub(values, values, centre, count);
                Mul(values, values, scale, count);
                Add(values, values, beta, count);
                Activate(values, count, sums.Array(3).ReinterpretCast<uint8_t>());
                LocalTensor<T> staged = outQueue_.template AllocTensor<T>();
                FromFloat(staged, values, count);
                outQueue_.EnQue(staged);
                staged = outQueue_.template DeQue<T>();
                DataCopyPad(outGm_[tile.offset], staged,
                            batch_norm_kernel::RowCopy<T>(tiling_, chunk, tile.rows, true));
                outQueue_.FreeTensor(staged);
            });
    }

    __aicore__ inline void LoadRowsAsFloat(const LocalTensor<float>& values, const RowChunk& chunk,
                                           const RowTile& tile) {
        LocalTensor<T> staged = inQueue_.template AllocTensor<T>();
        DataCopyPad(staged, xGm_[tile.offset], batch_norm_kernel::RowCopy<T>(tiling_, chunk, tile.rows, false),
                    DataCopyPadExtParams<T>{false, 0, 0, T()});
        inQueue_.EnQue(staged);
        staged = inQueue_.template DeQue<T>();
        ToFloat(values, staged, tile.rows * chunk.stride);
        inQueue_.FreeTensor(staged);
    }

    // Per sample n: the core's groups of n (its units), their statistics vectorised over the groups and written as
    // one contiguous piece of row n, then each unit normalised with its channels' gamma and beta. The instance
    // norm's running statistics add up each sample's statistics in a fixed order (n ascending).
    __aicore__ inline void ProcessGrouped() {
        const uint32_t groups = groupCount_;
        batch_norm_kernel::CopyIn(stats_[ForwardSlot::Gamma], gammaGm_, channelCount_);
        batch_norm_kernel::CopyIn(stats_[ForwardSlot::Beta], betaGm_, channelCount_);
        if (tiling_.updateRunningStats) {
            Duplicate(stats_[ForwardSlot::MeanSum], 0.0f, groups);
            Duplicate(stats_[ForwardSlot::RunningVar], 0.0f, groups);
        }
        for (uint32_t n = 0; n < tiling_.batch; ++n) {
            for (uint32_t local = 0; local < groups; ++local) AccumulateUnit(GroupUnit(n, local), local);
            PipeBarrier<PIPE_ALL>();
            MeanAndInvStd(groups);
            PipeBarrier<PIPE_ALL>();
            const uint64_t row = uint64_t(n) * tiling_.normGroups + firstGroup_;
            batch_norm_kernel::CopyOut(saveMeanGm_[row], stats_[ForwardSlot::Mean], groups);
            batch_norm_kernel::CopyOut(saveInvStdGm_[row], stats_[ForwardSlot::InvStd], groups);
            if (tiling_.updateRunningStats) {
                Add(stats_[ForwardSlot::MeanSum], stats_[ForwardSlot::MeanSum], stats_[ForwardSlot::Mean], groups);
                Add(stats_[ForwardSlot::RunningVar], stats_[ForwardSlot::RunningVar], stats_[ForwardSlot::Variance],
                    groups);
            }
            for (uint32_t local = 0; local < groups; ++local) NormalizeGroupUnit(GroupUnit(n, local), local);
        }
        if (tiling_.updateRunningStats) UpdateInstanceRunningStats();
    }

    __aicore__ inline Unit ChannelUnit(uint32_t local) const {
        return batch_norm_kernel::ChannelUnit(tiling_, firstChannel_ + local, local);
    }
    __aicore__ inline Unit GroupUnit(uint32_t n, uint32_t local) const {
        return batch_norm_kernel::GroupUnit(tiling_, n, firstGroup_ + local, local);
    }

    // Pass 1: the unit's two shifted sums, compensated, into slot position `slot`. A sum that is not finite (an inf
    // or NaN in the unit, which the compensation turns into NaN) is taken again plainly: torch's inf or NaN.
    __aicore__ inline void AccumulateUnit(const Unit& unit, uint32_t slot) {
        float shift = 0.0f, total = 0.0f, totalSquares = 0.0f;
        SumUnit<true>(unit, shift, total, totalSquares);
        if (!compensated_sum::IsFinite(total) || !compensated_sum::IsFinite(totalSquares)) {
            SumUnit<false>(unit, shift, total, totalSquares);
        }
        stats_[ForwardSlot::SumShifted].SetValue(slot, total);
        stats_[ForwardSlot::SumSquaresShifted].SetValue(slot, totalSquares);
        stats_[ForwardSlot::Shift].SetValue(slot, shift);
    }

    // Sums of x - shift and (x - shift)^2 over the unit (batch_norm_kernel::ChannelSums).
    template <bool kCompensated>
    __aicore__ inline void SumUnit(const Unit& unit, float& shift, float& total, float& totalSquares) {
        LocalTensor<float> values = valuesBuf_.Get<float>();
        LocalTensor<float> squares = squaresBuf_.Get<float>();
        batch_norm_kernel::ChannelSums<kCompensated> sums(sumsBuf_.Get<float>());
        bool first = true;
        batch_norm_kernel::ForEachTile<T>(tiling_, unit, [&](const PlaneTile& tile) ACTS_AICORE_LAMBDA {
            LoadAsFloat(values, tile);
            if (first) {
                shift = FirstTileMean(values, squares, tile.count);
                first = false;
            }
            Adds(values, values, -shift, tile.count);
            Mul(squares, values, values, tile.count);
            sums.Add(values, squares, tile.count);
        });
        sums.Totals(values, reduceWorkBuf_.Get<float>(), total, totalSquares);
    }

    // Mean, (biased) variance and invstd of the first `n` units, vectorised over them; Scale is scratch.
    __aicore__ inline void MeanAndInvStd(uint32_t n) {
        float inverseCount = tiling_.inverseCount;
        LocalTensor<float> mean = stats_[ForwardSlot::Mean];
        LocalTensor<float> variance = stats_[ForwardSlot::Variance];
        LocalTensor<float> invStd = stats_[ForwardSlot::InvStd];
        LocalTensor<float> scratch = stats_[ForwardSlot::Scale];
        // var = E[(x-shift)^2] - E[x-shift]^2, mean = E[x-shift] + shift
        Muls(mean, stats_[ForwardSlot::SumShifted], inverseCount, n);
        Muls(variance, stats_[ForwardSlot::SumSquaresShifted], inverseCount, n);
        Mul(scratch, mean, mean, n);
        Sub(variance, variance, scratch, n);
        // var < 0 (rounding) -> 0, as (var + |var|) / 2: exact for var >= 0, and a NaN or inf in the batch stays
        // NaN as in torch (a Maxs(var, 0) may drop NaN: its result for NaN is unspecified)
        Muls(variance, variance, 0.5f, n);
        Abs(scratch, variance, n);
        Add(variance, variance, scratch, n);
        Add(mean, mean, stats_[ForwardSlot::Shift], n);
        // invstd = 1 / sqrt(var + eps)
        Adds(scratch, variance, tiling_.eps, n);
        Sqrt(scratch, scratch, n);
        Duplicate(invStd, 1.0f, n);
        Div(invStd, invStd, scratch, n);
    }

    // running = (1 - momentum) * running + momentum * batch value; the variance unbiased (n / (n - 1)).
    __aicore__ inline void UpdateRunningStats(const LocalTensor<float>& mean, const LocalTensor<float>& variance) {
        const uint32_t n = channelCount_;
        LocalTensor<float> runningMean = stats_[ForwardSlot::RunningMean];
        LocalTensor<float> runningVar = stats_[ForwardSlot::RunningVar];
        batch_norm_kernel::CopyIn(runningMean, runningMeanGm_, n);
        batch_norm_kernel::CopyIn(runningVar, runningVarGm_, n);
        PipeBarrier<PIPE_ALL>();
        LocalTensor<float> scratch = stats_[ForwardSlot::SumShifted];  // no longer needed
        float keep = 1.0f - tiling_.momentum;
        Muls(runningMean, runningMean, keep, n);
        Muls(scratch, mean, tiling_.momentum, n);
        Add(runningMean, runningMean, scratch, n);
        Muls(runningVar, runningVar, keep, n);
        Muls(scratch, variance, tiling_.momentum * tiling_.unbiasFactor, n);
        Add(runningVar, runningVar, scratch, n);
        PipeBarrier<PIPE_ALL>();
        batch_norm_kernel::CopyOut(runningMeanOutGm_, runningMean, n);
        batch_norm_kernel::CopyOut(runningVarOutGm_, runningVar, n);
    }

    // Instance norm (G = C: group = channel): running = (1 - momentum) * running + momentum * (the mean over the N
    // instances of each one's mean, and of its unbiased variance), as torch's instance_norm.
    __aicore__ inline void UpdateInstanceRunningStats() {
        const uint32_t n = channelCount_;
        LocalTensor<float> runningMean = stats_[ForwardSlot::SumShifted];  // the passes are over: free
        LocalTensor<float> runningVar = stats_[ForwardSlot::SumSquaresShifted];
        LocalTensor<float> scratch = stats_[ForwardSlot::Shift];
        batch_norm_kernel::CopyIn(runningMean, runningMeanGm_, n);
        batch_norm_kernel::CopyIn(runningVar, runningVarGm_, n);
        PipeBarrier<PIPE_ALL>();
        float keep = 1.0f - tiling_.momentum;
        float meanWeight = tiling_.momentum * tiling_.inverseBatch;
        Muls(runningMean, runningMean, keep, n);
        Muls(scratch, stats_[ForwardSlot::MeanSum], meanWeight, n);
        Add(runningMean, runningMean, scratch, n);
        Muls(runningVar, runningVar, keep, n);
        Muls(scratch, stats_[ForwardSlot::RunningVar], meanWeight * tiling_.unbiasFactor, n);
        Add(runningVar, runningVar, scratch, n);
        PipeBarrier<PIPE_ALL>();
        batch_norm_kernel::CopyOut(runningMeanOutGm_, runningMean, n);
        batch_norm_kernel::CopyOut(runningVarOutGm_, runningVar, n);
    }

    // Pass 2: out = leaky_relu((x - centre) * scale + beta) (or relu), rounded once to T (centre and beta:
    // ChannelStatistics).
    __aicore__ inline void NormalizeChannel(uint32_t local) {
        PipeBarrier<PIPE_ALL>();
        float centre = stats_[ForwardSlot::Shift].GetValue(local);
        float scale = stats_[ForwardSlot::Scale].GetValue(local);
        float beta = stats_[ForwardSlot::Beta].GetValue(local);
        LocalTensor<float> values = valuesBuf_.Get<float>();
        batch_norm_kernel::ForEachTile<T>(tiling_, ChannelUnit(local), [&](const PlaneTile& tile) ACTS_AICORE_LAMBDA {
            LoadAsFloat(values, tile);
            Adds(values, values, -centre, tile.count);
            Muls(values, values, scale, tile.count);
            Adds(values, values, beta, tile.count);
            Activate(values, tile.count);
            batch_norm_kernel::StoreAsT(outQueue_, outGm_, values, tile);
        });
    }

    // Pass 2 of a grouped unit (core-local group `local`): the same per channel piece, scale = gamma[c] * invstd,
    // centred per piece (batch_norm_kernel::AffineCentre).
    __aicore__ inline void NormalizeGroupUnit(const Unit& unit, uint32_t local) {
        PipeBarrier<PIPE_ALL>();
        float mean = stats_[ForwardSlot::Mean].GetValue(local);
        float invStd = stats_[ForwardSlot::InvStd].GetValue(local);
        LocalTensor<float> gamma = stats_[ForwardSlot::Gamma];
        LocalTensor<float> beta = stats_[ForwardSlot::Beta];
        LocalTensor<float> values = valuesBuf_.Get<float>();
        batch_norm_kernel::ForEachTile<T>(tiling_, unit, [&](const PlaneTile& tile) ACTS_AICORE_LAMBDA {
            LoadAsFloat(values, tile);
            batch_norm_kernel::ForEachChannelPiece(
                tiling_, unit, tile, [&](uint32_t offset, uint32_t count, uint32_t channel) ACTS_AICORE_LAMBDA {
                    LocalTensor<float> piece = values[offset];
                    float scale = gamma.GetValue(channel) * invStd;
                    float shift = beta.GetValue(channel);
                    float centre = batch_norm_kernel::AffineCentre(mean, scale, shift);
                    Adds(piece, piece, -centre, count);
                    Muls(piece, piece, scale, count);
                    Adds(piece, piece, shift, count);
                });
            Activate(values, tile.count);
            batch_norm_kernel::StoreAsT(outQueue_, outGm_, values, tile);
        });
    }

    // ReLU as torch's (z < 0 ? +0 : z): LeakyReLU with slope 0 would give -0 for a negative z and NaN for -inf,
    // Maxs's NaN result is unspecified; a compare and Select decide every value. The zeros reuse the squares
    // buffer and the mask the sums buffer, both idle in pass 2.
    // `negative`: a mask of count / 8 bytes (the plane walk's sums buffer by default).
    __aicore__ inline void Activate(const LocalTensor<float>& values, uint32_t count) {
        static_assert(batch_norm_tiling::kMaxTileLength / 8 <=
                          batch_norm_tiling::kSumArrays * batch_norm_tiling::kSumLanes * sizeof(float),
                      "the ReLU mask must fit the sums buffer");
        Activate(values, count, sumsBuf_.Get<uint8_t>());
    }
    __aicore__ inline void Activate(const LocalTensor<float>& values, uint32_t count,
                                    const LocalTensor<uint8_t>& negative) {
        if (!tiling_.relu) {
            LeakyRelu(values, values, tiling_.negativeSlope, count);
            return;
        }
        LocalTensor<float> zeros = squaresBuf_.Get<float>();
        // CompareScalar works on whole 256-byte repeats; the tile buffers are multiples of one
        uint32_t lanes = (count + batch_norm_tiling::kFloatRepeat - 1) / batch_norm_tiling::kFloatRepeat *
                         batch_norm_tiling::kFloatRepeat;
        CompareScalar(negative, values, 0.0f, CMPMODE::LT, lanes);
        Duplicate(zeros, 0.0f, count);
        Select(values, negative, zeros, values, SELMODE::VSEL_TENSOR_TENSOR_MODE, count);
    }

    // The shift: the mean of the channel's first tile (any value works, one near the channel's mean keeps
    // E[(x-shift)^2] - E[x-shift]^2 from cancelling). `scratch`: a tile of floats.
    __aicore__ inline float FirstTileMean(const LocalTensor<float>& values, const LocalTensor<float>& scratch,
                                          uint32_t count) {
        float mean = batch_norm_kernel::SumToScalar(scratch, values, reduceWorkBuf_.Get<float>(), count) /
                     static_cast<float>(count);
        // an inf or NaN shift would turn every x - shift into NaN (torch: an inf in the batch gives mean inf, not
        // NaN); a mean that overflowed is no use either
        return compensated_sum::IsFinite(mean) ? mean : 0.0f;
    }

    __aicore__ inline void LoadAsFloat(const LocalTensor<float>& values, const PlaneTile& tile) {
        LocalTensor<T> staged = inQueue_.template AllocTensor<T>();
        batch_norm_kernel::CopyTileIn(staged, xGm_, tile);
        inQueue_.EnQue(staged);
        staged = inQueue_.template DeQue<T>();
        ToFloat(values, staged, tile.count);
        inQueue_.FreeTensor(staged);
    }

    BatchNormLeakyReluTiling tiling_;
    uint32_t firstGroup_ = 0, groupCount_ = 0, firstChannel_ = 0, channelCount_ = 0;
    TPipe pipe_;
    TQue<QuePosition::VECIN, batch_norm_tiling::kBufferNum> inQueue_;
    TQue<QuePosition::VECOUT, batch_norm_tiling::kBufferNum> outQueue_;
    TBuf<TPosition::VECCALC> valuesBuf_, squaresBuf_, sumsBuf_, reduceWorkBuf_;
    ChannelStats<ForwardSlot> stats_;
    GlobalTensor<T> xGm_, outGm_;
    GlobalTensor<float> gammaGm_, betaGm_, runningMeanGm_, runningVarGm_, saveMeanGm_, saveInvStdGm_, runningMeanOutGm_,
        runningVarOutGm_;
};

}  // namespace
}  // namespace ascend_acts

extern "C" __global__ __aicore__ void acts_batch_norm_leaky_relu(GM_ADDR x, GM_ADDR weight, GM_ADDR bias,
                                                                 GM_ADDR runningMean, GM_ADDR runningVar, GM_ADDR y,
                                                                 GM_ADDR saveMean, GM_ADDR saveInvstd,
                                                                 GM_ADDR runningMeanOut, GM_ADDR runningVarOut,
                                                                 GM_ADDR workspace, GM_ADDR tiling) {
    ascend_acts::BatchNormLeakyReluTiling t;
    ascend_acts::ReadTiling(t, tiling);
    ascend_acts::RunForDtypeKey<ascend_acts::BatchNormLeakyReluForward>(
        x, weight, bias, runningMean, runningVar, y, saveMean, saveInvstd, runningMeanOut, runningVarOut, t);
}
