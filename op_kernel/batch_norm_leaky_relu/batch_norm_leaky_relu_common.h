// Shared by the BatchNorm + LeakyReLU training kernels (forward and backward): the units a core reduces, the walk
// over a unit's tiles, and the per-core statistics arrays in UB.
//
// Layout: NCHW, so channel c of sample n is a plane of H*W contiguous elements at (n * C + c) * H*W. A unit (the
// values sharing one mean) is a channel's N planes (BatchNorm) or sample n's C/G consecutive planes of group g
// (norm_groups = G). Tiles never cross planes unless they hold whole ones; the last tile of a plane may be short,
// and is moved with DataCopyPad. The row mode (BatchNorm of short planes) walks chunks of channels by rows of
// samples instead (RowChunk, RowTile, RowSums below).
#pragma once

#include "kernel_operator.h"
#include "../common/compensated_sum.h"
#include "../common/float_compute.h"
#include "../common/read_tiling.h"
#include "batch_norm_leaky_relu_tiling_data.h"

namespace ascend_acts {
namespace batch_norm_kernel {

// A unit: `planes` planes of tiling.planeSize elements, `planeStride` apart in GM from `offset`; plane p has the
// core-local channel firstChannel + channelStep * p (channelStep 0: one channel, BatchNorm's unit).
struct Unit {
    uint64_t offset;
    uint32_t planes;
    uint64_t planeStride;
    uint32_t firstChannel;
    uint32_t channelStep;
};

// BatchNorm's unit of core-local channel `local` (global channel `channel`): its N planes.
__aicore__ inline Unit ChannelUnit(const BatchNormLeakyReluTiling& tiling, uint32_t channel, uint32_t local) {
    return Unit{uint64_t(channel) * tiling.planeSize, tiling.batch, uint64_t(tiling.channels) * tiling.planeSize, local,
                0};
}

// The grouped unit of sample n and group `group` (core-local group `local`): C/G contiguous planes.
__aicore__ inline Unit GroupUnit(const BatchNormLeakyReluTiling& tiling, uint32_t n, uint32_t group, uint32_t local) {
    const uint32_t perGroup = tiling.channelsPerGroup;
    return Unit{(uint64_t(n) * tiling.channels + uint64_t(group) * perGroup) * tiling.planeSize, perGroup,
                tiling.planeSize, local * perGroup, 1};
}

// One tile of a unit: its GM offset (elements) and its length. A tile of several whole planes (`planes` > 1) has
// them `planeStride` elements apart in GM and back to back in UB; `firstPlane` is its first plane's index in the
// unit.
struct PlaneTile {
    uint64_t offset;
    uint32_t count;
    uint32_t planes;
    uint64_t planeStride;
    uint32_t firstPlane;
};

// DataCopyPad's blockCount is 12 bits (CheckDataCopyPadParams, dav_c220 kernel_operator_data_copy_impl.h).
constexpr uint32_t kMaxCopyBlocks = 4095;

// Planes that fit a tile and fill whole 32-byte blocks are moved several per DMA (one strided DataCopyPad), so
// small planes (GAN layers' 4x4 .. 16x16) do not cost one DMA latency each; other planes go one at a time.
template <typename T>
__aicore__ inline uint32_t PlanesPerTile(const BatchNormLeakyReluTiling& tiling) {
    if (tiling.planeSize > tiling.tileLength || tiling.planeSize * sizeof(T) % 32 != 0) return 1;
    uint64_t planes = tiling.tileLength / tiling.planeSize;
    return planes < kMaxCopyBlocks ? static_cast<uint32_t>(planes) : kMaxCopyBlocks;
}

// Visits the tiles of `unit` in a fixed order (plane by plane, front to back).
template <typename T, typename Visit>
__aicore__ inline void ForEachTile(const BatchNormLeakyReluTiling& tiling, const Unit& unit, Visit&& visit) {
    const uint32_t group = PlanesPerTile<T>(tiling);
    if (group > 1) {
        for (uint32_t p = 0; p < unit.planes; p += group) {
            uint32_t planes = unit.planes - p < group ? unit.planes - p : group;
            visit(PlaneTile{unit.offset + p * unit.planeStride, planes * static_cast<uint32_t>(tiling.planeSize),
                            planes, unit.planeStride, p});
        }
        return;
    }
    for (uint32_t p = 0; p < unit.planes; ++p) {
        uint64_t planeStart = unit.offset + p * unit.planeStride;
        for (uint64_t done = 0; done < tiling.planeSize; done += tiling.tileLength) {
            uint64_t left = tiling.planeSize - done;
            uint32_t count = left < tiling.tileLength ? static_cast<uint32_t>(left) : tiling.tileLength;
            visit(PlaneTile{planeStart + done, count, 1, unit.planeStride, p});
        }
    }
}

// Visits the pieces of a tile that share one channel, as (UB offset, count, core-local channel): the whole tile for
// a one-channel unit, else each plane (whole planes in a tile fill 32-byte blocks, so every offset is aligned).
template <typename Visit>
__aicore__ inline void ForEachChannelPiece(const BatchNormLeakyReluTiling& tiling, const Unit& unit,
                                           const PlaneTile& tile, Visit&& visit) {
    if (unit.channelStep == 0 || tile.planes <= 1) {
        visit(0u, tile.count, unit.firstChannel + unit.channelStep * tile.firstPlane);
        return;
    }
    const uint32_t plane = static_cast<uint32_t>(tiling.planeSize);
    for (uint32_t p = 0; p < tile.planes; ++p) {
        visit(p * plane, plane, unit.firstChannel + unit.channelStep * (tile.firstPlane + p));
    }
}

// A float32 sum on the scalar unit, compensated (Neumaier): its error does not grow with the number of terms. `sum`
// alone is the plain sum, which a non-finite term or overflow leaves as torch's inf or NaN (the correction is then
// NaN or meaningless, and dropped).
struct ScalarSum {
    float sum = 0.0f;
    float correction = 0.0f;

