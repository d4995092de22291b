// Kernels read the plain tiling struct the host wrote to GM word by word (scalar reads work on every
// AscendC target); the *_tiling_data.h structs are padded to whole 32-bit words.
#pragma once

#include "kernel_operator.h"

namespace ascend_acts {

template <typename Tiling>
__aicore__ inline void ReadTiling(Tiling& tiling, GM_ADDR gm) {
    static_assert(sizeof(Tiling) % sizeof(uint32_t) == 0, "tiling structs are whole 32-bit words");
    auto* src = reinterpret_cast<__gm__ uint32_t*>(gm);
    auto* dst = reinterpret_cast<uint32_t*>(&tiling);
    for (uint32_t i = 0; i < sizeof(Tiling) / sizeof(uint32_t); ++i) dst[i] = src[i];
}

}  // namespace ascend_acts

namespace ascend_acts {

// Tiling key = data type, as the host sets it (SetTilingKey): 0 float32, 1 float16, 2 bfloat16.
// Runs Kernel<T>::Init(args...) then Process() for the T the key names.
template <template <typename> class Kernel, typename... Args>
__aicore__ inline void RunForDtypeKey(Args... args) {
    if (TILING_KEY_IS(0)) {
        Kernel<float> kernel;
        kernel.Init(args...);
        kernel.Process();
    } else if (TILING_KEY_IS(1)) {
        Kernel<half> kernel;
        kernel.Init(args...);
        kernel.Process();
    } else if (TILING_KEY_IS(2)) {
        Kernel<bfloat16_t> kernel;
        kernel.Init(args...);
        kernel.Process();
    }
}

}  // namespace ascend_acts
