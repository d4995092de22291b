// ActsFusedBiasLeakyRelu: y = leaky_relu(x + bias[channel], negative_slope) * scale, channel = dim 1 of x
// (StyleGAN2's fused_leaky_relu). The bias is read once per channel, never expanded to x's size; the kernel body
// is fused_bias_leaky_relu_kernel.h's.
#include "fused_bias_leaky_relu_kernel.h"

extern "C" __global__ __aicore__ void acts_fused_bias_leaky_relu(GM_ADDR x, GM_ADDR bias, GM_ADDR y, GM_ADDR workspace,
                                                                 GM_ADDR tiling) {
    ascend_acts::FusedBiasLeakyReluTiling t;
    ascend_acts::ReadTiling(t, tiling);
    ascend_acts::RunForDtypeKey<ascend_acts::FusedBiasLeakyReluForward>(x, static_cast<GM_ADDR>(nullptr), bias, y,
                                                                        static_cast<GM_ADDR>(nullptr), t);
}
