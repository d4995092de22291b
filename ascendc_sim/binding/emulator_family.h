// What a tiling family's emulator file (op_host/<family>/<family>_emulator.h) states once, and what it may use.
// The binding is generic: the generated tiling_headers.inc includes every family's file, and the binding finds
// the pieces below by overload resolution and template specialisation. A family's file, for its struct `S`:
//
//   namespace ascend_acts {                       // beside S, found by argument-dependent lookup
//   uint32_t LaunchBlocks(const S&);              // blocks (AI cores of a MIX launch) to launch; 0: nothing
//   uint32_t LaunchTileLength(const S&);          // the tile length the launch counters report
//   uint64_t LaunchWorkspaceBytes(const S&);      // optional: GM workspace bytes (none without it); also
//   }                                             //   Python's S.workspace_bytes
//   namespace ascend_acts_sim {
//   template <> struct TilingFunction<ascend_acts::S> {      // the Python function computing an S
//       static constexpr const char* kName = "<family>_tiling";
//       static constexpr auto kFunction = &STilingFor;       // S STilingFor(args...)
//       static constexpr auto kArgs = std::make_tuple(Arg("kernel"), ..., Arg("platform", "ascend910b1"), ...);
//       static constexpr const char* kDoc = "...";
//   };
//   }
//
// Emulator-only (the CANN build never includes it): no pybind11 here, so a family's file needs none either.
// A tiling function refuses its arguments with Refuse(message): ValueError(message) in Python.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/core.h"

namespace ascend_acts_sim {

// The platform of that name; ValueError naming the known ones otherwise (launch.cpp).
const ascendc_sim::Platform& PlatformNamed(const std::string& name);

// The tiling variant (KernelEntry::variant: the tiling function's template argument) of op-table kernel `kernel`,
// which must be one that fills `Tiling`; ValueError "<function>(): kernel must be one of ..." otherwise
// (module.cpp).
template <class Tiling>
uint32_t VariantOf(const std::string& kernel, const char* function);

// Refuses a tiling function's arguments: ValueError(message) in Python.
[[noreturn]] inline void Refuse(const std::string& message) { throw std::invalid_argument(message); }

// `[1, 2, 3]`: a shape as Python prints a list of ints.
template <class T>
std::string ListText(const std::vector<T>& values) {
    std::string text = "[";
    for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
    return text + "]";
}

// A Python argument of a tiling function: its keyword name and, for the trailing ones, its default:
// Arg("kernel") (an Arg<NoDefault>), Arg("platform", "ascend910b1"), Arg("vector_cores", 0): the default's C++
// type is the one pybind11 converts to Python for the signature.
struct NoDefault {};
template <class T = NoDefault>
struct Arg {
    const char* name;
    T value;
    constexpr explicit Arg(const char* keyword) : name(keyword), value{} {}
    constexpr Arg(const char* keyword, T fallback) : name(keyword), value(fallback) {}
};

// The Python function computing a `Tiling`: specialised by the family's emulator file (see above).
template <class Tiling>
struct TilingFunction;

// How a launch reads a `Tiling`: the family's overloads, found by argument-dependent lookup; no
// LaunchWorkspaceBytes overload means no workspace.
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

}  // namespace ascend_acts_sim
