// BatchNorm2d (training) + LeakyReLU backward, BatchNorm or (norm_groups = G > 0) GroupNorm statistics, from either
// of what the forward may keep:
// - the post-activation output a (saved_is_result, InPlace-ABN), so the convolution output need not be kept:
//     z     = a > 0 ? a : a / slope          (slope > 0: LeakyReLU is invertible; z is the BN output)
//     dz    = a > 0 ? dy : dy * slope
//     x_hat = (z - beta) / gamma             (gamma != 0)
// - the convolution output x and save_mean (any slope, or torch's relu):
//     x_hat = (x - mean) * invstd,  z = (x - mean) * (gamma * invstd) + beta   (the forward's operations; where
//     gamma * invstd is 0 or infinite, torch's x * scale + (beta - mean * scale) as the forward: AffineCentre)
//     dz    = z > 0 ? dy : dy * slope        (relu: z <= 0 ? 0 : dy, so a NaN z passes dy as torch's)
// then, per unit u (the values sharing one mean: a channel, or a sample's group of C/G channels; M values):
//   grad_beta[c] = sum dz,  grad_gamma[c] = sum dz * x_hat          (over n and the plane, per channel c)
//   grad_x = invstd * (gamma * dz - S1 / M - x_hat * S2 / M),  S1 = sum_u gamma * dz, S2 = sum_u gamma * dz * x_hat
//          = A * dz + B * centered + C,  centered = z - beta (from the output) or x_hat (from x)
//
// BatchNorm (a unit is a channel): A = gamma * invstd, C = -A * grad_beta / M, B = -invstd * grad_gamma / M (from the
// output) or -A * grad_gamma / M (from x), vectorised over the core's channels. Grouped: B = -invstd * S2 / (M *
// gamma) or -invstd * S2 / M, C = -invstd * S1 / M, per (unit, channel) on the scalar unit; each plane's sums (pairwise
// in UB down to 64 lanes, then compensated on the scalar unit) are added compensated into the unit's S1, S2 and the channel's two sums.
//
// Whole statistics groups per core (no cross-core reduction, every sum in a fixed order); two passes over dy and the
// saved tensor: (1) the sums (pairwise within a tile, compensated across tiles: their error does not grow with the
// count), (2) grad_x, written once. Half types are computed in float32 and rounded once (RINT).
//
// Row mode (BatchNorm of short planes; see the forward): the same passes by chunks of channels and tiles of
// rowSamples samples, the sums per lane then folded, gamma, beta, mean, invstd and A, B, C spread over the lanes.
#include "batch_norm_leaky_relu_common.h"

using namespace AscendC;

