// The Matmul high-level API as the emulator models it (our own implementation from Huawei's public
// documentation): C (M x N) = A (M x K) * B (K x N), A and B in GM (ND), C blocks of baseM x baseN
// fetched into UB with GetTensorC, accumulated in float32 like the cube's L0C.
//
// Checked: the tiling against the platform (fractal-aligned base sizes; L0A/L0B/L0C with their double
// buffers; L1 for the depthA1/depthB1 blocks, half of it per AIV since two share one cube core), A
// and B inside their GM tensors, C in VECIN (or GM), the call protocol (REGIST_MATMUL_OBJ before any
// InitBuffer, as 910B's separate cube/vector cores require; SetTensorA/B before Iterate; one
// GetTensorC per Iterate that returned true, into a UB tensor of at least baseM x baseN; End() before
// the kernel returns), and the registration's scope (REGIST_MATMUL_OBJ in the kernel entry, every
// Matmul call inside the scope it was expanded in). Counted: GM reads of A and B
// as the cube's MTE2 makes them (an A block per Iterate; B once per SetTensorB when all of K of a
// B block fits L1, else per Iterate), cube iterations and multiply-accumulates.
#pragma once

#include <algorithm>
#include <type_traits>

#include "../kernel_operator.h"

enum class CubeFormat { ND, NZ, ND_ALIGN };

// The documented TCubeTiling fields the emulated Matmul reads (the host fills them).
struct TCubeTiling {
    int32_t usedCoreNum;
    int32_t M, N, Ka, Kb;
    int32_t singleCoreM, singleCoreN, singleCoreK;
    int32_t baseM, baseN, baseK;
    int32_t depthA1, depthB1;
    int32_t stepM, stepN, stepKa, stepKb;
    int32_t isBias;
    int32_t iterateOrder;
    int32_t dbL0A, dbL0B, dbL0C;
};

namespace matmul {

template <AscendC::TPosition POSITION, CubeFormat FORMAT, typename TYPE, bool ISTRANS = false>
struct MatmulType {
    static constexpr AscendC::TPosition pos = POSITION;
    static constexpr CubeFormat format = FORMAT;
    using T = TYPE;
    static constexpr bool isTrans = ISTRANS;
};

template <class AType, class BType, class CType, class BiasType>
class Matmul {
    using SrcT = typename AType::T;
    using DstT = typename CType::T;
    static_assert(std::is_same_v<SrcT, typename BType::T>, "A and B have one dtype");
    static_assert(AType::pos == AscendC::TPosition::GM && BType::pos == AscendC::TPosition::GM,
                  "the emulator models A and B in GM");
    static_assert(AType::format == CubeFormat::ND && BType::format == CubeFormat::ND, "the emulator models ND A and B");
    static_assert(!AType::isTrans && !BType::isTrans, "the emulator models untransposed A and B");
    static_assert(std::is_same_v<DstT, float>, "the emulator models float C (L0C accumulation)");
    static_assert(CType::pos == AscendC::TPosition::VECIN || CType::pos == AscendC::TPosition::GM,
                  "C goes to VECIN or GM");

public:
    ~Matmul() {
        if (initialised_ && !ended_) ascendc_sim::Ctx().leaks.push_back("Matmul End() was never called");
    }

    void Init(const TCubeTiling* tiling, AscendC::TPipe*) {
        if (initialised_) Fail("registered twice");
        t_ = *tiling;
        const auto& p = ascendc_sim::Ctx().platform;
        if (ascendc_sim::Ctx().ubUsed != 0) {
            Fail("REGIST_MATMUL_OBJ after InitBuffer: with separate cube and vector cores (910B) it must come first");
        }
        if (t_.baseM <= 0 || t_.baseN <= 0 || t_.baseK <= 0 || t_.baseM % 16 || t_.baseN % 16 || t_.baseK % 16) {
            Fail("baseM/baseN/baseK must be positive multiples of 16 (the cube fractal)");
        }
        const uint64_t size = sizeof(SrcT);
        Capacity("L0A", uint64_t(t_.baseM) * t_.baseK * size * Buffers(t_.dbL0A), p.l0aBytes);
        Capacity("L0B", uint64_t(t_.baseK) * t_.baseN * size * Buffers(t_.dbL0B), p.l0bBytes);
        Capacity("L0C", uint64_t(t_.baseM) * t_.baseN * sizeof(float) * Buffers(t_.dbL0C), p.l0cBytes);
        if (t_.depthA1 < 1 || t_.depthB1 < 1 || t_.stepKa < 1 || t_.stepKb < 1 || t_.depthA1 < t_.stepKa ||
            t_.depthB1 < t_.stepKb) {
            Fail("depthA1/depthB1 must hold at least stepKa/stepKb blocks");
        }
        Capacity("L1 (half per AIV: two share a cube core)",
                 (uint64_t(t_.depthA1) * t_.baseM * t_.baseK + uint64_t(t_.depthB1) * t_.baseK * t_.baseN) * size,
                 p.l1Bytes / 2);
        if (t_.Ka != t_.Kb || t_.singleCoreK != t_.Ka || t_.singleCoreM > t_.M || t_.singleCoreN > t_.N) {
            Fail("inconsistent shape fields (Ka == Kb == singleCoreK, singleCoreM <= M, singleCoreN <= N)");
        }
        if (t_.isBias) Fail("SetBias is not modelled: add the bias on the vector unit");
        initialised_ = true;
    }

