// The cube core (AIC) of a MIX launch: GM -> L1 copies, LoadData (2D and img2col 3Dv2) into L0A/L0B,
// Mmad into L0C (float32 accumulation), Fixpipe L0C -> GM, cross-core flags. Our own model of the
// interfaces CANN 8.1 declares (names, parameter structs and template parameters as in
// basic_api/interface/kernel_operator_mm_intf.h, kernel_struct_mm.h, kernel_struct_fixpipe.h,
// kernel_operator_fixpipe_intf.h, kernel_operator_common_intf.h), with the semantics of Huawei's docs.
//
// Layouts (the LoadData docs: "A2: small-Z big-Z; B2: small-N big-Z"; fractals of 512 bytes, 16 x C0 with
// C0 = 32 / sizeof(T): 16 x 16 for 16-bit types, 16 x 8 on A and 8 x 16 on B for float; L0C NZ fractals
// of 16 x 16 float):
//   A2 (M x K, ZZ):  (m, k) at ((m/16) * K1 + k/C0) * 16*C0 + (m%16) * C0 + k%C0,   K1 = ceil(K/C0)
//   B2 (K x N, ZN):  (k, n) at ((k/C0) * N1 + n/16) * 16*C0 + (n%16) * C0 + k%C0,   N1 = ceil(N/16)
//   CO1 (M x N, NZ): (m, n) at ((n/16) * M1 + m/16) * 256 + (m%16) * 16 + n%16,     M1 = ceil(M/16)
#pragma once

#include <cmath>
#include <initializer_list>
#include <type_traits>

#include "datacopy.h"
#include "mix.h"

// The cube's quantisation modes (a compiler builtin enum in CANN, used as QuantMode_t::NoQuant).
enum QuantMode_t { NoQuant, F322F16, F322BF16, DEQF16, VDEQF16, QF322B8_PRE, VQF322B8_PRE, REQ8, VREQ8 };

// `if ASCEND_IS_AIC { ... }` as in CANN (basic_api/impl/utils/kernel_utils_macros.h).
#define ASCEND_IS_AIC (::ascendc_sim::Ctx().coreType == ::ascendc_sim::CoreType::AIC)
#define ASCEND_IS_AIV (::ascendc_sim::Ctx().coreType == ::ascendc_sim::CoreType::AIV)

namespace AscendC {

template <typename T>
using PrimT = T;

constexpr int32_t PAD_SIZE = 4;

// --- parameter structs (fields and order as kernel_struct_mm.h / kernel_struct_fixpipe.h) ------------
struct LoadData2DParams {
    LoadData2DParams() {}
    LoadData2DParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn, const uint16_t srcStrideIn,
                     const uint8_t sidIn, const uint16_t dstGapIn, const bool ifTransposeIn, const uint8_t addrModeIn)
        : startIndex(startIndexIn), dstGap(dstGapIn), srcStride(srcStrideIn), ifTranspose(ifTransposeIn),
          repeatTimes(repeatTimesIn), sid(sidIn), addrMode(addrModeIn) {}
    uint16_t startIndex = 0;
    uint16_t dstGap = 0;
    uint16_t srcStride = 0;
    bool ifTranspose = 0;
    uint8_t repeatTimes = 0;
    uint8_t sid = 0;
    uint8_t addrMode = 0;
};
using LoadData2dParams = LoadData2DParams;