namespace ascend_acts {
namespace {

using batch_norm_kernel::ChannelStats;
using batch_norm_kernel::PlaneTile;
using batch_norm_kernel::RowChunk;
using batch_norm_kernel::RowTile;
using batch_norm_kernel::ScalarSum;
using batch_norm_kernel::Unit;

// Per channel, but InvStd and Mean: per unit (BatchNorm: the channel's; grouped: the core's groups of one sample).
// Grouped, the coefficient slots hold the corrections of the two per-channel compensated sums instead.
enum class BackwardSlot : uint32_t {
    Gamma,
    Beta,
    InvStd,
    GradBeta,
    SumGradTimesCentered,
    GradGamma,
    CoefA,  // grouped: GradBeta's correction
    CoefB,  // grouped: SumGradTimesCentered's correction
    CoefC,
    Scale,  // row mode: gamma * invstd, the forward's scale
    Mean,
};
static_assert(static_cast<uint32_t>(BackwardSlot::Mean) < batch_norm_tiling::kStatsArrays, "stats buffer too small");

template <typename T>
class BatchNormLeakyReluBackward {
public:
    __aicore__ inline void Init(GM_ADDR gradOut, GM_ADDR saved, GM_ADDR gamma, GM_ADDR beta, GM_ADDR mean,
                                GM_ADDR invStd, GM_ADDR gradInput, GM_ADDR gradGamma, GM_ADDR gradBeta,
                                const BatchNormLeakyReluTiling& tiling) {
        tiling_ = tiling;
        BatchNormGroupRange(tiling_, GetBlockIdx(), firstGroup_, groupCount_);
        firstChannel_ = firstGroup_ * tiling_.channelsPerGroup;
        channelCount_ = groupCount_ * tiling_.channelsPerGroup;
        uint64_t total = uint64_t(tiling_.batch) * tiling_.channels * tiling_.planeSize;
        gradOutGm_.SetGlobalBuffer((__gm__ T*)gradOut, total);
        savedGm_.SetGlobalBuffer((__gm__ T*)saved, total);
        gradInputGm_.SetGlobalBuffer((__gm__ T*)gradInput, total);
        gammaGm_.SetGlobalBuffer((__gm__ float*)gamma + firstChannel_, channelCount_);
        betaGm_.SetGlobalBuffer((__gm__ float*)beta + firstChannel_, channelCount_);
        // grouped: row n of the (N, G) statistics at n * G + firstGroup_
        const uint64_t statistics = tiling_.normGroups ? uint64_t(tiling_.batch) * tiling_.normGroups
                                                       : tiling_.channels;
        invStdGm_.SetGlobalBuffer((__gm__ float*)invStd, statistics);
        if (!tiling_.savedIsResult) meanGm_.SetGlobalBuffer((__gm__ float*)mean, statistics);
        gradGammaGm_.SetGlobalBuffer((__gm__ float*)gradGamma + firstChannel_, channelCount_);
        gradBetaGm_.SetGlobalBuffer((__gm__ float*)gradBeta + firstChannel_, channelCount_);
        uint32_t tile = tiling_.tileLength;
        pipe_.InitBuffer(gradOutQueue_, batch_norm_tiling::kBufferNum, tile * sizeof(T));
        pipe_.InitBuffer(savedQueue_, batch_norm_tiling::kBufferNum, tile * sizeof(T));
        pipe_.InitBuffer(gradInputQueue_, batch_norm_tiling::kBufferNum, tile * sizeof(T));
        pipe_.InitBuffer(gradBuf_, tile * sizeof(float));
        pipe_.InitBuffer(centeredBuf_, tile * sizeof(float));
        pipe_.InitBuffer(gradPreActivationBuf_, tile * sizeof(float));
        pipe_.InitBuffer(productBuf_, tile * sizeof(float));
        if (tiling_.rowMode) {  // the per-lane sums, four rows of channel values (op_host's RowUbBytes)
            pipe_.InitBuffer(sumsBuf_, batch_norm_tiling::kRowSumArrays * tile * sizeof(float));
            pipe_.InitBuffer(reduceWorkBuf_, kLoadRows * tile * sizeof(float));
        } else {
            pipe_.InitBuffer(sumsBuf_, batch_norm_tiling::kSumArrays * batch_norm_tiling::kSumLanes * sizeof(float));
            pipe_.InitBuffer(reduceWorkBuf_, tiling_.reduceWorkLength * sizeof(float));
        }
        stats_.Init(pipe_, tiling_.statsLength);
    }

    __aicore__ inline void Process() {
        batch_norm_kernel::CopyIn(stats_[BackwardSlot::Gamma], gammaGm_, channelCount_);
        batch_norm_kernel::CopyIn(stats_[BackwardSlot::Beta], betaGm_, channelCount_);
        if (tiling_.normGroups != 0) {
            ProcessGrouped();
        } else if (tiling_.rowMode) {
            ProcessRows();
        } else {
            ProcessBatchNorm();
        }
    }

private:
    // Row mode: per-lane rows of the channels' mean, invstd, gamma, beta (LoadRowTile's), in reduceWorkBuf_.
    static constexpr uint32_t kLoadRows = 4;

    __aicore__ inline void LoadChannelStatistics() {
        const uint32_t n = channelCount_;
        batch_norm_kernel::CopyIn(stats_[BackwardSlot::InvStd], invStdGm_[firstChannel_], n);
        if (!tiling_.savedIsResult) batch_norm_kernel::CopyIn(stats_[BackwardSlot::Mean], meanGm_[firstChannel_], n);
    }

    __aicore__ inline void ProcessBatchNorm() {
        const uint32_t n = channelCount_;
        LoadChannelStatistics();
        for (uint32_t local = 0; local < n; ++local) AccumulateChannel(local);
        ComputeChannelCoefficients();
        for (uint32_t local = 0; local < n; ++local) GradInputUnit(ChannelUnit(local), local);
    }

    // Row mode: the core's channels chunk by chunk, each chunk's sums over all samples, the coefficients, then each
    // chunk's grad_x.
    __aicore__ inline void ProcessRows() {
        LoadChannelStatistics();
        if (!tiling_.savedIsResult) {
            PipeBarrier<PIPE_ALL>();
            Mul(stats_[BackwardSlot::Scale], stats_[BackwardSlot::Gamma], stats_[BackwardSlot::InvStd], channelCount_);
        }
        batch_norm_kernel::ForEachRowChunk(
            tiling_, channelCount_, [&](const RowChunk& chunk) ACTS_AICORE_LAMBDA { AccumulateRowChunk(chunk); });
        ComputeChannelCoefficients();
        batch_norm_kernel::ForEachRowChunk(tiling_, channelCount_,
                                           [&](const RowChunk& chunk) ACTS_AICORE_LAMBDA { GradInputRowChunk(chunk); });
    }

