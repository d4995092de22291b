// See leaky_relu.h. A select per value in eight lanes (lanes.h): the compiler does not if-convert the scalar form
// (x * slope may trap, so it stays a branch).
#include "leaky_relu.h"

#include "lanes.h"

namespace ascend_acts_cpu {
namespace ASCEND_ACTS_CPU_ISA {

void LeakyRelu(const float* x, float* out, int64_t count, float slope) {
    const V zero{}, slopes = Splat(slope);
    int64_t i = 0;
    for (; i + kLanes <= count; i += kLanes) {
        const V value = Load(x + i);
        Store(out + i, IfGreater(value, zero, value, value * slopes));
    }
    for (; i < count; ++i) out[i] = IfGreater(x[i], 0.0f, x[i], x[i] * slope);
}

void LeakyReluBackward(const float* grad, const float* saved, float* out, int64_t count, float slope) {
    const V zero{}, slopes = Splat(slope);
    int64_t i = 0;
    for (; i + kLanes <= count; i += kLanes) {
        const V g = Load(grad + i);
        Store(out + i, IfGreater(Load(saved + i), zero, g, g * slopes));
    }
    for (; i < count; ++i) out[i] = IfGreater(saved[i], 0.0f, grad[i], grad[i] * slope);
}

}  // namespace ASCEND_ACTS_CPU_ISA
}  // namespace ascend_acts_cpu
