// What the binding knows of a kernel it launches: a row of the launch table. The product kernels' rows are
// generated from the op table (launch_table.inc, scripts/op_files/emulator.py); the test kernels of
// tests/sim_kernels/ write theirs by hand.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core.h"
#include "tiling_list.inc"
#include "tiling_request.h"  // op_host/common: AttrKind

namespace ascend_acts_sim {

// The plain struct the kernel's host tiling fills (op_host/): one value per struct of the op table, named as the
// struct (the generated tiling_list.inc); or Raw: bytes the caller gives (test kernels).
#define ACTS_SIM_TILING_KIND(Struct) Struct,
enum class TilingKind : uint8_t { ACTS_SIM_TILINGS(ACTS_SIM_TILING_KIND) Raw };
#undef ACTS_SIM_TILING_KIND

// In: read; Out: written (poisoned before the launch); InOut: an in-place output, read and written under
// the name of an input listed before it (not poisoned, must still be written).
enum class Direction : uint8_t { In, Out, InOut };

struct Param {
    const char* name;
    Direction direction;
};

// An attribute of the kernel (op table: Kernel.attrs), in the OpDef's order: what its host tiling reads.
struct AttrSpec {
    const char* name;
    ascend_acts::AttrKind kind;
};

// Calls the kernel entry with the GM parameters in its order (`gm[i]` for params[i]), then workspace, tiling.
using Runner = void (*)(GM_ADDR const* gm, GM_ADDR workspace, GM_ADDR tiling);

struct KernelEntry {
    const char* name;   // the op table's base name (test kernels: their name)
    const char* entry;  // the name the emulator reports: the kernel entry
    TilingKind tiling;
    uint32_t variant;    // the tiling's variant (TilingRequest::variant: an enum of the family's), else 0
    bool wrapsIntegers;  // relies on integer vector results wrapping (the `integer_overflow` rule)
    bool mix;            // a MIX launch (AIC + 2 AIVs per AI core, ascendc_sim::LaunchMix)
    std::vector<Param> params;
    Runner run;
    // Raw tilings only: GM workspace bytes the kernel needs for this tiling (nullptr: none)
    uint64_t (*rawWorkspaceBytes)(const uint8_t* tiling, uint64_t tilingBytes) = nullptr;
    std::vector<AttrSpec> attrs = {};  // table kernels: the attributes their tiling function takes
};

struct KernelTable {
    const KernelEntry* begin;
    const KernelEntry* end;
    const KernelEntry* Find(const std::string& name) const {
        for (const KernelEntry* k = begin; k != end; ++k) {
            if (name == k->name) return k;
        }
        return nullptr;
    }
};

}  // namespace ascend_acts_sim
