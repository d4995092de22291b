// Host side of the BatchNorm + LeakyReLU training kernels on the emulator: tiling, launch, counters.
// Statistics (gamma, beta, running and saved stats, their gradients) are float32 whatever the dtype.
#include "../../op_host/batch_norm_leaky_relu/batch_norm_leaky_relu_tiling.h"
#include "abi.h"

extern "C" {
void acts_batch_norm_leaky_relu(GM_ADDR x, GM_ADDR gamma, GM_ADDR beta, GM_ADDR runningMean, GM_ADDR runningVar,
                                GM_ADDR out, GM_ADDR saveMean, GM_ADDR saveInvStd, GM_ADDR runningMeanOut,
                                GM_ADDR runningVarOut, GM_ADDR workspace, GM_ADDR tiling);
void acts_batch_norm_leaky_relu_grad(GM_ADDR gradOut, GM_ADDR output, GM_ADDR gamma, GM_ADDR beta, GM_ADDR invStd,
                                     GM_ADDR gradInput, GM_ADDR gradGamma, GM_ADDR gradBeta, GM_ADDR workspace,
                                     GM_ADDR tiling);
}

using ascend_acts::BatchNormLeakyReluTiling;
using ascend_acts::BatchNormPass;

namespace {
GM_ADDR Bytes(void* p) { return static_cast<uint8_t*>(p); }
}  // namespace

extern "C" int acts_sim_batch_norm_tiling(uint32_t pass, uint32_t batch, uint32_t channels, uint64_t planeSize,
                                          uint32_t elementSize, uint32_t platform, uint32_t vectorCores, float slope,
                                          float eps, float momentum, uint32_t update, BatchNormLeakyReluTiling* tiling) {
    if (pass > 1 || platform >= ascendc_sim::kPlatformCount) return ACTS_SIM_BAD_ARGUMENT;
    const auto& p = ascendc_sim::kPlatforms[platform];
    bool ok = ascend_acts::ComputeBatchNormLeakyReluTiling(
        static_cast<BatchNormPass>(pass), batch, channels, planeSize, elementSize, slope, eps, momentum, update != 0,
        vectorCores == 0 ? p.vectorCores : vectorCores, p.ubBytes, *tiling);
    return ok ? ACTS_SIM_OK : ACTS_SIM_BAD_ARGUMENT;
}

// Forward. Buffers in launch order: x, gamma, beta, out, saveMean, saveInvStd, tiling, then
// runningMean, runningVar (updated in place) when `update`. dtype: 0 float32, 1 float16, 2 bfloat16.
extern "C" int acts_sim_batch_norm_leaky_relu(uint32_t dtype, uint32_t platform, uint32_t vectorCores, uint32_t batch,
                                              uint32_t channels, uint64_t planeSize, void* x, float* gamma, float* beta,
                                              float* runningMean, float* runningVar, void* out, float* saveMean,
                                              float* saveInvStd, float slope, float eps, float momentum,
                                              uint32_t update, ActsSimStats* stats, char* error, uint64_t errorLength,
                                              int64_t* errorBlock) {
    if (dtype > 2) return ACTS_SIM_BAD_ARGUMENT;
    uint32_t elementSize = dtype == 0 ? 4 : 2;
    BatchNormLeakyReluTiling tiling;
    int status = acts_sim_batch_norm_tiling(0, batch, channels, planeSize, elementSize, platform, vectorCores, slope,
                                            eps, momentum, update, &tiling);
    if (status != ACTS_SIM_OK) return status;
    uint64_t bytes = uint64_t(batch) * channels * planeSize * elementSize, statBytes = uint64_t(channels) * 4;
    auto* t = reinterpret_cast<uint8_t*>(&tiling);
    std::vector<ascendc_sim::LaunchBuffer> buffers = {
        {x, bytes, false}, {gamma, statBytes, false}, {beta, statBytes, false}, {out, bytes, true},
        {saveMean, statBytes, true}, {saveInvStd, statBytes, true}, {t, sizeof(tiling), false}};
    if (update) {
        buffers.push_back({runningMean, statBytes, true, true});
        buffers.push_back({runningVar, statBytes, true, true});
    }
    auto runBlock = [&] {
        // running statistics in place: the same GM as input and as output
        acts_batch_norm_leaky_relu(Bytes(x), Bytes(gamma), Bytes(beta), Bytes(runningMean), Bytes(runningVar),
                                   Bytes(out), Bytes(saveMean), Bytes(saveInvStd), Bytes(runningMean),
                                   Bytes(runningVar), nullptr, t);
    };
    auto result = ascendc_sim::Launch("acts_batch_norm_leaky_relu", ascendc_sim::kPlatforms[platform],
                                      tiling.usedCoreNum, dtype, buffers, runBlock);
    int reported = ascend_acts_sim::Report(result, stats, error, errorLength, errorBlock);
    if (stats != nullptr) stats->tileLength = tiling.tileLength;
    return reported;
}

// Backward from the post-activation output. Buffers in launch order: gradOut, output, gamma, beta,
// invStd, gradInput, gradGamma, gradBeta, tiling.
extern "C" int acts_sim_batch_norm_leaky_relu_grad(uint32_t dtype, uint32_t platform, uint32_t vectorCores,
                                                   uint32_t batch, uint32_t channels, uint64_t planeSize, void* gradOut,
                                                   void* output, float* gamma, float* beta, float* invStd,
                                                   void* gradInput, float* gradGamma, float* gradBeta, float slope,
                                                   ActsSimStats* stats, char* error, uint64_t errorLength,
                                                   int64_t* errorBlock) {
    if (dtype > 2) return ACTS_SIM_BAD_ARGUMENT;
    uint32_t elementSize = dtype == 0 ? 4 : 2;
    BatchNormLeakyReluTiling tiling;
    int status = acts_sim_batch_norm_tiling(1, batch, channels, planeSize, elementSize, platform, vectorCores, slope,
                                            0.0f, 0.0f, 0, &tiling);
    if (status != ACTS_SIM_OK) return status;
    uint64_t bytes = uint64_t(batch) * channels * planeSize * elementSize, statBytes = uint64_t(channels) * 4;
    auto* t = reinterpret_cast<uint8_t*>(&tiling);
    std::vector<ascendc_sim::LaunchBuffer> buffers = {
        {gradOut, bytes, false}, {output, bytes, false}, {gamma, statBytes, false}, {beta, statBytes, false},
        {invStd, statBytes, false}, {gradInput, bytes, true}, {gradGamma, statBytes, true},
        {gradBeta, statBytes, true}, {t, sizeof(tiling), false}};
    auto runBlock = [&] {
        acts_batch_norm_leaky_relu_grad(Bytes(gradOut), Bytes(output), Bytes(gamma), Bytes(beta), Bytes(invStd),
                                        Bytes(gradInput), Bytes(gradGamma), Bytes(gradBeta), nullptr, t);
    };
    auto result = ascendc_sim::Launch("acts_batch_norm_leaky_relu_grad", ascendc_sim::kPlatforms[platform],
                                      tiling.usedCoreNum, dtype, buffers, runBlock);
    int reported = ascend_acts_sim::Report(result, stats, error, errorLength, errorBlock);
    if (stats != nullptr) stats->tileLength = tiling.tileLength;
    return reported;
}
