// BatchNorm2d (training) + LeakyReLU backward from the post-activation output (InPlace-ABN), so the
// convolution output need not be kept:
//
//   z     = a > 0 ? a : a / slope          (slope > 0: LeakyReLU is invertible; z is the BN output)
//   dz    = a > 0 ? dy : dy * slope
//   x_hat = (z - beta) / gamma             (gamma != 0)
//   grad_beta  = sum dz,  grad_gamma = sum dz * x_hat = sum(dz * (z - beta)) / gamma
//   grad_x     = gamma * invstd * (dz - grad_beta / n - x_hat * grad_gamma / n)
//              = A * dz + B * (z - beta) + C,  A = gamma * invstd, B = -invstd * grad_gamma / n,
//                                              C = -A * grad_beta / n
//
// Whole channels per core (no cross-core reduction); two passes over dy and a: (1) the two sums (pairwise within a
// tile, compensated across tiles: their error does not grow with N * H * W), (2)
// grad_x, written once. Half types are computed in float32 and rounded once (RINT).
#include "batch_norm_leaky_relu_common.h"

using namespace AscendC;

namespace ascend_acts {
namespace {

using batch_norm_kernel::ChannelStats;
using batch_norm_kernel::PlaneTile;

enum class BackwardSlot : uint32_t {
    Gamma,
    Beta,
    InvStd,
    GradBeta,
    SumGradTimesCentered,
    GradGamma,
    CoefA,
    CoefB,
    CoefC,
    Scratch,
};
static_assert(static_cast<uint32_t>(BackwardSlot::Scratch) < batch_norm_tiling::kStatsArrays, "stats buffer too small");

template <typename T>
class BatchNormLeakyReluBackward {
public:
    __aicore__ inline void Init(GM_ADDR gradOut, GM_ADDR output, GM_ADDR gamma, GM_ADDR beta, GM_ADDR invStd,
                                GM_ADDR gradInput, GM_ADDR gradGamma, GM_ADDR gradBeta,
                                const BatchNormLeakyReluTiling& tiling) {
        tiling_ = tiling;
        BatchNormChannelRange(tiling_, GetBlockIdx(), firstChannel_, channelCount_);
        uint64_t total = uint64_t(tiling_.batch) * tiling_.channels * tiling_.planeSize;
        gradOutGm_.SetGlobalBuffer((__gm__ T*)gradOut, total);
        outputGm_.SetGlobalBuffer((__gm__ T*)output, total);
        gradInputGm_.SetGlobalBuffer((__gm__ T*)gradInput, total);
        gammaGm_.SetGlobalBuffer((__gm__ float*)gamma + firstChannel_, channelCount_);
        betaGm_.SetGlobalBuffer((__gm__ float*)beta + firstChannel_, channelCount_);
        invStdGm_.SetGlobalBuffer((__gm__ float*)invStd + firstChannel_, channelCount_);
        gradGammaGm_.SetGlobalBuffer((__gm__ float*)gradGamma + firstChannel_, channelCount_);
        gradBetaGm_.SetGlobalBuffer((__gm__ float*)gradBeta + firstChannel_, channelCount_);
        uint32_t tile = tiling_.tileLength;
        pipe_.InitBuffer(gradOutQueue_, batch_norm_tiling::kBufferNum, tile * sizeof(T));
        pipe_.InitBuffer(outputQueue_, batch_norm_tiling::kBufferNum, tile * sizeof(T));
        pipe_.InitBuffer(gradInputQueue_, batch_norm_tiling::kBufferNum, tile * sizeof(T));
        pipe_.InitBuffer(gradBuf_, tile * sizeof(float));
        pipe_.InitBuffer(preActivationBuf_, tile * sizeof(float));
        pipe_.InitBuffer(gradPreActivationBuf_, tile * sizeof(float));
        pipe_.InitBuffer(productBuf_, tile * sizeof(float));
        pipe_.InitBuffer(sumsBuf_, batch_norm_tiling::kSumArrays * batch_norm_tiling::kSumLanes * sizeof(float));
        pipe_.InitBuffer(reduceWorkBuf_, tiling_.reduceWorkLength * sizeof(float));
        stats_.Init(pipe_, tiling_.statsLength);
    }