    __aicore__ inline void Add(float term) {
        float next = sum + term;
        float bigger = sum < 0.0f ? -sum : sum, smaller = term < 0.0f ? -term : term;
        correction += bigger >= smaller ? (sum - next) + term : (term - next) + sum;
        sum = next;
    }
    __aicore__ inline float Total() const {
        return compensated_sum::IsFinite(sum) && compensated_sum::IsFinite(correction) ? sum + correction : sum;
    }
};

__aicore__ inline AscendC::DataCopyExtParams ContiguousBytes(uint32_t count, uint32_t elementSize) {
    return AscendC::DataCopyExtParams{1, count * elementSize, 0, 0, 0};
}

// GM -> UB and UB -> GM of `count` contiguous elements, any count (DataCopyPad: exact bytes in GM).
template <typename T>
__aicore__ inline void CopyIn(const AscendC::LocalTensor<T>& dst, const AscendC::GlobalTensor<T>& src, uint32_t count) {
    AscendC::DataCopyPad(dst, src, ContiguousBytes(count, sizeof(T)),
                         AscendC::DataCopyPadExtParams<T>{false, 0, 0, T()});
}

template <typename T>
__aicore__ inline void CopyOut(const AscendC::GlobalTensor<T>& dst, const AscendC::LocalTensor<T>& src,
                               uint32_t count) {
    AscendC::DataCopyPad(dst, src, ContiguousBytes(count, sizeof(T)));
}

// A tile's bytes between GM (planes `planeStride` apart) and UB (back to back): GM gaps are in bytes.
template <typename T>
__aicore__ inline AscendC::DataCopyExtParams TileCopy(const PlaneTile& tile, bool toGm) {
    if (tile.planes <= 1) return ContiguousBytes(tile.count, sizeof(T));
    const uint32_t planeBytes = tile.count / tile.planes * sizeof(T);
    const uint32_t gapBytes = static_cast<uint32_t>((tile.planeStride - tile.count / tile.planes) * sizeof(T));
    return AscendC::DataCopyExtParams{static_cast<uint16_t>(tile.planes), planeBytes, toGm ? 0u : gapBytes,
                                      toGm ? gapBytes : 0u, 0};
}

template <typename T>
__aicore__ inline void CopyTileIn(const AscendC::LocalTensor<T>& dst, const AscendC::GlobalTensor<T>& src,
                                  const PlaneTile& tile) {
    AscendC::DataCopyPad(dst, src[tile.offset], TileCopy<T>(tile, false),
                         AscendC::DataCopyPadExtParams<T>{false, 0, 0, T()});
}

// `values` rounded once to T, through `queue` (VECOUT) to the tile's place in `dst`.
template <typename T, typename Queue>
__aicore__ inline void StoreAsT(Queue& queue, const AscendC::GlobalTensor<T>& dst,
                                const AscendC::LocalTensor<float>& values, const PlaneTile& tile) {
    AscendC::LocalTensor<T> staged = queue.template AllocTensor<T>();
    FromFloat(staged, values, tile.count);
    queue.EnQue(staged);
    staged = queue.template DeQue<T>();
    AscendC::DataCopyPad(dst[tile.offset], staged, TileCopy<T>(tile, true));
    queue.FreeTensor(staged);
}

// Per-core arrays of float, one value per channel of the core, each `statsLength` floats (32-byte
// aligned) in one UB buffer; `Slot` is the kernel's enum of arrays.
template <typename Slot>
class ChannelStats {
public:
    __aicore__ inline void Init(AscendC::TPipe& pipe, uint32_t statsLength) {
        length_ = statsLength;
        pipe.InitBuffer(buffer_, batch_norm_tiling::kStatsArrays * statsLength * sizeof(float));
        all_ = buffer_.template Get<float>();
    }
    __aicore__ inline AscendC::LocalTensor<float> operator[](Slot slot) const {
        return all_[static_cast<uint32_t>(slot) * length_];
    }

private:
    AscendC::TBuf<AscendC::TPosition::VECCALC> buffer_;
    AscendC::LocalTensor<float> all_;
    uint32_t length_ = 0;
};

// Sum of the first `count` floats of `values` as a scalar (the vector result read by the scalar unit).
__aicore__ inline float SumToScalar(const AscendC::LocalTensor<float>& result,
                                    const AscendC::LocalTensor<float>& values, const AscendC::LocalTensor<float>& work,
                                    uint32_t count) {
    AscendC::ReduceSum<float>(result, values, work, count);
    AscendC::PipeBarrier<PIPE_ALL>();
    return result.GetValue(0);
}

// The two per-lane sums a pass takes over one channel (forward: x - shift and its square; backward: dz and
// dz * (z - beta)), in one buffer of kSumArrays * kSumLanes floats: each tile's values halved in place down to
// kSumLanes (pairwise), added per lane, compensated (op_kernel/common/compensated_sum.h) or plain, then the lanes
// summed.
template <bool kCompensated>
class ChannelSums {
public:
    __aicore__ inline explicit ChannelSums(const AscendC::LocalTensor<float>& buffer)
        : first_(buffer), second_(buffer[batch_norm_tiling::kSumLanes]),
          firstComp_(buffer[2 * batch_norm_tiling::kSumLanes]), secondComp_(buffer[3 * batch_norm_tiling::kSumLanes]) {
        AscendC::Duplicate(buffer, 0.0f, batch_norm_tiling::kSumArrays * batch_norm_tiling::kSumLanes);
    }

