// The product eval kernel (op_kernel/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_kernel.h) with one cross-core
// flag left out, through its flag policy: the emulator must catch each (tests/test_sim_conv_eval.py).
//   conv_eval_no_input_ready_wait  the AIC copies an input slot without waiting for the AIVs to fill it:
//                                  `cross_core_hazard` (their write lands on bytes it read, unordered)
//   conv_eval_no_input_free        the AIC never releases an input slot: the AIVs wait for it forever,
//                                  `cross_core_deadlock`
// float32 only (tiling key 0); the real tiling struct, launched like the product kernel.
#include "kernel_operator.h"
#include "kernel_table.h"
#include "../../op_kernel/common/read_tiling.h"
#include "../../op_kernel/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_kernel.h"

namespace {

using ascend_acts::CrossCoreFlags;
namespace flags = ascend_acts::conv_eval_tiling;

struct SkipsInputReadyWait : CrossCoreFlags {
    static void Await(uint16_t flag) {
        if (flag >= flags::kInputReady && flag < flags::kInputReady + flags::kRingSlots) return;
        CrossCoreFlags::Await(flag);
    }
};

struct SkipsInputFree : CrossCoreFlags {
    template <pipe_t pipe>
    static void Signal(uint16_t flag) {
        if (flag >= flags::kInputFree && flag < flags::kInputFree + flags::kRingSlots) return;
        CrossCoreFlags::Signal<pipe>(flag);
    }
};

template <typename Sync>
void Run(GM_ADDR const* gm, GM_ADDR workspace, GM_ADDR tiling) {
    ascend_acts::ConvBnLeakyReluEvalTiling t;
    ascend_acts::ReadTiling(t, tiling);
    if (TILING_KEY_IS(0)) {
        ascend_acts::ConvBnLeakyReluEvalKernel<float, Sync> kernel;
        kernel.Init(gm[0], gm[1], gm[2], gm[3], workspace, t);
        kernel.Process();
    }
}

}  // namespace

namespace ascend_acts_sim {

std::vector<KernelEntry> ConvEvalBrokenKernels() {
    using ascend_acts_sim::Direction;
    const std::vector<Param> params = {
        {"x", Direction::In}, {"weight", Direction::In}, {"bias", Direction::In}, {"y", Direction::Out}};
    auto row = [&](const char* name, Runner run) {
        return KernelEntry{name, name, TilingKind::ConvBnLeakyReluEvalTiling, 0, false, /*mix=*/true, params, run};
    };
    return {row("conv_eval_no_input_ready_wait", Run<SkipsInputReadyWait>),
            row("conv_eval_no_input_free", Run<SkipsInputFree>)};
}

}  // namespace ascend_acts_sim