    __aicore__ inline void Process() {
        const uint32_t n = channelCount_;
        batch_norm_kernel::CopyIn(stats_[BackwardSlot::Gamma], gammaGm_, n);
        batch_norm_kernel::CopyIn(stats_[BackwardSlot::Beta], betaGm_, n);
        batch_norm_kernel::CopyIn(stats_[BackwardSlot::InvStd], invStdGm_, n);
        for (uint32_t local = 0; local < n; ++local) AccumulateChannel(local);
        ComputeChannelCoefficients();
        for (uint32_t local = 0; local < n; ++local) GradInputChannel(local);
    }

private:
    // Pass 1: grad_beta = sum dz and sum dz * (z - beta), compensated. A sum that is not finite (an inf or NaN
    // in the channel, which the compensation turns into NaN) is taken again plainly: torch's inf or NaN.
    __aicore__ inline void AccumulateChannel(uint32_t local) {
        float gradBeta = 0.0f, sumGradTimesCentered = 0.0f;
        SumChannel<true>(local, gradBeta, sumGradTimesCentered);
        if (!compensated_sum::IsFinite(gradBeta) || !compensated_sum::IsFinite(sumGradTimesCentered)) {
            SumChannel<false>(local, gradBeta, sumGradTimesCentered);
        }
        stats_[BackwardSlot::GradBeta].SetValue(local, gradBeta);
        stats_[BackwardSlot::SumGradTimesCentered].SetValue(local, sumGradTimesCentered);
    }

    // Sums of dz and dz * (z - beta) over the channel (batch_norm_kernel::ChannelSums).
    template <bool kCompensated>
    __aicore__ inline void SumChannel(uint32_t local, float& gradBeta, float& sumGradTimesCentered) {
        PipeBarrier<PIPE_ALL>();
        float beta = stats_[BackwardSlot::Beta].GetValue(local);
        LocalTensor<float> dz = gradPreActivationBuf_.Get<float>();
        LocalTensor<float> centered = preActivationBuf_.Get<float>();
        LocalTensor<float> product = productBuf_.Get<float>();
        batch_norm_kernel::ChannelSums<kCompensated> sums(sumsBuf_.Get<float>());
        batch_norm_kernel::ForEachTile<T>(tiling_, firstChannel_ + local,
                                          [&](const PlaneTile& tile) ACTS_AICORE_LAMBDA {
                                              LoadTile(tile);
                                              Adds(centered, centered, -beta, tile.count);
                                              Mul(product, dz, centered, tile.count);
                                              sums.Add(dz, product, tile.count);
                                          });
        sums.Totals(product, reduceWorkBuf_.Get<float>(), gradBeta, sumGradTimesCentered);
    }

    // grad_gamma, grad_beta to GM; A, B, C of grad_x = A * dz + B * (z - beta) + C.
    __aicore__ inline void ComputeChannelCoefficients() {
        const uint32_t n = channelCount_;
        float inverseCount = tiling_.inverseCount;
        LocalTensor<float> gradGamma = stats_[BackwardSlot::GradGamma];
        LocalTensor<float> coefA = stats_[BackwardSlot::CoefA];
        LocalTensor<float> coefB = stats_[BackwardSlot::CoefB];
        LocalTensor<float> coefC = stats_[BackwardSlot::CoefC];
        PipeBarrier<PIPE_ALL>();
        Div(gradGamma, stats_[BackwardSlot::SumGradTimesCentered], stats_[BackwardSlot::Gamma], n);
        Mul(coefA, stats_[BackwardSlot::Gamma], stats_[BackwardSlot::InvStd], n);
        Mul(coefB, stats_[BackwardSlot::InvStd], gradGamma, n);
        Muls(coefB, coefB, -inverseCount, n);
        Mul(coefC, coefA, stats_[BackwardSlot::GradBeta], n);
        Muls(coefC, coefC, -inverseCount, n);
        PipeBarrier<PIPE_ALL>();
        batch_norm_kernel::CopyOut(gradGammaGm_, gradGamma, n);
        batch_norm_kernel::CopyOut(gradBetaGm_, stats_[BackwardSlot::GradBeta], n);
    }

    // Pass 2: grad_x = A * dz + B * (z - beta) + C, rounded once to T.
    __aicore__ inline void GradInputChannel(uint32_t local) {
        PipeBarrier<PIPE_ALL>();
        float beta = stats_[BackwardSlot::Beta].GetValue(local);
        float coefA = stats_[BackwardSlot::CoefA].GetValue(local);
        float coefB = stats_[BackwardSlot::CoefB].GetValue(local);
        float coefC = stats_[BackwardSlot::CoefC].GetValue(local);
        LocalTensor<float> dz = gradPreActivationBuf_.Get<float>();
        LocalTensor<float> centered = preActivationBuf_.Get<float>();
        batch_norm_kernel::ForEachTile<T>(tiling_, firstChannel_ + local,
                                          [&](const PlaneTile& tile) ACTS_AICORE_LAMBDA {
                                              LoadTile(tile);
                                              Adds(centered, centered, -beta, tile.count);
                                              Muls(centered, centered, coefB, tile.count);
                                              Muls(dz, dz, coefA, tile.count);
                                              Add(dz, dz, centered, tile.count);
                                              Adds(dz, dz, coefC, tile.count);
                                              batch_norm_kernel::StoreAsT(gradInputQueue_, gradInputGm_, dz, tile);
                                          });
    }