    // Adds a tile of `count` values of each (both halved in place: scratch afterwards).
    __aicore__ inline void Add(const AscendC::LocalTensor<float>& first, const AscendC::LocalTensor<float>& second,
                               uint32_t count) {
        using batch_norm_tiling::kSumLanes;
        uint32_t lanes = compensated_sum::HalveTo(first, count, kSumLanes);
        compensated_sum::HalveTo(second, count, kSumLanes);
        if constexpr (kCompensated) {
            compensated_sum::Add(first_, firstComp_, first, first, lanes);
            compensated_sum::Add(second_, secondComp_, second, second, lanes);
        } else {
            AscendC::Add(first_, first_, first, lanes);
            AscendC::Add(second_, second_, second, lanes);
        }
    }

    // The two channel totals; `scratch` (a float of result) and `work` serve the plain ReduceSum.
    __aicore__ inline void Totals(const AscendC::LocalTensor<float>& scratch, const AscendC::LocalTensor<float>& work,
                                  float& first, float& second) const {
        using batch_norm_tiling::kSumLanes;
        if constexpr (kCompensated) {
            first = compensated_sum::Total(first_, firstComp_, kSumLanes);
            second = compensated_sum::Total(second_, secondComp_, kSumLanes);
        } else {
            first = SumToScalar(scratch, first_, work, kSumLanes);
            second = SumToScalar(scratch, second_, work, kSumLanes);
        }
    }

private:
    AscendC::LocalTensor<float> first_, second_, firstComp_, secondComp_;
};

// --- Row mode (BatchNorm of short planes; op_host/batch_norm_leaky_relu/batch_norm_leaky_relu_tiling.h) ---------
// A chunk: `channels` consecutive channels of the core from core-local channel `first`; a sample's values of them
// are `lanes` = channels * plane contiguous elements of GM, held in UB as a row of `stride` elements (kRowAlign).
struct RowChunk {
    uint32_t first;
    uint32_t channels;
    uint32_t lanes;
    uint32_t stride;
};

// A tile of a chunk: `rows` consecutive samples, the first one's segment at element `offset` of GM.
struct RowTile {
    uint64_t offset;
    uint32_t rows;
};

template <typename Visit>
__aicore__ inline void ForEachRowChunk(const BatchNormLeakyReluTiling& tiling, uint32_t channelCount, Visit&& visit) {
    const uint32_t plane = static_cast<uint32_t>(tiling.planeSize);
    for (uint32_t first = 0; first < channelCount; first += tiling.rowChannels) {
        uint32_t channels = channelCount - first < tiling.rowChannels ? channelCount - first : tiling.rowChannels;
        uint32_t lanes = channels * plane;
        uint32_t align = batch_norm_tiling::kRowAlign;
        visit(RowChunk{first, channels, lanes, (lanes + align - 1) / align * align});
    }
}

// Visits the chunk's tiles (global channel `channel` its first), samples ascending, rowSamples at a time.
template <typename Visit>
__aicore__ inline void ForEachRowTile(const BatchNormLeakyReluTiling& tiling, uint32_t channel, Visit&& visit) {
    for (uint32_t n = 0; n < tiling.batch; n += tiling.rowSamples) {
        uint32_t rows = tiling.batch - n < tiling.rowSamples ? tiling.batch - n : tiling.rowSamples;
        visit(RowTile{(uint64_t(n) * tiling.channels + channel) * tiling.planeSize, rows});
    }
}

// A tile's rows between GM (a whole (C * plane) row apart) and UB (`stride` elements apart): DataCopyPad's UB gap
// is in 32-byte blocks past a row's own padded blocks, its GM gap in bytes.
template <typename T>
__aicore__ inline AscendC::DataCopyExtParams RowCopy(const BatchNormLeakyReluTiling& tiling, const RowChunk& chunk,
                                                     uint32_t rows, bool toGm) {
    const uint32_t bytes = chunk.lanes * sizeof(T);
    const uint32_t gmGap = static_cast<uint32_t>((uint64_t(tiling.channels) * tiling.planeSize - chunk.lanes) *
                                                 sizeof(T));
    const uint32_t ubGap = (chunk.stride * static_cast<uint32_t>(sizeof(T)) - (bytes + 31) / 32 * 32) / 32;
    return AscendC::DataCopyExtParams{static_cast<uint16_t>(rows), bytes, toGm ? ubGap : gmGap, toGm ? gmGap : ubGap,
                                      0};
}

// The centre of the normalisation z = (x - centre) * scale + beta, and its beta (updated in place): the mean,
// except where scale = gamma * invstd is 0 or not finite (a zero or infinite gamma). There torch's own
// x * scale + (beta - mean * scale) (aten's batch_norm and group_norm): its zeros have x's sign, where the centred
// form's have x - mean's, and its two infinite terms meet as NaN, where the centred form gives an infinity.
__aicore__ inline bool DegenerateScale(float scale) { return !(scale != 0.0f && compensated_sum::IsFinite(scale)); }
__aicore__ inline float AffineCentre(float mean, float scale, float& beta) {
    if (!DegenerateScale(scale)) return mean;
    beta = beta - mean * scale;
    return 0.0f;
}

// `rows` rows of `stride` floats from row 0 to rows 1.. (row 0 copied by doubling: Muls by 1 keeps -0 and NaN).
__aicore__ inline void RepeatRow(const AscendC::LocalTensor<float>& tile, uint32_t stride, uint32_t rows) {
    for (uint32_t have = 1; have < rows;) {
        uint32_t copies = rows - have < have ? rows - have : have;
        AscendC::Muls(tile[have * stride], tile, 1.0f, copies * stride);
        have += copies;
    }
}

// Per lane of a chunk's tile, channel values in `rows` rows: lane c * plane + p of each row holds values[first + c]
// (the per-channel statistics array `values`; scalar writes, then the rows copied on the vector unit).
__aicore__ inline void ChannelRows(const BatchNormLeakyReluTiling& tiling, const AscendC::LocalTensor<float>& tile,
                                   const AscendC::LocalTensor<float>& values, const RowChunk& chunk, uint32_t rows) {
    const uint32_t plane = static_cast<uint32_t>(tiling.planeSize);
    AscendC::Duplicate(tile, 0.0f, chunk.stride);  // the padding lanes too: every lane the vector unit reads is set
    AscendC::PipeBarrier<PIPE_ALL>();
    for (uint32_t c = 0; c < chunk.channels; ++c) {
        float value = values.GetValue(chunk.first + c);
        for (uint32_t p = 0; p < plane; ++p) tile.SetValue(c * plane + p, value);
    }
    AscendC::PipeBarrier<PIPE_ALL>();
    RepeatRow(tile, chunk.stride, rows);
}

// Two sums per lane of a row-mode tile, over the chunk's tiles (a lane's samples in ascending order), compensated,
// and plainly for a channel whose compensated sums are not finite. kRowSumArrays arrays of `lanes` floats.
class RowSums {
public:
    __aicore__ inline RowSums(const AscendC::LocalTensor<float>& buffer, uint32_t lanes)
        : first_(buffer), firstComp_(buffer[lanes]), second_(buffer[2 * lanes]), secondComp_(buffer[3 * lanes]),
          firstPlain_(buffer[4 * lanes]), secondPlain_(buffer[5 * lanes]) {}

