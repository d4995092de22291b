// What a kernel's host tiling is computed from, the same on the NPU and on the emulator: the TilingRequest the CANN
// TilingFunc (op_host_common.h, RequestTilingFunc) fills from its TilingContext and the emulator binding
// (ascend_acts._sim.<family>_tiling) from Python's arguments. Each family's pure <family>_tiling.h states once, for
// its struct S (found by overload resolution, in namespace ascend_acts beside S):
//
//   bool TilingFor(const TilingRequest& request, S& tiling, std::string& why);  // false: `why` says what did not fit
//   uint32_t LaunchBlocks(const S&);          // blocks (AI cores of a MIX launch) to launch; 0: an empty launch
//   uint32_t LaunchTileLength(const S&);      // the tile length the emulator's counters report
//   uint64_t LaunchWorkspaceBytes(const S&);  // optional: user GM workspace bytes (none without it)
//
// so CANN and the emulator launch the same blocks and workspace by construction. Pure: no CANN or Python headers.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ascend_acts {

// An attribute's type, as the op table declares it (Attr.type: "float", "bool", "int", "list_int").
enum class AttrKind : uint8_t { Float, Bool, Int, ListInt };

// One attribute value: `number` for Float and Bool, `integer` for Int (exact: a double holds only 53 bits),
// `ints` for ListInt.
struct AttrValue {
    double number = 0;
    int64_t integer = 0;
    std::vector<int64_t> ints;
};

// The platform's limits a tiling may use (CANN: PlatformAscendC's core counts and GetCoreMemSize).
struct PlatformLimits {
    uint32_t vectorCores = 0;  // AIV
    uint32_t cubeCores = 0;    // AIC (AI cores)
    uint64_t ubBytes = 0, l1Bytes = 0, l0aBytes = 0, l0bBytes = 0, l0cBytes = 0;
};

struct TilingRequest {
    uint32_t variant = 0;                      // the kernel's tiling variant (op table: Kernel.tiling_variant)
    std::vector<std::vector<int64_t>> shapes;  // each input's shape, in the table's order
    std::vector<bool> present;                 // false: an optional input left out (its shape is empty)
    uint32_t elementSize = 0;                  // bytes of an element of input 0
    std::vector<AttrValue> attrs;              // the attributes, in the table's order
    PlatformLimits platform;
    uint64_t firstElement = 0;  // the flat index of input 0's first element: 0 on an NPU (the emulator may launch
                                // a tensor in pieces)

    float Float(size_t attr) const { return static_cast<float>(attrs[attr].number); }
    bool Bool(size_t attr) const { return attrs[attr].number != 0; }
    int64_t Int(size_t attr) const { return attrs[attr].integer; }
    const std::vector<int64_t>& Ints(size_t attr) const { return attrs[attr].ints; }
    // Input `input`'s element count (1 for a scalar).
    uint64_t Elements(size_t input) const {
        uint64_t count = 1;
        for (int64_t dim : shapes[input]) count *= static_cast<uint64_t>(dim);
        return count;
    }
};

// `(1, 2, 3)`: a shape for a refusal's message.
inline std::string ShapeText(const std::vector<int64_t>& shape) {
    std::string text = "(";
    for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + (shape.size() == 1 ? ",)" : ")");
}

// Input `input` as (N, C, S) of the per-channel kernels: dims 0 and 1 and the product of the rest; false below
// rank 2 (`why` says so).
inline bool ChannelLayout(const TilingRequest& request, size_t input, uint64_t& batch, uint64_t& channels,
                          uint64_t& spatial, std::string& why) {
    const std::vector<int64_t>& shape = request.shapes[input];
    if (shape.size() < 2) {
        why = "of shape " + ShapeText(shape) + ": needs rank >= 2 (channels in dimension 1)";
        return false;
    }
    batch = static_cast<uint64_t>(shape[0]);
    channels = static_cast<uint64_t>(shape[1]);
    spatial = 1;
    for (size_t i = 2; i < shape.size(); ++i) spatial *= static_cast<uint64_t>(shape[i]);
    return true;
}

// The user GM workspace of a tiling: its family's LaunchWorkspaceBytes, 0 without one.
namespace launch_fallback {
struct NoWorkspace {};
struct AnyTiling {
    template <class T>
    AnyTiling(const T&) {}  // NOLINT(google-explicit-constructor): the worst match, chosen only without another
};
NoWorkspace LaunchWorkspaceBytes(AnyTiling);  // declared only: a type to detect
template <class Tiling>
using WorkspaceResult = decltype(LaunchWorkspaceBytes(std::declval<const Tiling&>()));
}  // namespace launch_fallback

template <class Tiling>
constexpr bool kHasWorkspace = !std::is_same_v<launch_fallback::WorkspaceResult<Tiling>, launch_fallback::NoWorkspace>;

template <class Tiling>
uint64_t WorkspaceBytesOf(const Tiling& tiling) {
    if constexpr (kHasWorkspace<Tiling>) {
        return LaunchWorkspaceBytes(tiling);
    } else {
        return 0;
    }
}

}  // namespace ascend_acts
