// ascend_acts._sim: our AscendC kernels (op_kernel/) on the emulator (ascendc_sim/), for Python.
//   launch(kernel, buffers, tiling, platform)      the one launch entry (launch.h)
//   <family>_tiling(...), their structs            op_host's tiling (each family's TilingFor, the CANN
//                                                  TilingFunc's too) and the structs it returns, registered by
//                                                  the generated tiling_classes.inc
//   platforms(), Platform                          the emulator's platform table
//   Rule, EmulatorError, Launch                    what a launch raises and returns
//   kernels()                                      the launch table (generated from the op table)
#include <pybind11/pybind11.h>
#include <pybind11/native_enum.h>
#include <pybind11/stl.h>

#include <algorithm>

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
// family's tiling computes from it (workspace_bytes, when the family has a workspace).
template <class Tiling, class Fields>
void DefineTilingClass(py::module_& m, const char* name, const char* doc, Fields fields) {
    auto c = ReadOnlyClass<Tiling>(m, name, doc);
    fields(c);
    if constexpr (ascend_acts::kHasWorkspace<Tiling>) {
        c.def_property_readonly("workspace_bytes", [](const Tiling& t) { return ascend_acts::WorkspaceBytesOf(t); });
    }
}

std::string Listed(const std::vector<std::string>& names) {
    std::string text;
    for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
    return text;
}

// The TilingRequest of Python's arguments for `kernel`, as the CANN TilingFunc fills it from its context
// (op_host/common/op_host_common.h): the kernel's variant, its input shapes, element size, attributes by name in the
// table's order, and the named platform's limits (vector_cores 0: the platform's).
ascend_acts::TilingRequest RequestOf(const std::string& where, const KernelEntry& kernel, const py::sequence& inputs,
                                     uint32_t elementSize, const py::dict& attrs, const std::string& platformName,
                                     uint32_t vectorCores, uint64_t firstElement) {
    ascend_acts::TilingRequest request;
    request.variant = kernel.variant;
    request.elementSize = elementSize;
    request.firstElement = firstElement;
    std::vector<std::string> inputNames, attrNames;
    for (const auto& p : kernel.params) {
        if (p.direction == ascend_acts_sim::Direction::In) inputNames.emplace_back(p.name);
    }
    for (const auto& a : kernel.attrs) attrNames.emplace_back(a.name);
    if (py::len(inputs) != inputNames.size()) {
        throw py::value_error(where + " takes the shapes of its inputs " + Listed(inputNames) + ", got " +
                              std::to_string(py::len(inputs)));
    }
    for (size_t i = 0; i < inputNames.size(); ++i) {
        py::object shape = inputs[i];
        try {
            request.shapes.push_back(shape.is_none() ? std::vector<int64_t>{} : shape.cast<std::vector<int64_t>>());
        } catch (const py::cast_error&) {
            throw py::type_error(where + ": the shape of " + inputNames[i] +
                                 " must be a sequence of ints or None, got " + std::string(py::repr(shape)));
        }
        for (int64_t size : request.shapes.back()) {
            if (size < 0) {  // a TilingContext's shapes never hold one: a size would wrap to 2**64 - |size|
                throw py::value_error(where + ": the shape of " + inputNames[i] +
                                      " has a negative size: " + std::string(py::repr(shape)));
            }
        }
        request.present.push_back(!shape.is_none());
    }
    for (auto item : attrs) {
        std::string name = py::str(item.first);
        if (std::find(attrNames.begin(), attrNames.end(), name) == attrNames.end()) {
            throw py::value_error(where + " has no attribute '" + name + "' (its attributes: " + Listed(attrNames) +
                                  ")");
        }
    }
    for (const auto& a : kernel.attrs) {
        if (!attrs.contains(a.name)) {
            throw py::value_error(where + ": attribute '" + a.name + "' missing (its attributes: " + Listed(attrNames) +
                                  ")");
        }
        py::object value = attrs[a.name];
        ascend_acts::AttrValue converted;
        try {
            if (a.kind == ascend_acts::AttrKind::Float) {
                converted.number = value.cast<double>();
            } else if (a.kind == ascend_acts::AttrKind::Bool) {
                converted.number = value.cast<bool>() ? 1 : 0;
            } else if (a.kind == ascend_acts::AttrKind::Int) {
                // a bool is an int to pybind11; the OpDef's Int attribute takes none
                if (py::isinstance<py::bool_>(value)) throw py::cast_error();
                converted.integer = value.cast<int64_t>();
            } else {
                converted.ints = value.cast<std::vector<int64_t>>();
            }
        } catch (const py::cast_error&) {
            const char* expected = a.kind == ascend_acts::AttrKind::Float  ? "a float"
                                   : a.kind == ascend_acts::AttrKind::Bool ? "a bool"
                                   : a.kind == ascend_acts::AttrKind::Int  ? "an int"
                                                                           : "a sequence of ints";
            throw py::type_error(where + ": attribute '" + a.name + "' must be " + expected + ", got " +
                                 std::string(py::repr(value)));
        }
        request.attrs.push_back(converted);
    }
    const ascendc_sim::Platform& p = ascend_acts_sim::PlatformNamed(platformName);
    request.platform = {vectorCores == 0 ? p.vectorCores : vectorCores,
                        p.cubeCores,
                        p.ubBytes,
                        p.l1Bytes,
                        p.l0aBytes,
                        p.l0bBytes,
                        p.l0cBytes};
    return request;
}

// A family's Python tiling function `name` (the generated tiling_classes.inc: <family>_tiling), the same for every
// struct: the request of its arguments and the family's TilingFor, the one the CANN TilingFunc runs.
template <class Tiling>
void DefineTilingFunction(py::module_& m, const char* name) {
    m.def(
        name,
        [name](const std::string& kernel, const py::sequence& inputs, uint32_t elementSize, const py::dict& attrs,
               const std::string& platform, uint32_t vectorCores, uint64_t firstElement) {
            const KernelEntry& entry = KernelWith(kernel, ascend_acts_sim::TilingKindOf<Tiling>::kKind, name);
            ascend_acts::TilingRequest request = RequestOf(std::string(name) + "(): " + kernel, entry, inputs,
                                                           elementSize, attrs, platform, vectorCores, firstElement);
            Tiling tiling{};
            std::string why;
            if (!TilingFor(request, tiling, why)) {
                throw py::value_error("no tiling for " + kernel + " " + why + " on " + platform);
            }
            return tiling;
        },
        py::arg("kernel"), py::arg("inputs"), py::arg("element_size"), py::arg("attrs") = py::dict(),
        py::arg("platform") = "ascend910b1", py::arg("vector_cores") = 0, py::arg("first_element") = 0,
        "The host tiling of `kernel` (a kernel of this family) as the op package's TilingFunc computes it: `inputs` "
        "its input shapes in the op table's order (None: an optional input left out), `element_size` the bytes of an "
        "element of input 0, `attrs` every attribute of the kernel by name; vector_cores 0: the platform's; "
        "first_element: the flat index of input 0's first element (a launch in pieces). ValueError when it has none.");
}

}  // namespace

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
