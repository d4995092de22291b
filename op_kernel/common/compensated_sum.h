// Compensated (Kahan) float32 sums on the vector unit, shared by the kernels that reduce many values per
// channel (fused bias grad_bias, BatchNorm's statistics and gradient sums): a plain per-lane float32 sum's
// error grows with the number of terms, a compensated one's does not.
//
// A sum is two float arrays in UB, acc and comp: the sum of the terms added to lane i is acc[i] - comp[i], comp
// holding the low-order part the rounded acc lost (with the opposite sign), which the next term added to the lane
// makes up for. Once a term or a partial sum is +-inf, (t - acc) - y is inf - inf = NaN and poisons the lane, where
// a plain float32 sum gives +-inf: callers sum a non-finite result again plainly.
#pragma once

#include "kernel_operator.h"

namespace ascend_acts {
namespace compensated_sum {

constexpr uint32_t kFloatsPerBlock = 8;  // floats per 32-byte block: vector operands start on one

// value - value is 0 exactly when value is finite, NaN for +-inf and NaN.
__aicore__ inline bool IsFinite(float value) { return value - value == 0.0f; }

// The lower part of `lanes` sums halved: at least half, whole 32-byte blocks of floats.
__aicore__ inline uint32_t HalfOf(uint32_t lanes) {
    return ((lanes + 1) / 2 + kFloatsPerBlock - 1) / kFloatsPerBlock * kFloatsPerBlock;
}

// (acc, comp) += term over `count` lanes, Kahan's step: y = term - comp, t = acc + y, comp = (t - acc) - y,
// acc = t. comp holds t while acc is still needed, and acc + y is then recomputed (the same bits). `y` is scratch
// of `count` floats and may be `term` itself (read only by the first step). Separate vector instructions: no
// compiler can reassociate them away. Five vector instructions where a plain sum takes one.
__aicore__ inline void Add(const AscendC::LocalTensor<float>& acc, const AscendC::LocalTensor<float>& comp,
                           const AscendC::LocalTensor<float>& term, const AscendC::LocalTensor<float>& y,
                           uint32_t count) {
    AscendC::Sub(y, term, comp, count);
    AscendC::Add(comp, acc, y, count);
    AscendC::Sub(comp, comp, acc, count);
    AscendC::Sub(comp, comp, y, count);
    AscendC::Add(acc, acc, y, count);
}

// Adds the sums at lane offset `from` into those at lane 0, over `count` lanes (from >= count: the ranges do not
// overlap): the corrections first (small: plain addition), then the sums compensated (acc[from..] its own scratch).
__aicore__ inline void FoldInto0(const AscendC::LocalTensor<float>& acc, const AscendC::LocalTensor<float>& comp,
                                 uint32_t from, uint32_t count) {
    AscendC::Add(comp, comp, comp[from], count);
    Add(acc, comp, acc[from], acc[from], count);
}

// Halves the first `lanes` sums (upper part into lower part) down to at most one block of lanes; returns how many
// are left.
__aicore__ inline uint32_t FoldLanes(const AscendC::LocalTensor<float>& acc, const AscendC::LocalTensor<float>& comp,
                                     uint32_t lanes) {
    while (lanes > kFloatsPerBlock) {
        uint32_t half = HalfOf(lanes);
        FoldInto0(acc, comp, half, lanes - half);
        lanes = half;
    }
    return lanes;
}

// Halves the first `count` of `values` in place (upper part added plainly into lower part) until at most `lanes`
// are left; returns how many. Their sum is that of the `count`, with at most log2(count / lanes) roundings per
// value: a pairwise sum, which costs about one vector addition per value, where a compensated one costs five.
__aicore__ inline uint32_t HalveTo(const AscendC::LocalTensor<float>& values, uint32_t count, uint32_t lanes) {
    while (count > lanes) {
        uint32_t half = HalfOf(count);
        AscendC::Add(values, values, values[half], count - half);
        count = half;
    }
    return count;
}

// The sum of the first `lanes` (acc, comp) pairs, compensated on the scalar unit.
__aicore__ inline float SumOfLanes(const AscendC::LocalTensor<float>& acc, const AscendC::LocalTensor<float>& comp,
                                   uint32_t lanes) {
    AscendC::PipeBarrier<PIPE_ALL>();
    float sum = acc.GetValue(0), correction = comp.GetValue(0);
    for (uint32_t i = 1; i < lanes; ++i) {
        correction += comp.GetValue(i);
        float y = acc.GetValue(i) - correction;
        float next = sum + y;
        correction = (next - sum) - y;
        sum = next;
    }
    return sum - correction;
}

// The sum of the first `lanes` (acc, comp) pairs as a scalar: lanes folded on the vector unit, the last block on
// the scalar unit, all compensated. Overwrites acc and comp.
__aicore__ inline float Total(const AscendC::LocalTensor<float>& acc, const AscendC::LocalTensor<float>& comp,
                              uint32_t lanes) {
    return SumOfLanes(acc, comp, FoldLanes(acc, comp, lanes));
}

}  // namespace compensated_sum
}  // namespace ascend_acts
