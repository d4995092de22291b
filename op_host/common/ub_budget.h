// The Unified Buffer a kernel's own buffers may take: what the platform reports (GetCoreMemSize(UB))
// minus what the AscendC APIs the kernel calls keep for themselves.
#pragma once

#include <cstdint>

namespace ascend_acts {

// Select in tensor-tensor or tensor-scalar mode writes a temporary at TMP_UB_OFFSET, 8 KiB below the top
// of UB on 910B (184 KiB of 192: AscendC basic_api/impl/utils/kernel_utils_constants.h, used by
// dav_c220/kernel_operator_vec_cmpsel_impl.h); the Select docs say to keep those 8 KiB free.
constexpr uint64_t kSelectReservedUbBytes = 8 * 1024;

inline uint64_t UsableUbBytes(uint64_t ubBytes, bool usesSelect) {
    uint64_t reserve = usesSelect ? kSelectReservedUbBytes : 0;
    return ubBytes > reserve ? ubBytes - reserve : 0;
}

}  // namespace ascend_acts
