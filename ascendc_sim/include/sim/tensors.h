// GlobalTensor, LocalTensor, TPipe, TQue and TBuf with the checks the hardware does not do for you.
#pragma once

#include <deque>
#include <type_traits>

#include "core.h"

// Pipes are a global enum in AscendC.
enum pipe_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_FIX, PIPE_ALL };

namespace AscendC {

template <typename A, typename B>
struct IsSameType {
    static constexpr bool value = std::is_same<A, B>::value;
};

// The positions of CANN 8.1 (basic_api/impl/kernel_event.h, in its order). Where each lives on 910B
// (GetPhyType there, __CCE_AICORE__ == 220): A1/B1/C1 L1, A2 L0A, B2 L0B, CO1 L0C, C2 the bias table,
// C2PIPE2GM the fixpipe buffer, the VEC* positions UB.
enum class TPosition : uint8_t {
    GM,
    A1,
    A2,
    B1,
    B2,
    C1,
    C2,
    CO1,
    CO2,
    VECIN,
    VECOUT,
    VECCALC,
    LCM = VECCALC,
    SPM,
    SHM = SPM,
    TSCM,
    C2PIPE2GM,
    C2PIPE2LOCAL,
    MAX
};
using QuePosition = TPosition;

inline uint32_t GetBlockIdx() { return ascendc_sim::Ctx().blockIdx; }
inline uint32_t GetBlockNum() { return ascendc_sim::Ctx().blockDim; }
// In a MIX kernel (AIC:AIV 1:2) the two AIVs of an AI core are its sub-blocks 0 and 1.
inline int64_t GetSubBlockIdx() { return ascendc_sim::Ctx().subBlockIdx; }
inline int64_t GetTaskRation() { return ascendc_sim::Ctx().mix ? 2 : 1; }

// The memory a position lives in on 910B, as the emulator allocates it.
constexpr ascendc_sim::Memory MemoryOf(TPosition position) {
    switch (position) {
        case TPosition::A1:
        case TPosition::B1:
        case TPosition::C1: return ascendc_sim::Memory::L1;
        case TPosition::A2: return ascendc_sim::Memory::L0A;
        case TPosition::B2: return ascendc_sim::Memory::L0B;
        case TPosition::CO1: return ascendc_sim::Memory::L0C;
        case TPosition::C2: return ascendc_sim::Memory::BiasTable;
        case TPosition::C2PIPE2GM: return ascendc_sim::Memory::FixpipeBuffer;
        default: return ascendc_sim::Memory::UB;
    }
}
template <pipe_t pipe>
inline void PipeBarrier() {}  // the emulator runs every pipe in program order

template <typename T>
class GlobalTensor {
public:
    void SetGlobalBuffer(__gm__ T* buffer, uint64_t size) {
        if (ascendc_sim::FindGm(buffer, size * sizeof(T)) == nullptr) {
            ascendc_sim::Fail(ascendc_sim::Rule::gm_out_of_bounds,
                              "SetGlobalBuffer: window of " + std::to_string(size) +
                                  " elements is not inside a buffer passed to the launch");
        }
        data_ = buffer;
        size_ = size;
    }
    GlobalTensor operator[](uint64_t offset) const {
        GlobalTensor view;
        view.data_ = data_ + offset;
        view.size_ = offset <= size_ ? size_ - offset : 0;
        return view;
    }
    T GetValue(uint64_t index) const {
        CheckRange(index, 1, "GetValue");
        ascendc_sim::RecordGmRead(data_ + index, sizeof(T));
        return data_[index];
    }
    void SetValue(uint64_t index, T value) const {
        CheckRange(index, 1, "SetValue");
        ascendc_sim::RecordGmWrite(data_ + index, sizeof(T));
        data_[index] = value;
    }
    // Elements [0, count) must lie inside the window given to SetGlobalBuffer.
    void CheckRange(uint64_t first, uint64_t count, const char* op) const {
        if (data_ == nullptr || first + count > size_) {
            ascendc_sim::Fail(ascendc_sim::Rule::gm_out_of_bounds,
                              std::string(op) + ": elements [" + std::to_string(first) + ", " +
                                  std::to_string(first + count) + ") outside the GM window of " +
                                  std::to_string(size_) + " elements");
        }
    }
    T* Address() const { return data_; }
    uint64_t GetSize() const { return size_; }

private:
    T* data_ = nullptr;
    uint64_t size_ = 0;
};

template <typename T>
class LocalTensor {
public:
    LocalTensor() = default;
    LocalTensor(T* data, uint32_t capacity, TPosition position = TPosition::VECCALC)
        : data_(data), capacity_(capacity), position_(position) {}
    LocalTensor operator[](uint32_t offset) const {
        return LocalTensor(data_ + offset, offset <= capacity_ ? capacity_ - offset : 0, position_);
    }
    template <typename U>
    LocalTensor<U> ReinterpretCast() const {
        return LocalTensor<U>(reinterpret_cast<U*>(data_),
                              static_cast<uint32_t>(uint64_t(capacity_) * sizeof(T) / sizeof(U)), position_);
    }
    TPosition GetPosition() const { return position_; }
    T GetValue(uint32_t index) const {
        Check(index + 1, "GetValue", false);
        return data_[index];
    }
    void SetValue(uint32_t index, T value) const {
        Check(index + 1, "SetValue", false);
        data_[index] = value;
    }
    uint32_t GetSize() const { return capacity_; }
    T* Address() const { return data_; }

