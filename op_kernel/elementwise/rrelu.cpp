// ActsRrelu (training): y = x > 0 ? x : x * noise(seed, flat index); no noise tensor is written.
#include "rrelu_noise.h"

namespace ascend_acts {
struct RreluForward : RreluNoise {
    static constexpr ElementwiseOp kOp = ElementwiseOp::Rrelu;
    __aicore__ inline void Compute(const TileVectors& v, uint64_t firstIndex, uint32_t lanes) const {
        Fill(v, firstIndex, lanes);
        AscendC::Mul(v.work[0], v.in[0], v.work[0], lanes);
        SelectPositive(v, v.in[0], v.in[0], v.work[0], lanes);
    }
};
}  // namespace ascend_acts

extern "C" __global__ __aicore__ void acts_rrelu(GM_ADDR x, GM_ADDR seed, GM_ADDR y, GM_ADDR workspace,
                                                 GM_ADDR tiling) {
    ascend_acts::ElementwiseTiling t;
    ascend_acts::ReadTiling(t, tiling);
    GM_ADDR inputs[] = {x};
    ascend_acts::RunElementwise(inputs, y, t, ascend_acts::RreluForward{ascend_acts::RreluNoise::FromSeed(seed, t)});
}
