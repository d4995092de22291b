// CANN host glue of ActsConvBnLeakyReluEval (y = leaky_relu(conv2d(x, W') + b') in one MIX launch, W' and b'
// BN-folded by the caller and W' packed in CANN's FRACTAL_Z order (C1, kh, kw, M1, 16, C0); groups = 1,
// NCHW): the output shape, and the TilingFunc, which runs our pure tiling and asks for its GM rings.
// Written from CANN's documented interfaces; it needs the CANN toolkit to compile.
#pragma once

#include <cstring>

#include "../common/op_host_common.h"
#include "conv_bn_leaky_relu_eval_tiling.h"

namespace optiling {

inline bool CubePlatformOf(const platform_ascendc::PlatformAscendC& platform, ascend_acts::CubePlatform& cube) {
    using platform_ascendc::CoreMemType;
    cube.cubeCoreNum = platform.GetCoreNumAic();
    cube.vectorCoreNum = platform.GetCoreNumAiv();
    platform.GetCoreMemSize(CoreMemType::UB, cube.ubBytes);
    platform.GetCoreMemSize(CoreMemType::L1, cube.l1Bytes);
    platform.GetCoreMemSize(CoreMemType::L0_A, cube.l0aBytes);
    platform.GetCoreMemSize(CoreMemType::L0_B, cube.l0bBytes);
    platform.GetCoreMemSize(CoreMemType::L0_C, cube.l0cBytes);
    return cube.cubeCoreNum > 0;
}

// The packed weight's shape is the one the geometry implies (a 4-D W' or another packing is an error, not a
// silent misread of its bytes).
inline bool PackedWeightMatches(const gert::Shape& w, const ascend_acts::ConvGeometry& g, uint32_t dtypeSize) {
    const int64_t c0 = 32 / dtypeSize;
    const int64_t expected[6] = {(int64_t(g.inChannels) + c0 - 1) / c0,
                                 int64_t(g.kernelH),
                                 int64_t(g.kernelW),
                                 (int64_t(g.outChannels) + 15) / 16,
                                 16,
                                 c0};
    if (w.GetDimNum() != 6) return false;
    for (size_t i = 0; i < 6; ++i) {
        if (w.GetDim(i) != expected[i]) return false;
    }
    return true;
}

// Inputs: x (N, C_in, H, W), weight (C1, kh, kw, M1, 16, C0), bias (C_out,) float. Attributes: strides (h, w),
// pads (top, bottom, left, right), dilations (h, w), negative_slope.
inline ge::graphStatus ConvBnLeakyReluEvalTilingFunc(gert::TilingContext* context) {
    auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    ascend_acts::CubePlatform cube;
    if (!CubePlatformOf(platform, cube)) return ge::GRAPH_FAILED;
    ge::DataType type = context->GetInputDesc(0)->GetDataType();
    ascend_acts::DtypeKey key;
    uint32_t size = 0;
    if (!TilingKeyOf(type, key, size)) return ge::GRAPH_FAILED;
    const auto& x = context->GetInputShape(0)->GetStorageShape();
    const auto& w = context->GetInputShape(1)->GetStorageShape();
    const auto& b = context->GetInputShape(2)->GetStorageShape();
    const auto& y = context->GetOutputShape(0)->GetStorageShape();
    const auto* attrs = context->GetAttrs();
    const int64_t* strides = attrs->GetListInt(0)->GetData();
    const int64_t* pads = attrs->GetListInt(1)->GetData();
    const int64_t* dilations = attrs->GetListInt(2)->GetData();
    float slope = *attrs->GetAttrPointer<float>(3);
    auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
    ascend_acts::ConvGeometry g{u(x.GetDim(0)), u(x.GetDim(1)),  u(x.GetDim(2)),  u(x.GetDim(3)), u(b.GetDim(0)),
                                u(w.GetDim(2)), u(w.GetDim(3)),  u(strides[0]),   u(strides[1]),  u(pads[0]),
                                u(pads[2]),     u(dilations[0]), u(dilations[1]), u(y.GetDim(2)), u(y.GetDim(3))};
    if (!PackedWeightMatches(w, g, size)) return ge::GRAPH_FAILED;
    ascend_acts::ConvBnLeakyReluEvalTiling plan;
    if (!ascend_acts::ComputeConvBnLeakyReluEvalTiling(g, size, slope, cube, plan)) return ge::GRAPH_FAILED;

    auto* raw = context->GetRawTilingData();
    std::memcpy(raw->GetData(), &plan, sizeof(plan));
    raw->SetDataSize(sizeof(plan));
    context->SetBlockDim(plan.blockDim);  // AI cores: each runs one AIC and two AIVs
    context->SetTilingKey(static_cast<uint64_t>(key));
    size_t* workspace = context->GetWorkspaceSizes(1);
    workspace[0] = platform.GetLibApiWorkSpaceSize() + ascend_acts::WorkspaceBytes(plan);  // + the GM rings
    return ge::GRAPH_SUCCESS;
}

}  // namespace optiling

namespace ge {

// y: N x C_out x H_out x W_out from the input, the packed weight (kh, kw: dims 2 and 3), the bias (C_out) and
// the attributes.
inline graphStatus ConvOutputShape(gert::InferShapeContext* context) {
    const gert::Shape* x = context->GetInputShape(0);
    const gert::Shape* w = context->GetInputShape(1);
    const gert::Shape* b = context->GetInputShape(2);
    const auto* attrs = context->GetAttrs();
    const int64_t* strides = attrs->GetListInt(0)->GetData();
    const int64_t* pads = attrs->GetListInt(1)->GetData();
    const int64_t* dilations = attrs->GetListInt(2)->GetData();
    gert::Shape* y = context->GetOutputShape(0);
    y->SetDimNum(4);
    y->SetDim(0, x->GetDim(0));
    y->SetDim(1, b->GetDim(0));
    for (int axis = 0; axis < 2; ++axis) {
        int64_t extent = x->GetDim(2 + axis) + pads[2 * axis] + pads[2 * axis + 1];
        y->SetDim(2 + axis, (extent - dilations[axis] * (w->GetDim(2 + axis) - 1) - 1) / strides[axis] + 1);
    }
    return GRAPH_SUCCESS;
}

}  // namespace ge