template <typename T>
struct LoadData3DParamsV2 {
    LoadData3DParamsV2() {}
    LoadData3DParamsV2(const uint8_t padListIn[PAD_SIZE], const uint16_t l1HIn, const uint16_t l1WIn,
                       const uint16_t channelSizeIn, const uint16_t kExtensionIn, const uint16_t mExtensionIn,
                       const uint16_t kStartPtIn, const uint16_t mStartPtIn, const uint8_t strideWIn,
                       const uint8_t strideHIn, const uint8_t filterWIn, const uint8_t filterHIn,
                       const uint8_t dilationFilterWIn, const uint8_t dilationFilterHIn, const bool enTransposeIn,
                       const bool enSmallKIn, const T padValueIn)
        : l1H(l1HIn), l1W(l1WIn), channelSize(channelSizeIn), kExtension(kExtensionIn), mExtension(mExtensionIn),
          kStartPt(kStartPtIn), mStartPt(mStartPtIn), strideW(strideWIn), strideH(strideHIn), filterW(filterWIn),
          filterH(filterHIn), dilationFilterW(dilationFilterWIn), dilationFilterH(dilationFilterHIn),
          enTranspose(enTransposeIn), enSmallK(enSmallKIn), padValue(padValueIn) {
        for (int32_t i = 0; i < PAD_SIZE; ++i) padList[i] = padListIn[i];
    }
    uint8_t padList[PAD_SIZE] = {0};  // left, right, top, bottom
    uint16_t l1H = 0;
    uint16_t l1W = 0;
    uint16_t channelSize = 0;
    uint16_t kExtension = 0;
    uint16_t mExtension = 0;
    uint16_t kStartPt = 0;
    uint16_t mStartPt = 0;
    uint8_t strideW = 1;
    uint8_t strideH = 1;
    uint8_t filterW = 1;
    uint8_t filterH = 1;
    uint8_t dilationFilterW = 1;
    uint8_t dilationFilterH = 1;
    bool enTranspose = false;
    bool enSmallK = false;
    T padValue = T(0.0f);
    bool filterSizeW = false;
    bool filterSizeH = false;
    bool fMatrixCtrl = false;
};

struct IsResetLoad3dConfig {
    constexpr IsResetLoad3dConfig(const bool isSetFMatrixIn, const bool isSetPaddingIn)
        : isSetFMatrix(isSetFMatrixIn), isSetPadding(isSetPaddingIn) {}
    bool isSetFMatrix = true;
    bool isSetPadding = true;
};
constexpr IsResetLoad3dConfig IS_RESER_LOAD3D_DEFAULT_CONFIG = {true, true};

struct MmadParams {
    MmadParams() {}
    MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn, const bool isBiasIn,
               const int32_t fmOffsetIn, const bool enSsparseIn, const bool enWinogradAIn, const bool enWinogradBIn)
        : m(mIn), n(nIn), k(kIn), isBias(isBiasIn), fmOffset(fmOffsetIn), enSsparse(enSsparseIn),
          enWinogradA(enWinogradAIn), enWinogradB(enWinogradBIn) {}
    MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn, const uint8_t unitFlagIn,
               const bool cmatrixSourceIn, const bool cmatrixInitValIn)
        : m(mIn), n(nIn), k(kIn), unitFlag(unitFlagIn), cmatrixSource(cmatrixSourceIn),
          cmatrixInitVal(cmatrixInitValIn) {}
    uint16_t m = 0;
    uint16_t n = 0;
    uint16_t k = 0;
    bool isBias = false;  // 1: accumulate onto L0C
    int32_t fmOffset = 0;
    bool enSsparse = false;
    bool enWinogradA = false;
    bool enWinogradB = false;
    uint8_t unitFlag = 0;
    bool kDirectionAlign = false;
    bool cmatrixSource = false;
    bool cmatrixInitVal = true;  // 1: C starts at 0
};

enum class CO2Layout : uint8_t { NZ = 0, ROW_MAJOR, COLUMN_MAJOR };
struct FixpipeConfig {
    CO2Layout format;
};
constexpr FixpipeConfig CFG_NZ = {CO2Layout::NZ};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR};
constexpr FixpipeConfig CFG_COLUMN_MAJOR = {CO2Layout::COLUMN_MAJOR};

struct FixpipeParamsV220 {
    FixpipeParamsV220() {}
    FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn,
                      const uint32_t dstStrideIn, const bool reluEnIn)
        : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn), reluEn(reluEnIn) {}
    uint16_t nSize = 0;
    uint16_t mSize = 0;
    uint16_t srcStride = 0;  // L0C: 16-element rows between the starts of neighbouring 16-column blocks
    uint32_t dstStride = 0;  // ROW_MAJOR GM: elements between the starts of neighbouring rows
    QuantMode_t quantPre = QuantMode_t::NoQuant;
    uint64_t deqScalar = 0;
    uint16_t ndNum = 1;
    uint16_t srcNdStride = 0;
    uint16_t dstNdStride = 0;
    bool reluEn = false;
    uint8_t unitFlag = 0;
    bool isChannelSplit = false;
};

