// ascend_acts._sim: our AscendC kernels (op_kernel/) on the emulator (ascendc_sim/), for Python.
//   launch(kernel, buffers, tiling, platform)      the one launch entry (launch.h)
//   <family>_tiling(...), their structs            op_host's tiling functions and the structs they return: each
//                                                  family's emulator file, registered by the generated
//                                                  tiling_classes.inc (emulator_family.h)
//   platforms(), Platform                          the emulator's platform table
//   Rule, EmulatorError, Launch                    what a launch raises and returns
//   kernels()                                      the launch table (generated from the op table)
#include <pybind11/pybind11.h>
#include <pybind11/native_enum.h>
#include <pybind11/stl.h>

#include "kernel_table.h"
#include "launch.h"
#include "tilings.h"

namespace py = pybind11;

#include "launch_table.inc"

namespace {

using ascend_acts_sim::KernelEntry;
using ascend_acts_sim::kOpKernels;
using ascend_acts_sim::TilingKind;

const ascend_acts_sim::KernelTable kTable{std::begin(kOpKernels), std::end(kOpKernels)};

const KernelEntry& KernelWith(const std::string& name, TilingKind tiling, const char* function) {
    const KernelEntry* kernel = kTable.Find(name);
    if (kernel == nullptr || kernel->tiling != tiling) {
        std::string fitting;
        for (const KernelEntry& k : kOpKernels) {
            if (k.tiling == tiling) fitting += std::string(fitting.empty() ? "" : ", ") + k.name;
        }
        throw py::value_error(std::string(function) + "(): kernel must be one of " + fitting + ", got '" + name + "'");
    }
    return *kernel;
}

const char* TilingName(TilingKind kind) {
    switch (kind) {
#define ACTS_SIM_TILING_NAME(Struct) \
    case TilingKind::Struct: return #Struct;
        ACTS_SIM_TILINGS(ACTS_SIM_TILING_NAME)
#undef ACTS_SIM_TILING_NAME
        case TilingKind::Raw: return "bytes";
    }
    return "?";
}

template <class T>
std::string Repr(py::handle self, const char* name) {
    std::string text = std::string(name) + "(";
    bool first = true;
    for (auto attribute : py::type::handle_of(self).attr("__dict__")) {
        std::string key = py::str(attribute);
        if (key.rfind("_", 0) == 0) continue;
        text += (first ? "" : ", ") + key + "=" + py::repr(self.attr(attribute)).cast<std::string>();
        first = false;
    }
    return text + ")";
}

template <class T, class... Options>
py::class_<T, Options...> ReadOnlyClass(py::module_& m, const char* name, const char* doc) {
    py::class_<T, Options...> c(m, name, doc);
    c.def("__repr__", [name](py::handle self) { return Repr<T>(self, name); });
    return c;
}

// A tiling struct's Python class: read-only, its fields (`fields(c)`, generated from the struct), then what the
// family's emulator file computes from it (workspace_bytes, when the family has a workspace).
template <class Tiling, class Fields>
void DefineTilingClass(py::module_& m, const char* name, const char* doc, Fields fields) {
    auto c = ReadOnlyClass<Tiling>(m, name, doc);
    fields(c);
    if constexpr (ascend_acts_sim::kHasWorkspace<Tiling>) {
        c.def_property_readonly("workspace_bytes",
                                [](const Tiling& t) { return ascend_acts_sim::WorkspaceBytesOf(t); });
    }
}

py::arg PythonArg(const ascend_acts_sim::Arg<ascend_acts_sim::NoDefault>& arg) { return py::arg(arg.name); }
template <class T>
py::arg_v PythonArg(const ascend_acts_sim::Arg<T>& arg) {
    return py::arg(arg.name) = arg.value;
}

template <class R, class... Args>
constexpr size_t ArityOf(R (*)(Args...)) {
    return sizeof...(Args);
}

// A family's tiling function, with the keyword names and defaults its emulator file gives (TilingFunction<Tiling>).
template <class Tiling>
void DefineTilingFunction(py::module_& m) {
    using F = ascend_acts_sim::TilingFunction<Tiling>;
    static_assert(std::tuple_size_v<decltype(F::kArgs)> == ArityOf(F::kFunction),
                  "TilingFunction<...>::kArgs names every parameter of kFunction");
    std::apply([&m](const auto&... args) { m.def(F::kName, F::kFunction, PythonArg(args)..., F::kDoc); }, F::kArgs);
}

}  // namespace

namespace ascend_acts_sim {

template <class Tiling>
uint32_t VariantOf(const std::string& kernel, const char* function) {
    return KernelWith(kernel, TilingKindOf<Tiling>::kKind, function).variant;
}

}  // namespace ascend_acts_sim

#include "tiling_classes.inc"