    __aicore__ inline LocalTensor<float> LoadRow(uint32_t index) {
        return reduceWorkBuf_.Get<float>()[index * tiling_.rowLanes];
    }

    // The rows LoadRowTile reads: beta (from the output); mean, invstd, gamma * invstd, beta (from x).
    __aicore__ inline void LoadRows(const RowChunk& chunk) {
        PipeBarrier<PIPE_ALL>();
        const uint32_t samples = tiling_.rowSamples;
        batch_norm_kernel::ChannelRows(tiling_, LoadRow(3), stats_[BackwardSlot::Beta], chunk, samples);
        if (tiling_.savedIsResult) return;
        batch_norm_kernel::ChannelRows(tiling_, LoadRow(0), stats_[BackwardSlot::Mean], chunk, samples);
        batch_norm_kernel::ChannelRows(tiling_, LoadRow(1), stats_[BackwardSlot::InvStd], chunk, samples);
        batch_norm_kernel::ChannelRows(tiling_, LoadRow(2), stats_[BackwardSlot::Scale], chunk, samples);
    }

    // Row mode pass 1: the chunk's sums of dz and dz * centered per lane over the samples, folded over the rows,
    // then each channel's lanes summed (RowSums).
    __aicore__ inline void AccumulateRowChunk(const RowChunk& chunk) {
        LoadRows(chunk);
        LocalTensor<float> dz = gradPreActivationBuf_.Get<float>();
        LocalTensor<float> centered = centeredBuf_.Get<float>();
        LocalTensor<float> product = productBuf_.Get<float>();
        batch_norm_kernel::RowSums sums(sumsBuf_.Get<float>(), tiling_.rowLanes);
        sums.Clear(tiling_.rowSamples * chunk.stride);
        batch_norm_kernel::ForEachRowTile(tiling_, firstChannel_ + chunk.first,
                                          [&](const RowTile& tile) ACTS_AICORE_LAMBDA {
                                              const uint32_t count = LoadRowTile(chunk, tile);
                                              Mul(product, dz, centered, count);
                                              sums.Add(dz, product, count);
                                          });
        sums.FoldRows(tiling_.rowSamples, chunk.stride);
        PipeBarrier<PIPE_ALL>();
        sums.StoreTotals(chunk.channels, static_cast<uint32_t>(tiling_.planeSize), stats_[BackwardSlot::GradBeta],
                         stats_[BackwardSlot::SumGradTimesCentered], chunk.first);
    }

    // Row mode pass 2: grad_x = A * dz + B * centered + C with per-lane rows of A, B, C (the sums' idle arrays).
    __aicore__ inline void GradInputRowChunk(const RowChunk& chunk) {
        LoadRows(chunk);
        batch_norm_kernel::RowSums sums(sumsBuf_.Get<float>(), tiling_.rowLanes);
        LocalTensor<float> coefA = sums.Array(0), coefB = sums.Array(1), coefC = sums.Array(2);
        const uint32_t samples = tiling_.rowSamples;
        batch_norm_kernel::ChannelRows(tiling_, coefA, stats_[BackwardSlot::CoefA], chunk, samples);
        batch_norm_kernel::ChannelRows(tiling_, coefB, stats_[BackwardSlot::CoefB], chunk, samples);
        batch_norm_kernel::ChannelRows(tiling_, coefC, stats_[BackwardSlot::CoefC], chunk, samples);
        LocalTensor<float> dz = gradPreActivationBuf_.Get<float>();
        LocalTensor<float> centered = centeredBuf_.Get<float>();
        batch_norm_kernel::ForEachRowTile(
            tiling_, firstChannel_ + chunk.first, [&](const RowTile& tile) ACTS_AICORE_LAMBDA {
                const uint32_t count = LoadRowTile(chunk, tile);
                Mul(centered, centered, coefB, count);
                Mul(dz, dz, coefA, count);
                Add(dz, dz, centered, count);
                Add(dz, dz, coefC, count);
                LocalTensor<T> staged = gradInputQueue_.template AllocTensor<T>();
                FromFloat(staged, dz, count);
                gradInputQueue_.EnQue(staged);
                staged = gradInputQueue_.template DeQue<T>();
                DataCopyPad(gradInputGm_[tile.offset], staged,
                            batch_norm_kernel::RowCopy<T>(tiling_, chunk, tile.rows, true));
                gradInputQueue_.FreeTensor(staged);
            });
    }

