// The as-soon-as-possible schedule of a launch's events (sim/timeline.h), computed while the kernel runs:
// the emulator issues each core's operations in program order, and a MIX launch runs a core only after the
// flags it waits on were set, so every event's producers are already scheduled when it arrives.
#include "sim/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

namespace ascendc_sim {

const char* PipeName(Pipe pipe) {
    static const char* const names[] = {"MTE2", "MTE1", "M", "FIX", "V", "MTE3", "S"};
    return names[size_t(pipe)];
}

// The vector instruction classes, by their measured cycles on one 910B1 vector core: msKPP's profiling data
// (Huawei MindStudio Kernel Performance Prediction, Mulan PSL v2; public mirror xiaobingling93-pixel/Ascend-mskpp,
// csrc/prof_data/resource910b.cpp, tables V*_1_core_910b1: total cycles of one instruction by its repeat count).
// Figures only; the float32 tables where the dtype matters (our kernels' dtype).
const std::vector<VectorClassInfo>& VectorClasses() {
    static const std::vector<VectorClassInfo> classes = {
        {"scalar operand", 1, 3,
         "Adds Muls Maxs Mins LeakyRelu Abs Not ShiftRight ShiftLeft Duplicate CreateVecIndex Cast CompareScalar",
         "VADDS VMULS VMAXS VMINS VLRELU VABS VNOT VSHR VSHL VECTORDUP VCONV VCMPVS",
         "msKPP resource910b.cpp: 1 cycle per repeat, 3.0-4.1 cycles for 1-3 repeats (VCMPVS: 7 when the repeat "
         "count is not a multiple of 4; VABS_FP32, one operand, the same)"},
        {"two tensors", 2, 3, "Add Sub Mul Max Min And Or Select Sqrt Compare",
         "VADD VSUB VMUL VMAX VMIN VAND VOR VSEL VSQRT",
         "msKPP resource910b.cpp: 2 cycles per repeat, 3.0-3.1 for one repeat (VSQRT float16: 4 per repeat)"},
        {"reduce", 3, 3, "ReduceSum", "VCADD", "msKPP resource910b.cpp VCADD_FP32: 3 cycles per repeat (float16: 7)"},
        {"divide", 4, 4, "Div", "VDIV", "msKPP resource910b.cpp VDIV_FP32: 4 cycles per repeat, 4.0 for one"},
        {"multiply-add", 6, 6, "", "VMLA VMADD", "msKPP resource910b.cpp VMLA/VMADD: 6 cycles per repeat"},
        {"transpose", 1, 3, "TransDataTo5HD", "VNCHWCONV",
         "assumption: msKPP lists no VNCHWCONV; charged like its data movers VCOPY / VBRCB (1 cycle per repeat, 3 "
         "minimum)"},
    };
    return classes;
}

uint8_t VectorClassOf(const char* api) {
    const auto& classes = VectorClasses();
    const size_t length = std::strlen(api);
    for (size_t c = 0; c < classes.size(); ++c) {
        for (const char* p = classes[c].apis; (p = std::strstr(p, api)) != nullptr; p += length) {
            const bool starts = p == classes[c].apis || p[-1] == ' ';
            if (starts && (p[length] == ' ' || p[length] == '\0')) return uint8_t(c);
        }
    }
    throw std::logic_error(std::string("timeline: vector instruction ") + api +
                           " has no class in VectorClasses() (ascendc_sim/src/timeline.cpp)");
}

double VectorClassCycles(uint8_t vectorClass, uint64_t repeats) {
    const VectorClassInfo& c = VectorClasses().at(vectorClass);
    return std::max(c.minCycles, double(repeats) * c.cyclesPerRepeat);
}

namespace {

// Dependencies are tracked per granule of each memory: two vector repeats of UB, a 512-byte fractal of L1 / L0,
// 512 bytes of GM (cores depend on each other only through an AIC's flags, and the rings between an AIC and
// its AIVs are whole fractals). The unique-bytes bitmaps of GM count 32-byte DMA blocks.
uint32_t GranuleBytes(Memory memory) {
    switch (memory) {
        case Memory::UB: return 512;
        case Memory::BiasTable:
        case Memory::FixpipeBuffer: return 64;
        default: return 512;
    }
}
constexpr uint32_t kGmGranule = 512, kGmBlock = 32;

struct Granule {
    double writeEnd = 0, readEnd = 0;
    int32_t writer = -1, reader = -1;  // core * 8 + pipe of the last access, -1: none
};

struct Region {
    uint32_t granuleBytes = 0;
    std::vector<Granule> granules;
    Granule* Range(uint64_t begin, uint64_t end, size_t& count) {
        const size_t first = begin / granuleBytes, last = end == begin ? first : (end - 1) / granuleBytes + 1;
        if (granules.size() < last) granules.resize(last);
        count = last - first;
        return granules.data() + first;
    }
};

struct CoreState {
    std::array<double, kPipes> pipeFree{};
    std::array<double, kPipes> busy{};
    std::array<uint64_t, kPipes> events{};
    double issueFloor = 0;  // a CrossCoreWaitFlag holds every later instruction of the core
    double makespan = 0;
    Region local[size_t(Memory::Count)];
};

int32_t Agent(uint32_t core, Pipe pipe) { return int32_t(core * 8 + uint32_t(pipe)); }

}  // namespace

struct Timeline::State {
    TimelineCosts costs;
    bool mix = false;
    uint32_t blockDim = 0;
    std::vector<CoreState> cores;
    std::vector<Region> gm;                     // per GM buffer, from its first write
    std::vector<std::vector<uint8_t>> touched;  // per GM buffer and 32-byte granule: 1 read first, 2 written
    std::map<std::tuple<uint32_t, uint16_t, uint32_t>, std::deque<double>> flags;  // (receiver, id, sender)
    uint64_t syncs = 0, crossCoreWaits = 0, cubeMacs16 = 0, cubeMacs32 = 0, vectorRepeats = 0, gatherElements = 0;
    double vectorWorkCycles = 0;
    std::vector<uint64_t> classInstructions = std::vector<uint64_t>(VectorClasses().size());
    std::vector<uint64_t> classRepeats = std::vector<uint64_t>(VectorClasses().size());
    uint64_t gmBytes = 0;
    uint64_t pendingFirstReadBytes = 0;

