// Broken on purpose (tests/test_kernel_sources.py): device code calls a lambda without an execution-space
// annotation (CANN's kernels write `[&](...) __attribute__((cce_aicore)) {...}`; ours ACTS_AICORE_LAMBDA).
#include "kernel_operator.h"

template <typename Visit>
__aicore__ inline void ForEachBlock(uint32_t blocks, Visit&& visit) {
    for (uint32_t b = 0; b < blocks; ++b) visit(b);
}

extern "C" __global__ __aicore__ void unannotated_lambda(GM_ADDR x, GM_ADDR tiling) {
    AscendC::GlobalTensor<uint32_t> gm;
    gm.SetGlobalBuffer(reinterpret_cast<__gm__ uint32_t*>(x), 8);
    ForEachBlock(8, [&](uint32_t b) { gm.SetValue(b, b); });
}