namespace cube_detail {

template <typename T>
constexpr uint32_t C0() {
    return 32 / sizeof(T);
}
inline uint32_t Ceil(uint32_t value, uint32_t to) { return (value + to - 1) / to * to; }

inline const char* PositionName(TPosition p) {
    switch (p) {
        case TPosition::A1: return "A1";
        case TPosition::A2: return "A2";
        case TPosition::B1: return "B1";
        case TPosition::B2: return "B2";
        case TPosition::C1: return "C1";
        case TPosition::C2: return "C2";
        case TPosition::CO1: return "CO1";
        case TPosition::C2PIPE2GM: return "C2PIPE2GM";
        default: return "a UB position";
    }
}

// The tensor is in one of `allowed` positions, on the cube core, inside its buffer, `alignment`-aligned.
template <typename T>
void CheckTensor(const LocalTensor<T>& t, std::initializer_list<TPosition> allowed, uint64_t count, uint32_t alignment,
                 const char* op, const char* role) {
    ascendc_sim::RequireCore(ascendc_sim::CoreType::AIC, op);
    bool ok = false;
    std::string names;
    for (TPosition p : allowed) {
        ok = ok || t.GetPosition() == p;
        names += std::string(names.empty() ? "" : " / ") + PositionName(p);
    }
    if (!ok) {
        Fail(ascendc_sim::Rule::cube_position,
             std::string(op) + ": " + role + " is in " + PositionName(t.GetPosition()) + ", expected " + names);
    }
    auto& ctx = ascendc_sim::Ctx();
    const size_t m = size_t(MemoryOf(t.GetPosition()));
    auto* bytes = reinterpret_cast<uint8_t*>(t.Address());
    if (bytes < ctx.cubeMemory[m] || bytes >= ctx.cubeMemory[m] + ctx.cubeUsed[m]) {
        Fail(ascendc_sim::Rule::cube_position, std::string(op) + ": " + role + " is not a tensor allocated in " +
                                                   ascendc_sim::MemoryName(MemoryOf(t.GetPosition())));
    }
    if ((bytes - ctx.cubeMemory[m]) % alignment != 0) {
        Fail(ascendc_sim::Rule::cube_alignment,
             std::string(op) + ": " + role + " at " + ascendc_sim::MemoryName(MemoryOf(t.GetPosition())) + " offset " +
                 std::to_string(bytes - ctx.cubeMemory[m]) + " is not " + std::to_string(alignment) + "-byte aligned");
    }
    if (count > t.GetSize()) {
        Fail(ascendc_sim::Rule::cube_out_of_bounds, std::string(op) + ": " + role + " needs " + std::to_string(count) +
                                                        " elements, its tensor holds " + std::to_string(t.GetSize()));
    }
}

template <typename T>
float ToFloat(T value) {
    return static_cast<float>(value);
}

}  // namespace cube_detail

// --- GM -> L1 (MTE2): DataCopy with DataCopyParams (32-byte blocks) --------------------------------
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& params) {
    using namespace cube_detail;
    if (MemoryOf(dst.GetPosition()) == ascendc_sim::Memory::UB) {
        Fail(ascendc_sim::Rule::cube_position,
             "DataCopy with DataCopyParams: the emulator models it GM -> A1 / B1 (use DataCopyPad to UB)");
    }
    const uint64_t unit = 32 / sizeof(T);
    if (params.blockCount == 0 || params.blockLen == 0)
        Fail(ascendc_sim::Rule::cube_params, "DataCopy: blockCount and blockLen must be >= 1");
    // what the copy writes: the gap after the last block is not written, so the tensor need not hold it
    const uint64_t span = (uint64_t(params.blockCount - 1) * (params.blockLen + params.dstStride) + params.blockLen) *
                          unit;
    CheckTensor(dst, {TPosition::A1, TPosition::B1, TPosition::C1}, span, 32, "DataCopy GM -> L1", "dst");
    for (uint32_t b = 0; b < params.blockCount; ++b) {
        const uint64_t from = uint64_t(b) * (params.blockLen + params.srcStride) * unit;
        const uint64_t to = uint64_t(b) * (params.blockLen + params.dstStride) * unit;
        src.CheckRange(from, params.blockLen * unit, "DataCopy GM -> L1");
        ascendc_sim::RecordGmRead(src.Address() + from, params.blockLen * 32ull);
        std::memcpy(dst.Address() + to, src.Address() + from, params.blockLen * 32ull);
        ascendc_sim::Ctx().counters.l1BytesIn += params.blockLen * 32ull;
    }
    ascendc_sim::trace::CopyIn(
        dst, src.Address(),
        ascendc_sim::trace::StridedBytes(params.blockCount, params.blockLen * 32ull, params.srcStride * 32ull), span,
        params.blockCount * params.blockLen * 32ull);
}

