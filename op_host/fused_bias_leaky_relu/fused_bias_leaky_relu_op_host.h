// CANN host glue of the fused bias + LeakyReLU ops: the TilingFunc over the pure tiling of
// fused_bias_leaky_relu_tiling.h (the platform's vector cores and UB; x's shape as N = dim 0, C = dim 1,
// S = the product of the rest). The infer functions the OpDefs name are in op_host/common/op_host_common.h.
// Written from CANN's documented custom-operator interfaces; it needs the CANN toolkit to compile.
#pragma once

#include "../common/op_host_common.h"
#include "fused_bias_leaky_relu_tiling.h"

namespace optiling {

// Inputs in OpDef order: forward x, bias (optional); backward dy, saved, bias (optional). Attributes:
// negative_slope, scale, then (backward only) saved_is_result, then clamp, relu.
template <ascend_acts::FusedBiasPass kPass>
ge::graphStatus FusedBiasLeakyReluTilingFunc(gert::TilingContext* context) {
    auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ubBytes = 0;
    ascend_acts::DtypeKey key;
    uint32_t elementSize = 0;
    if (!ReadVectorBasics(context, platform, ubBytes, key, elementSize)) return ge::GRAPH_FAILED;
    uint64_t batch = 0, channels = 0, spatial = 0;
    if (!ReadChannelLayout(context, batch, channels, spatial)) return ge::GRAPH_FAILED;
    const bool backward = kPass == ascend_acts::FusedBiasPass::Backward;
    const bool hasBias = context->GetOptionalInputShape(backward ? 2 : 1) != nullptr;
    const auto* attrs = context->GetAttrs();
    float slope = *attrs->GetAttrPointer<float>(0);
    float scale = *attrs->GetAttrPointer<float>(1);
    bool savedIsResult = backward ? *attrs->GetAttrPointer<bool>(2) : true;
    const size_t modeAttrs = backward ? 3 : 2;
    float clamp = *attrs->GetAttrPointer<float>(modeAttrs);
    bool relu = *attrs->GetAttrPointer<bool>(modeAttrs + 1);

    ascend_acts::FusedBiasLeakyReluTiling tiling;
    if (!ascend_acts::ComputeFusedBiasLeakyReluTiling(kPass, batch, channels, spatial, elementSize, hasBias, slope,
                                                      scale, savedIsResult, clamp, relu, platform.GetCoreNumAiv(),
                                                      ubBytes, tiling)) {
        return ge::GRAPH_FAILED;
    }
    return SetPlainTiling(context, platform, tiling.usedCoreNum, key, tiling);
}

}  // namespace optiling
