// MIX launches: separate cube (AIC) and vector (AIV) programs, CrossCoreSetFlag/CrossCoreWaitFlag between
// them, the cube core's memories, and the GM-visibility hazard check.
//
// Each core runs on its own thread, but only one at a time (a baton handed over when a core waits on a
// flag nobody has set yet, or returns), so runs are deterministic. Visibility is a happens-before
// relation: every core has an epoch that CrossCoreSetFlag closes; the flag carries the setter's vector
// clock to the waiter. A core may read (or overwrite) GM bytes another core wrote (or read) only if a
// chain of flags orders the two accesses; otherwise the access is a `cross_core_hazard`.
#include <algorithm>
#include <cstring>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "sim/launch.h"
#include "sim/mix.h"
#include "sim/timeline.h"

namespace ascendc_sim {

const char* MemoryName(Memory memory) {
    static const char* const names[] = {"UB", "L1", "L0A", "L0B", "L0C", "bias table", "fixpipe buffer"};
    return names[size_t(memory)];
}

uint32_t CapacityOf(Memory memory) {
    const Platform& p = Ctx().platform;
    switch (memory) {
        case Memory::UB: return p.ubBytes;
        case Memory::L1: return p.l1Bytes;
        case Memory::L0A: return p.l0aBytes;
        case Memory::L0B: return p.l0bBytes;
        case Memory::L0C: return p.l0cBytes;
        case Memory::BiasTable: return p.biasTableBytes;
        default: return p.fixpipeBufferBytes;
    }
}

void RequireCore(CoreType type, const char* what) {
    const Context& ctx = Ctx();
    if (!ctx.mix || ctx.coreType == type) return;
    Fail(ascendc_sim::Rule::wrong_core,
         std::string(what) + " on the " + (ctx.coreType == CoreType::AIC ? "cube core (AIC)" : "vector core (AIV)") +
             ": it exists only on the " +
             (type == CoreType::AIC ? "cube core (AIC): guard it with `if ASCEND_IS_AIC`"
                                    : "vector cores (AIV): guard it with `if ASCEND_IS_AIV`"));
}

uint8_t* AllocateCube(Memory memory, uint64_t bytes) {
    auto& ctx = Ctx();
    if (!ctx.mix || ctx.coreType != CoreType::AIC) {
        Fail(ascendc_sim::Rule::wrong_core, std::string("InitBuffer in ") + MemoryName(memory) +
                                                ": the cube core's memories exist only on the AIC of a MIX launch");
    }
    const size_t m = size_t(memory);
    const uint64_t end = uint64_t(ctx.cubeUsed[m]) + bytes;
    if (end > CapacityOf(memory)) {
        Fail(ascendc_sim::Rule::cube_buffer_overflow, std::string("InitBuffer: ") + std::to_string(end) + " bytes of " +
                                                          MemoryName(memory) + " requested, " + ctx.platform.name +
                                                          " has " + std::to_string(CapacityOf(memory)));
    }
    uint8_t* address = ctx.cubeMemory[m] + ctx.cubeUsed[m];
    ctx.cubeUsed[m] = static_cast<uint32_t>(end);
    return address;
}

namespace {

struct AbortUnwind {};  // thrown in the cores still running when another core broke a rule

struct CoreSlot {
    // the per-core fields of Context, saved while another core runs
    uint32_t blockIdx = 0, subBlockIdx = 0;
    CoreType type = CoreType::AIV;
    std::unique_ptr<uint8_t[]> storage[size_t(Memory::Count)];
    uint8_t* memory[size_t(Memory::Count)] = {};
    uint32_t used[size_t(Memory::Count)] = {};
    bool selectIssued = false;
    std::vector<std::string> leaks;
    // scheduling and happens-before
    enum class State { Ready, Waiting, Done } state = State::Ready;
    std::function<bool()> canResume;
    std::vector<uint32_t> clock;  // clock[i]: the epochs of core i this core has seen; clock[self] = own epoch
};

struct Shadow {  // per GM byte: the last writer and the last reader, with their epochs
    std::vector<int16_t> writer, reader;
    std::vector<uint32_t> writeEpoch, readEpoch;
};

struct MixState {
    uint32_t blockDim = 0;
    std::vector<CoreSlot> cores;
    std::vector<Shadow> shadows;  // one per GM buffer, allocated at the buffer's first write
    // pending flags: (receiver core, flag id, sender core) -> clocks of the sets not yet waited for
    std::map<std::tuple<uint32_t, uint16_t, uint32_t>, std::vector<std::vector<uint32_t>>> flags;
    std::mutex mutex;
    std::condition_variable wake;
    uint32_t current = 0;
    bool aborted = false;
    std::mutex unwind;  // aborted cores unwind one at a time (their destructors touch the context)
    bool failed = false;
    RuleViolation violation{ascendc_sim::Rule::block_dim, ""};
    int64_t failedCore = -1;
};

MixState* g_mix = nullptr;

uint32_t AicOf(uint32_t core, uint32_t blockDim) { return core < blockDim ? core : (core - blockDim) / 2; }
uint32_t AivCore(uint32_t aic, uint32_t sub, uint32_t blockDim) { return blockDim + 2 * aic + sub; }

std::string CoreName(uint32_t core, uint32_t blockDim) {
    if (core < blockDim) return "AIC " + std::to_string(core);
    return "AIV " + std::to_string(core - blockDim) + " (AI core " + std::to_string((core - blockDim) / 2) + ")";
}

void SaveCore(CoreSlot& slot) {
    auto& ctx = Ctx();
    for (size_t m = 0; m < size_t(Memory::Count); ++m) slot.used[m] = ctx.cubeUsed[m];
    slot.used[size_t(Memory::UB)] = ctx.ubUsed;
    slot.selectIssued = ctx.selectIssued;
    slot.leaks = std::move(ctx.leaks);
    ctx.leaks.clear();
}

void RestoreCore(uint32_t core) {
    auto& ctx = Ctx();
    CoreSlot& slot = g_mix->cores[core];
    ctx.blockIdx = slot.blockIdx;
    ctx.coreId = core;
    ctx.coreType = slot.type;
    ctx.subBlockIdx = slot.subBlockIdx;
    for (size_t m = 0; m < size_t(Memory::Count); ++m) {
        ctx.cubeMemory[m] = slot.memory[m];
        ctx.cubeUsed[m] = slot.used[m];
    }
    ctx.ub = slot.memory[size_t(Memory::UB)];
    ctx.ubUsed = slot.used[size_t(Memory::UB)];
    ctx.selectIssued = slot.selectIssued;
    ctx.leaks = std::move(slot.leaks);
}

bool Runnable(const CoreSlot& slot) {
    return slot.state == CoreSlot::State::Ready || (slot.state == CoreSlot::State::Waiting && slot.canResume());
}

// Hands the baton to the next core that can run (round robin), or reports a deadlock. Called with the
// lock held by the running core after it saved its fields.
void PassBaton(std::unique_lock<std::mutex>&) {
    MixState& s = *g_mix;
    const uint32_t n = static_cast<uint32_t>(s.cores.size());
    for (uint32_t step = 1; step <= n; ++step) {
        uint32_t next = (s.current + step) % n;
        if (Runnable(s.cores[next])) {
            s.current = next;
            s.wake.notify_all();
            return;
        }
    }
    bool anyWaiting = std::any_of(s.cores.begin(), s.cores.end(),
                                  [](const CoreSlot& c) { return c.state == CoreSlot::State::Waiting; });
    if (anyWaiting && !s.failed) {
        std::string waiting;
        for (uint32_t i = 0; i < n; ++i) {
            if (s.cores[i].state == CoreSlot::State::Waiting)
                waiting += (waiting.empty() ? "" : ", ") + CoreName(i, s.blockDim);
        }
        s.failed = true;
        s.violation = RuleViolation(ascendc_sim::Rule::cross_core_deadlock,
                                    "every core still running waits on a flag no core will set: " + waiting);
        s.failedCore = -1;
    }
    s.aborted = true;
    s.wake.notify_all();
}

// The running core waits (other cores run) until `ready` holds.
void BlockUntil(const std::function<bool()>& ready) {
    MixState& s = *g_mix;
    if (ready()) return;
    std::unique_lock<std::mutex> lock(s.mutex);
    const uint32_t me = s.current;
    CoreSlot& slot = s.cores[me];
    SaveCore(slot);
    slot.state = CoreSlot::State::Waiting;
    slot.canResume = ready;
    PassBaton(lock);
    s.wake.wait(lock, [&] { return s.aborted || s.current == me; });
    slot.state = CoreSlot::State::Ready;
    slot.canResume = nullptr;
    if (s.aborted) {
        lock.unlock();
        s.unwind.lock();  // released by RunCore once this core's stack has unwound
        throw AbortUnwind{};
    }
    RestoreCore(me);
}

void RunCore(uint32_t core, const std::function<void()>& program) {
    MixState& s = *g_mix;
    {
        std::unique_lock<std::mutex> lock(s.mutex);
        s.wake.wait(lock, [&] { return s.aborted || s.current == core; });
        if (s.aborted) return;
        RestoreCore(core);
    }
    try {
        try {
            program();
            if (!Ctx().leaks.empty())
                Fail(ascendc_sim::Rule::leaked_tensor, Ctx().leaks.front() + " when the kernel returned");
        } catch (const AbortUnwind&) {
            throw;
        } catch (const RuleViolation& violation) {
            std::unique_lock<std::mutex> lock(s.mutex);
            if (!s.failed) {
                s.failed = true;
                s.violation = violation;
                s.failedCore = core;
            }
            s.aborted = true;
            s.cores[core].state = CoreSlot::State::Done;
            s.wake.notify_all();
            return;
        }
    } catch (const AbortUnwind&) {
        s.unwind.unlock();
        return;
    }
    std::unique_lock<std::mutex> lock(s.mutex);
    SaveCore(s.cores[core]);
    s.cores[core].state = CoreSlot::State::Done;
    if (std::all_of(s.cores.begin(), s.cores.end(),
                    [](const CoreSlot& c) { return c.state == CoreSlot::State::Done; })) {
        s.aborted = true;  // every core finished: release the launcher
        s.wake.notify_all();
        return;
    }
    PassBaton(lock);
}

std::vector<uint32_t>& ClockOf(uint32_t core) { return g_mix->cores[core].clock; }

[[noreturn]] void Hazard(const std::string& what, uint64_t byte, uint32_t other, uint32_t otherEpoch) {
    const uint32_t me = Ctx().coreId;
    Fail(ascendc_sim::Rule::cross_core_hazard, CoreName(me, g_mix->blockDim) + " " + what + " GM byte " +
                                                   std::to_string(byte) + " that " + CoreName(other, g_mix->blockDim) +
                                                   " accessed in its epoch " + std::to_string(otherEpoch) +
                                                   " with no CrossCoreSetFlag/CrossCoreWaitFlag between them: on 910B "
                                                   "cube and vector cores see each other's GM "
                                                   "writes only after a flag");
}

}  // namespace

void NoteMixGmAccess(size_t bufferIndex, uint64_t first, uint64_t bytes, bool write) {
    if (g_mix == nullptr) return;
    MixState& s = *g_mix;
    const auto& gm = Ctx().gm[bufferIndex];
    Shadow& shadow = s.shadows[bufferIndex];
    if (shadow.writer.empty()) {
        if (!write) return;  // never written: nothing to order reads against
        shadow.writer.assign(gm.bytes, -1);
        shadow.reader.assign(gm.bytes, -1);
        shadow.writeEpoch.assign(gm.bytes, 0);
        shadow.readEpoch.assign(gm.bytes, 0);
    }
    const uint32_t me = Ctx().coreId;
    const auto& clock = ClockOf(me);
    const uint32_t epoch = clock[me];
    for (uint64_t i = first; i < first + bytes; ++i) {
        int16_t writer = shadow.writer[i];
        if (writer >= 0 && uint32_t(writer) != me && clock[writer] < shadow.writeEpoch[i]) {
            Hazard(write ? "overwrites" : "reads", i, writer, shadow.writeEpoch[i]);
        }
        if (write) {
            int16_t reader = shadow.reader[i];
            if (reader >= 0 && uint32_t(reader) != me && clock[reader] < shadow.readEpoch[i]) {
                Hazard("overwrites", i, reader, shadow.readEpoch[i]);
            }
            shadow.writer[i] = static_cast<int16_t>(me);
            shadow.writeEpoch[i] = epoch;
            shadow.reader[i] = -1;
        } else {
            shadow.reader[i] = static_cast<int16_t>(me);
            shadow.readEpoch[i] = epoch;
        }
    }
}

void CrossCoreSet(uint8_t mode, uint16_t flagId) {
    auto& ctx = Ctx();
    if (g_mix == nullptr)
        Fail(ascendc_sim::Rule::cross_core_flag, "CrossCoreSetFlag outside a MIX launch (AIC:AIV 1:2)");
    if (mode != 2)
        Fail(ascendc_sim::Rule::cross_core_flag,
             "CrossCoreSetFlag mode " + std::to_string(mode) + " is not modelled (mode 2: AIC <-> its AIVs)");
    if (flagId >= kCrossCoreFlags)
        Fail(ascendc_sim::Rule::cross_core_flag,
             "CrossCoreSetFlag: flag id " + std::to_string(flagId) + " is not in 0..15");
    MixState& s = *g_mix;
    const uint32_t me = ctx.coreId;
    auto& clock = ClockOf(me);
    std::vector<uint32_t> receivers;
    if (ctx.coreType == CoreType::AIC) {
        receivers = {AivCore(me, 0, s.blockDim), AivCore(me, 1, s.blockDim)};
    } else {
        receivers = {AicOf(me, s.blockDim)};
    }
    for (uint32_t r : receivers) {
        auto& pending = s.flags[{r, flagId, me}];
        if (pending.size() >= kCrossCoreFlagDepth) {
            Fail(ascendc_sim::Rule::cross_core_flag, "CrossCoreSetFlag: flag " + std::to_string(flagId) + " to " +
                                                         CoreName(r, s.blockDim) + " already has " +
                                                         std::to_string(pending.size()) +
                                                         " sets nobody waited for (the counter holds 15)");
        }
        pending.push_back(clock);
    }
    ++clock[me];  // writes after this set belong to the next epoch
    ++ctx.counters.crossCoreFlags;
    trace::FlagSet(me, receivers, flagId);
}

void CrossCoreWait(uint8_t mode, uint16_t flagId) {
    auto& ctx = Ctx();
    if (g_mix == nullptr)
        Fail(ascendc_sim::Rule::cross_core_flag, "CrossCoreWaitFlag outside a MIX launch (AIC:AIV 1:2)");
    if (mode != 2)
        Fail(ascendc_sim::Rule::cross_core_flag,
             "CrossCoreWaitFlag mode " + std::to_string(mode) + " is not modelled (mode 2: AIC <-> its AIVs)");
    if (flagId >= kCrossCoreFlags)
        Fail(ascendc_sim::Rule::cross_core_flag,
             "CrossCoreWaitFlag: flag id " + std::to_string(flagId) + " is not in 0..15");
    MixState& s = *g_mix;
    const uint32_t me = ctx.coreId;
    std::vector<uint32_t> senders;
    if (ctx.coreType == CoreType::AIC) {
        senders = {AivCore(me, 0, s.blockDim), AivCore(me, 1, s.blockDim)};  // both AIVs must have set
    } else {
        senders = {AicOf(me, s.blockDim)};
    }
    BlockUntil([&s, me, flagId, senders] {
        for (uint32_t from : senders) {
            auto it = s.flags.find({me, flagId, from});
            if (it == s.flags.end() || it->second.empty()) return false;
        }
        return true;
    });
    auto& clock = ClockOf(me);
    for (uint32_t from : senders) {
        auto& pending = s.flags[{me, flagId, from}];
        const std::vector<uint32_t> seen = pending.front();
        pending.erase(pending.begin());
        for (size_t i = 0; i < clock.size(); ++i) clock[i] = std::max(clock[i], seen[i]);
    }
    trace::FlagWait(me, senders, flagId);
}

LaunchResult LaunchMix(const char* kernel, const Platform& platform, uint32_t blockDim, uint64_t tilingKey,
                       const std::vector<LaunchBuffer>& buffers, const std::function<void()>& runCore) {
    LaunchResult result;
    if (blockDim == 0 || blockDim > platform.cubeCores) {
        result.ok = false;
        result.rule = ascendc_sim::Rule::block_dim;
        result.message = "blockDim " + std::to_string(blockDim) + " is outside 1.." +
                         std::to_string(platform.cubeCores) + " (" + platform.name + " AI cores, MIX AIC:AIV 1:2)";
        for (size_t i = 0; i < buffers.size(); ++i)
            result.bufferBytesIn.push_back(0), result.bufferBytesOut.push_back(0);
        return result;
    }
    const uint32_t cores = 3 * blockDim;
    MixState state;
    state.blockDim = blockDim;
    state.cores.resize(cores);
    state.shadows.resize(buffers.size());
    for (uint32_t core = 0; core < cores; ++core) {
        CoreSlot& slot = state.cores[core];
        slot.clock.assign(cores, 0);
        slot.clock[core] = 1;
        if (core < blockDim) {
            slot.type = CoreType::AIC;
            slot.blockIdx = core;
            for (Memory m :
                 {Memory::L1, Memory::L0A, Memory::L0B, Memory::L0C, Memory::BiasTable, Memory::FixpipeBuffer}) {
                uint32_t bytes = 0;
                switch (m) {
                    case Memory::L1: bytes = platform.l1Bytes; break;
                    case Memory::L0A: bytes = platform.l0aBytes; break;
                    case Memory::L0B: bytes = platform.l0bBytes; break;
                    case Memory::L0C: bytes = platform.l0cBytes; break;
                    case Memory::BiasTable: bytes = platform.biasTableBytes; break;
                    default: bytes = platform.fixpipeBufferBytes; break;
                }
                slot.storage[size_t(m)].reset(new uint8_t[bytes + 512]);
                auto aligned = (reinterpret_cast<uintptr_t>(slot.storage[size_t(m)].get()) + 511) / 512 * 512;
                slot.memory[size_t(m)] = reinterpret_cast<uint8_t*>(aligned);
                std::memset(slot.memory[size_t(m)], 0xFF, bytes);  // garbage until written
            }
        } else {
            slot.type = CoreType::AIV;
            slot.blockIdx = core - blockDim;  // 2 * AI core + sub-block, as GetBlockIdx on an AIV of a MIX kernel
            slot.subBlockIdx = (core - blockDim) % 2;
            slot.storage[size_t(Memory::UB)].reset(new uint8_t[platform.ubBytes + 32]);
            auto aligned = (reinterpret_cast<uintptr_t>(slot.storage[size_t(Memory::UB)].get()) + 31) / 32 * 32;
            slot.memory[size_t(Memory::UB)] = reinterpret_cast<uint8_t*>(aligned);
            std::memset(slot.memory[size_t(Memory::UB)], 0, platform.ubBytes);
        }
    }
    g_mix = &state;
    auto body = [&] {
        Ctx().mix = true;
        Ctx().blockDim = blockDim;
        std::vector<std::thread> threads;
        threads.reserve(cores);
        for (uint32_t core = 0; core < cores; ++core)
            threads.emplace_back([core, &runCore] { RunCore(core, runCore); });
        for (auto& t : threads) t.join();
        if (state.failed) {
            if (state.failedCore >= 0)
                RestoreCoreIds(uint32_t(state.failedCore), state.cores[state.failedCore].blockIdx);
            throw state.violation;
        }
    };
    // blockDim counts the AI cores; Launch's per-block bookkeeping is sized for every core of the launch
    result = LaunchCores(kernel, platform, cores, tilingKey, buffers, body);
    g_mix = nullptr;
    return result;
}

}  // namespace ascendc_sim
