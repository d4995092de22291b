// ActsFusedBiasLeakyReluGrad: dx = dy * scale * (pre > 0 ? 1 : negative_slope) and grad_bias = dx summed over
// every dimension but 1, in one launch: each core owns whole channels and reduces them itself. pre > 0 is read
// from saved = y (saved_is_result) or from saved + bias = x + bias. The kernel body is
// fused_bias_leaky_relu_kernel.h's.
#include "fused_bias_leaky_relu_kernel.h"

extern "C" __global__ __aicore__ void acts_fused_bias_leaky_relu_grad(GM_ADDR dy, GM_ADDR saved, GM_ADDR bias,
                                                                      GM_ADDR dx, GM_ADDR gradBias, GM_ADDR workspace,
                                                                      GM_ADDR tiling) {
    ascend_acts::FusedBiasLeakyReluTiling t;
    ascend_acts::ReadTiling(t, tiling);
    ascend_acts::RunForDtypeKey<ascend_acts::FusedBiasLeakyReluBackward>(dy, saved, bias, dx, gradBias, t);
}
