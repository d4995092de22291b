// Broken on purpose (tests/test_kernel_sources.py): device code calls a helper without __aicore__, which
// bisheng compiles for the host only. g++ and the emulator accept it.
#include "kernel_operator.h"

inline uint32_t Twice(uint32_t value) { return 2 * value; }  // missing __aicore__

extern "C" __global__ __aicore__ void host_helper_in_device_code(GM_ADDR x, GM_ADDR tiling) {
    AscendC::GlobalTensor<uint32_t> gm;
    gm.SetGlobalBuffer(reinterpret_cast<__gm__ uint32_t*>(x), 1);
    gm.SetValue(0, Twice(AscendC::GetBlockIdx()));
}
