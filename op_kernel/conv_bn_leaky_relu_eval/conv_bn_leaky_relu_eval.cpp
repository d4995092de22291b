// ActsConvBnLeakyReluEval: y = leaky_relu(conv2d(x, W') + b') in one MIX launch (AIC:AIV 1:2), BatchNorm folded
// into W' (packed in the cube's fractal layout by the host) and b'; the kernel body is
// conv_bn_leaky_relu_eval_kernel.h's. Literal tiling keys: 0 float32, 1 float16, 2 bfloat16.
#include "conv_bn_leaky_relu_eval_kernel.h"
#include "../common/read_tiling.h"

using namespace AscendC;  // GetUserWorkspace: AscendC's in CANN, global in the emulator

namespace ascend_acts {

template <typename T>
__aicore__ inline void RunConvBnLeakyReluEval(GM_ADDR x, GM_ADDR weight, GM_ADDR bias, GM_ADDR y, GM_ADDR workspace,
                                              const ConvBnLeakyReluEvalTiling& tiling) {
    ConvBnLeakyReluEvalKernel<T> kernel;
    kernel.Init(x, weight, bias, y, workspace, tiling);
    kernel.Process();
}

}  // namespace ascend_acts

extern "C" __global__ __aicore__ void acts_conv_bn_leaky_relu_eval(GM_ADDR x, GM_ADDR weight, GM_ADDR bias, GM_ADDR y,
                                                                   GM_ADDR workspace, GM_ADDR tiling) {
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
    ascend_acts::ConvBnLeakyReluEvalTiling t;
    ascend_acts::ReadTiling(t, tiling);
    GM_ADDR ring = GetUserWorkspace(workspace);  // no system workspace: no high-level API runs
    if (TILING_KEY_IS(0)) {
        ascend_acts::RunConvBnLeakyReluEval<float>(x, weight, bias, y, ring, t);
    } else if (TILING_KEY_IS(1)) {
        ascend_acts::RunConvBnLeakyReluEval<half>(x, weight, bias, y, ring, t);
    } else if (TILING_KEY_IS(2)) {
        ascend_acts::RunConvBnLeakyReluEval<bfloat16_t>(x, weight, bias, y, ring, t);
    }
}
