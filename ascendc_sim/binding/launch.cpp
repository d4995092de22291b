// The generic launch: buffers checked and registered by the kernel's parameter names, the tiling turned
// into the buffer the kernel reads, one launch at a time (the emulator's launch context is global) with
// the GIL released, counters or the broken rule back to Python.
#include "launch.h"

#include <pthread.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <optional>

#include <pybind11/stl.h>

#include "tilings.h"

namespace py = pybind11;

namespace ascend_acts_sim {
namespace {

// One launch at a time. A fork while another thread launches must not leave the child's copy held.
std::mutex g_launchMutex;
void RenewLaunchMutexInChild() { new (&g_launchMutex) std::mutex(); }
[[maybe_unused]] const bool g_atFork = [] { return pthread_atfork(nullptr, nullptr, RenewLaunchMutexInChild) == 0; }();

struct DataType {
    const char* name;
    uint32_t tilingKey;  // the kernels' TILING_KEY_IS values (ElementwiseDtype)
    uint32_t size;
};
constexpr DataType kDataTypes[] = {{"float32", 0, 4}, {"float16", 1, 2}, {"bfloat16", 2, 2}};

struct HostBuffer {
    void* data = nullptr;
    uint64_t bytes = 0;
    std::string dtype;  // NumPy's or torch's name without the "torch." prefix
    bool given = false;
};

std::string TypeName(py::handle object) { return py::str(py::type::handle_of(object).attr("__name__")); }

HostBuffer BufferOf(const std::string& kernel, const std::string& name, py::handle object, bool written) {
    HostBuffer buffer;
    if (object.is_none()) return buffer;
    std::string where = kernel + ": buffer '" + name + "'";
    if (py::hasattr(object, "data_ptr")) {  // a torch tensor
        if (py::str(object.attr("device").attr("type")).cast<std::string>() != "cpu") {
            throw py::value_error(where + " must be a CPU tensor");
        }
        if (!object.attr("is_contiguous")().cast<bool>()) throw py::value_error(where + " must be contiguous");
        buffer.data = reinterpret_cast<void*>(object.attr("data_ptr")().cast<uintptr_t>());
    } else if (py::hasattr(object, "__array_interface__")) {  // a NumPy array
        py::tuple data = object.attr("__array_interface__")["data"];
        if (!object.attr("flags").attr("c_contiguous").cast<bool>()) {
            throw py::value_error(where + " must be C-contiguous");
        }
        if (written && data[1].cast<bool>()) throw py::value_error(where + " is written but read-only");
        buffer.data = reinterpret_cast<void*>(data[0].cast<uintptr_t>());
    } else {
        throw py::type_error(where + " must be a NumPy array or a torch tensor, got " + TypeName(object));
    }
    buffer.bytes = object.attr("nbytes").cast<uint64_t>();
    std::string dtype = py::str(object.attr("dtype"));
    buffer.dtype = dtype.rfind("torch.", 0) == 0 ? dtype.substr(6) : dtype;
    buffer.given = true;
    return buffer;
}

// The launch-ready pieces of a tiling.
struct PreparedTiling {
    std::vector<uint8_t> bytes;
    uint32_t blocks = 0;
    uint32_t tileLength = 0;
    uint64_t workspaceBytes = 0;
};

template <class Tiling>
PreparedTiling Prepare(const KernelEntry& kernel, py::handle tiling, uint32_t elementSize, const char* typeName) {
    if (!py::isinstance<Tiling>(tiling)) {
        throw py::type_error(std::string(kernel.name) + ": tiling must be a " + typeName + ", got " + TypeName(tiling));
    }
    const Tiling& t = tiling.cast<const Tiling&>();
    using Traits = TilingTraits<Tiling>;
    return {Traits::Buffer(t), Traits::Blocks(t), Traits::TileLength(t), Traits::WorkspaceBytes(t, elementSize)};
}

PreparedTiling PrepareRaw(const KernelEntry& kernel, py::handle tiling, std::optional<uint32_t> blockDim) {
    if (!blockDim) throw py::value_error(std::string(kernel.name) + ": block_dim is required (no tiling struct)");
    PreparedTiling prepared;
    if (!tiling.is_none()) {
        py::buffer_info info = py::reinterpret_borrow<py::buffer>(tiling).request();
        auto* first = static_cast<const uint8_t*>(info.ptr);
        prepared.bytes.assign(first, first + info.size * info.itemsize);
    }
    prepared.blocks = *blockDim;
    if (kernel.rawWorkspaceBytes != nullptr) {
        prepared.workspaceBytes = kernel.rawWorkspaceBytes(prepared.bytes.data(), prepared.bytes.size());
    }
    return prepared;
}

[[noreturn]] void RaiseBrokenRule(const std::string& kernel, const ascendc_sim::LaunchResult& result) {
    py::module_ sim = py::module_::import("ascend_acts._sim");
    const char* rule = ascendc_sim::RuleName(result.rule);
    std::string where = result.block >= 0 ? "block " + std::to_string(result.block) : "launch";
    py::object type = sim.attr("EmulatorError");
    py::object error = type(kernel + " (" + where + "): [" + rule + "] " + result.message);
    error.attr("kernel") = kernel;
    error.attr("block") = result.block >= 0 ? py::object(py::int_(result.block)) : py::object(py::none());
    error.attr("rule") = sim.attr("Rule").attr(rule);
    PyErr_SetObject(type.ptr(), error.ptr());
    throw py::error_already_set();
}

LaunchCounters Run(KernelTable table, const std::string& name, py::dict buffers, py::handle tiling,
                   const std::string& platformName, std::optional<uint32_t> blockDim) {
    const KernelEntry* kernel = table.Find(name);
    if (kernel == nullptr) {
        std::string known;
        for (const KernelEntry* k = table.begin; k != table.end; ++k)
            known += std::string(known.empty() ? "" : ", ") + k->name;
        throw py::value_error("kernel: unknown kernel '" + name + "' (known: " + known + ")");
    }
    const ascendc_sim::Platform& platform = PlatformNamed(platformName);

    // the GM parameters by name: an in-place tensor is one buffer, written, its contents kept
    std::vector<std::string> names;
    std::vector<Direction> directions;
    std::vector<size_t> slotOf;  // params[i] -> its buffer
    for (const Param& p : kernel->params) {
        size_t slot = 0;
        while (slot < names.size() && names[slot] != p.name) ++slot;
        if (slot == names.size()) {
            names.push_back(p.name);
            directions.push_back(p.direction);
        } else if (p.direction != Direction::In) {
            directions[slot] = Direction::InOut;
        }
        slotOf.push_back(slot);
    }
    std::string expected;
    for (const auto& n : names) expected += (expected.empty() ? "" : ", ") + n;
    for (auto item : buffers) {
        std::string key = py::str(item.first);
        if (std::find(names.begin(), names.end(), key) == names.end()) {
            throw py::value_error(name + ": no GM parameter '" + key + "' (the kernel takes " + expected + ")");
        }
    }
    std::vector<HostBuffer> host;
    for (size_t i = 0; i < names.size(); ++i) {
        if (!buffers.contains(names[i])) {
            throw py::value_error(name + ": buffer '" + names[i] + "' missing (the kernel takes " + expected +
                                  "; None for one the kernel does not touch)");
        }
        host.push_back(BufferOf(name, names[i], buffers[py::str(names[i])], directions[i] != Direction::In));
    }
    // tiling key and element size: the dtype of the first parameter, the kernel's data
    const DataType* dtype = nullptr;
    for (const DataType& d : kDataTypes) {
        if (host[0].dtype == d.name) dtype = &d;
    }
    if (dtype == nullptr) {
        throw py::type_error(name + ": buffer '" + names[0] + "' has dtype " +
                             (host[0].given ? host[0].dtype : "None") +
                             "; the kernels take float32, float16 or bfloat16");
    }

    PreparedTiling prepared;
    switch (kernel->tiling) {
        case TilingKind::ElementwiseTiling:
            prepared = Prepare<ascend_acts::ElementwiseTiling>(*kernel, tiling, dtype->size, "ElementwiseTiling");
            break;
        case TilingKind::BatchNormLeakyReluTiling:
            prepared = Prepare<ascend_acts::BatchNormLeakyReluTiling>(*kernel, tiling, dtype->size,
                                                                      "BatchNormLeakyReluTiling");
            break;
        case TilingKind::ConvBnLeakyReluEvalTiling:
            prepared = Prepare<ascend_acts::ConvBnLeakyReluEvalTiling>(*kernel, tiling, dtype->size,
                                                                       "ConvBnLeakyReluEvalTiling");
            break;
        case TilingKind::FusedBiasLeakyReluTiling:
            prepared = Prepare<ascend_acts::FusedBiasLeakyReluTiling>(*kernel, tiling, dtype->size,
                                                                      "FusedBiasLeakyReluTiling");
            break;
        case TilingKind::Raw: prepared = PrepareRaw(*kernel, tiling, blockDim); break;
    }
    if (kernel->tiling != TilingKind::Raw && blockDim) {
        throw py::value_error(name + ": block_dim is the tiling's; leave it None");
    }

    LaunchCounters counters;
    counters.kernel = kernel->entry;
    counters.tileLength = prepared.tileLength;
    std::vector<ascendc_sim::LaunchBuffer> launchBuffers;
    std::vector<std::string> launchNames;
    for (size_t i = 0; i < names.size(); ++i) {
        if (!host[i].given) continue;
        bool written = directions[i] != Direction::In;
        launchBuffers.push_back({host[i].data, host[i].bytes, written, directions[i] == Direction::InOut});
        launchNames.push_back(names[i]);
    }
    // GM holds garbage until written: all-ones bytes (NaN in every float type) expose an unwritten workspace row
    std::vector<uint8_t> workspace(prepared.workspaceBytes, 0xFF);
    if (!workspace.empty()) {
        launchBuffers.push_back({workspace.data(), workspace.size(), false});
        launchNames.push_back("workspace");
    }
    if (!prepared.bytes.empty()) {
        launchBuffers.push_back({prepared.bytes.data(), prepared.bytes.size(), false});
        launchNames.push_back("tiling");
    }
    if (prepared.blocks == 0 && kernel->tiling != TilingKind::Raw) {  // an empty tensor: nothing to launch
        for (const auto& n : launchNames) {
            counters.bufferBytesIn.emplace_back(n, 0);
            counters.bufferBytesOut.emplace_back(n, 0);
        }
        return counters;
    }

    std::vector<GM_ADDR> gm;
    for (size_t slot : slotOf) gm.push_back(static_cast<GM_ADDR>(host[slot].data));
    GM_ADDR workspaceAddress = workspace.empty() ? nullptr : workspace.data();
    GM_ADDR tilingAddress = prepared.bytes.empty() ? nullptr : prepared.bytes.data();
    auto runCore = [&] { kernel->run(gm.data(), workspaceAddress, tilingAddress); };
    ascendc_sim::LaunchResult result;
    {
        py::gil_scoped_release released;
        std::lock_guard<std::mutex> one(g_launchMutex);
        result = kernel->mix ? ascendc_sim::LaunchMix(kernel->entry, platform, prepared.blocks, dtype->tilingKey,
                                                      launchBuffers, runCore)
                             : ascendc_sim::Launch(kernel->entry, platform, prepared.blocks, dtype->tilingKey,
                                                   launchBuffers, runCore, kernel->wrapsIntegers);
    }
    if (!result.ok) RaiseBrokenRule(kernel->entry, result);
    const auto& c = result.counters;
    counters.gmBytesIn = c.gmBytesIn;
    counters.gmBytesOut = c.gmBytesOut;
    counters.dataCopyCalls = c.dataCopyCalls;
    counters.vectorInstructions = c.vectorInstructions;
    counters.vectorRepeats = c.vectorRepeats;
    counters.peakUbBytes = c.peakUbBytes;
    counters.cubeIterations = c.cubeIterations;
    counters.cubeMacs = c.cubeMacs;
    counters.blockDim = static_cast<uint32_t>(c.blockBytesIn.size());
    counters.blockBytesIn = c.blockBytesIn;
    counters.blockBytesOut = c.blockBytesOut;
    for (size_t i = 0; i < launchNames.size(); ++i) {
        counters.bufferBytesIn.emplace_back(launchNames[i], result.bufferBytesIn[i]);
        counters.bufferBytesOut.emplace_back(launchNames[i], result.bufferBytesOut[i]);
    }
    return counters;
}

}  // namespace

const ascendc_sim::Platform& PlatformNamed(const std::string& name) {
    std::string known;
    for (uint32_t i = 0; i < ascendc_sim::kPlatformCount; ++i) {
        if (name == ascendc_sim::kPlatforms[i].name) return ascendc_sim::kPlatforms[i];
        known += std::string(i ? ", " : "") + ascendc_sim::kPlatforms[i].name;
    }
    throw py::value_error("platform: unknown platform '" + name + "' (known: " + known + ")");
}

void DefineLaunch(py::module_& module, KernelTable table) {
    module.def(
        "launch",
        [table](const std::string& kernel, py::dict buffers, py::object tiling, const std::string& platform,
                std::optional<uint32_t> blockDim) { return Run(table, kernel, buffers, tiling, platform, blockDim); },
        py::arg("kernel"), py::arg("buffers"), py::arg("tiling") = py::none(), py::arg("platform") = "ascend910b1",
        py::arg("block_dim") = py::none(),
        "Launch `kernel` (its op-table base name) on the emulator. `buffers`: every GM parameter by name, a "
        "contiguous NumPy array or CPU torch tensor used in place (None: one the kernel does not touch); "
        "`tiling`: the kernel's tiling struct (from the *_tiling functions); `block_dim`: only for kernels "
        "without a tiling struct. Returns the Launch counters; raises EmulatorError for a broken rule.");
}

}  // namespace ascend_acts_sim
