// TransDataTo5HD: the vector unit's 16-block transpose (NCHW -> NC1HWC0), the LocalTensor-list overload of
// basic_api/interface/kernel_operator_vec_transpose_intf.h with TransDataTo5HDParams of
// basic_api/interface/kernel_struct_transpose.h.
//
// Per repeat r, source block i is the 32 bytes at srcLocalList[i] + r * srcRepStride blocks and destination
// block i the 32 bytes at dstLocalList[i] + r * dstRepStride blocks (Huawei's TransDataTo5HD docs):
//   16-bit types: destination block i = element i of each of the 16 source blocks (a 16 x 16 transpose);
//   32-bit types: for i in 0..7, element i of source blocks 0..7 -> destination block 2i, element i of
//                 source blocks 8..15 -> destination block 2i + 1.
// 8-bit types (srcHighHalf / dstHighHalf select half blocks) are not modelled.
#pragma once

#include <cstring>
#include <string>

#include "tensors.h"
#include "timeline.h"
#include "vector.h"

namespace AscendC {

constexpr int32_t NCHW_CONV_ADDR_LIST_SIZE = 16;  // basic_api/impl/utils/kernel_utils_constants.h

struct TransDataTo5HDParams {
    TransDataTo5HDParams() {}
    TransDataTo5HDParams(const bool dstHighHalfIn, const bool srcHighHalfIn, const uint8_t repeatTimesIn,
                         const uint16_t dstRepStrideIn, const uint16_t srcRepStrideIn)
        : dstHighHalf(dstHighHalfIn), srcHighHalf(srcHighHalfIn), repeatTimes(repeatTimesIn),
          dstRepStride(dstRepStrideIn), srcRepStride(srcRepStrideIn) {}
    bool dstHighHalf = false;
    bool srcHighHalf = false;
    uint8_t repeatTimes = 1;
    uint16_t dstRepStride = 0;
    uint16_t srcRepStride = 0;
};

namespace detail {

// The smallest span of UB covering every block `list` touches over the repeats (the timeline's dependency).
template <typename T>
ascendc_sim::Span CoveringSpan(const LocalTensor<T> (&list)[NCHW_CONV_ADDR_LIST_SIZE], uint64_t count) {
    ascendc_sim::Span all = ascendc_sim::trace::LocalSpan(list[0], count);
    for (int32_t i = 1; i < NCHW_CONV_ADDR_LIST_SIZE; ++i) {
        const ascendc_sim::Span s = ascendc_sim::trace::LocalSpan(list[i], count);
        all.begin = s.begin < all.begin ? s.begin : all.begin;
        all.end = s.end > all.end ? s.end : all.end;
    }
    return all;
}

}  // namespace detail

template <typename T>
void TransDataTo5HD(const LocalTensor<T> (&dstLocalList)[NCHW_CONV_ADDR_LIST_SIZE],
                    const LocalTensor<T> (&srcLocalList)[NCHW_CONV_ADDR_LIST_SIZE],
                    const TransDataTo5HDParams& params) {
    // the SupportType list of TransDataTo5HD in basic_api/inner_interface/inner_kernel_operator_vec_transpose_intf.cppm
    if constexpr (detail::OneOf<T, int8_t, uint8_t>) {
        ascendc_sim::Fail(ascendc_sim::Rule::transdata_params,
                          "TransDataTo5HD on 8-bit types (half-block srcHighHalf / dstHighHalf) is not modelled");
    } else if constexpr (!detail::OneOf<T, half, int16_t, uint16_t, float, int32_t, uint32_t>) {
        detail::Unsupported<T>("TransDataTo5HD");
    } else {
        const std::string op = "TransDataTo5HD";
        if (params.repeatTimes == 0) {
            ascendc_sim::Fail(ascendc_sim::Rule::transdata_params, op + ": repeatTimes must be 1..255, got 0");
        }
        if (params.dstHighHalf || params.srcHighHalf) {
            ascendc_sim::Fail(ascendc_sim::Rule::transdata_params,
                              op + ": dstHighHalf / srcHighHalf apply to 8-bit types only, not " +
                                  detail::TypeName<T>());
        }
        constexpr uint32_t kBlock = 32 / sizeof(T);  // elements per 32-byte block
        const uint64_t last = params.repeatTimes - 1;
        const uint64_t srcCount = (last * params.srcRepStride + 1) * kBlock;
        const uint64_t dstCount = (last * params.dstRepStride + 1) * kBlock;
        for (int32_t i = 0; i < NCHW_CONV_ADDR_LIST_SIZE; ++i) {  // UB, 32-byte aligned, every repeat inside
            srcLocalList[i].Check(srcCount, (op + " srcLocalList[" + std::to_string(i) + "]").c_str());
            dstLocalList[i].Check(dstCount, (op + " dstLocalList[" + std::to_string(i) + "]").c_str());
        }
        // 16 blocks of 32 bytes per repeat: two 256-byte vector repeats of work
        const uint64_t bytes = uint64_t(params.repeatTimes) * NCHW_CONV_ADDR_LIST_SIZE * 32;
        ascendc_sim::RecordVector(bytes);
        if (ascendc_sim::trace::Active() != nullptr) {
            ascendc_sim::TraceEvent e;
            e.pipe = ascendc_sim::Pipe::V;
            e.kind = ascendc_sim::EventKind::Vector;
            e.vectorClass = ascendc_sim::VectorClassOf("TransDataTo5HD");
            e.bytes = bytes;
            e.readCount = 1;
            e.reads[0] = detail::CoveringSpan(srcLocalList, srcCount);
            e.writes = true;
            e.write = detail::CoveringSpan(dstLocalList, dstCount);
            ascendc_sim::trace::Record(e);
        }
        for (uint64_t r = 0; r < params.repeatTimes; ++r) {
            T source[NCHW_CONV_ADDR_LIST_SIZE][kBlock];  // read every source before writing (they may alias)
            for (int32_t i = 0; i < NCHW_CONV_ADDR_LIST_SIZE; ++i) {
                std::memcpy(source[i], srcLocalList[i].Address() + r * params.srcRepStride * kBlock, 32);
            }
            for (int32_t d = 0; d < NCHW_CONV_ADDR_LIST_SIZE; ++d) {
                T* block = dstLocalList[d].Address() + r * params.dstRepStride * kBlock;
                for (uint32_t e = 0; e < kBlock; ++e) {
                    // 16-bit: element e of block d is source e's element d; 32-bit: block d = 2i + h holds
                    // element i of sources 8h .. 8h + 7
                    block[e] = kBlock == 16 ? source[e][d] : source[(d % 2) * 8 + e][d / 2];
                }
            }
        }
    }
}

}  // namespace AscendC
