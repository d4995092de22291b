// DataCopy (32-byte granular, as the hardware moves data) and DataCopyPad (exact bytes in GM).
#pragma once

#include <algorithm>

#include "tensors.h"
#include "timeline.h"

namespace AscendC {

// GM <-> local copies in 32-byte blocks (kernel_struct_data_copy.h): lengths and gaps in blocks.
struct DataCopyParams {
    DataCopyParams() {}
    DataCopyParams(const uint16_t count, const uint16_t len, const uint16_t srcStrideIn, const uint16_t dstStrideIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn) {}
    uint16_t blockCount = 1;
    uint16_t blockLen = 0;
    uint16_t srcStride = 0;
    uint16_t dstStride = 0;
};

struct DataCopyExtParams {
    uint16_t blockCount = 1;
    uint32_t blockLen = 0;   // bytes per block
    uint32_t srcStride = 0;  // GM -> UB: bytes between GM blocks; UB -> GM: 32-byte blocks between UB blocks
    uint32_t dstStride = 0;  // GM -> UB: 32-byte blocks between UB blocks; UB -> GM: bytes between GM blocks
    uint32_t rsv = 0;
};

template <typename T>
struct DataCopyPadExtParams {
    bool isPad = false;
    uint8_t leftPadding = 0;   // elements
    uint8_t rightPadding = 0;  // elements
    T paddingValue{};
};

namespace detail {
inline void CheckDataCopyBytes(uint64_t bytes) {
    if (bytes % 32 != 0) {
        ascendc_sim::Fail(
            ascendc_sim::Rule::unaligned_datacopy,
            "DataCopy of " + std::to_string(bytes) +
                " bytes: not a multiple of 32 (the hardware would silently drop the rest; use DataCopyPad)");
    }
}
inline uint64_t UbBlockBytes(uint32_t blockLen) { return (uint64_t(blockLen) + 31) / 32 * 32; }
// DataCopyPad's field widths: blockCount 12 bits, blockLen 21 bits (CheckDataCopyPadParams in
// basic_api/impl/dav_c220/kernel_operator_data_copy_impl.h: UINT12_MAX, DATACOPYPAD_BLKLEN_LIMIT = 2097151).
inline void CheckDataCopyPadParams(const DataCopyExtParams& params) {
    constexpr uint32_t kMaxBlockCount = 4095, kMaxBlockLen = 2097151;
    if (params.blockCount > kMaxBlockCount || params.blockLen > kMaxBlockLen) {
        ascendc_sim::Fail(ascendc_sim::Rule::datacopy_params,
                          "DataCopyPad: blockCount " + std::to_string(params.blockCount) + " (at most 4095) and " +
                              "blockLen " + std::to_string(params.blockLen) + " bytes (at most 2097151)");
    }
}
// The padding DataCopyPad leaves without isPad (and past rightPadding) to the 32-byte end of a UB block has no
// documented value: all-ones bytes (NaN in every float type), so a kernel that reads it shows.
constexpr uint8_t kUndefinedPadByte = 0xFF;
}  // namespace detail

template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint32_t count) {
    uint64_t bytes = uint64_t(count) * sizeof(T);
    detail::CheckDataCopyBytes(bytes);
    dst.Check(count, "DataCopy");
    src.CheckRange(0, count, "DataCopy");
    std::memcpy(dst.Address(), src.Address(), bytes);
    ascendc_sim::RecordGmRead(src.Address(), bytes);
    ascendc_sim::trace::CopyIn(dst, src.Address(), bytes, count, bytes);
}

template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count) {
    uint64_t bytes = uint64_t(count) * sizeof(T);
    detail::CheckDataCopyBytes(bytes);
    src.Check(count, "DataCopy");
    dst.CheckRange(0, count, "DataCopy");
    ascendc_sim::RecordGmWrite(dst.Address(), bytes);
    std::memcpy(dst.Address(), src.Address(), bytes);
    ascendc_sim::trace::CopyOut(dst.Address(), bytes, src, count, bytes);
}