    // LoadTile for a row tile, the channel values from LoadRows' per-lane rows; returns the tile's lane count.
    __aicore__ inline uint32_t LoadRowTile(const RowChunk& chunk, const RowTile& tile) {
        const uint32_t count = tile.rows * chunk.stride;
        const DataCopyExtParams copy = batch_norm_kernel::RowCopy<T>(tiling_, chunk, tile.rows, false);
        LoadPair(gradOutGm_[tile.offset], savedGm_[tile.offset], copy, count);
        LocalTensor<float> grad = gradBuf_.Get<float>();
        LocalTensor<float> centered = centeredBuf_.Get<float>();
        LocalTensor<float> dz = gradPreActivationBuf_.Get<float>();
        LocalTensor<uint8_t> mask = productBuf_.Get<uint8_t>();
        const uint32_t lanes = CompareLanes(count);
        if (tiling_.savedIsResult) {
            GradFromOutput(mask, grad, centered, dz, count, lanes);
            Sub(centered, centered, LoadRow(3), count);
            return count;
        }
        // z = (x - mean) * (gamma * invstd) + beta, the forward's operations (its activation branch for every value;
        // a zero or infinite scale keeps this centred form here, unlike the forward's AffineCentre), x_hat after
        Sub(centered, centered, LoadRow(0), count);
        Mul(dz, centered, LoadRow(2), count);
        Add(dz, dz, LoadRow(3), count);
        Mul(centered, centered, LoadRow(1), count);
        GradFromPreActivation(mask, grad, dz, count, lanes);
        return count;
    }

    // Per sample n: each of the core's groups (units) summed, then its grad_x; the per-channel sums run on over n.
    __aicore__ inline void ProcessGrouped() {
        const uint32_t channels = channelCount_;
        for (BackwardSlot slot :
             {BackwardSlot::GradBeta, BackwardSlot::SumGradTimesCentered, BackwardSlot::CoefA, BackwardSlot::CoefB}) {
            Duplicate(stats_[slot], 0.0f, channels);
        }
        for (uint32_t n = 0; n < tiling_.batch; ++n) {
            const uint64_t row = uint64_t(n) * tiling_.normGroups + firstGroup_;
            PipeBarrier<PIPE_ALL>();
            batch_norm_kernel::CopyIn(stats_[BackwardSlot::InvStd], invStdGm_[row], groupCount_);
            if (!tiling_.savedIsResult)
                batch_norm_kernel::CopyIn(stats_[BackwardSlot::Mean], meanGm_[row], groupCount_);
            for (uint32_t local = 0; local < groupCount_; ++local) {
                const Unit unit = batch_norm_kernel::GroupUnit(tiling_, n, firstGroup_ + local, local);
                float sumGamma = 0.0f, sumGammaCentered = 0.0f;
                SumGroupUnit(unit, local, sumGamma, sumGammaCentered);
                GradInputGroupUnit(unit, local, sumGamma, sumGammaCentered);
            }
        }
        FinishGroupedGradients();
    }

    __aicore__ inline Unit ChannelUnit(uint32_t local) const {
        return batch_norm_kernel::ChannelUnit(tiling_, firstChannel_ + local, local);
    }

    // The unit's mean and invstd (position `slot` of the per-unit slots; the mean only from x).
    __aicore__ inline void UnitStatistics(uint32_t slot, float& mean, float& invStd) {
        PipeBarrier<PIPE_ALL>();
        invStd = stats_[BackwardSlot::InvStd].GetValue(slot);
        mean = tiling_.savedIsResult ? 0.0f : stats_[BackwardSlot::Mean].GetValue(slot);
    }

    // Pass 1 (BatchNorm): grad_beta = sum dz and sum dz * centered, compensated. A sum that is not finite (an inf or
    // NaN in the channel, which the compensation turns into NaN) is taken again plainly: torch's inf or NaN.
    __aicore__ inline void AccumulateChannel(uint32_t local) {
        float gradBeta = 0.0f, sumGradTimesCentered = 0.0f;
        SumChannel<true>(local, gradBeta, sumGradTimesCentered);
        if (!compensated_sum::IsFinite(gradBeta) || !compensated_sum::IsFinite(sumGradTimesCentered)) {
            SumChannel<false>(local, gradBeta, sumGradTimesCentered);
        }
        stats_[BackwardSlot::GradBeta].SetValue(local, gradBeta);
        stats_[BackwardSlot::SumGradTimesCentered].SetValue(local, sumGradTimesCentered);
    }

