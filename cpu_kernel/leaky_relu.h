// The reference backend's float32 LeakyReLU passes, compiled (ascend_acts._cpu): torch's formulas, value for value
// the NumPy ones of python/ascend_acts/ops/leaky_relu/reference.py (the same IEEE operation per value).
#pragma once

#include <cstdint>

namespace ascend_acts_cpu {

// LeakyRelu: out = x > 0 ? x : x * slope. LeakyReluBackward: out = saved > 0 ? grad : grad * slope (saved: the input,
// or the output of a slope >= 0). out may be x, grad or saved. Compiled as norm_activation.h's passes are, twice.
#define ASCEND_ACTS_CPU_DECLARE_LEAKY_RELU(isa)                                                            \
    namespace isa {                                                                                        \
    void LeakyRelu(const float* x, float* out, int64_t count, float slope);                                \
    void LeakyReluBackward(const float* grad, const float* saved, float* out, int64_t count, float slope); \
    }

ASCEND_ACTS_CPU_DECLARE_LEAKY_RELU(avx2)
ASCEND_ACTS_CPU_DECLARE_LEAKY_RELU(baseline)

}  // namespace ascend_acts_cpu
