// Kernels compute in float32 whatever the tensor dtype: T -> float before, float -> T (rounded once to
// nearest even) after. For float itself both are exact copies (Muls by 1 keeps -0.0 and NaN payloads).
#pragma once

#include "kernel_operator.h"

namespace ascend_acts {

template <typename T>
__aicore__ inline void ToFloat(const AscendC::LocalTensor<float>& dst, const AscendC::LocalTensor<T>& src,
                               uint32_t count) {
    if constexpr (AscendC::IsSameType<T, float>::value) {
        AscendC::Muls(dst, src, 1.0f, count);
    } else {
        AscendC::Cast(dst, src, AscendC::RoundMode::CAST_NONE, count);
    }
}

template <typename T>
__aicore__ inline void FromFloat(const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<float>& src,
                                 uint32_t count) {
    if constexpr (AscendC::IsSameType<T, float>::value) {
        AscendC::Muls(dst, src, 1.0f, count);
    } else {
        AscendC::Cast(dst, src, AscendC::RoundMode::CAST_RINT, count);
    }
}

}  // namespace ascend_acts