// --- LoadData 2D: whole 512-byte fractals L1 -> L0A/L0B ----------------------------------------------
template <typename T>
void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& p) {
    using namespace cube_detail;
    constexpr uint32_t fractal = 512 / sizeof(T);
    if (p.ifTranspose) Fail(ascendc_sim::Rule::cube_params, "LoadData 2D: ifTranspose is not modelled");
    if (p.repeatTimes == 0) Fail(ascendc_sim::Rule::cube_params, "LoadData 2D: repeatTimes must be >= 1");
    const uint64_t srcLast = uint64_t(p.startIndex) + uint64_t(p.repeatTimes - 1) * p.srcStride + 1;
    CheckTensor(src, {TPosition::A1, TPosition::B1}, srcLast * fractal, 32, "LoadData 2D", "src");
    const uint64_t dstSpan = uint64_t(p.repeatTimes) * (1 + p.dstGap) * fractal;
    CheckTensor(dst, {TPosition::A2, TPosition::B2}, dstSpan - uint64_t(p.dstGap) * fractal, 512, "LoadData 2D", "dst");
    for (uint32_t r = 0; r < p.repeatTimes; ++r) {
        std::memcpy(dst.Address() + uint64_t(r) * (1 + p.dstGap) * fractal,
                    src.Address() + (uint64_t(p.startIndex) + uint64_t(r) * p.srcStride) * fractal, 512);
    }
    ascendc_sim::trace::Load(dst, dstSpan - uint64_t(p.dstGap) * fractal, src, srcLast * fractal,
                             p.repeatTimes * 512ull);
}

// --- LoadData 3Dv2: img2col of a [C1][l1H][l1W][C0] feature map in L1 into L0A (ZZ) or L0B (ZN) -------
// Row m of the img2col matrix is output position m (row-major over the output grid the padded, dilated
// filter leaves), column k is (c1, kh, kw, c0) with c0 fastest: our reading of the Load3D docs, which is
// also the order of CANN's FRACTAL_Z weights (C1*Kh*Kw, N1, N0, C0). Out-of-map taps read padValue.
template <typename T, const IsResetLoad3dConfig& defaultConfig = IS_RESER_LOAD3D_DEFAULT_CONFIG, typename U = PrimT<T>,
          typename std::enable_if<std::is_same<PrimT<T>, U>::value, bool>::type = true>
