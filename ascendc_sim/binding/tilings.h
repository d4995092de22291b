// How the binding launches a kernel with each tiling struct of op_host/: the tiling buffer the kernel reads,
// the blocks to launch, the GM workspace, and the tile length the counters report. Per struct, not per op, and
// stated once by each family's pure tiling (op_host/<family>/<family>_tiling.h, see
// op_host/common/tiling_request.h), which the generated tiling_headers.inc includes; nothing here names a family.
#pragma once

#include <cstring>
#include <vector>

#include "kernel_table.h"
#include "tiling_headers.inc"

namespace ascend_acts_sim {

// The TilingKind of each tiling struct, and its name (Python's class name).
template <class Tiling>
struct TilingKindOf;
#define ACTS_SIM_TILING_KIND_OF(Struct)                         \
    template <>                                                 \
    struct TilingKindOf<ascend_acts::Struct> {                  \
        static constexpr TilingKind kKind = TilingKind::Struct; \
        static constexpr const char* kName = #Struct;           \
    };
ACTS_SIM_TILINGS(ACTS_SIM_TILING_KIND_OF)
#undef ACTS_SIM_TILING_KIND_OF

template <class Tiling>
std::vector<uint8_t> BytesOf(const Tiling& tiling) {
    std::vector<uint8_t> bytes(sizeof(Tiling));
    std::memcpy(bytes.data(), &tiling, sizeof(Tiling));
    return bytes;
}

template <class Tiling>
struct TilingTraits {
    static uint32_t Blocks(const Tiling& t) { return LaunchBlocks(t); }  // 0: nothing to launch (an empty tensor)
    static uint32_t TileLength(const Tiling& t) { return LaunchTileLength(t); }
    static uint64_t WorkspaceBytes(const Tiling& t) { return ascend_acts::WorkspaceBytesOf(t); }
    static std::vector<uint8_t> Buffer(const Tiling& t) { return BytesOf(t); }
};

}  // namespace ascend_acts_sim
