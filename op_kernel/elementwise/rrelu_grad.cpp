// ActsRreluGrad: dx = saved > 0 ? dy : dy * noise(seed, flat index), the noise regenerated from the seed.
#include "rrelu_noise.h"

namespace ascend_acts {
struct RreluBackward : RreluNoise {
    static constexpr ElementwiseOp kOp = ElementwiseOp::RreluGrad;
    __aicore__ inline void Compute(const TileVectors& v, uint64_t firstIndex, uint32_t lanes) const {
        Fill(v, firstIndex, lanes);
        AscendC::Mul(v.work[0], v.in[0], v.work[0], lanes);
        SelectPositive(v, v.in[1], v.in[0], v.work[0], lanes);
    }
};
}  // namespace ascend_acts

extern "C" __global__ __aicore__ void acts_rrelu_grad(GM_ADDR dy, GM_ADDR saved, GM_ADDR seed, GM_ADDR dx,
                                                      GM_ADDR workspace, GM_ADDR tiling) {
    ascend_acts::ElementwiseTiling t;
    ascend_acts::ReadTiling(t, tiling);
    GM_ADDR inputs[] = {dy, saved};
    ascend_acts::RunElementwise(inputs, dx, t, ascend_acts::RreluBackward{ascend_acts::RreluNoise::FromSeed(seed, t)});
}