    __aicore__ inline void Clear(uint32_t count) {
        for (const AscendC::LocalTensor<float>* sum :
             {&first_, &firstComp_, &second_, &secondComp_, &firstPlain_, &secondPlain_}) {
            AscendC::Duplicate(*sum, 0.0f, count);
        }
    }

    // Adds `count` lanes of each (`first` is then scratch).
    __aicore__ inline void Add(const AscendC::LocalTensor<float>& first, const AscendC::LocalTensor<float>& second,
                               uint32_t count) {
        AscendC::Add(firstPlain_, firstPlain_, first, count);
        AscendC::Add(secondPlain_, secondPlain_, second, count);
        compensated_sum::Add(first_, firstComp_, first, first, count);
        compensated_sum::Add(second_, secondComp_, second, second, count);
    }

    // Folds rows 1..rows-1 (`stride` lanes each) into row 0, halving (a fixed order for a given row count).
    __aicore__ inline void FoldRows(uint32_t rows, uint32_t stride) {
        while (rows > 1) {
            uint32_t half = (rows + 1) / 2;
            uint32_t from = half * stride, count = (rows - half) * stride;
            compensated_sum::FoldInto0(first_, firstComp_, from, count);
            compensated_sum::FoldInto0(second_, secondComp_, from, count);
            AscendC::Add(firstPlain_, firstPlain_, firstPlain_[from], count);
            AscendC::Add(secondPlain_, secondPlain_, secondPlain_[from], count);
            rows = half;
        }
    }

