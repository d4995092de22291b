// CANN host glue shared by the elementwise ops: the TilingFunc reads the platform's vector core count
// and UB size and runs the pure tiling of elementwise_tiling.h; InferShape/InferDataType copy input 0.
// Written from CANN's documented custom-operator interfaces; it needs the CANN toolkit to compile.
#pragma once

#include <cstring>

#include "elementwise_tiling.h"
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"

namespace optiling {

inline bool TilingKeyOf(ge::DataType type, ascend_acts::ElementwiseDtype& key, uint32_t& size) {
    switch (type) {
        case ge::DT_FLOAT: key = ascend_acts::ElementwiseDtype::Float32; size = 4; return true;
        case ge::DT_FLOAT16: key = ascend_acts::ElementwiseDtype::Float16; size = 2; return true;
        case ge::DT_BF16: key = ascend_acts::ElementwiseDtype::BFloat16; size = 2; return true;
        default: return false;
    }
}

// The launch of a kernel whose tiling is one plain struct: blockDim, the dtype key, the struct copied into
// the raw tiling data, and the system workspace only (no user workspace).
template <typename Tiling>
ge::graphStatus SetPlainTiling(gert::TilingContext* context, const platform_ascendc::PlatformAscendC& platform,
                               uint32_t blockDim, ascend_acts::ElementwiseDtype key, const Tiling& tiling) {
    context->SetBlockDim(blockDim);
    context->SetTilingKey(static_cast<uint64_t>(key));
    auto* raw = context->GetRawTilingData();
    std::memcpy(raw->GetData(), &tiling, sizeof(tiling));
    raw->SetDataSize(sizeof(tiling));
    size_t* workspace = context->GetWorkspaceSizes(1);
    workspace[0] = platform.GetLibApiWorkSpaceSize();
    return ge::GRAPH_SUCCESS;
}

// Attributes: LeakyRelu(Grad) has negative_slope; RRelu(Grad) has lower, upper (in that order).
template <ascend_acts::ElementwiseOp kOp>
ge::graphStatus ElementwiseTilingFunc(gert::TilingContext* context) {
    auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ubBytes = 0;
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);
    ascend_acts::ElementwiseDtype key;
    uint32_t elementSize = 0;
    if (!TilingKeyOf(context->GetInputDesc(0)->GetDataType(), key, elementSize)) return ge::GRAPH_FAILED;
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

namespace ge {

inline graphStatus SameShapeAsInput0(gert::InferShapeContext* context) {
    *context->GetOutputShape(0) = *context->GetInputShape(0);
    return GRAPH_SUCCESS;
}

inline graphStatus SameTypeAsInput0(gert::InferDataTypeContext* context) {
    context->SetOutputDataType(0, context->GetInputDataType(0));
    return GRAPH_SUCCESS;
}

}  // namespace ge
