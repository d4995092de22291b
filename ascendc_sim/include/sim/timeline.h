// The per-core pipe timeline of a launch: every operation a kernel issues becomes an event on its core's
// pipe (MTE2 GM -> UB/L1, MTE1 L1 -> L0, M Mmad, FIX L0C -> GM, V vector, MTE3 UB -> GM; cross-core flags),
// with the memory ranges it reads and writes and its cost inputs. The launch's Timeline (src/timeline.cpp)
// schedules each event as soon as possible as it is recorded: when its pipe is free, the data it reads has
// been written (RAW) and the memory it writes has been read and written by earlier events (WAR / WAW), plus
// a per-sync cost when a dependency crosses pipes and a flag latency when it crosses cores. That is the
// schedule a perfectly synchronised kernel could reach (docs/benchmarks.md). It also counts the unique GM
// bytes a launch touches (the HBM level of the traffic model).
//
// The hooks below are called from the AscendC model (one line per operation); they do nothing unless a
// Timeline is active (the binding activates one per launch).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tensors.h"

namespace ascendc_sim {

enum class Pipe : uint8_t { MTE2, MTE1, M, FIX, V, MTE3, S, Count };
constexpr size_t kPipes = size_t(Pipe::Count);
const char* PipeName(Pipe pipe);

enum class EventKind : uint8_t { Dma, Load, Mmad, Fixpipe, Vector, Gather };

// What a vector instruction costs on the V pipe by its class: max(minCycles, repeats * cyclesPerRepeat) for
// its 256-byte repeats (+ TimelineCosts::vectorIssueCycles). The one table of them is VectorClasses()
// (src/timeline.cpp), with the measured figures it comes from; VectorClassOf maps an AscendC API name to its
// class (a name the table does not list is an error while a timeline is active).
struct VectorClassInfo {
    const char* name;
    double cyclesPerRepeat;
    double minCycles;
    const char* apis;          // the emulator's AscendC calls of this class, space-separated
    const char* instructions;  // the msKPP instructions measured
    const char* source;
};
const std::vector<VectorClassInfo>& VectorClasses();
uint8_t VectorClassOf(const char* api);
double VectorClassCycles(uint8_t vectorClass, uint64_t repeats);  // without the issue cost

// Cost inputs of the schedule, in cycles and bytes per cycle. The values come from one table, the Python
// dataclass ascend_acts.backends.sim.timeline.Assumptions (with their sources); this struct only carries them.
struct TimelineCosts {
    double dmaIssueCycles = 0;        // a GM DMA instruction's fixed time on its pipe (MTE2, MTE3, FIX to GM)
    double dmaLatencyCycles = 0;      // ... and its latency: its data is usable this much after its pipe is free
    double mte2HbmBytesPerCycle = 1;  // GM -> UB, one core, bytes the launch reads first (from HBM)
    double mte2L2BytesPerCycle = 1;   // GM -> UB, one core, bytes read again or written before (in L2)
    double mte2L1BytesPerCycle = 1;   // GM -> L1, one core, in L2 (first reads: scaled by hbm / l2 of GM -> UB)
    double mte3BytesPerCycle = 1;     // UB -> GM, one core
    double fixBytesPerCycle = 1;      // L0C -> GM (Fixpipe)
    double l0cToUbBytesPerCycle = 1;  // L0C -> UB (the Matmul API's GetTensorC)
    double mte1L0aBytesPerCycle = 1;  // L1 -> L0A (LoadData)
    double mte1L0bBytesPerCycle = 1;  // L1 -> L0B
    double mte1IssueCycles = 0;
    double cubeMacsPerCycle16 = 1;  // half / bfloat16 Mmad
    double cubeMacsPerCycle32 = 1;  // float Mmad
    double mmadEfficiency = 1;      // achieved / peak, for every Mmad
    double mmadIssueCycles = 0;
    double vectorIssueCycles = 0;  // per vector instruction, besides its class's cycles (VectorClasses())
    double gatherElementsPerCycle = 1;
    double syncCycles = 0;           // a dependency between two pipes of one core (SetFlag/WaitFlag)
    double crossCoreFlagCycles = 0;  // CrossCoreSetFlag -> CrossCoreWaitFlag
};

// A memory range an event touches: a local memory of the recording core, or GM buffer `gmBuffer`.
struct Span {
    bool gm = false;
    uint32_t owner = 0;  // the core whose local memory this is
    Memory memory = Memory::UB;
    uint32_t gmBuffer = 0;
    uint64_t begin = 0, end = 0;  // bytes
};

struct TraceEvent {
    Pipe pipe = Pipe::V;
    EventKind kind = EventKind::Vector;
    uint64_t bytes = 0;        // moved (DMA, LoadData, Fixpipe) or processed (vector)
    uint64_t firstBytes = 0;   // DMA from GM: the bytes of `bytes` no earlier access of the launch touched
    uint64_t macs = 0;         // Mmad: fractal-padded multiply-accumulates
    uint64_t elements = 0;     // Gather
    uint8_t elementBytes = 0;  // Mmad operand size (2 or 4)
    uint8_t vectorClass = 0;   // Vector: its index in VectorClasses()
    uint8_t readCount = 0;
    bool writes = false;
    Span reads[3];
    Span write;
};

// What a launch's schedule came to, per core: a MIX launch's AIC c at c and AIV v at blockDim + v; otherwise
// block b at b and the stand-in cube core of its Matmul calls (if any) at blockDim + b.
struct TimelineSummary {
    TimelineCosts costs;
    bool mix = false;
    uint32_t blockDim = 0;
    std::vector<double> makespanCycles;                  // per core
    std::vector<std::array<double, kPipes>> busyCycles;  // per core and pipe
    std::vector<std::array<uint64_t, kPipes>> events;    // per core and pipe
    uint64_t syncs = 0;                                  // dependencies that crossed pipes within a core
    uint64_t crossCoreWaits = 0;
    uint64_t cubeMacs16 = 0, cubeMacs32 = 0;  // Mmad multiply-accumulates (fractal-padded)
    uint64_t vectorRepeats = 0, gatherElements = 0;
    double vectorWorkCycles = 0;              // every vector instruction's class cycles, issue excluded
    std::vector<uint64_t> classInstructions;  // per VectorClasses() entry
    std::vector<uint64_t> classRepeats;
    uint64_t gmBytes = 0;         // every GM byte moved (the L2 level)
    uint64_t hbmBytes = 0;        // compulsory: first reads + written bytes, 32 B granules
    uint64_t footprintBytes = 0;  // unique GM bytes touched, 32 B granules
};

class Timeline;

namespace trace {

// The active timeline (one launch at a time, as the emulator's context): nullptr outside a traced launch.
Timeline* Active();
void Activate(Timeline* timeline);

void Record(const TraceEvent& event);  // on the running core
void RecordOn(uint32_t core, const TraceEvent& event);
// The core the Matmul API's cube work is scheduled on: outside MIX launches a stand-in cube core per vector
// core (blockDim + block), paired with it like an AIC with its AIVs.
uint32_t MatmulCore();
// every GM access the counters see (RecordGmRead / RecordGmWrite): the unique-bytes bitmaps
void TouchGm(const void* address, uint64_t bytes, bool write);
// cross-core flags (src/mix_runtime.cpp): the pipe comes from CrossCoreSetFlag/WaitFlag's template argument
void FlagPipe(pipe_t pipe);
void FlagSet(uint32_t core, const std::vector<uint32_t>& receivers, uint16_t flagId);
void FlagWait(uint32_t core, const std::vector<uint32_t>& senders, uint16_t flagId);

Span GmSpan(const void* first, uint64_t bytes);
// The GM bytes `count` blocks of `length` bytes `gap` bytes apart span.
inline uint64_t StridedBytes(uint64_t count, uint64_t length, uint64_t gap) {
    return count == 0 ? 0 : (count - 1) * (length + gap) + length;
}
template <typename T>
Span LocalSpan(const AscendC::LocalTensor<T>& tensor, uint64_t count) {
    auto& ctx = Ctx();
    Span span;
    span.owner = ctx.coreId;
    span.memory = AscendC::MemoryOf(tensor.GetPosition());
    const uint8_t* base = span.memory == Memory::UB ? ctx.ub : ctx.cubeMemory[size_t(span.memory)];
    span.begin = reinterpret_cast<const uint8_t*>(tensor.Address()) - base;
    span.end = span.begin + count * sizeof(T);
    return span;
}

// --- the hooks ---------------------------------------------------------------------------------------
// A GM <-> UB / L1 copy of `bytes` over the GM elements [first, first + count) and `localCount` local ones.
template <typename T>
void CopyIn(const AscendC::LocalTensor<T>& dst, const T* gmFirst, uint64_t gmBytes, uint64_t localCount,
            uint64_t bytes) {
    if (Active() == nullptr) return;
    TraceEvent e;
    e.pipe = Pipe::MTE2;
    e.kind = EventKind::Dma;
    e.bytes = bytes;
    e.readCount = 1;
    e.reads[0] = GmSpan(gmFirst, gmBytes);
    e.writes = true;
    e.write = LocalSpan(dst, localCount);
    Record(e);
}
template <typename T>
void CopyOut(T* gmFirst, uint64_t gmBytes, const AscendC::LocalTensor<T>& src, uint64_t localCount, uint64_t bytes) {
    if (Active() == nullptr) return;
    TraceEvent e;
    e.pipe = Pipe::MTE3;
    e.kind = EventKind::Dma;
    e.bytes = bytes;
    e.readCount = 1;
    e.reads[0] = LocalSpan(src, localCount);
    e.writes = true;
    e.write = GmSpan(gmFirst, gmBytes);
    Record(e);
}

// Vector instruction `op` (an AscendC API name, VectorClasses()) over `bytes` (256-byte repeats): writes `dst`,
// reads `srcs` (count elements each).
template <typename D, typename... S>
void Vector(const char* op, uint64_t bytes, uint64_t count, const AscendC::LocalTensor<D>& dst, const S&... srcs) {
    if (Active() == nullptr) return;
    TraceEvent e;
    e.pipe = Pipe::V;
    e.kind = EventKind::Vector;
    e.vectorClass = VectorClassOf(op);
    e.bytes = bytes;
    e.writes = true;
    e.write = LocalSpan(dst, count);
    ((e.reads[e.readCount++] = LocalSpan(srcs, count)), ...);
    Record(e);
}
// The same with operand sizes of their own (Cast, CompareScalar, Select's mask, Gather, ReduceSum).
template <typename D>
void VectorOf(const char* op, EventKind kind, uint64_t bytes, uint64_t elements, const AscendC::LocalTensor<D>& dst,
              uint64_t dstCount, std::initializer_list<Span> reads) {
    if (Active() == nullptr) return;
    TraceEvent e;
    e.pipe = Pipe::V;
    e.kind = kind;
    if (kind == EventKind::Vector) e.vectorClass = VectorClassOf(op);
    e.bytes = bytes;
    e.elements = elements;
    e.writes = true;
    e.write = LocalSpan(dst, dstCount);
    for (const Span& s : reads) e.reads[e.readCount++] = s;
    Record(e);
}

// LoadData (MTE1): `bytes` from L1 into L0A / L0B.
template <typename T>
void Load(const AscendC::LocalTensor<T>& dst, uint64_t dstCount, const AscendC::LocalTensor<T>& src, uint64_t srcCount,
          uint64_t bytes) {
    if (Active() == nullptr) return;
    TraceEvent e;
    e.pipe = Pipe::MTE1;
    e.kind = EventKind::Load;
    e.bytes = bytes;
    e.readCount = 1;
    e.reads[0] = LocalSpan(src, srcCount);
    e.writes = true;
    e.write = LocalSpan(dst, dstCount);
    Record(e);
}

// Mmad (M): C (m x n) (+)= A (m x k) * B (k x n), costed by whole fractals.
template <typename C, typename A, typename B>
void Mmad(const AscendC::LocalTensor<C>& c, const AscendC::LocalTensor<A>& a, const AscendC::LocalTensor<B>& b,
          uint32_t m, uint32_t n, uint32_t k, bool accumulate) {
    if (Active() == nullptr) return;
    const uint64_t k0 = 32 / sizeof(A), mA = (m + 15) / 16 * 16, nA = (n + 15) / 16 * 16, kA = (k + k0 - 1) / k0 * k0;
    TraceEvent e;
    e.pipe = Pipe::M;
    e.kind = EventKind::Mmad;
    e.macs = mA * nA * kA;
    e.elementBytes = sizeof(A);
    e.reads[e.readCount++] = LocalSpan(a, mA * kA);
    e.reads[e.readCount++] = LocalSpan(b, kA * nA);
    if (accumulate) e.reads[e.readCount++] = LocalSpan(c, mA * nA);
    e.writes = true;
    e.write = LocalSpan(c, mA * nA);
    Record(e);
}

// Fixpipe (FIX): L0C -> GM, `bytes` written over the GM range [gmFirst, gmFirst + gmBytes).
template <typename S>
void Fixpipe(const void* gmFirst, uint64_t gmBytes, const AscendC::LocalTensor<S>& src, uint64_t srcCount,
             uint64_t bytes) {
    if (Active() == nullptr) return;
    TraceEvent e;
    e.pipe = Pipe::FIX;
    e.kind = EventKind::Fixpipe;
    e.bytes = bytes;
    e.readCount = 1;
    e.reads[0] = LocalSpan(src, srcCount);
    e.writes = true;
    e.write = GmSpan(gmFirst, gmBytes);
    Record(e);
}

// The Matmul API's Iterate (its MTE2 loads of the A and B blocks, then the Mmad into an L0C buffer of two)
// and GetTensorC (FIX: the block into UB). The cube's internal buffers are stand-in L1 / L0C ranges
// alternating with the block's parity, as the API double-buffers them.
void MatmulIterate(const void* aFirst, uint64_t aBytes, const void* bFirst, uint64_t bSpanBytes, uint64_t bBytes,
                   uint64_t paddedMacs, uint32_t elementBytes, uint32_t block);
template <typename T>
void MatmulGetC(const AscendC::LocalTensor<T>& c, uint64_t count, uint64_t bytes, uint32_t block) {
    if (Active() == nullptr) return;
    TraceEvent e;
    e.pipe = Pipe::FIX;
    e.kind = EventKind::Fixpipe;
    e.bytes = bytes;
    e.readCount = 1;
    e.reads[0].memory = Memory::L0C;
    e.reads[0].owner = MatmulCore();
    e.reads[0].begin = (block % 2) * 65536;
    e.reads[0].end = e.reads[0].begin + 512;
    e.writes = true;
    e.write = LocalSpan(c, count);
    RecordOn(MatmulCore(), e);
}

}  // namespace trace

// The schedule of one launch (src/timeline.cpp).
class Timeline {
public:
    explicit Timeline(const TimelineCosts& costs);
    ~Timeline();
    void Add(uint32_t core, const TraceEvent& event);
    void TouchGm(size_t buffer, uint64_t bufferBytes, uint64_t first, uint64_t bytes, bool write);
    // the first-touch bytes TouchGm saw since the last call (charged to the copy that made the accesses)
    uint64_t TakeFirstReadBytes();
    void FlagSet(uint32_t core, Pipe pipe, const std::vector<uint32_t>& receivers, uint16_t flagId);
    void FlagWait(uint32_t core, Pipe pipe, const std::vector<uint32_t>& senders, uint16_t flagId);
    // a MIX launch (AIC c, AIVs blockDim + 2c + s) or not (block b, its Matmul's cube core blockDim + b)
    void SetLaunch(bool mix, uint32_t blockDim);
    TimelineSummary Summary() const;
    Pipe pendingFlagPipe = Pipe::S;

private:
    struct State;
    State* state_;
};

}  // namespace ascendc_sim
