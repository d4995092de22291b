// Eight float32 lanes for the compiled passes (norm_activation.cpp, leaky_relu.cpp), in the namespace of the ISA a
// file is compiled for (ASCEND_ACTS_CPU_ISA, internal linkage: the two builds' helpers never meet at link time): one
// AVX2 register in the avx2 build (ASCEND_ACTS_CPU_AVX2), two 16-byte registers (SSE2, NEON) otherwise (GCC's vector
// extension). The same IEEE operation per lane in both, so both builds give the same values (a NaN's sign and payload
// follow which operand the compiler puts first, and may differ).
#pragma once

#include <cstdint>

#define ALWAYS_INLINE inline __attribute__((always_inline))

namespace ascend_acts_cpu {
namespace ASCEND_ACTS_CPU_ISA {
namespace {

#ifdef ASCEND_ACTS_CPU_AVX2
using V = float __attribute__((vector_size(32)));
#define LANES_NATIVE 1
#else
#define LANES_NATIVE 0
#endif
constexpr int64_t kLanes = 8;
constexpr int64_t kSegment = 256;

#if LANES_NATIVE
ALWAYS_INLINE V Load(const float* p) {
    V v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
ALWAYS_INLINE void Store(float* p, V v) { __builtin_memcpy(p, &v, sizeof v); }
ALWAYS_INLINE V Splat(float x) { return V{x, x, x, x, x, x, x, x}; }  // not 0 + x: that is +0 for -0
ALWAYS_INLINE float Lane(V v, int64_t lane) { return v[lane]; }
ALWAYS_INLINE V IfLess(V a, V b, V then, V otherwise) { return a < b ? then : otherwise; }
ALWAYS_INLINE V IfGreater(V a, V b, V then, V otherwise) { return a > b ? then : otherwise; }
ALWAYS_INLINE V IfLessEqual(V a, V b, V then, V otherwise) { return a <= b ? then : otherwise; }
#else
using Half = float __attribute__((vector_size(16)));
struct V {
    Half lo, hi;
};
ALWAYS_INLINE V operator+(V a, V b) { return {a.lo + b.lo, a.hi + b.hi}; }
ALWAYS_INLINE V operator-(V a, V b) { return {a.lo - b.lo, a.hi - b.hi}; }
ALWAYS_INLINE V operator*(V a, V b) { return {a.lo * b.lo, a.hi * b.hi}; }
ALWAYS_INLINE V operator/(V a, V b) { return {a.lo / b.lo, a.hi / b.hi}; }
ALWAYS_INLINE V& operator+=(V& a, V b) { return a = a + b; }
ALWAYS_INLINE V Load(const float* p) {
    V v;
    __builtin_memcpy(&v.lo, p, sizeof v.lo);
    __builtin_memcpy(&v.hi, p + 4, sizeof v.hi);
    return v;
}
ALWAYS_INLINE void Store(float* p, V v) {
    __builtin_memcpy(p, &v.lo, sizeof v.lo);
    __builtin_memcpy(p + 4, &v.hi, sizeof v.hi);
}
ALWAYS_INLINE V Splat(float x) { return {Half{x, x, x, x}, Half{x, x, x, x}}; }
ALWAYS_INLINE float Lane(V v, int64_t lane) { return lane < 4 ? v.lo[lane] : v.hi[lane - 4]; }
ALWAYS_INLINE V IfLess(V a, V b, V then, V otherwise) {
    return {a.lo < b.lo ? then.lo : otherwise.lo, a.hi < b.hi ? then.hi : otherwise.hi};
}
ALWAYS_INLINE V IfGreater(V a, V b, V then, V otherwise) {
    return {a.lo > b.lo ? then.lo : otherwise.lo, a.hi > b.hi ? then.hi : otherwise.hi};
}
ALWAYS_INLINE V IfLessEqual(V a, V b, V then, V otherwise) {
    return {a.lo <= b.lo ? then.lo : otherwise.lo, a.hi <= b.hi ? then.hi : otherwise.hi};
}
#endif
ALWAYS_INLINE float IfLess(float a, float b, float then, float otherwise) { return a < b ? then : otherwise; }
ALWAYS_INLINE float IfGreater(float a, float b, float then, float otherwise) { return a > b ? then : otherwise; }
ALWAYS_INLINE float IfLessEqual(float a, float b, float then, float otherwise) { return a <= b ? then : otherwise; }

ALWAYS_INLINE int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

ALWAYS_INLINE double Total(V v) {
    double total = 0;
    for (int64_t lane = 0; lane < kLanes; ++lane) total += Lane(v, lane);
    return total;
}

}  // namespace
}  // namespace ASCEND_ACTS_CPU_ISA
}  // namespace ascend_acts_cpu
