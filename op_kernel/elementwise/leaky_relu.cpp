// ActsLeakyRelu: y = x > 0 ? x : x * negative_slope.
#include "elementwise_pipeline.h"

namespace ascend_acts {
struct LeakyReluForward : IndexFree {
    static constexpr ElementwiseOp kOp = ElementwiseOp::LeakyRelu;
    float slope;
    __aicore__ inline void Compute(const TileVectors& v, uint64_t, uint32_t lanes) const {
        AscendC::LeakyRelu(v.out, v.in[0], slope, lanes);
    }
};
}  // namespace ascend_acts

extern "C" __global__ __aicore__ void acts_leaky_relu(GM_ADDR x, GM_ADDR y, GM_ADDR workspace, GM_ADDR tiling) {
    ascend_acts::ElementwiseTiling t;
    ascend_acts::ReadTiling(t, tiling);
    GM_ADDR inputs[] = {x};
    ascend_acts::RunElementwise(inputs, y, t, ascend_acts::LeakyReluForward{{}, t.slope});
}
