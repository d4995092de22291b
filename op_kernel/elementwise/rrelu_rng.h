// The RReLU counter-hash RNG of docs/rng.md on the vector unit: only 32-bit multiply-low (Muls on
// int32), add, shifts and and/or/not (on uint16 halves: bitwise ops act per bit, and 910B's And/Or/Not
// take 16-bit types), because 910B has no Philox. Bit-identical to python/ascend_acts/ops/rrelu/rng.py.
//
// The hash's int32 Muls (and the Adds of the high index word) rely on results wrapping to their low 32
// bits, which the AscendC docs state for Ascend 950 but not for 910B (A2): a hardware check
// (docs/npu.md), declared to the emulator by the RReLU launches (docs/emulator.md, `integer_overflow`).
// Computing the products from 16-bit halves instead would need int32 products of up to 32 bits (no
// uint32 Mul on 910B) and about 20 more vector instructions per multiply, 4 multiplies per element.
#pragma once

#include "kernel_operator.h"

namespace ascend_acts {
namespace rng {

constexpr uint32_t kMix1 = 0x85EBCA6Bu;
constexpr uint32_t kMix2 = 0xC2B2AE35u;
constexpr uint32_t kGolden = 0x9E3779B9u;

__aicore__ inline uint32_t Fmix32(uint32_t h) {
    h ^= h >> 16;
    h *= kMix1;
    h ^= h >> 13;
    h *= kMix2;
    return h ^ (h >> 16);
}

struct Keys {
    uint32_t k0, k1;
};

// Round keys of a 64-bit seed (scalar unit, once per launch).
__aicore__ inline Keys RoundKeys(uint64_t seed) {
    uint32_t k0 = Fmix32(static_cast<uint32_t>(seed) ^ kGolden);
    uint32_t k1 = Fmix32((static_cast<uint32_t>(seed >> 32) ^ k0) + kGolden);
    return {k0, k1};
}

// Vector registers of one tile: the hash words and two scratch vectors, `count` elements each.
struct HashBuffers {
    AscendC::LocalTensor<uint32_t> h, scratch, scratch2;
};

// dst = a ^ b as (a | b) & ~(a & b) on 16-bit halves; tmp must differ from the other operands.
__aicore__ inline void Xor(const AscendC::LocalTensor<uint32_t>& dst, const AscendC::LocalTensor<uint32_t>& a,
                           const AscendC::LocalTensor<uint32_t>& b, const AscendC::LocalTensor<uint32_t>& tmp,
                           uint32_t count) {
    auto d = dst.ReinterpretCast<uint16_t>();
    auto x = a.ReinterpretCast<uint16_t>();
    auto y = b.ReinterpretCast<uint16_t>();
    auto t = tmp.ReinterpretCast<uint16_t>();
    AscendC::And(t, x, y, 2 * count);
    AscendC::Or(d, x, y, 2 * count);
    AscendC::Not(t, t, 2 * count);
    AscendC::And(d, d, t, 2 * count);
}

__aicore__ inline void XorScalar(const HashBuffers& v, uint32_t key, uint32_t count) {
    AscendC::Duplicate(v.scratch, key, count);
    Xor(v.h, v.h, v.scratch, v.scratch2, count);
}

__aicore__ inline void Fmix32(const HashBuffers& v, uint32_t count) {
    auto asSigned = v.h.ReinterpretCast<int32_t>();
    const uint32_t shifts[3] = {16, 13, 16};
    const uint32_t multipliers[2] = {kMix1, kMix2};
    for (int round = 0; round < 3; ++round) {
        AscendC::ShiftRight(v.scratch, v.h, shifts[round], count);
        Xor(v.h, v.h, v.scratch, v.scratch2, count);
        if (round < 2) AscendC::Muls(asSigned, asSigned, static_cast<int32_t>(multipliers[round]), count);
    }
}

// Tiles of the noise never cross a multiple of kIndexSplit (RreluNoise::TileLength).
constexpr uint64_t kIndexSplit = uint64_t(1) << 31;

// h[i] = low word of flat index first + i, exact for any first. CreateVecIndex<int32_t> is exact only
// for first values below 2^24 in CANN 8.x (it computes its first block through float), so it counts
// from 0 (count < 2^24) and one int32 Adds adds the tile's first low word: inside a tile that does not
// cross a multiple of 2^31 the sum stays in int32's range (low words >= 2^31 are negative as int32).
__aicore__ inline void LowIndexWords(const HashBuffers& v, uint64_t first, uint32_t count) {
    auto index = v.h.ReinterpretCast<int32_t>();
    AscendC::CreateVecIndex(index, int32_t(0), count);
    uint32_t low = static_cast<uint32_t>(first);
    if (low != 0) AscendC::Adds(index, index, static_cast<int32_t>(low), count);
}

// noise[i] = lower + span * u(first + i) for i < count; the tile must not cross a multiple of
// kIndexSplit (the caller splits it), so the high index word is one scalar.
__aicore__ inline void Noise(const AscendC::LocalTensor<float>& noise, const HashBuffers& v, Keys keys, uint64_t first,
                             uint32_t count, float lower, float span) {
    LowIndexWords(v, first, count);
    XorScalar(v, keys.k0, count);
    Fmix32(v, count);
    XorScalar(v, keys.k1, count);
    uint32_t high = static_cast<uint32_t>(first >> 32);
    if (high != 0) {
        auto asSigned = v.h.ReinterpretCast<int32_t>();
        AscendC::Adds(asSigned, asSigned, static_cast<int32_t>(high * kGolden), count);
    }
    Fmix32(v, count);
    AscendC::ShiftRight(v.h, v.h, 8u, count);
    AscendC::Cast(noise, v.h.ReinterpretCast<int32_t>(), AscendC::RoundMode::CAST_NONE, count);  // < 2^24: exact
    AscendC::Muls(noise, noise, 1.0f / 16777216.0f, count);                                      // exact
    AscendC::Muls(noise, noise, span, count);                                                    // rounding 1
    AscendC::Adds(noise, noise, lower, count);                                                   // rounding 2
}

}  // namespace rng
}  // namespace ascend_acts