    // Channel totals of row 0's lanes [lane, lane + plane), on the scalar unit (after FoldRows and a barrier).
    __aicore__ inline void Totals(uint32_t lane, uint32_t plane, float& first, float& second) const {
        first = Total(first_, firstComp_, lane, plane);
        second = Total(second_, secondComp_, lane, plane);
        if (!compensated_sum::IsFinite(first) || !compensated_sum::IsFinite(second)) {
            first = PlainTotal(firstPlain_, lane, plane);
            second = PlainTotal(secondPlain_, lane, plane);
        }
    }

    // Totals of `channels` channels of `plane` lanes each into first[at + c] and second[at + c] (after FoldRows and a
    // barrier; SetValue is const on a LocalTensor, kernel_tensor.h).
    __aicore__ inline void StoreTotals(uint32_t channels, uint32_t plane, const AscendC::LocalTensor<float>& first,
                                       const AscendC::LocalTensor<float>& second, uint32_t at) const {
        for (uint32_t c = 0; c < channels; ++c) {
            float firstTotal = 0.0f, secondTotal = 0.0f;
            Totals(c * plane, plane, firstTotal, secondTotal);
            first.SetValue(at + c, firstTotal);
            second.SetValue(at + c, secondTotal);
        }
    }

    // The sums' arrays, idle once the totals are read (pass 2's per-lane rows).
    __aicore__ inline AscendC::LocalTensor<float> Array(uint32_t index) const {
        return index == 0   ? first_
               : index == 1 ? firstComp_
               : index == 2 ? second_
               : index == 3 ? secondComp_
                            : firstPlain_;
    }

private:
    // A lane's sum is acc - comp (compensated_sum::Add); lanes summed compensated on the scalar unit.
    __aicore__ static inline float Total(const AscendC::LocalTensor<float>& acc,
                                         const AscendC::LocalTensor<float>& comp, uint32_t lane, uint32_t plane) {
        ScalarSum sum{acc.GetValue(lane), -comp.GetValue(lane)};
        for (uint32_t p = 1; p < plane; ++p) {
            sum.Add(acc.GetValue(lane + p));
            sum.correction -= comp.GetValue(lane + p);
        }
        return sum.Total();
    }
    __aicore__ static inline float PlainTotal(const AscendC::LocalTensor<float>& plain, uint32_t lane, uint32_t plane) {
        float sum = plain.GetValue(lane);
        for (uint32_t p = 1; p < plane; ++p) sum += plain.GetValue(lane + p);
        return sum;
    }

    AscendC::LocalTensor<float> first_, firstComp_, second_, secondComp_, firstPlain_, secondPlain_;
};

}  // namespace batch_norm_kernel
}  // namespace ascend_acts