    CoreState& Core(uint32_t core) {
        if (cores.size() <= core) cores.resize(core + 1);
        return cores[core];
    }
    // MIX: AIC c and AIVs blockDim + 2c, 2c + 1; otherwise block b and its Matmul's cube core blockDim + b
    uint32_t AiCoreOf(uint32_t core) const {
        if (core < blockDim) return core;
        return mix ? (core - blockDim) / 2 : core - blockDim;
    }

    // The earliest start of an access by (core, pipe) after `other`'s access ending at `end`.
    double After(int32_t other, double end, uint32_t core, Pipe pipe, bool& synced) const {
        if (other < 0) return 0;
        const uint32_t otherCore = uint32_t(other) / 8;
        if (otherCore == core) {
            if (Pipe(other % 8) == pipe) return end;
            synced = true;
            return end + costs.syncCycles;
        }
        // Cores are ordered only through cross-core flags, which exist between an AIC (or the stand-in cube
        // core of a Matmul) and its own AIVs
        const bool cubeAndVector = (otherCore < blockDim) != (core < blockDim);
        if (!cubeAndVector || AiCoreOf(otherCore) != AiCoreOf(core)) return 0;
        return end + costs.crossCoreFlagCycles;
    }

    Region* RegionOf(const Span& span, bool write) {
        if (!span.gm) {
            Region& r = Core(span.owner).local[size_t(span.memory)];
            if (r.granuleBytes == 0) r.granuleBytes = GranuleBytes(span.memory);
            return &r;
        }
        if (gm.size() <= span.gmBuffer) gm.resize(span.gmBuffer + 1);
        Region& r = gm[span.gmBuffer];
        if (r.granuleBytes == 0) {
            if (!write) return nullptr;  // never written yet: a read waits for nothing and no write waits for it
            r.granuleBytes = kGmGranule;
        }
        return &r;
    }

    // A GM DMA's data arrives its latency after the DMA leaves its pipe (DMAs in flight overlap).
    double Latency(const TraceEvent& e) const {
        const bool gmDma = e.kind == EventKind::Dma || (e.kind == EventKind::Fixpipe && e.write.gm);
        return gmDma ? costs.dmaLatencyCycles : 0.0;
    }

