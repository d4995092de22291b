// ActsLeakyReluGrad: dx = saved > 0 ? dy : dy * negative_slope; `saved` is x, or y when the slope is >= 0.
#include "elementwise_pipeline.h"

namespace ascend_acts {
struct LeakyReluBackward : IndexFree {
    static constexpr ElementwiseOp kOp = ElementwiseOp::LeakyReluGrad;
    float slope;
    __aicore__ inline void Compute(const TileVectors& v, uint64_t, uint32_t lanes) const {
        AscendC::Muls(v.work[0], v.in[0], slope, lanes);
        SelectPositive(v, v.in[1], v.in[0], v.work[0], lanes);
    }
};
}  // namespace ascend_acts

extern "C" __global__ __aicore__ void acts_leaky_relu_grad(GM_ADDR dy, GM_ADDR saved, GM_ADDR dx, GM_ADDR workspace,
                                                           GM_ADDR tiling) {
    ascend_acts::ElementwiseTiling t;
    ascend_acts::ReadTiling(t, tiling);
    GM_ADDR inputs[] = {dy, saved};
    ascend_acts::RunElementwise(inputs, dx, t, ascend_acts::LeakyReluBackward{{}, t.slope});
}
