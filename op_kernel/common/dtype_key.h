// The tiling key every kernel of the package dispatches on: the dtype of its data tensors, as the host sets
// it (SetTilingKey). Kernels test it with literal TILING_KEY_IS(0/1/2): CANN collects the keys with a regex
// over the preprocessed kernel, which sees no enum values (read_tiling.h RunForDtypeKey, elementwise_pipeline.h).
#pragma once

#include <cstdint>

namespace ascend_acts {

enum class DtypeKey : uint32_t { Float32 = 0, Float16 = 1, BFloat16 = 2 };

}  // namespace ascend_acts