void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData3DParamsV2<U>& p) {
    using namespace cube_detail;
    static_assert(defaultConfig.isSetFMatrix && defaultConfig.isSetPadding,
                  "the emulator models LoadData 3Dv2 with the FMatrix and padding taken from its parameters");
    static_assert(std::is_same<T, half>::value || std::is_same<T, bfloat16_t>::value || std::is_same<T, float>::value,
                  "the emulator models LoadData 3Dv2 for half / bfloat16_t / float (B2 takes no 8-bit types on 910B)");
    constexpr uint32_t c0 = C0<T>();
    const char* op = "LoadData 3Dv2";
    if (p.enTranspose || p.enSmallK || p.filterSizeW || p.filterSizeH || p.fMatrixCtrl) {
        Fail(ascendc_sim::Rule::cube_params,
             std::string(op) + ": enTranspose / enSmallK / filterSize / fMatrixCtrl are not modelled");
    }
    if (p.l1H == 0 || p.l1W == 0 || p.channelSize == 0 || p.channelSize % c0 != 0) {
        Fail(ascendc_sim::Rule::load3d_params,
             std::string(op) + ": l1H, l1W >= 1 and channelSize a positive multiple of C0 = " + std::to_string(c0) +
                 " (got channelSize " + std::to_string(p.channelSize) + ")");
    }
    if (p.strideW < 1 || p.strideW > 63 || p.strideH < 1 || p.strideH > 63 || p.filterW < 1 || p.filterH < 1 ||
        p.dilationFilterW < 1 || p.dilationFilterH < 1) {
        Fail(ascendc_sim::Rule::load3d_params,
             std::string(op) + ": strides must be 1..63, filter sizes and dilations 1..255");
    }
    if (p.kExtension == 0 || p.kExtension % c0 || p.kStartPt % c0 || p.mExtension == 0 || p.mExtension % 16 ||
        p.mStartPt % 16) {
        Fail(ascendc_sim::Rule::load3d_params,
             std::string(op) + ": kStartPt/kExtension must be multiples of C0 = " + std::to_string(c0) +
                 " and mStartPt/mExtension multiples of 16 (whole fractals), kExtension and mExtension >= 1");
    }
    const int32_t effH = (p.filterH - 1) * p.dilationFilterH + 1, effW = (p.filterW - 1) * p.dilationFilterW + 1;
    const int32_t paddedH = p.l1H + p.padList[2] + p.padList[3], paddedW = p.l1W + p.padList[0] + p.padList[1];
    if (paddedH < effH || paddedW < effW)
        Fail(ascendc_sim::Rule::load3d_params, std::string(op) + ": the filter is larger than the padded map");
    const uint32_t outW = (paddedW - effW) / p.strideW + 1, outH = (paddedH - effH) / p.strideH + 1;
    const uint32_t kTotal = uint32_t(p.channelSize) * p.filterH * p.filterW;
    if (uint32_t(p.kStartPt) + p.kExtension > kTotal) {
        Fail(ascendc_sim::Rule::load3d_params,
             std::string(op) + ": K range [" + std::to_string(p.kStartPt) + ", " +
                 std::to_string(p.kStartPt + p.kExtension) +
                 ") is past channelSize * filterH * filterW = " + std::to_string(kTotal));
    }
    CheckTensor(src, {TPosition::A1, TPosition::B1}, uint64_t(p.channelSize) * p.l1H * p.l1W, 32, op, "src");
    const bool toB = dst.GetPosition() == TPosition::B2;
    CheckTensor(dst, {TPosition::A2, TPosition::B2}, uint64_t(p.mExtension) * p.kExtension, 512, op, "dst");
    const uint32_t kBlocks = p.kExtension / c0, mBlocks = p.mExtension / 16;
    const uint32_t tapsPerC1 = uint32_t(p.filterH) * p.filterW * c0;
    for (uint32_t i = 0; i < p.mExtension; ++i) {
        const uint32_t position = p.mStartPt + i;
        const bool inGrid = position < outH * outW;
        const int32_t oh = inGrid ? int32_t(position / outW) : 0, ow = inGrid ? int32_t(position % outW) : 0;
        for (uint32_t j = 0; j < p.kExtension; ++j) {
            const uint32_t k = p.kStartPt + j;
            const uint32_t c1 = k / tapsPerC1, tap = (k % tapsPerC1) / c0, c = k % c0;
            const int32_t kh = int32_t(tap / p.filterW), kw = int32_t(tap % p.filterW);
            const int32_t h = oh * p.strideH - p.padList[2] + kh * p.dilationFilterH;
            const int32_t w = ow * p.strideW - p.padList[0] + kw * p.dilationFilterW;
            T value = static_cast<T>(p.padValue);
            if (inGrid && h >= 0 && h < p.l1H && w >= 0 && w < p.l1W) {
                value = src.Address()[((uint64_t(c1) * p.l1H + h) * p.l1W + w) * c0 + c];
            }
            const uint64_t fractal = toB ? uint64_t(j / c0) * mBlocks + i / 16 : uint64_t(i / 16) * kBlocks + j / c0;
            dst.Address()[fractal * 16 * c0 + (i % 16) * c0 + j % c0] = value;
        }
    }
    ascendc_sim::trace::Load(dst, uint64_t(p.mExtension) * p.kExtension, src, uint64_t(p.channelSize) * p.l1H * p.l1W,
                             uint64_t(p.mExtension) * p.kExtension * sizeof(T));
}

