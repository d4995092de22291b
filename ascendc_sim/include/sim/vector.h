// Vector instructions on UB tensors, with the dtypes 910B supports for each (others are errors).
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "tensors.h"
#include "timeline.h"

namespace AscendC {

enum class RoundMode { CAST_NONE, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };
enum class CMPMODE { LT, GT, EQ, LE, GE, NE };
enum class SELMODE { VSEL_CMPMASK_SPR, VSEL_TENSOR_SCALAR_MODE, VSEL_TENSOR_TENSOR_MODE };

namespace detail {

template <typename T, typename... Allowed>
constexpr bool OneOf = (std::is_same_v<T, Allowed> || ...);

template <typename T>
constexpr const char* TypeName() {
    if constexpr (std::is_same_v<T, float>) return "float";
    else if constexpr (std::is_same_v<T, half>) return "half";
    else if constexpr (std::is_same_v<T, bfloat16_t>) return "bfloat16_t";
    else if constexpr (std::is_same_v<T, int32_t>) return "int32_t";
    else if constexpr (std::is_same_v<T, uint32_t>) return "uint32_t";
    else if constexpr (std::is_same_v<T, int16_t>) return "int16_t";
    else if constexpr (std::is_same_v<T, uint16_t>) return "uint16_t";
    else if constexpr (std::is_same_v<T, uint8_t>) return "uint8_t";
    else return "another type";
}

template <typename T>
[[noreturn]] void Unsupported(const char* op) {
    ascendc_sim::Fail(ascendc_sim::Rule::unsupported_dtype,
                      std::string(op) + " does not take " + TypeName<T>() + " on 910B");
}

// Counts one vector instruction over `count` elements and checks every operand.
template <typename T, typename... Operands>
void Issue(const char* op, uint32_t count, const Operands&... operands) {
    (operands.Check(count, op), ...);
    ascendc_sim::RecordVector(uint64_t(count) * sizeof(T));
    ascendc_sim::trace::Vector(op, uint64_t(count) * sizeof(T), count, operands...);
}

template <typename T>
constexpr bool kArithmetic = OneOf<T, half, float, int16_t, int32_t>;
template <typename T>
constexpr bool kFloating = OneOf<T, half, float>;
template <typename T>
constexpr bool kShiftable = OneOf<T, int16_t, uint16_t, int32_t, uint32_t>;
template <typename T>
constexpr bool kBitwise = OneOf<T, int16_t, uint16_t>;

// Integer results that leave T's range keep their low bits (multiply: the low word), as the Ascend 950
// docs describe for int32 Muls/Adds; 910B's docs say nothing, so a wrap is an `integer_overflow` error
// unless the launch declared that its kernel relies on it (NoteIntegerWrap).
template <typename T, typename F>
T Wrap(const char* op, T a, T b, F compute) {
    if constexpr (std::is_integral_v<T>) {
        int64_t exact = compute(int64_t(a), int64_t(b));
        if (exact < int64_t(std::numeric_limits<T>::min()) || exact > int64_t(std::numeric_limits<T>::max())) {
            ascendc_sim::NoteIntegerWrap(op, TypeName<T>());
        }
        using U = std::make_unsigned_t<T>;
        return static_cast<T>(static_cast<U>(compute(static_cast<U>(a), static_cast<U>(b))));
    } else {
        return static_cast<T>(compute(a, b));
    }
}

// Max/Min/Maxs/Mins with a NaN operand: the API states only a comparison ("dst = src0 > src1 ? src0 : src1",
// "dst[i] = src[i] > scalar ? src[i] : scalar", basic_api/interface/kernel_operator_vec_binary_intf.h and
// kernel_operator_vec_binary_scalar_intf.h), nothing about NaN, so the result is unspecified: an error, so that no
// kernel can come to rely on NaN being dropped (or kept) by a max/min.
template <typename T>
T NanChecked(const char* op, T a, T b, bool takeFirst) {
    if constexpr (kFloating<T>) {
        if (std::isnan(static_cast<float>(a)) || std::isnan(static_cast<float>(b))) {
            ascendc_sim::Fail(ascendc_sim::Rule::unspecified_nan,
                              std::string(op) + " of a NaN: the result is unspecified (the docs define it by a "
                                                "comparison only); compare and Select to decide what NaN gives");
        }
    }
    return takeFirst ? a : b;
}

}  // namespace detail

#define ASCENDC_SIM_BINARY(NAME, SUPPORTED, EXPR)                                                                  \
    template <typename T>                                                                                          \
    void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint32_t count) { \
        if constexpr (!SUPPORTED<T>) {                                                                             \
            detail::Unsupported<T>(#NAME);                                                                         \
        } else {                                                                                                   \
            detail::Issue<T>(#NAME, count, dst, src0, src1);                                                       \
            T* d = dst.Address();                                                                                  \
            const T* a = src0.Address();                                                                           \
            const T* b = src1.Address();                                                                           \
            for (uint32_t i = 0; i < count; ++i)                                                                   \
                d[i] = detail::Wrap<T>(#NAME, a[i], b[i], [](auto x, auto y) { return EXPR; });                    \
        }                                                                                                          \
    }

#define ASCENDC_SIM_SCALAR(NAME, SUPPORTED, EXPR)                                                 \
    template <typename T>                                                                         \
    void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, T scalar, uint32_t count) {   \
        if constexpr (!SUPPORTED<T>) {                                                            \
            detail::Unsupported<T>(#NAME);                                                        \
        } else {                                                                                  \
            detail::Issue<T>(#NAME, count, dst, src);                                             \
            T* d = dst.Address();                                                                 \
            const T* a = src.Address();                                                           \
            for (uint32_t i = 0; i < count; ++i)                                                  \
                d[i] = detail::Wrap<T>(#NAME, a[i], scalar, [](auto x, auto y) { return EXPR; }); \
        }                                                                                         \
    }

ASCENDC_SIM_BINARY(Add, detail::kArithmetic, x + y)
ASCENDC_SIM_BINARY(Sub, detail::kArithmetic, x - y)
ASCENDC_SIM_BINARY(Mul, detail::kArithmetic, x* y)
ASCENDC_SIM_BINARY(Div, detail::kFloating, x / y)
ASCENDC_SIM_BINARY(Max, detail::kArithmetic, detail::NanChecked("Max", x, y, x > y))
ASCENDC_SIM_BINARY(Min, detail::kArithmetic, detail::NanChecked("Min", x, y, x < y))
ASCENDC_SIM_BINARY(And, detail::kBitwise, x& y)
ASCENDC_SIM_BINARY(Or, detail::kBitwise, x | y)
ASCENDC_SIM_SCALAR(Adds, detail::kArithmetic, x + y)
ASCENDC_SIM_SCALAR(Muls, detail::kArithmetic, x* y)
ASCENDC_SIM_SCALAR(Maxs, detail::kArithmetic, detail::NanChecked("Maxs", x, y, x > y))
ASCENDC_SIM_SCALAR(Mins, detail::kArithmetic, detail::NanChecked("Mins", x, y, x < y))
#undef ASCENDC_SIM_BINARY
#undef ASCENDC_SIM_SCALAR

// dst = src > 0 ? src : src * scalar
template <typename T>
void LeakyRelu(const LocalTensor<T>& dst, const LocalTensor<T>& src, T scalar, uint32_t count) {
    if constexpr (!detail::kFloating<T>) {
        detail::Unsupported<T>("LeakyRelu");
    } else {
        detail::Issue<T>("LeakyRelu", count, dst, src);
        for (uint32_t i = 0; i < count; ++i) {
            T x = src.Address()[i];
            dst.Address()[i] = x > T(0) ? x : static_cast<T>(x * scalar);
        }
    }
}

template <typename T>
void Not(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count) {
    if constexpr (!detail::kBitwise<T>) {
        detail::Unsupported<T>("Not");
    } else {
        detail::Issue<T>("Not", count, dst, src);
        for (uint32_t i = 0; i < count; ++i) dst.Address()[i] = static_cast<T>(~src.Address()[i]);
    }
}

template <typename T>
void Sqrt(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count) {
    if constexpr (!detail::kFloating<T>) {
        detail::Unsupported<T>("Sqrt");
    } else {
        detail::Issue<T>("Sqrt", count, dst, src);
        for (uint32_t i = 0; i < count; ++i)
            dst.Address()[i] = static_cast<T>(std::sqrt(static_cast<float>(src.Address()[i])));
    }
}

// dst[i] = abs(src[i]) (basic_api/interface/kernel_operator_vec_unary_intf.h), half/float (AbsIntrinsicsImpl's
// SupportType, basic_api/impl/dav_c220/kernel_operator_vec_unary_impl.h); a NaN stays NaN, as IEEE's abs.
template <typename T>
void Abs(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count) {
    if constexpr (!detail::kFloating<T>) {
        detail::Unsupported<T>("Abs");
    } else {
        detail::Issue<T>("Abs", count, dst, src);
        for (uint32_t i = 0; i < count; ++i)
            dst.Address()[i] = static_cast<T>(std::fabs(static_cast<float>(src.Address()[i])));
    }
}

template <typename T>
void ShiftRight(const LocalTensor<T>& dst, const LocalTensor<T>& src, T bits, uint32_t count) {
    if constexpr (!detail::kShiftable<T>) {
        detail::Unsupported<T>("ShiftRight");
    } else {
        detail::Issue<T>("ShiftRight", count, dst, src);
        for (uint32_t i = 0; i < count; ++i) dst.Address()[i] = static_cast<T>(src.Address()[i] >> bits);
    }
}

template <typename T>
void ShiftLeft(const LocalTensor<T>& dst, const LocalTensor<T>& src, T bits, uint32_t count) {
    if constexpr (!detail::kShiftable<T>) {
        detail::Unsupported<T>("ShiftLeft");
    } else {
        detail::Issue<T>("ShiftLeft", count, dst, src);
        using U = std::make_unsigned_t<T>;
        for (uint32_t i = 0; i < count; ++i)
            dst.Address()[i] = static_cast<T>(static_cast<U>(src.Address()[i]) << bits);
    }
}

template <typename T>
void Duplicate(const LocalTensor<T>& dst, T value, uint32_t count) {
    if constexpr (!detail::OneOf<T, half, float, int16_t, uint16_t, int32_t, uint32_t>) {
        detail::Unsupported<T>("Duplicate");
    } else {
        detail::Issue<T>("Duplicate", count, dst);
        for (uint32_t i = 0; i < count; ++i) dst.Address()[i] = value;
    }
}

// dst[i] = firstValue + i, with CANN 8.x's arithmetic (basic_api/impl/dav_c220/
// kernel_operator_vec_createvecindex_impl.h, CreateVecIndexOneBlk / CreateVecIndexCalc): the first
// 32-byte block is written by the scalar unit as float(firstValue) + float(i), the later blocks by
// integer Adds of the block length. For integer T the float step is inexact past 2^24, which is a
// `vec_index_precision` error here rather than silently wrong indices.
template <typename T>
void CreateVecIndex(const LocalTensor<T>& dst, T firstValue, uint32_t count) {
    if constexpr (!detail::OneOf<T, half, float, int16_t, int32_t>) {
        detail::Unsupported<T>("CreateVecIndex");
    } else {
        detail::Issue<T>("CreateVecIndex", count, dst);
        constexpr uint32_t kBlock = 32 / sizeof(T);
        for (uint32_t i = 0; i < count; ++i) {
            if constexpr (std::is_integral_v<T>) {
                if (i < kBlock) {
                    float viaFloat = static_cast<float>(firstValue) + static_cast<float>(i);
                    if (double(viaFloat) != double(int64_t(firstValue) + i)) {
                        ascendc_sim::Fail(ascendc_sim::Rule::vec_index_precision,
                                          "CreateVecIndex<" + std::string(detail::TypeName<T>()) + "> from " +
                                              std::to_string(firstValue) + ": CANN 8.x computes element " +
                                              std::to_string(i) + " as float(first) + i, which is not exact past 2^24");
                    }
                    dst.Address()[i] = static_cast<T>(firstValue + static_cast<T>(i));
                } else {  // the integer Adds of the later blocks
                    dst.Address()[i] = detail::Wrap<T>("CreateVecIndex", dst.Address()[i - kBlock], T(kBlock),
                                                       [](auto x, auto y) { return x + y; });
                }
            } else {
                dst.Address()[i] = static_cast<T>(static_cast<float>(firstValue) + static_cast<float>(i));
            }
        }
    }
}

namespace detail {
template <typename Dst, typename Src>
constexpr bool kCastable = (std::is_same_v<Dst, float> && OneOf<Src, half, bfloat16_t, int32_t>) ||
                           (OneOf<Dst, half, bfloat16_t, int32_t> && std::is_same_v<Src, float>);

inline float RoundFloat(float x, RoundMode mode) {
    switch (mode) {
        case RoundMode::CAST_FLOOR: return std::floor(x);
        case RoundMode::CAST_CEIL: return std::ceil(x);
        case RoundMode::CAST_ROUND: return std::round(x);
        case RoundMode::CAST_TRUNC: return std::trunc(x);
        default: return std::nearbyint(x);  // to nearest, ties to even
    }
}
}  // namespace detail

// float -> half / bfloat16_t round to nearest even (CAST_RINT; CAST_NONE is the same for narrowing floats)
template <typename Dst, typename Src>
void Cast(const LocalTensor<Dst>& dst, const LocalTensor<Src>& src, RoundMode mode, uint32_t count) {
    if constexpr (!detail::kCastable<Dst, Src>) {
        ascendc_sim::Fail(ascendc_sim::Rule::unsupported_dtype, std::string("Cast from ") + detail::TypeName<Src>() +
                                                                    " to " + detail::TypeName<Dst>() +
                                                                    " is not a 910B conversion");
    } else {
        src.Check(count, "Cast");
        dst.Check(count, "Cast");
        ascendc_sim::RecordVector(uint64_t(count) * (sizeof(Dst) > sizeof(Src) ? sizeof(Dst) : sizeof(Src)));
        ascendc_sim::trace::VectorOf("Cast", ascendc_sim::EventKind::Vector,
                                     uint64_t(count) * (sizeof(Dst) > sizeof(Src) ? sizeof(Dst) : sizeof(Src)), 0, dst,
                                     count, {ascendc_sim::trace::LocalSpan(src, count)});
        for (uint32_t i = 0; i < count; ++i) {
            if constexpr (std::is_same_v<Dst, int32_t>) {
                dst.Address()[i] = static_cast<int32_t>(detail::RoundFloat(src.Address()[i], mode));
            } else {
                dst.Address()[i] = static_cast<Dst>(static_cast<float>(src.Address()[i]));
            }
        }
    }
}

// Bit i of dst (a uint8_t mask) = src[i] <mode> scalar. count * sizeof(T) must be a multiple of 256 bytes.
template <typename T>
void CompareScalar(const LocalTensor<uint8_t>& dst, const LocalTensor<T>& src, T scalar, CMPMODE mode, uint32_t count) {
    if constexpr (!detail::kFloating<T>) {
        detail::Unsupported<T>("CompareScalar");
    } else {
        if (uint64_t(count) * sizeof(T) % 256 != 0) {
            ascendc_sim::Fail(ascendc_sim::Rule::vector_alignment,
                              "CompareScalar: count * sizeof(T) must be a multiple of 256 bytes");
        }
        src.Check(count, "CompareScalar");
        dst.Check((count + 7) / 8, "CompareScalar");
        ascendc_sim::RecordVector(uint64_t(count) * sizeof(T));
        ascendc_sim::trace::VectorOf("CompareScalar", ascendc_sim::EventKind::Vector, uint64_t(count) * sizeof(T), 0,
                                     dst, (count + 7) / 8, {ascendc_sim::trace::LocalSpan(src, count)});
        uint8_t* mask = dst.Address();
        std::memset(mask, 0, (count + 7) / 8);
        for (uint32_t i = 0; i < count; ++i) {
            T x = src.Address()[i];
            bool bit = mode == CMPMODE::GT   ? x > scalar
                       : mode == CMPMODE::LT ? x < scalar
                       : mode == CMPMODE::GE ? x >= scalar
                       : mode == CMPMODE::LE ? x <= scalar
                       : mode == CMPMODE::EQ ? x == scalar
                                             : x != scalar;
            mask[i / 8] |= static_cast<uint8_t>(bit) << (i % 8);
        }
    }
}

// dst[i] = bit i of mask ? src0[i] : src1[i]
template <typename T>
void Select(const LocalTensor<T>& dst, const LocalTensor<uint8_t>& mask, const LocalTensor<T>& src0,
            const LocalTensor<T>& src1, SELMODE mode, uint32_t count) {
    if constexpr (!detail::kFloating<T>) {
        detail::Unsupported<T>("Select");
    } else {
        if (mode != SELMODE::VSEL_TENSOR_TENSOR_MODE)
            ascendc_sim::Fail(ascendc_sim::Rule::unsupported_mode,
                              "Select: tensor operands need VSEL_TENSOR_TENSOR_MODE");
        ascendc_sim::NoteSelect("Select");  // tensor-tensor mode: its temporary at selectTemporaryOffset
        mask.Check((count + 7) / 8, "Select");
        detail::Issue<T>("Select", count, dst, src0, src1);
        for (uint32_t i = 0; i < count; ++i) {
            bool bit = (mask.Address()[i / 8] >> (i % 8)) & 1u;
            dst.Address()[i] = bit ? src0.Address()[i] : src1.Address()[i];
        }
    }
}

// dst[i] = the element at byte offset srcBaseAddr + srcOffset[i] of src (offsets in bytes, whole
// elements, inside src): a UB-to-UB gather of 2- or 4-byte elements.
template <typename T>
void Gather(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<uint32_t>& srcOffset,
            uint32_t srcBaseAddr, uint32_t count) {
    if constexpr (!detail::OneOf<T, half, float, int16_t, uint16_t, int32_t, uint32_t>) {
        detail::Unsupported<T>("Gather");
    } else {
        dst.Check(count, "Gather");
        srcOffset.Check(count, "Gather");
        src.Check(0, "Gather");
        ascendc_sim::RecordVector(uint64_t(count) * sizeof(T));
        ascendc_sim::trace::VectorOf(
            "Gather", ascendc_sim::EventKind::Gather, uint64_t(count) * sizeof(T), count, dst, count,
            {ascendc_sim::trace::LocalSpan(src, src.GetSize()), ascendc_sim::trace::LocalSpan(srcOffset, count)});
        const uint64_t srcBytes = uint64_t(src.GetSize()) * sizeof(T);
        const auto* base = reinterpret_cast<const uint8_t*>(src.Address());
        for (uint32_t i = 0; i < count; ++i) {
            uint64_t offset = uint64_t(srcBaseAddr) + srcOffset.Address()[i];
            if (offset % sizeof(T) != 0 || offset + sizeof(T) > srcBytes) {
                ascendc_sim::Fail(ascendc_sim::Rule::ub_out_of_bounds,
                                  "Gather: element " + std::to_string(i) + " reads byte offset " +
                                      std::to_string(offset) + ", outside the " + std::to_string(srcBytes) +
                                      "-byte source or not a whole element");
            }
            std::memcpy(dst.Address() + i, base + offset, sizeof(T));
        }
    }
}

// dst[0] = sum of src[0..count) (work is scratch space, as the documented interface requires)
template <typename T>
void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work, uint32_t count) {
    if constexpr (!detail::kFloating<T>) {
        detail::Unsupported<T>("ReduceSum");
    } else {
        src.Check(count, "ReduceSum");
        dst.Check(1, "ReduceSum");
        work.Check(1, "ReduceSum");
        ascendc_sim::RecordVector(uint64_t(count) * sizeof(T));
        ascendc_sim::trace::VectorOf("ReduceSum", ascendc_sim::EventKind::Vector, uint64_t(count) * sizeof(T), 0, dst,
                                     1, {ascendc_sim::trace::LocalSpan(src, count)});
        float sum = 0.0f;
        for (uint32_t i = 0; i < count; ++i) sum += static_cast<float>(src.Address()[i]);
        dst.Address()[0] = static_cast<T>(sum);
    }
}

}  // namespace AscendC
