#include <algorithm>

#include "sim/launch.h"
#include "sim/mix.h"
#include "sim/tensors.h"
#include "sim/timeline.h"

namespace ascendc_sim {

// The CANN 8.1 platform files (aarch64-linux/data/platform_config/<SoC>.ini: vector_core_cnt,
// cube_core_cnt, ub_size, l1_size, l0_a/b/c_size): one cube core (AIC) per two vector cores, UB 192 KiB,
// L1 / L0A / L0B / L0C = 512 / 64 / 64 / 128 KiB, bias table bt_size = 1 KiB, fixpipe buffer fb0_size = 2 KiB; Atlas A3 (Ascend910_9391) has 910B1's numbers and
// its vector architecture (dav-c220). Select's temporary at 184 KiB: see Platform.
const Platform kPlatforms[] = {
    {"ascend910b1", 48, 192 * 1024, 184 * 1024, 24, 512 * 1024, 64 * 1024, 64 * 1024, 128 * 1024, 1024, 2048},
    {"ascend910b3", 40, 192 * 1024, 184 * 1024, 20, 512 * 1024, 64 * 1024, 64 * 1024, 128 * 1024, 1024, 2048},
    {"ascend910_93", 48, 192 * 1024, 184 * 1024, 24, 512 * 1024, 64 * 1024, 64 * 1024, 128 * 1024, 1024, 2048},
};
const uint32_t kPlatformCount = sizeof(kPlatforms) / sizeof(kPlatforms[0]);

namespace {
Context* g_context = nullptr;
constexpr uint8_t kPoison = 0xA5;
}  // namespace

Context& Ctx() { return *g_context; }

void Fail(Rule rule, const std::string& message) { throw RuleViolation(rule, message); }

GmBuffer* FindGm(const void* address, uint64_t bytes) {
    auto* p = static_cast<const uint8_t*>(address);
    for (auto& buffer : Ctx().gm) {
        if (p >= buffer.base && p + bytes <= buffer.base + buffer.bytes) return &buffer;
    }
    return nullptr;
}

void RecordGmRead(const void* address, uint64_t bytes) {
    GmBuffer* buffer = FindGm(address, bytes);
    if (buffer == nullptr)
        Fail(ascendc_sim::Rule::gm_out_of_bounds,
             "read of " + std::to_string(bytes) + " bytes outside the launch's buffers");
    if (Ctx().mix) {
        NoteMixGmAccess(size_t(buffer - Ctx().gm.data()), static_cast<const uint8_t*>(address) - buffer->base, bytes,
                        false);
    }
    trace::TouchGm(address, bytes, false);
    buffer->bytesIn += bytes;
    auto& c = Ctx().counters;
    c.gmBytesIn += bytes;
    c.blockBytesIn[Ctx().coreId] += bytes;
    ++c.dataCopyCalls;
}

void RecordGmWrite(const void* address, uint64_t bytes) {
    auto& ctx = Ctx();
    GmBuffer* buffer = FindGm(address, bytes);
    if (buffer == nullptr)
        Fail(ascendc_sim::Rule::gm_out_of_bounds,
             "write of " + std::to_string(bytes) + " bytes outside the launch's buffers");
    if (ctx.mix)
        NoteMixGmAccess(size_t(buffer - ctx.gm.data()), static_cast<const uint8_t*>(address) - buffer->base, bytes,
                        true);
    if (buffer->output) {
        auto block = static_cast<int16_t>(ctx.coreId);
        uint64_t first = static_cast<const uint8_t*>(address) - buffer->base;
        for (uint64_t i = first; i < first + bytes; ++i) {
            int16_t& owner = buffer->owner[i];
            if (owner != -1 && owner != block) {
                Fail(ascendc_sim::Rule::overlapping_core_writes,
                     "GM byte " + std::to_string(i) + " of an output is written by blocks " + std::to_string(owner) +
                         " and " + std::to_string(block));
            }
            owner = block;
        }
    }
    trace::TouchGm(address, bytes, true);
    buffer->bytesOut += bytes;
    ctx.counters.gmBytesOut += bytes;
    ctx.counters.blockBytesOut[ctx.coreId] += bytes;
    ++ctx.counters.dataCopyCalls;
}

void RecordVector(uint64_t bytes) {
    auto& c = Ctx().counters;
    ++c.vectorInstructions;
    c.vectorRepeats += (bytes + 255) / 256;
}

namespace {
[[noreturn]] void ReservedUb(const char* what) {
    auto& ctx = Ctx();
    Fail(ascendc_sim::Rule::ub_reserved, std::string(what) + ": the block's buffers reach past UB byte " +
                                             std::to_string(ctx.platform.selectTemporaryOffset) +
                                             " while it uses Select, whose temporary lives there on " +
                                             ctx.platform.name + " (leave the top 8 KiB of UB free)");
}
}  // namespace

// Select writes its temporary at selectTemporaryOffset: no buffer of the block may reach there, before
// or after the Select.
void NoteSelect(const char* op) {
    auto& ctx = Ctx();
    ctx.selectIssued = true;
    if (ctx.ubUsed > ctx.platform.selectTemporaryOffset) ReservedUb(op);
}

void NoteIntegerWrap(const char* op, const char* type) {
    auto& ctx = Ctx();
    if (!ctx.integerWrapAllowed) {
        Fail(ascendc_sim::Rule::integer_overflow, std::string(op) + " on " + type +
                                                      ": a result wrapped around; 910B documents no " +
                                                      "wraparound for integer vector arithmetic (declare the kernel's "
                                                      "reliance at launch and check it on hardware)");
    }
    ++ctx.counters.integerWraps;
}

uint32_t AllocateUb(uint32_t bytes, const char* what) {
    auto& ctx = Ctx();
    uint64_t end = uint64_t(ctx.ubUsed) + bytes;
    if (end > ctx.platform.ubBytes) {
        Fail(ascendc_sim::Rule::ub_overflow, std::string(what) + ": " + std::to_string(end) +
                                                 " bytes of Unified Buffer requested, " + ctx.platform.name + " has " +
                                                 std::to_string(ctx.platform.ubBytes));
    }
    if (ctx.selectIssued && end > ctx.platform.selectTemporaryOffset) ReservedUb(what);
    uint32_t offset = ctx.ubUsed;
    ctx.ubUsed = static_cast<uint32_t>(end);
    ctx.counters.peakUbBytes = std::max<uint64_t>(ctx.counters.peakUbBytes, end);
    return offset;
}

LaunchResult Launch(const char* kernel, const Platform& platform, uint32_t blockDim, uint64_t tilingKey,
                    const std::vector<LaunchBuffer>& buffers, const std::function<void()>& runBlock,
                    bool wrapsIntegers) {
    auto body = [&] {
        auto& context = Ctx();
        if (blockDim == 0 || blockDim > platform.vectorCores) {
            Fail(ascendc_sim::Rule::block_dim, "blockDim " + std::to_string(blockDim) + " is outside 1.." +
                                                   std::to_string(platform.vectorCores) + " (" + platform.name +
                                                   " vector cores)");
        }
        for (uint32_t block = 0; block < blockDim; ++block) {
            context.blockIdx = block;
            context.coreId = block;
            context.ubUsed = 0;
            context.selectIssued = false;
            context.leaks.clear();
            std::memset(context.ub, 0, platform.ubBytes);
            runBlock();
            if (!context.leaks.empty())
                Fail(ascendc_sim::Rule::leaked_tensor, context.leaks.front() + " when the kernel returned");
        }
    };
    return LaunchCores(kernel, platform, blockDim, tilingKey, buffers, body, wrapsIntegers);
}

void RestoreCoreIds(uint32_t core, uint32_t blockIdx) {
    Ctx().coreId = core;
    Ctx().blockIdx = blockIdx;
}

LaunchResult LaunchCores(const char* kernel, const Platform& platform, uint32_t cores, uint64_t tilingKey,
                         const std::vector<LaunchBuffer>& buffers, const std::function<void()>& body,
                         bool wrapsIntegers) {
    Context context;
    context.integerWrapAllowed = wrapsIntegers;
    context.platform = platform;
    context.kernel = kernel;
    context.blockDim = cores;
    context.tilingKey = tilingKey;
    context.ubStorage.reset(new uint8_t[platform.ubBytes + 32]);
    auto aligned = (reinterpret_cast<uintptr_t>(context.ubStorage.get()) + 31) / 32 * 32;
    context.ub = reinterpret_cast<uint8_t*>(aligned);
    const uint32_t slots = cores == 0 ? 1 : cores;
    context.counters.blockBytesIn.assign(slots, 0);
    context.counters.blockBytesOut.assign(slots, 0);
    for (const auto& b : buffers) {
        GmBuffer gm{static_cast<uint8_t*>(b.data), b.bytes, b.output, {}};
        if (b.output) {
            gm.owner.assign(b.bytes, -1);
            if (!b.keepContents) std::memset(b.data, kPoison, b.bytes);
        }
        context.gm.push_back(std::move(gm));
    }
    g_context = &context;
    LaunchResult result;
    bool launchLevel = false;
    try {
        body();
        launchLevel = true;
        for (const auto& gm : context.gm) {
            auto unwritten = std::find(gm.owner.begin(), gm.owner.end(), int16_t(-1));
            if (gm.output && unwritten != gm.owner.end()) {
                Fail(ascendc_sim::Rule::unwritten_output, "output byte " +
                                                              std::to_string(unwritten - gm.owner.begin()) + " of " +
                                                              std::to_string(gm.bytes) + " was never written");
            }
        }
    } catch (const RuleViolation& violation) {
        result.ok = false;
        result.rule = violation.rule;
        result.message = violation.what();
        bool inBlock = !launchLevel && result.rule != ascendc_sim::Rule::block_dim &&
                       result.rule != ascendc_sim::Rule::cross_core_deadlock;
        result.block = inBlock ? static_cast<int64_t>(context.blockIdx) : -1;
    }
    result.counters = context.counters;
    for (const auto& gm : context.gm) {
        result.bufferBytesIn.push_back(gm.bytesIn);
        result.bufferBytesOut.push_back(gm.bytesOut);
    }
    g_context = nullptr;
    return result;
}

}  // namespace ascendc_sim
