// GlobalTensor, LocalTensor, TPipe, TQue and TBuf with the checks the hardware does not do for you.
#pragma once

#include <deque>
#include <type_traits>

#include "core.h"

// Pipes are a global enum in AscendC.
enum pipe_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL };

namespace AscendC {

template <typename A, typename B>
struct IsSameType { static constexpr bool value = std::is_same<A, B>::value; };

enum class TPosition { GM, VECIN, VECOUT, VECCALC, A1, A2, B1, B2, CO1, CO2 };
using QuePosition = TPosition;

inline uint32_t GetBlockIdx() { return ascendc_sim::Ctx().blockIdx; }
inline uint32_t GetBlockNum() { return ascendc_sim::Ctx().blockDim; }
template <pipe_t pipe>
inline void PipeBarrier() {}  // the emulator runs every pipe in program order

template <typename T>
class GlobalTensor {
public:
    void SetGlobalBuffer(__gm__ T* buffer, uint64_t size) {
        if (ascendc_sim::FindGm(buffer, size * sizeof(T)) == nullptr) {
            ascendc_sim::Fail("gm_out_of_bounds", "SetGlobalBuffer: window of " + std::to_string(size) +
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
            ascendc_sim::Fail("gm_out_of_bounds", std::string(op) + ": elements [" + std::to_string(first) + ", " +
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
    LocalTensor(T* data, uint32_t capacity) : data_(data), capacity_(capacity) {}
    LocalTensor operator[](uint32_t offset) const {
        return LocalTensor(data_ + offset, offset <= capacity_ ? capacity_ - offset : 0);
    }
    template <typename U>
    LocalTensor<U> ReinterpretCast() const {
        return LocalTensor<U>(reinterpret_cast<U*>(data_), static_cast<uint32_t>(uint64_t(capacity_) * sizeof(T) / sizeof(U)));
    }
    T GetValue(uint32_t index) const { Check(index + 1, "GetValue", false); return data_[index]; }
    void SetValue(uint32_t index, T value) const { Check(index + 1, "SetValue", false); data_[index] = value; }
    uint32_t GetSize() const { return capacity_; }
    T* Address() const { return data_; }

    // `count` elements from the start must be inside this tensor's UB buffer, which starts 32-byte aligned.
    void Check(uint64_t count, const char* op, bool aligned = true) const {
        auto& ctx = ascendc_sim::Ctx();
        auto* bytes = reinterpret_cast<uint8_t*>(data_);
        if (data_ == nullptr || bytes < ctx.ub || bytes >= ctx.ub + ctx.ubUsed) {
            ascendc_sim::Fail("not_in_ub", std::string(op) + ": operand is not a tensor in the Unified Buffer");
        }
        if (aligned && (bytes - ctx.ub) % 32 != 0) {
            ascendc_sim::Fail("unaligned_local", std::string(op) + ": LocalTensor at UB offset " +
                              std::to_string(bytes - ctx.ub) + " is not 32-byte aligned");
        }
        if (count > capacity_) {
            ascendc_sim::Fail("ub_out_of_bounds", std::string(op) + ": " + std::to_string(count) +
                              " elements exceed the tensor's " + std::to_string(capacity_));
        }
    }

private:
    T* data_ = nullptr;
    uint32_t capacity_ = 0;
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
                ascendc_sim::Ctx().leaks.push_back("a tensor of a queue was never freed (buffer " + std::to_string(i) + ")");
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
    template <typename T>
    LocalTensor<T> AllocTensor() {
        for (size_t i = 0; i < slots_.size(); ++i) {
            if (state_[i] == Slot::Free) {
                state_[i] = Slot::Held;
                return LocalTensor<T>(reinterpret_cast<T*>(slots_[i]), len_ / sizeof(T));
            }
        }
        ascendc_sim::Fail("queue_depth", "AllocTensor: all " + std::to_string(slots_.size()) +
                          " buffers of the queue are in use (free or dequeue them first)");
    }
    template <typename T>
    void EnQue(const LocalTensor<T>& tensor) {
        size_t slot = SlotOf(tensor.Address(), "EnQue");
        if (state_[slot] != Slot::Held) ascendc_sim::Fail("foreign_free", "EnQue: tensor is not allocated");
        if (queued_.size() >= static_cast<size_t>(depth)) {
            ascendc_sim::Fail("queue_depth", "EnQue: queue of depth " + std::to_string(depth) + " is full");
        }
        state_[slot] = Slot::Queued;
        queued_.push_back(slot);
    }
    template <typename T>
    LocalTensor<T> DeQue() {
        if (queued_.empty()) ascendc_sim::Fail("deque_empty", "DeQue: the queue is empty");
        size_t slot = queued_.front();
        queued_.pop_front();
        state_[slot] = Slot::Held;
        return LocalTensor<T>(reinterpret_cast<T*>(slots_[slot]), len_ / sizeof(T));
    }
    template <typename T>
    void FreeTensor(const LocalTensor<T>& tensor) {
        size_t slot = SlotOf(tensor.Address(), "FreeTensor");
        if (state_[slot] != Slot::Held) {
            ascendc_sim::Fail("foreign_free", "FreeTensor: tensor is not held (never allocated, still queued, or freed twice)");
        }
        state_[slot] = Slot::Free;
    }

private:
    enum class Slot { Free, Held, Queued };
    size_t SlotOf(const void* address, const char* op) const {
        for (size_t i = 0; i < slots_.size(); ++i) {
            if (slots_[i] == address) return i;
        }
        ascendc_sim::Fail("foreign_free", std::string(op) + ": tensor does not belong to this queue");
    }
    std::vector<uint8_t*> slots_;
    std::vector<Slot> state_;
    std::deque<size_t> queued_;
    uint32_t len_ = 0;
};

template <TPosition position>
class TBuf {
public:
    void Init(uint8_t* base, uint32_t len) { base_ = base; len_ = len; }
    template <typename T>
    LocalTensor<T> Get() const { return LocalTensor<T>(reinterpret_cast<T*>(base_), len_ / sizeof(T)); }
    template <typename T>
    LocalTensor<T> Get(uint32_t count) const {
        if (uint64_t(count) * sizeof(T) > len_) ascendc_sim::Fail("ub_out_of_bounds", "TBuf::Get: more than the buffer holds");
        return LocalTensor<T>(reinterpret_cast<T*>(base_), count);
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
        queue.Init(Allocate(uint64_t(num) * rounded), num, rounded);
    }
    template <TPosition position>
    void InitBuffer(TBuf<position>& buffer, uint32_t len) {
        uint32_t rounded = (len + 31) / 32 * 32;
        buffer.Init(Allocate(rounded), rounded);
    }

private:
    uint8_t* Allocate(uint64_t bytes) {
        if (bytes > UINT32_MAX) ascendc_sim::Fail("ub_overflow", "InitBuffer: request larger than 4 GiB");
        return ascendc_sim::Ctx().ub + ascendc_sim::AllocateUb(static_cast<uint32_t>(bytes), "InitBuffer");
    }
};

}  // namespace AscendC