// --- Mmad: C (m x n, float, L0C) (+)= A (m x k, L0A) * B (k x n, L0B) --------------------------------
template <typename DstT, typename Src0T, typename Src1T>
void MmadCompute(const LocalTensor<DstT>& dst, const LocalTensor<Src0T>& a, const LocalTensor<Src1T>& b,
                 const float* bias, const MmadParams& p) {
    using namespace cube_detail;
    static_assert(
        std::is_same<DstT, float>::value && std::is_same<Src0T, Src1T>::value &&
            (std::is_same<Src0T, half>::value || std::is_same<Src0T, bfloat16_t>::value ||
             std::is_same<Src0T, float>::value),
        "Mmad on 910B (dav_c220 MmadCal SupportType): float <- half x half, bfloat16 x bfloat16, float x float "
        "(the emulator does not model int8)");
    constexpr uint32_t c0 = C0<Src0T>();
    if (p.m == 0 || p.n == 0 || p.k == 0 || p.m > 4095 || p.n > 4095 || p.k > 4095) {
        Fail(ascendc_sim::Rule::mmad_params, "Mmad: m, n, k must be 1..4095 (got " + std::to_string(p.m) + ", " +
                                                 std::to_string(p.n) + ", " + std::to_string(p.k) + ")");
    }
    if (p.fmOffset || p.enSsparse || p.enWinogradA || p.enWinogradB || p.unitFlag || p.kDirectionAlign ||
        p.cmatrixSource) {
        Fail(ascendc_sim::Rule::cube_params,
             "Mmad: fmOffset / sparse / winograd / unitFlag / kDirectionAlign / cmatrixSource are not modelled");
    }
    const uint32_t mA = Ceil(p.m, 16), nA = Ceil(p.n, 16), kA = Ceil(p.k, c0);
    CheckTensor(a, {TPosition::A2}, uint64_t(mA) * kA, 512, "Mmad", "fm (A)");
    CheckTensor(b, {TPosition::B2}, uint64_t(kA) * nA, 512, "Mmad", "filter (B)");
    CheckTensor(dst, {TPosition::CO1}, uint64_t(mA) * nA, 1024, "Mmad", "dst (C)");
    const uint32_t kBlocks = kA / c0, nBlocks = nA / 16, mBlocks = mA / 16;
    const bool accumulate = p.isBias || !p.cmatrixInitVal;
    for (uint32_t m = 0; m < p.m; ++m) {
        for (uint32_t n = 0; n < p.n; ++n) {
            float& c = dst.Address()[(uint64_t(n / 16) * mBlocks + m / 16) * 256 + (m % 16) * 16 + n % 16];
            float sum = bias != nullptr ? bias[n] : (accumulate ? c : 0.0f);
            for (uint32_t k = 0; k < p.k; ++k) {
                const Src0T av = a.Address()[(uint64_t(m / 16) * kBlocks + k / c0) * 16 * c0 + (m % 16) * c0 + k % c0];
                const Src1T bv = b.Address()[(uint64_t(k / c0) * nBlocks + n / 16) * 16 * c0 + (n % 16) * c0 + k % c0];
                sum += ToFloat(av) * ToFloat(bv);
            }
            c = sum;
        }
    }
    auto& counters = ascendc_sim::Ctx().counters;
    ++counters.cubeIterations;
    counters.cubeMacs += uint64_t(p.m) * p.n * p.k;
    ascendc_sim::trace::Mmad(dst, a, b, p.m, p.n, p.k, accumulate);
}

template <typename DstT, typename Src0T, typename Src1T>
void Mmad(const LocalTensor<DstT>& dst, const LocalTensor<Src0T>& fm, const LocalTensor<Src1T>& filter,
          const MmadParams& p) {
    MmadCompute(dst, fm, filter, nullptr, p);
}

// With a bias row (1 x n, float) in the bias table (C2): C = bias + A * B.
template <typename DstT, typename Src0T, typename Src1T, typename BiasT>
void Mmad(const LocalTensor<DstT>& dst, const LocalTensor<Src0T>& fm, const LocalTensor<Src1T>& filter,
          const LocalTensor<BiasT>& bias, const MmadParams& p) {
    static_assert(std::is_same<BiasT, float>::value, "the emulator models a float bias");
    cube_detail::CheckTensor(bias, {TPosition::C2}, p.n, 64, "Mmad", "bias");
    MmadCompute(dst, fm, filter, bias.Address(), p);
}