    // Sums of dz and dz * centered over the channel (batch_norm_kernel::ChannelSums).
    template <bool kCompensated>
    __aicore__ inline void SumChannel(uint32_t local, float& gradBeta, float& sumGradTimesCentered) {
        float mean = 0.0f, invStd = 0.0f;
        UnitStatistics(local, mean, invStd);
        const Unit unit = ChannelUnit(local);
        LocalTensor<float> dz = gradPreActivationBuf_.Get<float>();
        LocalTensor<float> centered = centeredBuf_.Get<float>();
        LocalTensor<float> product = productBuf_.Get<float>();
        batch_norm_kernel::ChannelSums<kCompensated> sums(sumsBuf_.Get<float>());
        batch_norm_kernel::ForEachTile<T>(tiling_, unit, [&](const PlaneTile& tile) ACTS_AICORE_LAMBDA {
            LoadTile(unit, tile, mean, invStd);
            Mul(product, dz, centered, tile.count);
            sums.Add(dz, product, tile.count);
        });
        sums.Totals(product, reduceWorkBuf_.Get<float>(), gradBeta, sumGradTimesCentered);
    }

    // grad_gamma, grad_beta to GM; A, B, C of grad_x = A * dz + B * centered + C.
    __aicore__ inline void ComputeChannelCoefficients() {
        const uint32_t n = channelCount_;
        float inverseCount = tiling_.inverseCount;
        LocalTensor<float> gradGamma = stats_[BackwardSlot::GradGamma];
        LocalTensor<float> coefA = stats_[BackwardSlot::CoefA];
        LocalTensor<float> coefB = stats_[BackwardSlot::CoefB];
        LocalTensor<float> coefC = stats_[BackwardSlot::CoefC];
        PipeBarrier<PIPE_ALL>();
        Mul(coefA, stats_[BackwardSlot::Gamma], stats_[BackwardSlot::InvStd], n);
        if (tiling_.savedIsResult) {  // sum dz * (z - beta) = gamma * grad_gamma
            Div(gradGamma, stats_[BackwardSlot::SumGradTimesCentered], stats_[BackwardSlot::Gamma], n);
            Mul(coefB, stats_[BackwardSlot::InvStd], gradGamma, n);
        } else {  // sum dz * x_hat = grad_gamma
            Muls(gradGamma, stats_[BackwardSlot::SumGradTimesCentered], 1.0f, n);
            Mul(coefB, coefA, gradGamma, n);
        }
        Muls(coefB, coefB, -inverseCount, n);
        Mul(coefC, coefA, stats_[BackwardSlot::GradBeta], n);
        Muls(coefC, coefC, -inverseCount, n);
        PipeBarrier<PIPE_ALL>();
        batch_norm_kernel::CopyOut(gradGammaGm_, gradGamma, n);
        batch_norm_kernel::CopyOut(gradBetaGm_, stats_[BackwardSlot::GradBeta], n);
    }

    // Pass 2 (BatchNorm): grad_x = A * dz + B * centered + C, rounded once to T.
    __aicore__ inline void GradInputUnit(const Unit& unit, uint32_t local) {
        float mean = 0.0f, invStd = 0.0f;
        UnitStatistics(local, mean, invStd);
        float coefA = stats_[BackwardSlot::CoefA].GetValue(local);
        float coefB = stats_[BackwardSlot::CoefB].GetValue(local);
        float coefC = stats_[BackwardSlot::CoefC].GetValue(local);
        LocalTensor<float> dz = gradPreActivationBuf_.Get<float>();
        LocalTensor<float> centered = centeredBuf_.Get<float>();
        batch_norm_kernel::ForEachTile<T>(tiling_, unit, [&](const PlaneTile& tile) ACTS_AICORE_LAMBDA {
            LoadTile(unit, tile, mean, invStd);
            Muls(centered, centered, coefB, tile.count);
            Muls(dz, dz, coefA, tile.count);
            Add(dz, dz, centered, tile.count);
            Adds(dz, dz, coefC, tile.count);
            batch_norm_kernel::StoreAsT(gradInputQueue_, gradInputGm_, dz, tile);
        });
    }