template <typename T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& params,
                 const DataCopyPadExtParams<T>& pad) {
    detail::CheckDataCopyPadParams(params);
    if (params.blockLen % sizeof(T) != 0)
        ascendc_sim::Fail(ascendc_sim::Rule::unaligned_datacopy, "DataCopyPad: blockLen is not whole elements");
    const uint64_t padded = params.blockLen + (pad.leftPadding + pad.rightPadding) * sizeof(T);
    uint64_t ubStride = detail::UbBlockBytes(static_cast<uint32_t>(padded)) + uint64_t(params.dstStride) * 32;
    for (uint32_t block = 0; block < params.blockCount; ++block) {
        uint64_t gmOffset = uint64_t(block) * (params.blockLen + params.srcStride);
        if (gmOffset % sizeof(T) != 0)
            ascendc_sim::Fail(ascendc_sim::Rule::unaligned_datacopy, "DataCopyPad: GM stride is not whole elements");
        uint64_t first = gmOffset / sizeof(T), count = params.blockLen / sizeof(T);
        src.CheckRange(first, count, "DataCopyPad");
        LocalTensor<T> row = dst[static_cast<uint32_t>(block * ubStride / sizeof(T))];
        row.Check(count + pad.leftPadding + pad.rightPadding, "DataCopyPad");
        if (pad.isPad) {
            for (uint32_t i = 0; i < pad.leftPadding; ++i) row.Address()[i] = pad.paddingValue;
            for (uint32_t i = 0; i < pad.rightPadding; ++i)
                row.Address()[pad.leftPadding + count + i] = pad.paddingValue;
        }
        std::memcpy(row.Address() + (pad.isPad ? pad.leftPadding : 0), src.Address() + first, params.blockLen);
        uint64_t written = pad.isPad ? padded : params.blockLen;
        uint64_t blockEnd = std::min<uint64_t>(detail::UbBlockBytes(static_cast<uint32_t>(written)),
                                               uint64_t(row.GetSize()) * sizeof(T));
        if (blockEnd > written) {
            std::memset(reinterpret_cast<uint8_t*>(row.Address()) + written, detail::kUndefinedPadByte,
                        blockEnd - written);
        }
        ascendc_sim::RecordGmRead(src.Address() + first, params.blockLen);
    }
    ascendc_sim::trace::CopyIn(dst, src.Address(),
                               ascendc_sim::trace::StridedBytes(params.blockCount, params.blockLen, params.srcStride),
                               params.blockCount * ubStride / sizeof(T), uint64_t(params.blockCount) * params.blockLen);
}

template <typename T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& params) {
    detail::CheckDataCopyPadParams(params);
    if (params.blockLen % sizeof(T) != 0)
        ascendc_sim::Fail(ascendc_sim::Rule::unaligned_datacopy, "DataCopyPad: blockLen is not whole elements");
    uint64_t ubStride = detail::UbBlockBytes(params.blockLen) + uint64_t(params.srcStride) * 32;
    for (uint32_t block = 0; block < params.blockCount; ++block) {
        uint64_t gmOffset = uint64_t(block) * (params.blockLen + params.dstStride);
        if (gmOffset % sizeof(T) != 0)
            ascendc_sim::Fail(ascendc_sim::Rule::unaligned_datacopy, "DataCopyPad: GM stride is not whole elements");
        uint64_t first = gmOffset / sizeof(T), count = params.blockLen / sizeof(T);
        dst.CheckRange(first, count, "DataCopyPad");
        LocalTensor<T> row = src[static_cast<uint32_t>(block * ubStride / sizeof(T))];
        row.Check(count, "DataCopyPad");
        ascendc_sim::RecordGmWrite(dst.Address() + first, params.blockLen);
        std::memcpy(dst.Address() + first, row.Address(), params.blockLen);
    }
    ascendc_sim::trace::CopyOut(
        dst.Address(), ascendc_sim::trace::StridedBytes(params.blockCount, params.blockLen, params.dstStride), src,
        params.blockCount * ubStride / sizeof(T), uint64_t(params.blockCount) * params.blockLen);
}

}  // namespace AscendC