    // dy and a of one tile -> z (preActivationBuf_) and dz (gradPreActivationBuf_), in float.
    __aicore__ inline void LoadTile(const PlaneTile& tile) {
        LocalTensor<T> gradOut = gradOutQueue_.template AllocTensor<T>();
        LocalTensor<T> output = outputQueue_.template AllocTensor<T>();
        batch_norm_kernel::CopyTileIn(gradOut, gradOutGm_, tile);
        batch_norm_kernel::CopyTileIn(output, outputGm_, tile);
        gradOutQueue_.EnQue(gradOut);
        outputQueue_.EnQue(output);
        gradOut = gradOutQueue_.template DeQue<T>();
        output = outputQueue_.template DeQue<T>();
        LocalTensor<float> grad = gradBuf_.Get<float>();
        LocalTensor<float> z = preActivationBuf_.Get<float>();
        LocalTensor<float> dz = gradPreActivationBuf_.Get<float>();
        ToFloat(grad, gradOut, tile.count);
        ToFloat(z, output, tile.count);
        gradOutQueue_.FreeTensor(gradOut);
        outputQueue_.FreeTensor(output);
        // dz = a > 0 ? dy : dy * slope, as LeakyReLU's own gradient: the sign of z is the sign of a.
        LocalTensor<uint8_t> positive = productBuf_.Get<uint8_t>();
        uint32_t lanes = CompareLanes(tile.count);
        CompareScalar(positive, z, 0.0f, CMPMODE::GT, lanes);
        Muls(dz, grad, tiling_.negativeSlope, tile.count);
        Select(dz, positive, grad, dz, SELMODE::VSEL_TENSOR_TENSOR_MODE, tile.count);
        // z = a > 0 ? a : a / slope: LeakyReLU with the reciprocal slope inverts it.
        LeakyRelu(z, z, 1.0f / tiling_.negativeSlope, tile.count);
    }

    // CompareScalar works on whole 256-byte repeats; the tile buffers are multiples of one.
    __aicore__ inline uint32_t CompareLanes(uint32_t count) const {
        return (count + batch_norm_tiling::kFloatRepeat - 1) / batch_norm_tiling::kFloatRepeat *
               batch_norm_tiling::kFloatRepeat;
    }

    BatchNormLeakyReluTiling tiling_;
    uint32_t firstChannel_ = 0, channelCount_ = 0;
    TPipe pipe_;
    TQue<QuePosition::VECIN, batch_norm_tiling::kBufferNum> gradOutQueue_, outputQueue_;
    TQue<QuePosition::VECOUT, batch_norm_tiling::kBufferNum> gradInputQueue_;
    TBuf<TPosition::VECCALC> gradBuf_, preActivationBuf_, gradPreActivationBuf_, productBuf_, sumsBuf_, reduceWorkBuf_;
    ChannelStats<BackwardSlot> stats_;
    GlobalTensor<T> gradOutGm_, outputGm_, gradInputGm_;
    GlobalTensor<float> gammaGm_, betaGm_, invStdGm_, gradGammaGm_, gradBetaGm_;
};

}  // namespace
}  // namespace ascend_acts

extern "C" __global__ __aicore__ void acts_batch_norm_leaky_relu_grad(GM_ADDR dy, GM_ADDR y, GM_ADDR weight,
                                                                      GM_ADDR bias, GM_ADDR saveInvstd, GM_ADDR dx,
                                                                      GM_ADDR gradWeight, GM_ADDR gradBias,
                                                                      GM_ADDR workspace, GM_ADDR tiling) {
    ascend_acts::BatchNormLeakyReluTiling t;
    ascend_acts::ReadTiling(t, tiling);
    ascend_acts::RunForDtypeKey<ascend_acts::BatchNormLeakyReluBackward>(dy, y, weight, bias, saveInvstd, dx,
                                                                         gradWeight, gradBias, t);
}