    // Pass 1 (grouped): each plane's sums of dz and dz * centered, pairwise in UB, then on the scalar unit into the
    // unit's S1 = sum gamma * dz and S2 = sum dz * (z - beta) (from the output) or sum gamma * dz * x_hat (from x),
    // and, compensated, into the channel's sums over n (slots GradBeta / SumGradTimesCentered, corrections CoefA /
    // CoefB).
    __aicore__ inline void SumGroupUnit(const Unit& unit, uint32_t local, float& sumGamma, float& sumGammaCentered) {
        float mean = 0.0f, invStd = 0.0f;
        UnitStatistics(local, mean, invStd);
        LocalTensor<float> dz = gradPreActivationBuf_.Get<float>();
        LocalTensor<float> centered = centeredBuf_.Get<float>();
        LocalTensor<float> product = productBuf_.Get<float>();
        ScalarSum unitGamma, unitCentered;
        batch_norm_kernel::ForEachTile<T>(tiling_, unit, [&](const PlaneTile& tile) ACTS_AICORE_LAMBDA {
            LoadTile(unit, tile, mean, invStd);
            Mul(product, dz, centered, tile.count);
            batch_norm_kernel::ForEachChannelPiece(
                tiling_, unit, tile, [&](uint32_t offset, uint32_t count, uint32_t channel) ACTS_AICORE_LAMBDA {
                    float gradSum = PieceSum(dz[offset], count);
                    float productSum = PieceSum(product[offset], count);
                    float gamma = stats_[BackwardSlot::Gamma].GetValue(channel);
                    unitGamma.Add(gamma * gradSum);
                    unitCentered.Add(tiling_.savedIsResult ? productSum : gamma * productSum);
                    AddToChannel(BackwardSlot::GradBeta, BackwardSlot::CoefA, channel, gradSum);
                    AddToChannel(BackwardSlot::SumGradTimesCentered, BackwardSlot::CoefB, channel, productSum);
                });
        });
        sumGamma = unitGamma.Total();
        sumGammaCentered = unitCentered.Total();
    }

    // The sum of `count` floats from `values` (scratch afterwards): halved pairwise to kPieceLanes lanes, then
    // summed compensated on the scalar unit (a plane of up to kPieceLanes values is summed with no pairwise step).
    __aicore__ inline float PieceSum(const LocalTensor<float>& values, uint32_t count) {
        constexpr uint32_t kPieceLanes = 64;
        uint32_t lanes = compensated_sum::HalveTo(values, count, kPieceLanes);
        PipeBarrier<PIPE_ALL>();
        ScalarSum sum;
        for (uint32_t i = 0; i < lanes; ++i) sum.Add(values.GetValue(i));
        return sum.Total();
    }

    // (sum, correction) of core-local `channel` in slots (sumSlot, correctionSlot) += term.
    __aicore__ inline void AddToChannel(BackwardSlot sumSlot, BackwardSlot correctionSlot, uint32_t channel,
                                        float term) {
        ScalarSum sum{stats_[sumSlot].GetValue(channel), stats_[correctionSlot].GetValue(channel)};
        sum.Add(term);
        stats_[sumSlot].SetValue(channel, sum.sum);
        stats_[correctionSlot].SetValue(channel, sum.correction);
    }

    // Pass 2 (grouped): grad_x = A * dz + B * centered + C with A, B per channel piece and C per unit.
    __aicore__ inline void GradInputGroupUnit(const Unit& unit, uint32_t local, float sumGamma,
                                              float sumGammaCentered) {
        float mean = 0.0f, invStd = 0.0f;
        UnitStatistics(local, mean, invStd);
        const float inverseCount = tiling_.inverseCount;
        const float coefC = -invStd * sumGamma * inverseCount;
        const float centeredFactor = -invStd * sumGammaCentered * inverseCount;  // B = this (from x), / gamma (output)
        LocalTensor<float> dz = gradPreActivationBuf_.Get<float>();
        LocalTensor<float> centered = centeredBuf_.Get<float>();
        batch_norm_kernel::ForEachTile<T>(tiling_, unit, [&](const PlaneTile& tile) ACTS_AICORE_LAMBDA {
            LoadTile(unit, tile, mean, invStd);
            batch_norm_kernel::ForEachChannelPiece(
                tiling_, unit, tile, [&](uint32_t offset, uint32_t count, uint32_t channel) ACTS_AICORE_LAMBDA {
                    float gamma = stats_[BackwardSlot::Gamma].GetValue(channel);
                    float coefB = tiling_.savedIsResult ? centeredFactor / gamma : centeredFactor;
                    Muls(centered[offset], centered[offset], coefB, count);
                    Muls(dz[offset], dz[offset], gamma * invStd, count);
                });
            Add(dz, dz, centered, tile.count);
            Adds(dz, dz, coefC, tile.count);
            batch_norm_kernel::StoreAsT(gradInputQueue_, gradInputGm_, dz, tile);
        });
    }

