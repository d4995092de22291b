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
    uint32_t tilingKey;  // the kernels' TILING_KEY_IS values (op_kernel/common/dtype_key.h)
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
PreparedTiling Prepare(const KernelEntry& kernel, py::handle tiling) {
    if (!py::isinstance<Tiling>(tiling)) {
        throw py::type_error(std::string(kernel.name) + ": tiling must be a " + TilingKindOf<Tiling>::kName + ", got " +
                             TypeName(tiling));
    }
    const Tiling& t = tiling.cast<const Tiling&>();
    using Traits = TilingTraits<Tiling>;
    return {Traits::Buffer(t), Traits::Blocks(t), Traits::TileLength(t), Traits::WorkspaceBytes(t)};
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
                   const std::string& platformName, std::optional<uint32_t> blockDim, py::handle costs) {
    if (!costs.is_none() && !py::isinstance<ascendc_sim::TimelineCosts>(costs)) {
        throw py::type_error(name + ": costs must be a TimelineCosts or None, got " + TypeName(costs));
    }
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
#define ACTS_SIM_PREPARE(Struct) \
    case TilingKind::Struct: prepared = Prepare<ascend_acts::Struct>(*kernel, tiling); break;
        ACTS_SIM_TILINGS(ACTS_SIM_PREPARE)
#undef ACTS_SIM_PREPARE
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
    std::optional<ascendc_sim::Timeline> timeline;
    if (!costs.is_none()) {
        timeline.emplace(costs.cast<const ascendc_sim::TimelineCosts&>());
        timeline->SetLaunch(kernel->mix, prepared.blocks);
    }
    {
        py::gil_scoped_release released;
        std::lock_guard<std::mutex> one(g_launchMutex);
        ascendc_sim::trace::Activate(timeline ? &*timeline : nullptr);
        result = kernel->mix ? ascendc_sim::LaunchMix(kernel->entry, platform, prepared.blocks, dtype->tilingKey,
                                                      launchBuffers, runCore)
                             : ascendc_sim::Launch(kernel->entry, platform, prepared.blocks, dtype->tilingKey,
                                                   launchBuffers, runCore, kernel->wrapsIntegers);
        ascendc_sim::trace::Activate(nullptr);
    }
    if (timeline) counters.timeline = std::make_shared<ascendc_sim::TimelineSummary>(timeline->Summary());
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
                std::optional<uint32_t> blockDim,
                py::object costs) { return Run(table, kernel, buffers, tiling, platform, blockDim, costs); },
        py::arg("kernel"), py::arg("buffers"), py::arg("tiling") = py::none(), py::arg("platform") = "ascend910b1",
        py::arg("block_dim") = py::none(), py::arg("costs") = py::none(),
        "Launch `kernel` (its op-table base name) on the emulator. `buffers`: every GM parameter by name, a "
        "contiguous NumPy array or CPU torch tensor used in place (None: one the kernel does not touch); "
        "`tiling`: the kernel's tiling struct (from the *_tiling functions); `block_dim`: only for kernels "
        "without a tiling struct; `costs`: a TimelineCosts to schedule the launch's pipe timeline with "
        "(Launch.timeline; "
        "None: no schedule). Returns the Launch counters; raises EmulatorError for a broken rule.");
}

}  // namespace ascend_acts_sim