    // The end of REGIST_MATMUL_OBJ's scope: on 910B its KfcCommClient's destructor ends the cube service.
    void EndRegistrationScope() { serviceEnded_ = true; }

    void SetTensorA(const AscendC::GlobalTensor<SrcT>& a, bool transpose = false) {
        Ready("SetTensorA");
        if (transpose) Fail("SetTensorA: transposed A is not modelled");
        a.CheckRange(0, uint64_t(t_.singleCoreM) * t_.Ka, "Matmul SetTensorA");
        a_ = a;
        Restart();
    }

    void SetTensorB(const AscendC::GlobalTensor<SrcT>& b, bool transpose = false) {
        Ready("SetTensorB");
        if (transpose) Fail("SetTensorB: transposed B is not modelled");
        b.CheckRange(0, uint64_t(t_.Kb) * t_.N, "Matmul SetTensorB");
        b_ = b;
        bLoaded_ = -1;
        Restart();
    }

    // Computes the next baseM x baseN block of C (M first, then N); false when none is left.
    template <bool sync = true>
    bool Iterate(bool enPartialSum = false) {
        static_assert(sync, "the emulator models the synchronous Iterate/GetTensorC");
        Ready("Iterate");
        if (enPartialSum) Fail("Iterate: enPartialSum is not modelled");
        if (a_.Address() == nullptr || b_.Address() == nullptr) Fail("Iterate before SetTensorA and SetTensorB");
        if (pending_) Fail("Iterate: the previous block was not taken with GetTensorC");
        const int32_t blocksM = (t_.singleCoreM + t_.baseM - 1) / t_.baseM;
        const int32_t blocksN = (t_.singleCoreN + t_.baseN - 1) / t_.baseN;
        if (next_ >= blocksM * blocksN) return false;
        const int32_t mBlock = next_ % blocksM, nBlock = next_ / blocksM;
        ++next_;
        rows_ = std::min(t_.baseM, t_.singleCoreM - mBlock * t_.baseM);
        cols_ = std::min(t_.baseN, t_.singleCoreN - nBlock * t_.baseN);
        const uint64_t m0 = uint64_t(mBlock) * t_.baseM, n0 = uint64_t(nBlock) * t_.baseN, k = t_.Ka;
        // MTE2: the A block, and the B block unless all of its K stayed in L1 since the last load
        ascendc_sim::RecordGmRead(a_.Address() + m0 * k, uint64_t(rows_) * k * sizeof(SrcT));
        const bool bFitsL1 = uint64_t(t_.stepKb) * t_.baseK >= k, loadB = !bFitsL1 || bLoaded_ != nBlock;
        if (loadB) {
            for (uint64_t r = 0; r < k; ++r)
                ascendc_sim::RecordGmRead(b_.Address() + r * t_.N + n0, cols_ * sizeof(SrcT));
            bLoaded_ = nBlock;
        }
        block_.assign(size_t(rows_) * cols_, 0.0f);
        for (int32_t i = 0; i < rows_; ++i) {
            const SrcT* a = a_.Address() + (m0 + i) * k;
            for (uint64_t kk = 0; kk < k; ++kk) {
                const float av = static_cast<float>(a[kk]);
                const SrcT* b = b_.Address() + kk * t_.N + n0;
                float* c = block_.data() + size_t(i) * cols_;
                for (int32_t j = 0; j < cols_; ++j) c[j] += av * static_cast<float>(b[j]);
            }
        }
        auto& counters = ascendc_sim::Ctx().counters;
        ++counters.cubeIterations;
        counters.cubeMacs += uint64_t(rows_) * cols_ * k;
        ascendc_sim::trace::MatmulIterate(a_.Address() + m0 * k, uint64_t(rows_) * k * sizeof(SrcT), b_.Address() + n0,
                                          ((k - 1) * t_.N + cols_) * sizeof(SrcT), loadB ? k * cols_ * sizeof(SrcT) : 0,
                                          uint64_t(rows_ + 15) / 16 * 16 * ((cols_ + 15) / 16 * 16) *
                                              ((k + 32 / sizeof(SrcT) - 1) / (32 / sizeof(SrcT)) * (32 / sizeof(SrcT))),
                                          sizeof(SrcT), next_ - 1);
        pending_ = true;
        return true;
    }

