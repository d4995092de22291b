// Broken on purpose (tests/test_kernel_sources.py): a tiling key that is not an integer literal after
// preprocessing, which CANN's key collection (tbe/tikcpp/compile_op.py) cannot read. The emulator's
// TILING_KEY_IS refuses it at compile time. ACTS_KEY_EXPR selects the spelling under test.
#include "kernel_operator.h"

enum class Dtype : uint32_t { Float32 = 0 };
#define ACTS_FLOAT_KEY 0

extern "C" __global__ __aicore__ void non_literal_tiling_key(GM_ADDR x, GM_ADDR tiling) {
    if (TILING_KEY_IS(ACTS_KEY_EXPR)) {
        AscendC::GlobalTensor<uint32_t> gm;
        gm.SetGlobalBuffer(reinterpret_cast<__gm__ uint32_t*>(x), 1);
        gm.SetValue(0, 1);
    }
}
