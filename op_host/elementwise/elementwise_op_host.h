// CANN host glue of the elementwise ops: the TilingFunc reads the platform's vector core count and UB size
// and runs the pure tiling of elementwise_tiling.h. Written from CANN's documented custom-operator
// interfaces; it needs the CANN toolkit to compile.
#pragma once

#include "../common/op_host_common.h"
#include "elementwise_tiling.h"

namespace optiling {

// Attributes: LeakyRelu(Grad) has negative_slope; Rrelu(Grad) has lower, upper (in that order).
template <ascend_acts::ElementwiseOp kOp>
ge::graphStatus ElementwiseTilingFunc(gert::TilingContext* context) {
    auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ubBytes = 0;
    ascend_acts::DtypeKey key;
    uint32_t elementSize = 0;
    if (!ReadVectorBasics(context, platform, ubBytes, key, elementSize)) return ge::GRAPH_FAILED;
    uint64_t total = context->GetInputShape(0)->GetStorageShape().GetShapeSize();

    ascend_acts::ElementwiseTiling tiling;
    if (!ascend_acts::ComputeElementwiseTiling(kOp, total, elementSize, platform.GetCoreNumAiv(), ubBytes, tiling)) {
        return ge::GRAPH_FAILED;
    }
    const auto* attrs = context->GetAttrs();
    if (kOp == ascend_acts::ElementwiseOp::LeakyRelu || kOp == ascend_acts::ElementwiseOp::LeakyReluGrad) {
        tiling.slope = *attrs->GetAttrPointer<float>(0);
    } else {
        float lower = *attrs->GetAttrPointer<float>(0);
        float upper = *attrs->GetAttrPointer<float>(1);
        tiling.lower = lower;
        tiling.span = upper - lower;  // float32 arithmetic, as docs/rng.md specifies
    }
    // An empty tensor still launches one block, which finds an empty range and returns.
    return SetPlainTiling(context, platform, tiling.blockDim > 0 ? tiling.blockDim : 1, key, tiling);
}

}  // namespace optiling