    // grad_beta and grad_gamma (from the output: sum dz * (z - beta) / gamma) of the core's channels to GM.
    __aicore__ inline void FinishGroupedGradients() {
        PipeBarrier<PIPE_ALL>();
        LocalTensor<float> gradBeta = stats_[BackwardSlot::CoefC];
        LocalTensor<float> gradGamma = stats_[BackwardSlot::GradGamma];
        for (uint32_t c = 0; c < channelCount_; ++c) {
            ScalarSum beta{stats_[BackwardSlot::GradBeta].GetValue(c), stats_[BackwardSlot::CoefA].GetValue(c)};
            ScalarSum centered{stats_[BackwardSlot::SumGradTimesCentered].GetValue(c),
                               stats_[BackwardSlot::CoefB].GetValue(c)};
            float gamma = stats_[BackwardSlot::Gamma].GetValue(c);
            gradBeta.SetValue(c, beta.Total());
            gradGamma.SetValue(c, tiling_.savedIsResult ? centered.Total() / gamma : centered.Total());
        }
        PipeBarrier<PIPE_ALL>();
        batch_norm_kernel::CopyOut(gradGammaGm_, gradGamma, channelCount_);
        batch_norm_kernel::CopyOut(gradBetaGm_, gradBeta, channelCount_);
    }

    // dy and the saved tensor of one tile -> dz (gradPreActivationBuf_) and centered (centeredBuf_), in float:
    // centered = z - beta (from the output) or x_hat (from x); `mean`, `invStd`: the unit's.
    __aicore__ inline void LoadTile(const Unit& unit, const PlaneTile& tile, float mean, float invStd) {
        LoadPair(gradOutGm_[tile.offset], savedGm_[tile.offset], batch_norm_kernel::TileCopy<T>(tile, false),
                 tile.count);
        LocalTensor<float> grad = gradBuf_.Get<float>();
        LocalTensor<float> centered = centeredBuf_.Get<float>();
        LocalTensor<float> dz = gradPreActivationBuf_.Get<float>();
        LocalTensor<float> gamma = stats_[BackwardSlot::Gamma];
        LocalTensor<float> beta = stats_[BackwardSlot::Beta];
        LocalTensor<uint8_t> mask = productBuf_.Get<uint8_t>();
        const uint32_t lanes = CompareLanes(tile.count);
        if (tiling_.savedIsResult) {
            GradFromOutput(mask, grad, centered, dz, tile.count, lanes);
            batch_norm_kernel::ForEachChannelPiece(
                tiling_, unit, tile, [&](uint32_t offset, uint32_t count, uint32_t channel) ACTS_AICORE_LAMBDA {
                    Adds(centered[offset], centered[offset], -beta.GetValue(channel), count);
                });
            return;
        }
        // z (in dz's buffer until the mask is taken) with the forward's operations and constants, so that the
        // activation's branch is the forward's for every value: (x - mean) * (gamma * invstd) + beta, or where that
        // scale is 0 or infinite torch's x * scale + (beta - mean * scale) (batch_norm_kernel::AffineCentre), from
        // x before it is centred; then x_hat = (x - mean) * invstd
        batch_norm_kernel::ForEachChannelPiece(
            tiling_, unit, tile, [&](uint32_t offset, uint32_t count, uint32_t channel) ACTS_AICORE_LAMBDA {
                float scale = gamma.GetValue(channel) * invStd;
                if (!batch_norm_kernel::DegenerateScale(scale)) return;
                float shift = beta.GetValue(channel);
                batch_norm_kernel::AffineCentre(mean, scale, shift);
                Muls(dz[offset], centered[offset], scale, count);
                Adds(dz[offset], dz[offset], shift, count);
            });
        Adds(centered, centered, -mean, tile.count);
        batch_norm_kernel::ForEachChannelPiece(
            tiling_, unit, tile, [&](uint32_t offset, uint32_t count, uint32_t channel) ACTS_AICORE_LAMBDA {
                float scale = gamma.GetValue(channel) * invStd;
                if (batch_norm_kernel::DegenerateScale(scale)) return;
                Muls(dz[offset], centered[offset], scale, count);
                Adds(dz[offset], dz[offset], beta.GetValue(channel), count);
            });
        Muls(centered, centered, invStd, tile.count);
        GradFromPreActivation(mask, grad, dz, tile.count, lanes);
    }

    // dy and the saved tensor of a tile (`copy` from GM at `gradOut` and `saved`) into gradBuf_ and centeredBuf_ as
    // float, `count` elements.
    __aicore__ inline void LoadPair(const GlobalTensor<T>& gradOutGm, const GlobalTensor<T>& savedGm,
                                    const DataCopyExtParams& copy, uint32_t count) {
        LocalTensor<T> gradOut = gradOutQueue_.template AllocTensor<T>();
        LocalTensor<T> saved = savedQueue_.template AllocTensor<T>();
        DataCopyPad(gradOut, gradOutGm, copy, DataCopyPadExtParams<T>{false, 0, 0, T()});
        DataCopyPad(saved, savedGm, copy, DataCopyPadExtParams<T>{false, 0, 0, T()});
        gradOutQueue_.EnQue(gradOut);
        savedQueue_.EnQue(saved);
        gradOut = gradOutQueue_.template DeQue<T>();
        saved = savedQueue_.template DeQue<T>();
        ToFloat(gradBuf_.Get<float>(), gradOut, count);
        ToFloat(centeredBuf_.Get<float>(), saved, count);
        gradOutQueue_.FreeTensor(gradOut);
        savedQueue_.FreeTensor(saved);
    }

