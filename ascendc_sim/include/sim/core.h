// ascendc_sim core: scalar types, the per-launch runtime context, rule violations and counters.
// Our own CPU model of the documented AscendC programming interface (not derived from CANN sources).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "rules.h"

// Execution-space and address-space qualifiers mark nothing on the CPU (a check that compiles the
// kernels with clang's CUDA rules defines __aicore__ itself: tests/test_kernel_execution_space.py).
#ifndef __aicore__
#define __aicore__
#endif
#define __global__
#define __gm__
#define __inline__ inline
typedef uint8_t* GM_ADDR;

// 910B vector fp16: _Float16 arithmetic is rounded to fp16 after every operation.
using half = _Float16;

// bfloat16 storage type; 910B's vector unit has no bf16 arithmetic, only Cast to/from float.
struct bfloat16_t {
    uint16_t bits = 0;
    bfloat16_t() = default;
    explicit bfloat16_t(float value) {
        uint32_t u;
        std::memcpy(&u, &value, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) {
            bits = static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN, sign kept
        } else {
            bits = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // nearest even
        }
    }
    explicit operator float() const {
        uint32_t u = static_cast<uint32_t>(bits) << 16;
        float value;
        std::memcpy(&value, &u, 4);
        return value;
    }
};

namespace ascendc_sim {

struct Platform {
    const char* name;
    uint32_t vectorCores;
    uint32_t ubBytes;
    // Start of the UB that Select (tensor-tensor/tensor-scalar modes) uses as its temporary: AscendC's
    // TMP_UB_OFFSET (basic_api/impl/utils/kernel_utils_constants.h), 8 KiB below the top on 910B.
    uint32_t selectTemporaryOffset;
    // the cube unit
    uint32_t cubeCores;
    uint32_t l1Bytes, l0aBytes, l0bBytes, l0cBytes;
    uint32_t biasTableBytes, fixpipeBufferBytes;  // bt_size, fb0_size
};

// The memories of an AI core: UB on each vector core (AIV), the rest on the cube core (AIC).
enum class Memory : uint8_t { UB, L1, L0A, L0B, L0C, BiasTable, FixpipeBuffer, Count };
const char* MemoryName(Memory memory);

enum class CoreType : uint8_t { AIV, AIC };

// A broken rule (sim/rules.h).
struct RuleViolation : std::runtime_error {
    Rule rule;
    RuleViolation(Rule broken, const std::string& message) : std::runtime_error(message), rule(broken) {}
};

[[noreturn]] void Fail(Rule rule, const std::string& message);

struct Counters {
    uint64_t gmBytesIn = 0;
    uint64_t gmBytesOut = 0;
    uint64_t dataCopyCalls = 0;
    uint64_t vectorInstructions = 0;
    uint64_t vectorRepeats = 0;  // 256-byte vector repeats issued
    uint64_t peakUbBytes = 0;
    uint64_t cubeIterations = 0;  // Matmul Iterate calls (one baseM x baseN block of C each)
    uint64_t cubeMacs = 0;        // multiply-accumulates the cube did
    uint64_t integerWraps = 0;    // vector integer results that wrapped (allowed kernels only)
    uint64_t crossCoreFlags = 0;  // CrossCoreSetFlag calls (MIX launches)
    uint64_t l1BytesIn = 0;       // GM -> L1 bytes (the cube core's MTE2)
    std::vector<uint64_t> blockBytesIn, blockBytesOut;
};

// A GM buffer handed to the launch; `owner` records which block wrote each byte of an output.
struct GmBuffer {
    uint8_t* base;
    uint64_t bytes;
    bool output;
    std::vector<int16_t> owner;
    uint64_t bytesIn = 0, bytesOut = 0;  // traffic of this buffer alone
};

class QueueBase;

struct Context {
    Platform platform{};
    const char* kernel = "";
    uint32_t blockIdx = 0;
    uint32_t blockDim = 1;
    uint64_t tilingKey = 0;
    std::vector<GmBuffer> gm;
    std::unique_ptr<uint8_t[]> ubStorage;
    uint8_t* ub = nullptr;  // 32-byte aligned
    uint32_t ubUsed = 0;
    std::vector<std::string> leaks;   // tensors still held when a queue went away
    bool selectIssued = false;        // this block used Select: the UB from selectTemporaryOffset is taken
    bool integerWrapAllowed = false;  // the launch declares that its kernel relies on integer wraparound
    Counters counters;
    // MIX launches (LaunchMix): the running core, its type and sub-block, its cube memories
    bool mix = false;
    CoreType coreType = CoreType::AIV;
    uint32_t coreId = 0;  // index into per-core counters and ownership: blockIdx, or AIC c / AIV 2c+s after
    uint32_t subBlockIdx = 0;
    uint8_t* cubeMemory[size_t(Memory::Count)] = {};
    uint32_t cubeUsed[size_t(Memory::Count)] = {};
};

Context& Ctx();

GmBuffer* FindGm(const void* address, uint64_t bytes);
void RecordGmRead(const void* address, uint64_t bytes);
void RecordGmWrite(const void* address, uint64_t bytes);
void RecordVector(uint64_t bytes);
uint32_t AllocateUb(uint32_t bytes, const char* what);
void NoteSelect(const char* op);
void NoteIntegerWrap(const char* op, const char* type);
uint8_t* AllocateCube(Memory memory, uint64_t bytes);
void RequireCore(CoreType type, const char* what);
uint32_t CapacityOf(Memory memory);

}  // namespace ascendc_sim