// --- Fixpipe L0C -> GM: NZ to row-major ND, float32 -> DstT -------------------------------------------
template <typename DstT, typename SrcT, const FixpipeConfig& config = CFG_ROW_MAJOR>
void Fixpipe(const GlobalTensor<DstT>& dst, const LocalTensor<SrcT>& src, const FixpipeParamsV220& p) {
    using namespace cube_detail;
    static_assert(std::is_same<SrcT, float>::value, "the emulator models float L0C");
    static_assert(config.format == CO2Layout::ROW_MAJOR,
                  "the emulator models Fixpipe NZ -> ND (CFG_ROW_MAJOR); 910B has no COLUMN_MAJOR to GM");
    const char* op = "Fixpipe";
    // dav_c220 CheckCommonFixpipeParam / CheckFixpipeL0C2GMParam (kernel_operator_fixpipe_v2_impl.h)
    if (p.nSize < 1 || p.nSize > 4095 || p.mSize < 1 || p.mSize > 8192 || p.dstStride == 0) {
        Fail(ascendc_sim::Rule::fixpipe_params,
             "Fixpipe: nSize must be 1..4095, mSize 1..8192 (ROW_MAJOR), dstStride >= 1");
    }
    constexpr bool toFloat = std::is_same<DstT, float>::value, toHalf = std::is_same<DstT, half>::value,
                   toBf16 = std::is_same<DstT, bfloat16_t>::value;
    static_assert(toFloat || toHalf || toBf16, "the emulator models Fixpipe float -> float / half / bfloat16_t");
    const QuantMode_t expected = toFloat ? QuantMode_t::NoQuant : toHalf ? QuantMode_t::F322F16 : QuantMode_t::F322BF16;
    if (p.quantPre != expected) {
        Fail(ascendc_sim::Rule::fixpipe_params,
             "Fixpipe: float L0C to this dtype needs quantPre " + std::string(toFloat  ? "NoQuant"
                                                                              : toHalf ? "F322F16"
                                                                                       : "F322BF16"));
    }
    if (p.ndNum != 1 || p.isChannelSplit || p.unitFlag)
        Fail(ascendc_sim::Rule::cube_params, "Fixpipe: ndNum > 1 / channel split / unitFlag are not modelled");
    if (p.srcStride % 16 != 0 || p.srcStride < Ceil(p.mSize, 16) || p.dstStride < p.nSize) {
        Fail(ascendc_sim::Rule::fixpipe_params,
             "Fixpipe: srcStride must be a multiple of 16 holding mSize rows, dstStride at least nSize "
             "(got srcStride " +
                 std::to_string(p.srcStride) + ", dstStride " + std::to_string(p.dstStride) + ")");
    }
    const uint32_t nBlocks = Ceil(p.nSize, 16) / 16;
    CheckTensor(src, {TPosition::CO1}, uint64_t(nBlocks) * p.srcStride * 16, 64, op, "src");
    dst.CheckRange(0, uint64_t(p.mSize - 1) * p.dstStride + p.nSize, op);
    std::vector<DstT> row(p.nSize);
    for (uint32_t m = 0; m < p.mSize; ++m) {
        for (uint32_t n = 0; n < p.nSize; ++n) {
            float v = src.Address()[(uint64_t(n / 16) * p.srcStride + m) * 16 + n % 16];
            if (p.reluEn && v < 0.0f) v = 0.0f;
            row[n] = static_cast<DstT>(v);
        }
        ascendc_sim::RecordGmWrite(dst.Address() + uint64_t(m) * p.dstStride, uint64_t(p.nSize) * sizeof(DstT));
        std::memcpy(dst.Address() + uint64_t(m) * p.dstStride, row.data(), uint64_t(p.nSize) * sizeof(DstT));
    }
    ascendc_sim::trace::Fixpipe(dst.Address(), (uint64_t(p.mSize - 1) * p.dstStride + p.nSize) * sizeof(DstT), src,
                                uint64_t(nBlocks) * p.srcStride * 16, uint64_t(p.mSize) * p.nSize * sizeof(DstT));
}

// --- cross-core flags (kernel_operator_common_intf.h) -------------------------------------------------
template <uint8_t modeId, pipe_t pipe>
void CrossCoreSetFlag(uint16_t flagId) {
    ascendc_sim::trace::FlagPipe(pipe);
    ascendc_sim::CrossCoreSet(modeId, flagId);
}

template <uint8_t modeId = 0, pipe_t pipe = PIPE_S>
void CrossCoreWaitFlag(uint16_t flagId) {
    ascendc_sim::trace::FlagPipe(pipe);
    ascendc_sim::CrossCoreWait(modeId, flagId);
}

}  // namespace AscendC
