// Tiling of the elementwise kernels (LeakyReLU, RReLU and their gradients): a pure function of
// (op, element count, element size, platform) with no CANN includes, shared by the CANN TilingFunc and the
// emulator through TilingFor (op_host/common/tiling_request.h). The struct the kernels read is in
// op_kernel/elementwise/elementwise_tiling_data.h.
#pragma once

#include <cstdint>
#include <string>

#include "../../op_kernel/elementwise/elementwise_tiling_data.h"
#include "../common/tiling_request.h"
#include "../common/ub_budget.h"

namespace ascend_acts {

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
// unit more), and picks the largest tile that fits `ubBytes` (less Select's reserve) with all of the
// op's buffers.
// Returns false when the element size is unsupported or not even one tile quantum fits.
inline bool ComputeElementwiseTiling(ElementwiseOp op, uint64_t totalLength, uint32_t elementSize, uint32_t vectorCores,
                                     uint64_t ubBytes, ElementwiseTiling& tiling) {
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
    uint64_t quanta = UsableUbBytes(ubBytes, BuffersOf(op).mask) / perQuantum;  // the mask is Select's
    if (quanta == 0) return false;
    uint64_t longestCore = tiling.bigCoreCount > 0 ? tiling.bigCoreLength : tiling.smallCoreLength;
    uint64_t needed = CeilDiv(longestCore > 0 ? longestCore : 1, kTileQuantum);
    tiling.tileLength = static_cast<uint32_t>((quanta < needed ? quanta : needed) * kTileQuantum);
    return true;
}

// The request's input 0 as a flat tensor; attributes (op table): LeakyRelu(Grad) negative_slope, Rrelu(Grad)
// lower, upper. The variant is the ElementwiseOp.
inline bool TilingFor(const TilingRequest& request, ElementwiseTiling& tiling, std::string& why) {
    const auto op = static_cast<ElementwiseOp>(request.variant);
    const uint64_t total = request.Elements(0);
    if (!ComputeElementwiseTiling(op, total, request.elementSize, request.platform.vectorCores,
                                  request.platform.ubBytes, tiling)) {
        why = "with " + std::to_string(total) + " elements of " + std::to_string(request.elementSize) + " bytes";
        return false;
    }
    if (op == ElementwiseOp::LeakyRelu || op == ElementwiseOp::LeakyReluGrad) {
        tiling.slope = request.Float(0);
    } else {
        const float lower = request.Float(0), upper = request.Float(1);
        tiling.lower = lower;
        tiling.span = upper - lower;  // float32 arithmetic, as docs/rng.md specifies
    }
    tiling.indexBase = request.firstElement;
    return true;
}

inline uint32_t LaunchBlocks(const ElementwiseTiling& t) { return t.blockDim; }  // 0: an empty tensor
inline uint32_t LaunchTileLength(const ElementwiseTiling& t) { return t.tileLength; }

}  // namespace ascend_acts
