// What the elementwise kernels (LeakyReLU, RReLU and their gradients) read from the host's tiling: the
// plain tiling struct, the UB buffers each op allocates, and a core's flat range. In op_kernel/ because
// CANN's source package ships only op_kernel/ to the kernel build; op_host/elementwise/elementwise_tiling.h (the
// pure tiling function) includes it from here.
#pragma once

#include <cstdint>

#include "../common/dtype_key.h"
#include "../common/execution_space.h"

namespace ascend_acts {

enum class ElementwiseOp : uint32_t { LeakyRelu = 0, LeakyReluGrad = 1, Rrelu = 2, RreluGrad = 3 };

struct ElementwiseTiling {
    uint64_t totalLength;      // elements
    uint64_t bigCoreLength;    // elements of each of the first bigCoreCount cores
    uint64_t smallCoreLength;  // elements of the other cores; the last core stops at totalLength (the tail)
    uint64_t indexBase;        // flat index of element 0, for the RReLU noise (0 unless launched in pieces)
    uint32_t blockDim;         // 0 only when totalLength is 0: nothing to launch
    uint32_t bigCoreCount;
    uint32_t tileLength;  // elements per UB tile, a multiple of kTileQuantum
    float slope;          // LeakyRelu(Grad): negative_slope
    float lower;          // Rrelu(Grad): float32(lower)
    float span;           // Rrelu(Grad): float32(float32(upper) - lower)
};

// The UB buffers each op's kernel allocates, per tile element (op_kernel/elementwise/elementwise_pipeline.h).
struct ElementwiseBuffers {
    uint32_t inputs;      // tensor inputs streamed through double-buffered queues
    uint32_t workFloats;  // float work vectors
    bool mask;            // one bit per element (CompareScalar/Select)
};

constexpr uint32_t kQueueBuffers = 2;   // double buffering
constexpr uint32_t kGmBlockBytes = 32;  // DataCopy granularity
constexpr uint32_t kTileQuantum = 256;  // 1 KiB of float: whole 256-byte repeats, 32-byte-aligned masks

constexpr ElementwiseBuffers BuffersOf(ElementwiseOp op) {
    switch (op) {
        case ElementwiseOp::LeakyRelu: return {1, 0, false};
        case ElementwiseOp::LeakyReluGrad: return {2, 1, true};
        case ElementwiseOp::Rrelu: return {1, 4, true};  // noise, hash, two scratch words
        case ElementwiseOp::RreluGrad: return {2, 4, true};
    }
    return {0, 0, false};
}

// The flat range of core `block`: [first, first + length).
__aicore__ inline void CoreRange(const ElementwiseTiling& tiling, uint32_t block, uint64_t& first, uint64_t& length) {
    uint64_t big = tiling.bigCoreCount;
    first = block < big ? block * tiling.bigCoreLength
                        : big * tiling.bigCoreLength + (block - big) * tiling.smallCoreLength;
    uint64_t nominal = block < big ? tiling.bigCoreLength : tiling.smallCoreLength;
    uint64_t left = first < tiling.totalLength ? tiling.totalLength - first : 0;
    length = nominal < left ? nominal : left;
}

}  // namespace ascend_acts