    // From the output a (in `centered`): dz = a > 0 ? dy : dy * slope, as LeakyReLU's own gradient (the sign of z is
    // the sign of a), and centered = z = a > 0 ? a : a / slope (LeakyReLU with the reciprocal slope inverts it).
    __aicore__ inline void GradFromOutput(const LocalTensor<uint8_t>& mask, const LocalTensor<float>& grad,
                                          const LocalTensor<float>& centered, const LocalTensor<float>& dz,
                                          uint32_t count, uint32_t lanes) {
        CompareScalar(mask, centered, 0.0f, CMPMODE::GT, lanes);
        Muls(dz, grad, tiling_.negativeSlope, count);
        Select(dz, mask, grad, dz, SELMODE::VSEL_TENSOR_TENSOR_MODE, count);
        LeakyRelu(centered, centered, 1.0f / tiling_.negativeSlope, count);
    }

    // From the pre-activation z (in `dz`): dz = the activation's gradient times dy.
    __aicore__ inline void GradFromPreActivation(const LocalTensor<uint8_t>& mask, const LocalTensor<float>& grad,
                                                 const LocalTensor<float>& dz, uint32_t count, uint32_t lanes) {
        if (tiling_.relu) {  // torch's threshold_backward: z <= 0 ? 0 : dy
            CompareScalar(mask, dz, 0.0f, CMPMODE::LE, lanes);
            Duplicate(dz, 0.0f, count);
            Select(dz, mask, dz, grad, SELMODE::VSEL_TENSOR_TENSOR_MODE, count);
        } else {  // leaky_relu_backward: z > 0 ? dy : dy * slope
            CompareScalar(mask, dz, 0.0f, CMPMODE::GT, lanes);
            Muls(dz, grad, tiling_.negativeSlope, count);
            Select(dz, mask, grad, dz, SELMODE::VSEL_TENSOR_TENSOR_MODE, count);
        }
    }

    // CompareScalar works on whole 256-byte repeats; the tile buffers are multiples of one.
    __aicore__ inline uint32_t CompareLanes(uint32_t count) const {
        return (count + batch_norm_tiling::kFloatRepeat - 1) / batch_norm_tiling::kFloatRepeat *
               batch_norm_tiling::kFloatRepeat;
    }

    BatchNormLeakyReluTiling tiling_;
    uint32_t firstGroup_ = 0, groupCount_ = 0, firstChannel_ = 0, channelCount_ = 0;
    TPipe pipe_;
    TQue<QuePosition::VECIN, batch_norm_tiling::kBufferNum> gradOutQueue_, savedQueue_;
    TQue<QuePosition::VECOUT, batch_norm_tiling::kBufferNum> gradInputQueue_;
    TBuf<TPosition::VECCALC> gradBuf_, centeredBuf_, gradPreActivationBuf_, productBuf_, sumsBuf_, reduceWorkBuf_;
    ChannelStats<BackwardSlot> stats_;
    GlobalTensor<T> gradOutGm_, savedGm_, gradInputGm_;
    GlobalTensor<float> gammaGm_, betaGm_, meanGm_, invStdGm_, gradGammaGm_, gradBetaGm_;
};

}  // namespace
}  // namespace ascend_acts

extern "C" __global__ __aicore__ void acts_batch_norm_leaky_relu_grad(GM_ADDR dy, GM_ADDR saved, GM_ADDR weight,
                                                                      GM_ADDR bias, GM_ADDR saveMean,
                                                                      GM_ADDR saveInvstd, GM_ADDR dx,
                                                                      GM_ADDR gradWeight, GM_ADDR gradBias,
                                                                      GM_ADDR workspace, GM_ADDR tiling) {
    ascend_acts::BatchNormLeakyReluTiling t;
    ascend_acts::ReadTiling(t, tiling);
    ascend_acts::RunForDtypeKey<ascend_acts::BatchNormLeakyReluBackward>(dy, saved, weight, bias, saveMean, saveInvstd,
                                                                         dx, gradWeight, gradBias, t);
}
