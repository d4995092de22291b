// The reference backend's float32 normalisation + activation passes, compiled (ascend_acts._cpu): the same
// statistics, factors and roundings as python/ascend_acts/ops/conv_bn_leaky_relu/reference_batch_norm.py's NumPy
// passes, with each statistics set (a channel over the batch, or a sample's group) visited whole while it is near
// the core. Sums of float32 values run in eight float32 lanes over segments of 256 values, merged in float64.
#pragma once

#include <cstdint>

namespace ascend_acts_cpu {

enum class Activation : int { kNone = 0, kRelu = 1, kLeakyRelu = 2 };

// The (N, C, size) tensor's statistics sets: groups == 0: batch statistics, set s is channel s over the N samples;
// groups >= 1: set s is sample s / groups, group s % groups (C / groups consecutive channels).
struct Sets {
    int64_t n, c, size, groups;
};

// Forward: out = act((y - mean) * (gamma * invstd) + beta) with centre_on_mean, else act((y - shift) * scale + bias')
// (the mean's offset from the shift folded into bias'), for the sets [first, last); writes mean, invstd and the
// biased variance of each (float32, indexed by set). out may be y.
// Backward: grad_y of the sets [first, last) from grad_out and what was kept: the output (saved_is_result: slope > 0)
// or the conv output. grad_y may be grad_out. Writes float64 per channel (batch statistics: grad_gamma[c],
// grad_beta[c]) or per row (group statistics: [sample * C + channel], for the caller to add over the batch). scratch:
// 6 doubles per row of a set (N for batch statistics, C / groups for group ones), its own per concurrent call.
// norm_activation.cpp is compiled twice, into namespace avx2 (-mavx2) and baseline (x86-64's SSE2); module.cpp calls
// the one the CPU supports. Both give the same values (lanes.h): the same IEEE operations per lane, no contraction.
#define ASCEND_ACTS_CPU_DECLARE_PASSES(isa)                                                                   \
    namespace isa {                                                                                           \
    void Forward(const float* y, float* out, Sets sets, int64_t first, int64_t last, const float* gamma,      \
                 const float* beta, float eps, Activation act, float slope, bool centre_on_mean, float* mean, \
                 float* invstd, float* variance);                                                             \
    void Backward(const float* grad_out, const float* saved, float* grad_y, bool saved_is_result, Sets sets,  \
                  int64_t first, int64_t last, const float* gamma, const float* beta, const float* mean,      \
                  const float* invstd, Activation act, float slope, double* grad_gamma, double* grad_beta,    \
                  double* scratch);                                                                           \
    }

ASCEND_ACTS_CPU_DECLARE_PASSES(avx2)
ASCEND_ACTS_CPU_DECLARE_PASSES(baseline)

}  // namespace ascend_acts_cpu