PYBIND11_MODULE(_sim, m) {
    m.doc() = "Our AscendC kernels on the emulator: one launch entry, op_host's tilings, the platforms and rules.";

    py::native_enum<ascendc_sim::Rule> rule(m, "Rule", "enum.Enum",
                                            "The rules the emulator checks (docs/emulator.md).");
#define ASCEND_ACTS_RULE_VALUE(name) rule.value(#name, ascendc_sim::Rule::name);
    ASCENDC_SIM_RULES(ASCEND_ACTS_RULE_VALUE)
#undef ASCEND_ACTS_RULE_VALUE
    rule.finalize();

    PyObject* error = PyErr_NewExceptionWithDoc(
        "ascend_acts._sim.EmulatorError",
        "A kernel broke an emulator rule: .kernel (its entry), .block (None: launch-level), .rule (a Rule).",
        PyExc_RuntimeError, nullptr);
    m.add_object("EmulatorError", py::reinterpret_steal<py::object>(error));

    ReadOnlyClass<ascendc_sim::Platform>(m, "Platform", "A modelled chip (numbers of its CANN 8.1 platform .ini).")
        .def_property_readonly("name", [](const ascendc_sim::Platform& p) { return std::string(p.name); })
        .def_readonly("vector_cores", &ascendc_sim::Platform::vectorCores)
        .def_readonly("ub_bytes", &ascendc_sim::Platform::ubBytes)
        .def_readonly("select_temporary_offset", &ascendc_sim::Platform::selectTemporaryOffset)
        .def_readonly("cube_cores", &ascendc_sim::Platform::cubeCores)
        .def_readonly("l1_bytes", &ascendc_sim::Platform::l1Bytes)
        .def_readonly("l0a_bytes", &ascendc_sim::Platform::l0aBytes)
        .def_readonly("l0b_bytes", &ascendc_sim::Platform::l0bBytes)
        .def_readonly("l0c_bytes", &ascendc_sim::Platform::l0cBytes)
        .def_readonly("bias_table_bytes", &ascendc_sim::Platform::biasTableBytes)
        .def_readonly("fixpipe_buffer_bytes", &ascendc_sim::Platform::fixpipeBufferBytes);
    m.def(
        "platforms",
        [] {
            py::tuple all(ascendc_sim::kPlatformCount);
            for (uint32_t i = 0; i < ascendc_sim::kPlatformCount; ++i) {
                all[i] = py::cast(&ascendc_sim::kPlatforms[i], py::return_value_policy::reference);
            }
            return all;
        },
        "The platform table, the default (ascend910b1) first.");

    ascend_acts_sim::DefineTimeline(m);
    using ascend_acts_sim::LaunchCounters;
    auto tupleOf = [](const std::vector<uint64_t>& v) { return py::tuple(py::cast(v)); };
    auto dictOf = [](const std::vector<std::pair<std::string, uint64_t>>& v) {
        py::dict d;
        for (const auto& [name, bytes] : v) d[py::str(name)] = bytes;
        return d;
    };
    ReadOnlyClass<LaunchCounters>(m, "Launch", "Counters of one kernel launch.")
        .def_readonly("kernel", &LaunchCounters::kernel)
        .def_readonly("gm_bytes_in", &LaunchCounters::gmBytesIn)
        .def_readonly("gm_bytes_out", &LaunchCounters::gmBytesOut)
        .def_readonly("datacopy_calls", &LaunchCounters::dataCopyCalls)
        .def_readonly("vector_instructions", &LaunchCounters::vectorInstructions)
        .def_readonly("vector_repeats", &LaunchCounters::vectorRepeats)
        .def_readonly("peak_ub_bytes", &LaunchCounters::peakUbBytes)
        .def_readonly("cube_iterations", &LaunchCounters::cubeIterations)
        .def_readonly("cube_macs", &LaunchCounters::cubeMacs)
        .def_readonly("block_dim", &LaunchCounters::blockDim)
        .def_readonly("tile_length", &LaunchCounters::tileLength)
        .def_property_readonly("block_bytes_in", [tupleOf](const LaunchCounters& c) { return tupleOf(c.blockBytesIn); })
        .def_property_readonly("block_bytes_out",
                               [tupleOf](const LaunchCounters& c) { return tupleOf(c.blockBytesOut); })
        .def_property_readonly("buffer_bytes_in", [dictOf](const LaunchCounters& c) { return dictOf(c.bufferBytesIn); })
        .def_property_readonly("buffer_bytes_out",
                               [dictOf](const LaunchCounters& c) { return dictOf(c.bufferBytesOut); })
        .def_readonly("timeline", &LaunchCounters::timeline);

    DefineTilings(m);

    m.def(
        "kernels",
        [] {
            py::list rows;
            for (const KernelEntry& k : kOpKernels) {
                py::list params;
                for (const auto& p : k.params) {
                    const char* direction = p.direction == ascend_acts_sim::Direction::In    ? "in"
                                            : p.direction == ascend_acts_sim::Direction::Out ? "out"
                                                                                             : "inout";
                    params.append(py::make_tuple(p.name, direction));
                }
                rows.append(py::dict(py::arg("name") = k.name, py::arg("entry") = k.entry,
                                     py::arg("tiling") = TilingName(k.tiling),
                                     py::arg("wraps_integers") = k.wrapsIntegers, py::arg("params") = params));
            }
            return rows;
        },
        "The launch table: one dict per kernel (name, entry, tiling, wraps_integers, params).");

    ascend_acts_sim::DefineLaunch(m, kTable);
}
