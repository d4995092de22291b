// Tiling of the elementwise kernels (LeakyReLU, RReLU and their gradients): a pure function of
// (op, element count, element size, platform) with no CANN includes, shared by the CANN TilingFunc
// (op_host/<op>.cpp) and the emulator build.
#pragma once

#include <cstdint>

namespace ascend_acts {

enum class ElementwiseOp : uint32_t { LeakyRelu = 0, LeakyReluGrad = 1, RRelu = 2, RReluGrad = 3 };

// Tiling key = data type, selected in the kernels with TILING_KEY_IS.
enum class ElementwiseDtype : uint32_t { Float32 = 0, Float16 = 1, BFloat16 = 2 };

struct ElementwiseTiling {
    uint64_t totalLength;      // elements
    uint64_t bigCoreLength;    // elements of each of the first bigCoreCount cores
    uint64_t smallCoreLength;  // elements of the other cores; the last core stops at totalLength (the tail)
    uint64_t indexBase;        // flat index of element 0, for the RReLU noise (0 unless launched in pieces)
    uint32_t blockDim;         // 0 only when totalLength is 0: nothing to launch
    uint32_t bigCoreCount;
    uint32_t tileLength;       // elements per UB tile, a multiple of kTileQuantum
    float slope;               // LeakyRelu(Grad): negative_slope
    float lower;               // RRelu(Grad): float32(lower)
    float span;                // RRelu(Grad): float32(float32(upper) - lower)
};

// The UB buffers each op's kernel allocates, per tile element (op_kernel/elementwise_pipeline.h).
struct ElementwiseBuffers {
    uint32_t inputs;      // tensor inputs streamed through double-buffered queues
    uint32_t workFloats;  // float work vectors
    bool mask;            // one bit per element (CompareScalar/Select)
};

constexpr uint32_t kQueueBuffers = 2;     // double buffering
constexpr uint32_t kGmBlockBytes = 32;    // DataCopy granularity
constexpr uint32_t kTileQuantum = 256;    // 1 KiB of float: whole 256-byte repeats, 32-byte-aligned masks

constexpr ElementwiseBuffers BuffersOf(ElementwiseOp op) {
    switch (op) {
        case ElementwiseOp::LeakyRelu: return {1, 0, false};
        case ElementwiseOp::LeakyReluGrad: return {2, 1, true};
        case ElementwiseOp::RRelu: return {1, 4, true};    // noise, hash, two scratch words
        case ElementwiseOp::RReluGrad: return {2, 4, true};
    }
    return {0, 0, false};
}

// UB bytes the kernel of `op` allocates for tiles of `tileLength` elements of `elementSize` bytes.
constexpr uint64_t ElementwiseUbBytes(ElementwiseOp op, uint32_t elementSize, uint32_t tileLength) {
    ElementwiseBuffers b = BuffersOf(op);
    uint64_t queues = uint64_t(b.inputs + 1) * kQueueBuffers * elementSize * tileLength;
    uint64_t casts = elementSize == 4 ? 0 : uint64_t(b.inputs + 1) * 4 * tileLength;  // float copies of half types
    uint64_t work = uint64_t(b.workFloats) * 4 * tileLength + (b.mask ? tileLength / 8 : 0);
    return queues + casts + work;
}

inline uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Splits [0, totalLength) over at most `vectorCores` cores in 32-byte units (the first cores take one
// unit more), and picks the largest tile that fits `ubBytes` with all of the op's buffers.
// Returns false when the element size is unsupported or not even one tile quantum fits.
inline bool ComputeElementwiseTiling(ElementwiseOp op, uint64_t totalLength, uint32_t elementSize,
                                     uint32_t vectorCores, uint64_t ubBytes, ElementwiseTiling& tiling) {
    if ((elementSize != 2 && elementSize != 4) || vectorCores == 0) return false;
    tiling = ElementwiseTiling{};
    tiling.totalLength = totalLength;
    uint64_t unit = kGmBlockBytes / elementSize;
    uint64_t units = CeilDiv(totalLength, unit);
    uint64_t cores = units < vectorCores ? units : vectorCores;
    tiling.blockDim = static_cast<uint32_t>(cores);
    if (cores > 0) {
        tiling.smallCoreLength = units / cores * unit;
        tiling.bigCoreLength = tiling.smallCoreLength + unit;
        tiling.bigCoreCount = static_cast<uint32_t>(units % cores);
    }
    uint64_t perQuantum = ElementwiseUbBytes(op, elementSize, kTileQuantum);
    uint64_t quanta = ubBytes / perQuantum;
    if (quanta == 0) return false;
    uint64_t longestCore = tiling.bigCoreCount > 0 ? tiling.bigCoreLength : tiling.smallCoreLength;
    uint64_t needed = CeilDiv(longestCore > 0 ? longestCore : 1, kTileQuantum);
    tiling.tileLength = static_cast<uint32_t>((quanta < needed ? quanta : needed) * kTileQuantum);
    return true;
}

// The flat range of core `block`: [first, first + length).
inline void CoreRange(const ElementwiseTiling& tiling, uint32_t block, uint64_t& first, uint64_t& length) {
    uint64_t big = tiling.bigCoreCount;
    first = block < big ? block * tiling.bigCoreLength
                        : big * tiling.bigCoreLength + (block - big) * tiling.smallCoreLength;
    uint64_t nominal = block < big ? tiling.bigCoreLength : tiling.smallCoreLength;
    uint64_t left = first < tiling.totalLength ? tiling.totalLength - first : 0;
    length = nominal < left ? nominal : left;
}

}  // namespace ascend_acts
