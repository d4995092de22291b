// CANN host glue shared by the BatchNorm + LeakyReLU training ops: dtype -> tiling key, the
// TilingFunc over the pure tiling of batch_norm_leaky_relu_tiling.h (platform's vector cores and UB).
// Written from CANN's documented custom-operator interfaces; it needs the CANN toolkit to compile.
#pragma once

#include "../common/op_host_common.h"
#include "batch_norm_leaky_relu_tiling.h"

namespace optiling {

// Attributes in OpDef order: negative_slope, then (forward only) eps, momentum, update_running_stats, relu.
template <ascend_acts::BatchNormPass kPass>
ge::graphStatus BatchNormLeakyReluTilingFunc(gert::TilingContext* context) {
    auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ubBytes = 0;
    ascend_acts::DtypeKey key;
    uint32_t elementSize = 0;
    if (!ReadVectorBasics(context, platform, ubBytes, key, elementSize)) return ge::GRAPH_FAILED;
    uint64_t batch = 0, channels = 0, plane = 0;
    if (!ReadChannelLayout(context, batch, channels, plane)) return ge::GRAPH_FAILED;
    const auto* attrs = context->GetAttrs();
    float slope = *attrs->GetAttrPointer<float>(0);
    bool forward = kPass == ascend_acts::BatchNormPass::Forward;
    float eps = forward ? *attrs->GetAttrPointer<float>(1) : 0.0f;
    float momentum = forward ? *attrs->GetAttrPointer<float>(2) : 0.0f;
    bool update = forward ? *attrs->GetAttrPointer<bool>(3) : false;
    bool relu = forward ? *attrs->GetAttrPointer<bool>(4) : false;

    ascend_acts::BatchNormLeakyReluTiling tiling;
    if (!ascend_acts::ComputeBatchNormLeakyReluTiling(
            kPass, static_cast<uint32_t>(batch), static_cast<uint32_t>(channels), plane, elementSize, slope, eps,
            momentum, update, relu, platform.GetCoreNumAiv(), ubBytes, tiling)) {
        return ge::GRAPH_FAILED;
    }
    return SetPlainTiling(context, platform, tiling.usedCoreNum, key, tiling);
}

}  // namespace optiling

namespace ge {

// Output 0's dtype is input 0's; the per-channel statistics are float32.
inline graphStatus FirstLikeInputRestFloat(gert::InferDataTypeContext* context) {
    context->SetOutputDataType(0, context->GetInputDataType(0));
    for (size_t i = 1; i < context->GetComputeNodeOutputNum(); ++i) context->SetOutputDataType(i, DT_FLOAT);
    return GRAPH_SUCCESS;
}

}  // namespace ge