    // The block of the last Iterate into UB: `rows` x `cols` valid values, rows 32-byte aligned apart.
    template <bool sync = true>
    void GetTensorC(const AscendC::LocalTensor<DstT>& c, uint8_t enAtomic = 0, bool enSequentialWrite = false) {
        static_assert(sync, "the emulator models the synchronous Iterate/GetTensorC");
        if (!pending_) Fail("GetTensorC without a block from Iterate");
        if (enAtomic != 0 || enSequentialWrite) Fail("GetTensorC: atomic or sequential write is not modelled");
        const uint32_t stride = (uint32_t(cols_) + 7) / 8 * 8;
        c.Check(uint64_t(t_.baseM) * t_.baseN, "GetTensorC");
        for (int32_t i = 0; i < rows_; ++i) {
            std::copy_n(block_.data() + size_t(i) * cols_, cols_, c.Address() + size_t(i) * stride);
        }
        ascendc_sim::trace::MatmulGetC(c, uint64_t(rows_ - 1) * stride + cols_, uint64_t(rows_) * cols_ * sizeof(DstT),
                                       next_ - 1);
        pending_ = false;
    }

    void End() {
        Ready("End");
        pending_ = false;
        ended_ = true;
    }

private:
    [[noreturn]] static void Fail(const std::string& message) {
        ascendc_sim::Fail(ascendc_sim::Rule::matmul, "Matmul: " + message);
    }
    static uint64_t Buffers(int32_t db) { return db == 2 ? 2 : 1; }
    static void Capacity(const char* memory, uint64_t bytes, uint64_t capacity) {
        if (bytes > capacity) {
            ascendc_sim::Fail(ascendc_sim::Rule::matmul_capacity, std::string("Matmul tiling needs ") +
                                                                      std::to_string(bytes) + " bytes of " + memory +
                                                                      ", the platform has " + std::to_string(capacity));
        }
    }
    void Ready(const char* op) const {
        if (!initialised_) Fail(std::string(op) + " before REGIST_MATMUL_OBJ");
        if (serviceEnded_) {
            ascendc_sim::Fail(
                ascendc_sim::Rule::matmul_scope,
                std::string("Matmul ") + op +
                    " after the scope of its REGIST_MATMUL_OBJ ended (its client's destructor has ended the "
                    "cube service): expand REGIST_MATMUL_OBJ in the kernel entry around every Matmul call");
        }
    }
    void Restart() {
        next_ = 0;
        pending_ = false;
    }

    TCubeTiling t_{};
    bool initialised_ = false, pending_ = false, ended_ = false, serviceEnded_ = false;
    AscendC::GlobalTensor<SrcT> a_, b_;
    int32_t next_ = 0, rows_ = 0, cols_ = 0, bLoaded_ = -1;
    std::vector<float> block_;
};

}  // namespace matmul

namespace matmul {

// What REGIST_MATMUL_OBJ declares in the emulator, modelled on CANN 8.1's expansion for 910B
// (highlevel_api/impl/kfc/kfc_register_obj.h, REGIST_CUBE_OBJ): on the AIC the cube service runs and
// then `return`s from the enclosing function, on the AIV a local KfcCommClient binds the Matmul objects
// and its destructor ends the service. So the macro belongs in the kernel entry (`__func__` is the
// launched kernel's name), and a Matmul call after the end of the enclosing scope is an error.
template <class M>
class MatmulRegistration {
public:
    MatmulRegistration(M& mm, const TCubeTiling* tiling, AscendC::TPipe* pipe, const char* function) : mm_(mm) {
        const char* entry = ascendc_sim::Ctx().kernel;
        if (std::string(function) != entry) {
            ascendc_sim::Fail(
                ascendc_sim::Rule::matmul_scope,
                std::string("REGIST_MATMUL_OBJ expanded in ") + function + "(), not in the kernel entry " + entry +
                    "(): on the AIC its `return` would only leave " + function +
                    "(), and on the AIV its client ends the cube service when " + function + "() returns");
        }
        mm_.Init(tiling, pipe);
    }
    ~MatmulRegistration() { mm_.EndRegistrationScope(); }
    MatmulRegistration(const MatmulRegistration&) = delete;
    MatmulRegistration& operator=(const MatmulRegistration&) = delete;

private:
    M& mm_;
};

}  // namespace matmul

// REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling): binds the Matmul object to its tiling
// for the rest of the enclosing scope.
#define REGIST_MATMUL_OBJ(pipe, workspace, mm, tiling) \
    static_cast<void>(workspace);                      \
    ::matmul::MatmulRegistration actsSimMatmulRegistration_((mm), (tiling), (pipe), __func__)