    // The event's time on its pipe.
    double Cost(const TraceEvent& e) {
        const TimelineCosts& c = costs;
        switch (e.kind) {
            case EventKind::Dma: {
                if (e.pipe == Pipe::MTE3) return c.dmaIssueCycles + double(e.bytes) / c.mte3BytesPerCycle;
                const uint64_t first = std::min(e.firstBytes, e.bytes);
                // GM -> L1 runs at its own measured rate; its first reads slow down as GM -> UB's do
                const double l2 = e.write.memory == Memory::L1 ? c.mte2L1BytesPerCycle : c.mte2L2BytesPerCycle;
                const double hbm = l2 * c.mte2HbmBytesPerCycle / c.mte2L2BytesPerCycle;
                return c.dmaIssueCycles + double(first) / hbm + double(e.bytes - first) / l2;
            }
            case EventKind::Load:
                return c.mte1IssueCycles + double(e.bytes) / (e.write.memory == Memory::L0A ? c.mte1L0aBytesPerCycle
                                                                                            : c.mte1L0bBytesPerCycle);
            case EventKind::Mmad: {
                const bool wide = e.elementBytes == 4;
                (wide ? cubeMacs32 : cubeMacs16) += e.macs;
                const double rate = wide ? c.cubeMacsPerCycle32 : c.cubeMacsPerCycle16;
                return c.mmadIssueCycles + double(e.macs) / (rate * c.mmadEfficiency);
            }
            case EventKind::Fixpipe:
                if (!e.write.gm) return double(e.bytes) / c.l0cToUbBytesPerCycle;
                return c.dmaIssueCycles + double(e.bytes) / c.fixBytesPerCycle;
            case EventKind::Vector: {
                const uint64_t repeats = (e.bytes + 255) / 256;
                const double work = VectorClassCycles(e.vectorClass, repeats);
                vectorRepeats += repeats;
                vectorWorkCycles += work;
                ++classInstructions.at(e.vectorClass);
                classRepeats[e.vectorClass] += repeats;
                return c.vectorIssueCycles + work;
            }
            case EventKind::Gather:
                gatherElements += e.elements;
                return c.vectorIssueCycles + double(e.elements) / c.gatherElementsPerCycle;
        }
        return 0;
    }
};

Timeline::Timeline(const TimelineCosts& costs) : state_(new State) { state_->costs = costs; }
Timeline::~Timeline() { delete state_; }

void Timeline::SetLaunch(bool mix, uint32_t blockDim) {
    state_->mix = mix;
    state_->blockDim = blockDim;
}

void Timeline::Add(uint32_t core, const TraceEvent& e) {
    State& s = *state_;
    CoreState& me = s.Core(core);
    const size_t pipe = size_t(e.pipe);
    double start = std::max(me.issueFloor, me.pipeFree[pipe]);
    bool synced = false;
    size_t count = 0;
    for (uint8_t r = 0; r < e.readCount; ++r) {
        if (e.reads[r].end <= e.reads[r].begin) continue;
        Region* region = s.RegionOf(e.reads[r], false);
        if (region == nullptr) continue;
        Granule* g = region->Range(e.reads[r].begin, e.reads[r].end, count);
        for (size_t i = 0; i < count; ++i)
            start = std::max(start, s.After(g[i].writer, g[i].writeEnd, core, e.pipe, synced));
    }
    Region* written = nullptr;
    Granule* wg = nullptr;
    size_t writtenCount = 0;
    if (e.writes && e.write.end > e.write.begin) {
        written = s.RegionOf(e.write, true);
        wg = written->Range(e.write.begin, e.write.end, writtenCount);
        for (size_t i = 0; i < writtenCount; ++i) {
            start = std::max(start, s.After(wg[i].writer, wg[i].writeEnd, core, e.pipe, synced));
            start = std::max(start, s.After(wg[i].reader, wg[i].readEnd, core, e.pipe, synced));
        }
    }
    const double duration = s.Cost(e);
    const double end = start + duration + s.Latency(e);  // when the data it moved is there
    const int32_t agent = Agent(core, e.pipe);
    for (uint8_t r = 0; r < e.readCount; ++r) {
        if (e.reads[r].end <= e.reads[r].begin) continue;
        Region* region = s.RegionOf(e.reads[r], false);
        if (region == nullptr) continue;
        Granule* g = region->Range(e.reads[r].begin, e.reads[r].end, count);
        for (size_t i = 0; i < count; ++i) {  // read while on its pipe: a DMA's latency is the way to the destination
            if (start + duration >= g[i].readEnd) {
                g[i].readEnd = start + duration;
                g[i].reader = agent;
            }
        }
    }
    if (written != nullptr) {
        wg = written->Range(e.write.begin, e.write.end, writtenCount);  // the reads may have grown the vector
        for (size_t i = 0; i < writtenCount; ++i) wg[i] = Granule{end, 0, agent, -1};
    }
    if (synced) ++s.syncs;
    me.pipeFree[pipe] = start + duration;
    me.busy[pipe] += duration;
    ++me.events[pipe];
    me.makespan = std::max(me.makespan, end);
}

void Timeline::TouchGm(size_t buffer, uint64_t bufferBytes, uint64_t first, uint64_t bytes, bool write) {
    State& s = *state_;
    s.gmBytes += bytes;
    if (bytes == 0) return;
    if (s.touched.size() <= buffer) s.touched.resize(buffer + 1);
    auto& bits = s.touched[buffer];
    if (bits.empty()) bits.assign((bufferBytes + kGmBlock - 1) / kGmBlock, 0);
    for (uint64_t g = first / kGmBlock; g <= (first + bytes - 1) / kGmBlock; ++g) {
        if (write) {
            bits[g] |= 2;
        } else if (bits[g] == 0) {
            bits[g] = 1;  // a first read comes from HBM; a read after a write finds the bytes in L2
            s.pendingFirstReadBytes += kGmBlock;
        }
    }
}

uint64_t Timeline::TakeFirstReadBytes() {
    const uint64_t bytes = state_->pendingFirstReadBytes;
    state_->pendingFirstReadBytes = 0;
    return bytes;
}

void Timeline::FlagSet(uint32_t core, Pipe pipe, const std::vector<uint32_t>& receivers, uint16_t flagId) {
    State& s = *state_;
    CoreState& me = s.Core(core);
    // set once the pipe named in the template argument has finished what was issued to it before
    const double at = std::max(me.issueFloor, me.pipeFree[size_t(pipe)]);
    for (uint32_t r : receivers) s.flags[{r, flagId, core}].push_back(at);
    ++me.events[size_t(Pipe::S)];
}

void Timeline::FlagWait(uint32_t core, Pipe pipe, const std::vector<uint32_t>& senders, uint16_t flagId) {
    State& s = *state_;
    CoreState& me = s.Core(core);
    double at = std::max(me.issueFloor, me.pipeFree[size_t(pipe)]);
    for (uint32_t from : senders) {
        auto& pending = s.flags[{core, flagId, from}];
        if (pending.empty()) continue;  // the emulator's runtime only lets a wait pass once every set exists
        at = std::max(at, pending.front() + s.costs.crossCoreFlagCycles);
        pending.pop_front();
    }
    me.issueFloor = at;
    me.pipeFree[size_t(pipe)] = std::max(me.pipeFree[size_t(pipe)], at);
    me.makespan = std::max(me.makespan, at);
    ++me.events[size_t(Pipe::S)];
    ++s.crossCoreWaits;
}

TimelineSummary Timeline::Summary() const {
    const State& s = *state_;
    TimelineSummary out;
    out.costs = s.costs;
    out.mix = s.mix;
    out.blockDim = s.blockDim;
    for (const CoreState& c : s.cores) {
        out.makespanCycles.push_back(c.makespan);
        out.busyCycles.push_back(c.busy);
        out.events.push_back(c.events);
    }
    out.syncs = s.syncs;
    out.crossCoreWaits = s.crossCoreWaits;
    out.cubeMacs16 = s.cubeMacs16;
    out.cubeMacs32 = s.cubeMacs32;
    out.vectorRepeats = s.vectorRepeats;
    out.gatherElements = s.gatherElements;
    out.vectorWorkCycles = s.vectorWorkCycles;
    out.classInstructions = s.classInstructions;
    out.classRepeats = s.classRepeats;
    out.gmBytes = s.gmBytes;
    for (const auto& bits : s.touched) {
        for (uint8_t b : bits) {
            out.hbmBytes += ((b & 1) ? kGmBlock : 0) + ((b & 2) ? kGmBlock : 0);
            out.footprintBytes += b != 0 ? kGmBlock : 0;
        }
    }
    return out;
}

namespace trace {
namespace {
Timeline* g_active = nullptr;

Pipe PipeOf(pipe_t pipe) {
    switch (pipe) {
        case PIPE_V: return Pipe::V;
        case PIPE_M: return Pipe::M;
        case PIPE_MTE1: return Pipe::MTE1;
        case PIPE_MTE2: return Pipe::MTE2;
        case PIPE_MTE3: return Pipe::MTE3;
        case PIPE_FIX: return Pipe::FIX;
        default: return Pipe::S;
    }
}
}  // namespace

Timeline* Active() { return g_active; }
void Activate(Timeline* timeline) { g_active = timeline; }

void RecordOn(uint32_t core, const TraceEvent& event) {
    const uint64_t firstReads = g_active->TakeFirstReadBytes();  // a scalar GetValue's go to no DMA
    if (event.kind == EventKind::Dma && event.pipe == Pipe::MTE2) {
        TraceEvent copy = event;
        copy.firstBytes = firstReads;
        g_active->Add(core, copy);
        return;
    }
    g_active->Add(core, event);
}
void Record(const TraceEvent& event) { RecordOn(Ctx().coreId, event); }
uint32_t MatmulCore() { return Ctx().mix ? Ctx().coreId : Ctx().blockDim + Ctx().coreId; }

Span GmSpan(const void* first, uint64_t bytes) {
    Span span;
    span.gm = true;
    GmBuffer* buffer = FindGm(first, bytes);
    if (buffer == nullptr) return span;  // empty: the operation's own check reports the bad range
    span.gmBuffer = uint32_t(buffer - Ctx().gm.data());
    span.begin = static_cast<const uint8_t*>(first) - buffer->base;
    span.end = span.begin + bytes;
    return span;
}

void TouchGm(const void* address, uint64_t bytes, bool write) {
    if (g_active == nullptr) return;
    GmBuffer* buffer = FindGm(address, bytes);
    g_active->TouchGm(size_t(buffer - Ctx().gm.data()), buffer->bytes,
                      static_cast<const uint8_t*>(address) - buffer->base, bytes, write);
}

void FlagPipe(pipe_t pipe) {
    if (g_active != nullptr) g_active->pendingFlagPipe = PipeOf(pipe);
}
void FlagSet(uint32_t core, const std::vector<uint32_t>& receivers, uint16_t flagId) {
    if (g_active != nullptr) g_active->FlagSet(core, g_active->pendingFlagPipe, receivers, flagId);
}
void FlagWait(uint32_t core, const std::vector<uint32_t>& senders, uint16_t flagId) {
    if (g_active != nullptr) g_active->FlagWait(core, g_active->pendingFlagPipe, senders, flagId);
}

void MatmulIterate(const void* aFirst, uint64_t aBytes, const void* bFirst, uint64_t bSpanBytes, uint64_t bBytes,
                   uint64_t paddedMacs, uint32_t elementBytes, uint32_t block) {
    if (g_active == nullptr) return;
    const uint64_t l1 = (block % 2) * 262144, l0c = (block % 2) * 65536;
    TraceEvent load;
    load.pipe = Pipe::MTE2;
    load.kind = EventKind::Dma;
    load.bytes = aBytes + bBytes;
    load.reads[load.readCount++] = GmSpan(aFirst, aBytes);
    if (bBytes > 0) load.reads[load.readCount++] = GmSpan(bFirst, bSpanBytes);
    load.writes = true;
    load.write.owner = MatmulCore();
    load.write.memory = Memory::L1;
    load.write.begin = l1;
    load.write.end = l1 + 512;
    RecordOn(MatmulCore(), load);
    TraceEvent mmad;
    mmad.pipe = Pipe::M;
    mmad.kind = EventKind::Mmad;
    mmad.macs = paddedMacs;
    mmad.elementBytes = uint8_t(elementBytes);
    mmad.readCount = 1;
    mmad.reads[0] = load.write;
    mmad.writes = true;
    mmad.write.owner = MatmulCore();
    mmad.write.memory = Memory::L0C;
    mmad.write.begin = l0c;
    mmad.write.end = l0c + 512;
    RecordOn(MatmulCore(), mmad);
}

}  // namespace trace
}  // namespace ascendc_sim