    // `count` elements from the start must be inside this tensor's UB buffer, which starts 32-byte aligned.
    void Check(uint64_t count, const char* op, bool aligned = true) const {
        auto& ctx = ascendc_sim::Ctx();
        auto* bytes = reinterpret_cast<uint8_t*>(data_);
        if (data_ == nullptr || bytes < ctx.ub || bytes >= ctx.ub + ctx.ubUsed) {
            ascendc_sim::Fail(ascendc_sim::Rule::not_in_ub,
                              std::string(op) + ": operand is not a tensor in the Unified Buffer");
        }
        if (aligned && (bytes - ctx.ub) % 32 != 0) {
            ascendc_sim::Fail(ascendc_sim::Rule::unaligned_local, std::string(op) + ": LocalTensor at UB offset " +
                                                                      std::to_string(bytes - ctx.ub) +
                                                                      " is not 32-byte aligned");
        }
        if (count > capacity_) {
            ascendc_sim::Fail(ascendc_sim::Rule::ub_out_of_bounds, std::string(op) + ": " + std::to_string(count) +
                                                                       " elements exceed the tensor's " +
                                                                       std::to_string(capacity_));
        }
    }

private:
    T* data_ = nullptr;
    uint32_t capacity_ = 0;
    TPosition position_ = TPosition::VECCALC;
};

class QueueBase {
public:
    virtual ~QueueBase() = default;
};

template <TPosition position, int32_t depth>
class TQue : public QueueBase {
public:
    ~TQue() override {
        for (size_t i = 0; i < state_.size(); ++i) {
            if (state_[i] != Slot::Free) {
                ascendc_sim::Ctx().leaks.push_back("a tensor of a queue was never freed (buffer " + std::to_string(i) +
                                                   ")");
            }
        }
    }
    void Init(uint8_t* base, int32_t num, uint32_t len) {
        for (int32_t i = 0; i < num; ++i) {
            slots_.push_back(base + uint64_t(i) * len);
            state_.push_back(Slot::Free);
        }
        len_ = len;
    }
    // The buffers in turn, from the one after the last allocated (CANN's TQueBind::AllocBuffer advances a
    // cursor the same way): with two buffers, consecutive tiles use different ones (double buffering).
    template <typename T>
    LocalTensor<T> AllocTensor() {
        for (size_t probe = 0; probe < slots_.size(); ++probe) {
            const size_t i = (cursor_ + probe) % slots_.size();
            if (state_[i] == Slot::Free) {
                state_[i] = Slot::Held;
                cursor_ = (i + 1) % slots_.size();
                return LocalTensor<T>(reinterpret_cast<T*>(slots_[i]), len_ / sizeof(T), position);
            }
        }
        ascendc_sim::Fail(ascendc_sim::Rule::queue_depth,
                          "AllocTensor: all " + std::to_string(slots_.size()) +
                              " buffers of the queue are in use (free or dequeue them first)");
    }
    template <typename T>
    void EnQue(const LocalTensor<T>& tensor) {
        size_t slot = SlotOf(tensor.Address(), "EnQue");
        if (state_[slot] != Slot::Held)
            ascendc_sim::Fail(ascendc_sim::Rule::foreign_free, "EnQue: tensor is not allocated");
        if (queued_.size() >= static_cast<size_t>(depth)) {
            ascendc_sim::Fail(ascendc_sim::Rule::queue_depth,
                              "EnQue: queue of depth " + std::to_string(depth) + " is full");
        }
        state_[slot] = Slot::Queued;
        queued_.push_back(slot);
    }
    template <typename T>
    LocalTensor<T> DeQue() {
        if (queued_.empty()) ascendc_sim::Fail(ascendc_sim::Rule::deque_empty, "DeQue: the queue is empty");
        size_t slot = queued_.front();
        queued_.pop_front();
        state_[slot] = Slot::Held;
        return LocalTensor<T>(reinterpret_cast<T*>(slots_[slot]), len_ / sizeof(T), position);
    }
    template <typename T>
    void FreeTensor(const LocalTensor<T>& tensor) {
        size_t slot = SlotOf(tensor.Address(), "FreeTensor");
        if (state_[slot] != Slot::Held) {
            ascendc_sim::Fail(ascendc_sim::Rule::foreign_free,
                              "FreeTensor: tensor is not held (never allocated, still queued, or freed twice)");
        }
        state_[slot] = Slot::Free;
    }

private:
    enum class Slot { Free, Held, Queued };
    size_t SlotOf(const void* address, const char* op) const {
        for (size_t i = 0; i < slots_.size(); ++i) {
            if (slots_[i] == address) return i;
        }
        ascendc_sim::Fail(ascendc_sim::Rule::foreign_free, std::string(op) + ": tensor does not belong to this queue");
    }
    std::vector<uint8_t*> slots_;
    std::vector<Slot> state_;
    std::deque<size_t> queued_;
    size_t cursor_ = 0;
    uint32_t len_ = 0;
};

template <TPosition position>
class TBuf {
public:
    void Init(uint8_t* base, uint32_t len) {
        base_ = base;
        len_ = len;
    }
    template <typename T>
    LocalTensor<T> Get() const {
        return LocalTensor<T>(reinterpret_cast<T*>(base_), len_ / sizeof(T), position);
    }
    template <typename T>
    LocalTensor<T> Get(uint32_t count) const {
        if (uint64_t(count) * sizeof(T) > len_)
            ascendc_sim::Fail(ascendc_sim::Rule::ub_out_of_bounds, "TBuf::Get: more than the buffer holds");
        return LocalTensor<T>(reinterpret_cast<T*>(base_), count, position);
    }

private:
    uint8_t* base_ = nullptr;
    uint32_t len_ = 0;
};

class TPipe {
public:
    template <TPosition position, int32_t depth>
    void InitBuffer(TQue<position, depth>& queue, int32_t num, uint32_t len) {
        uint32_t rounded = (len + 31) / 32 * 32;
        queue.Init(Allocate(MemoryOf(position), uint64_t(num) * rounded), num, rounded);
    }
    template <TPosition position>
    void InitBuffer(TBuf<position>& buffer, uint32_t len) {
        uint32_t rounded = (len + 31) / 32 * 32;
        buffer.Init(Allocate(MemoryOf(position), rounded), rounded);
    }

private:
    // UB on a vector core; L1, L0A/L0B/L0C, bias table and fixpipe buffer on the cube core (sim/cube.h)
    uint8_t* Allocate(ascendc_sim::Memory memory, uint64_t bytes) {
        if (memory != ascendc_sim::Memory::UB) return ascendc_sim::AllocateCube(memory, bytes);
        if (bytes > UINT32_MAX)
            ascendc_sim::Fail(ascendc_sim::Rule::ub_overflow, "InitBuffer: request larger than 4 GiB");
        ascendc_sim::RequireCore(ascendc_sim::CoreType::AIV, "InitBuffer of a UB position (VECIN/VECOUT/VECCALC)");
        return ascendc_sim::Ctx().ub + ascendc_sim::AllocateUb(static_cast<uint32_t>(bytes), "InitBuffer");
    }
};

}  // namespace AscendC