namespace ascend_acts_sim {
namespace {

using ascendc_sim::Pipe;

Pipe PipeNamed(const std::string& name) {
    for (size_t p = 0; p < ascendc_sim::kPipes; ++p) {
        if (name == ascendc_sim::PipeName(Pipe(p))) return Pipe(p);
    }
    throw py::value_error("schedule: pipe must be one of MTE2, MTE1, M, FIX, V, MTE3, S, got '" + name + "'");
}

ascendc_sim::EventKind KindNamed(const std::string& name) {
    static const std::pair<const char*, ascendc_sim::EventKind> kinds[] = {
        {"dma", ascendc_sim::EventKind::Dma},       {"load", ascendc_sim::EventKind::Load},
        {"mmad", ascendc_sim::EventKind::Mmad},     {"fixpipe", ascendc_sim::EventKind::Fixpipe},
        {"vector", ascendc_sim::EventKind::Vector}, {"gather", ascendc_sim::EventKind::Gather}};
    for (const auto& [n, kind] : kinds) {
        if (name == n) return kind;
    }
    throw py::value_error("schedule: kind must be one of dma, load, mmad, fixpipe, vector, gather, got '" + name + "'");
}

// ("UB" | "L1" | "L0A" | "L0B" | "L0C", begin, end) on the event's core, or ("GM", buffer, begin, end)
ascendc_sim::Span SpanOf(py::handle item, uint32_t core) {
    py::tuple t = py::reinterpret_borrow<py::tuple>(item);
    const std::string space = py::str(t[0]);
    ascendc_sim::Span span;
    span.owner = core;
    if (space == "GM") {
        if (t.size() != 4) throw py::value_error("schedule: a GM range is ('GM', buffer, begin, end)");
        span.gm = true;
        span.gmBuffer = t[1].cast<uint32_t>();
        span.begin = t[2].cast<uint64_t>();
        span.end = t[3].cast<uint64_t>();
        return span;
    }
    if (t.size() != 3) throw py::value_error("schedule: a local range is (memory, begin, end)");
    const ascendc_sim::Memory memories[] = {ascendc_sim::Memory::UB, ascendc_sim::Memory::L1, ascendc_sim::Memory::L0A,
                                            ascendc_sim::Memory::L0B, ascendc_sim::Memory::L0C};
    bool found = false;
    for (auto m : memories) {
        if (space == ascendc_sim::MemoryName(m)) span.memory = m, found = true;
    }
    if (!found) throw py::value_error("schedule: memory must be GM, UB, L1, L0A, L0B or L0C, got '" + space + "'");
    span.begin = t[1].cast<uint64_t>();
    span.end = t[2].cast<uint64_t>();
    return span;
}

template <class T>
T Get(py::dict event, const char* key, T fallback) {
    return event.contains(key) ? event[key].cast<T>() : fallback;
}

ascendc_sim::TimelineSummary Schedule(py::list events, const ascendc_sim::TimelineCosts& costs, bool mix,
                                      uint32_t blockDim) {
    // everything checked before the first event is scheduled
    struct Item {
        uint32_t core;
        int kind;  // 0 event, 1 flag set, 2 flag wait
        ascendc_sim::TraceEvent event;
        std::vector<uint32_t> peers;
        uint16_t flag = 0;
    };
    std::vector<Item> items;
    for (py::handle handle : events) {
        py::dict d = py::reinterpret_borrow<py::dict>(handle);
        Item item;
        item.core = Get<uint32_t>(d, "core", 0);
        item.event.pipe = PipeNamed(Get<std::string>(d, "pipe", "V"));
        if (d.contains("flag_set") || d.contains("flag_wait")) {
            item.kind = d.contains("flag_set") ? 1 : 2;
            item.flag = d[d.contains("flag_set") ? "flag_set" : "flag_wait"].cast<uint16_t>();
            item.peers = d["peers"].cast<std::vector<uint32_t>>();
        } else {
            item.kind = 0;
            ascendc_sim::TraceEvent& e = item.event;
            e.kind = KindNamed(Get<std::string>(d, "kind", "vector"));
            e.bytes = Get<uint64_t>(d, "bytes", 0);
            e.firstBytes = Get<uint64_t>(d, "first_bytes", 0);
            e.macs = Get<uint64_t>(d, "macs", 0);
            e.elements = Get<uint64_t>(d, "elements", 0);
            e.elementBytes = Get<uint8_t>(d, "element_bytes", 2);
            if (e.kind == ascendc_sim::EventKind::Vector) {
                const std::string op = Get<std::string>(d, "op", "");
                if (op.empty()) throw py::value_error("schedule: a vector event needs 'op' (an AscendC API name)");
                try {
                    e.vectorClass = ascendc_sim::VectorClassOf(op.c_str());
                } catch (const std::logic_error& error) {
                    throw py::value_error(std::string("schedule: ") + error.what());
                }
            }
            if (d.contains("reads")) {
                py::list reads = d["reads"];
                if (reads.size() > 3) throw py::value_error("schedule: at most 3 read ranges per event");
                for (py::handle r : reads) e.reads[e.readCount++] = SpanOf(r, item.core);
            }
            if (d.contains("write") && !d["write"].is_none()) {
                e.writes = true;
                e.write = SpanOf(d["write"], item.core);
            }
        }
        items.push_back(std::move(item));
    }
    ascendc_sim::Timeline timeline(costs);
    timeline.SetLaunch(mix, blockDim);
    for (const Item& item : items) {
        if (item.kind == 0) timeline.Add(item.core, item.event);
        if (item.kind == 1) timeline.FlagSet(item.core, item.event.pipe, item.peers, item.flag);
        if (item.kind == 2) timeline.FlagWait(item.core, item.event.pipe, item.peers, item.flag);
    }
    return timeline.Summary();
}

py::tuple BusyOf(const std::vector<std::array<double, ascendc_sim::kPipes>>& perCore) {
    py::tuple out(perCore.size());
    for (size_t c = 0; c < perCore.size(); ++c) {
        py::dict pipes;
        for (size_t p = 0; p < ascendc_sim::kPipes; ++p) pipes[ascendc_sim::PipeName(Pipe(p))] = perCore[c][p];
        out[c] = pipes;
    }
    return out;
}

}  // namespace

void DefineTimeline(py::module_& m) {
    using ascendc_sim::TimelineCosts;
    py::class_<TimelineCosts>(m, "TimelineCosts",
                              "Cost inputs of the pipe schedule (cycles, bytes per cycle); its values come from "
                              "ascend_acts.backends.sim.timeline.Assumptions.")
        .def(py::init<>())
        .def_readwrite("dma_issue_cycles", &TimelineCosts::dmaIssueCycles)
        .def_readwrite("dma_latency_cycles", &TimelineCosts::dmaLatencyCycles)
        .def_readwrite("mte2_hbm_bytes_per_cycle", &TimelineCosts::mte2HbmBytesPerCycle)
        .def_readwrite("mte2_l2_bytes_per_cycle", &TimelineCosts::mte2L2BytesPerCycle)
        .def_readwrite("mte2_l1_bytes_per_cycle", &TimelineCosts::mte2L1BytesPerCycle)
        .def_readwrite("mte3_bytes_per_cycle", &TimelineCosts::mte3BytesPerCycle)
        .def_readwrite("fix_bytes_per_cycle", &TimelineCosts::fixBytesPerCycle)
        .def_readwrite("l0c_to_ub_bytes_per_cycle", &TimelineCosts::l0cToUbBytesPerCycle)
        .def_readwrite("mte1_l0a_bytes_per_cycle", &TimelineCosts::mte1L0aBytesPerCycle)
        .def_readwrite("mte1_l0b_bytes_per_cycle", &TimelineCosts::mte1L0bBytesPerCycle)
        .def_readwrite("mte1_issue_cycles", &TimelineCosts::mte1IssueCycles)
        .def_readwrite("cube_macs_per_cycle_16", &TimelineCosts::cubeMacsPerCycle16)
        .def_readwrite("cube_macs_per_cycle_32", &TimelineCosts::cubeMacsPerCycle32)
        .def_readwrite("mmad_efficiency", &TimelineCosts::mmadEfficiency)
        .def_readwrite("mmad_issue_cycles", &TimelineCosts::mmadIssueCycles)
        .def_readwrite("vector_issue_cycles", &TimelineCosts::vectorIssueCycles)
        .def_readwrite("gather_elements_per_cycle", &TimelineCosts::gatherElementsPerCycle)
        .def_readwrite("sync_cycles", &TimelineCosts::syncCycles)
        .def_readwrite("cross_core_flag_cycles", &TimelineCosts::crossCoreFlagCycles);

    using ascendc_sim::TimelineSummary;
    py::class_<TimelineSummary, std::shared_ptr<TimelineSummary>>(
        m, "Timeline",
        "A launch's as-soon-as-possible pipe schedule (cycles). Cores: a MIX launch's AIC c at c and AIV v at "
        "block_dim + v; otherwise block b at b and its Matmul calls' cube core at block_dim + b.")
        .def_readonly("costs", &TimelineSummary::costs)
        .def_readonly("mix", &TimelineSummary::mix)
        .def_readonly("block_dim", &TimelineSummary::blockDim)
        .def_property_readonly("makespan_cycles",
                               [](const TimelineSummary& s) { return py::tuple(py::cast(s.makespanCycles)); })
        .def_property_readonly("busy_cycles", [](const TimelineSummary& s) { return BusyOf(s.busyCycles); })
        .def_property_readonly("events",
                               [](const TimelineSummary& s) {
                                   py::tuple out(s.events.size());
                                   for (size_t c = 0; c < s.events.size(); ++c) {
                                       py::dict pipes;
                                       for (size_t p = 0; p < ascendc_sim::kPipes; ++p)
                                           pipes[ascendc_sim::PipeName(Pipe(p))] = s.events[c][p];
                                       out[c] = pipes;
                                   }
                                   return out;
                               })
        .def_readonly("syncs", &TimelineSummary::syncs)
        .def_readonly("cross_core_waits", &TimelineSummary::crossCoreWaits)
        .def_readonly("cube_macs_16", &TimelineSummary::cubeMacs16)
        .def_readonly("cube_macs_32", &TimelineSummary::cubeMacs32)
        .def_readonly("vector_repeats", &TimelineSummary::vectorRepeats)
        .def_readonly("gather_elements", &TimelineSummary::gatherElements)
        .def_readonly("vector_work_cycles", &TimelineSummary::vectorWorkCycles)
        .def_property_readonly("vector_classes",
                               [](const TimelineSummary& s) {
                                   py::dict out;  // class name -> (instructions, repeats)
                                   const auto& classes = ascendc_sim::VectorClasses();
                                   for (size_t c = 0; c < classes.size(); ++c)
                                       out[classes[c].name] = py::make_tuple(s.classInstructions[c], s.classRepeats[c]);
                                   return out;
                               })
        .def_readonly("gm_bytes", &TimelineSummary::gmBytes)
        .def_readonly("hbm_bytes", &TimelineSummary::hbmBytes)
        .def_readonly("footprint_bytes", &TimelineSummary::footprintBytes);

    m.def("schedule", &Schedule, py::arg("events"), py::arg("costs"), py::arg("mix") = false, py::arg("block_dim") = 1,
          "The launch schedule over hand-written events (tests): a list of dicts, each either an operation "
          "{'core', 'pipe', 'kind' (dma, load, mmad, fixpipe, vector, gather), 'op' (vector: an AscendC API name, "
          "vector_classes()), 'bytes', 'first_bytes' (MTE2: of them read from HBM), "
          "'macs', 'element_bytes', "
          "'elements', 'reads': [range], 'write': range}, a range being (memory, begin, end) on the core or "
          "('GM', buffer, begin, end), or a cross-core flag {'core', 'pipe', 'flag_set' | 'flag_wait': id, "
          "'peers': [cores]}. Returns a Timeline (GM traffic levels stay 0: no GM access is counted).");
    m.def(
        "vector_classes",
        [] {
            py::list out;
            for (const auto& c : ascendc_sim::VectorClasses()) {
                py::dict d;
                d["name"] = c.name;
                d["cycles_per_repeat"] = c.cyclesPerRepeat;
                d["min_cycles"] = c.minCycles;
                d["apis"] = py::str(c.apis).attr("split")();
                d["instructions"] = c.instructions;
                d["source"] = c.source;
                out.append(d);
            }
            return out;
        },
        "The vector instruction classes the timeline charges (src/timeline.cpp): name, cycles_per_repeat, "
        "min_cycles, the AscendC APIs of the class, the measured instructions and their source.");
}

}  // namespace ascend_acts_sim
