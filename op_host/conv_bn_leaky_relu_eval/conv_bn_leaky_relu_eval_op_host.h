// CANN host glue of ActsConvBnLeakyReluEval (y = leaky_relu(conv2d(x, weight) + bias) in one MIX launch,
// weight and bias BN-folded by the caller; groups = 1, NCHW): the output shape, and the TilingFunc, which
// runs our pure tiling (column tiles, band, blocking) and fills the Matmul's TCubeTiling with CANN's
// MultiCoreMatmulTiling at the blocking it chose, written after our struct
// (conv_eval_tiling::kCubeTilingOffset), where the kernel reads it.
// Written from CANN's documented interfaces; it needs the CANN toolkit to compile.
#pragma once

#include <cstring>

#include "../common/op_host_common.h"
#include "conv_bn_leaky_relu_eval_tiling.h"
#include "tiling/tiling_api.h"

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

inline matmul_tiling::DataType MatmulTypeOf(ge::DataType type) {
    switch (type) {
        case ge::DT_FLOAT16: return matmul_tiling::DataType::DT_FLOAT16;
        case ge::DT_BF16: return matmul_tiling::DataType::DT_BFLOAT16;
        default: return matmul_tiling::DataType::DT_FLOAT;
    }
}

// Attributes: strides (h, w), pads (top, bottom, left, right), dilations (h, w), negative_slope.
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
    const auto& y = context->GetOutputShape(0)->GetStorageShape();
    const auto* attrs = context->GetAttrs();
    const int64_t* strides = attrs->GetListInt(0)->GetData();
    const int64_t* pads = attrs->GetListInt(1)->GetData();
    const int64_t* dilations = attrs->GetListInt(2)->GetData();
    float slope = *attrs->GetAttrPointer<float>(3);
    auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
    ascend_acts::ConvGeometry g{u(x.GetDim(0)), u(x.GetDim(1)),  u(x.GetDim(2)),  u(x.GetDim(3)), u(w.GetDim(0)),
                                u(w.GetDim(2)), u(w.GetDim(3)),  u(strides[0]),   u(strides[1]),  u(pads[0]),
                                u(pads[2]),     u(dilations[0]), u(dilations[1]), u(y.GetDim(2)), u(y.GetDim(3))};
    ascend_acts::ConvBnLeakyReluEvalTiling plan;
    if (!ascend_acts::ComputeConvBnLeakyReluEvalTiling(g, size, slope, cube, plan)) return ge::GRAPH_FAILED;

    // Each AIV runs its own C (C_out x columnTile) = W' (C_out x K) * slab (K x columnTile).
    matmul_tiling::MultiCoreMatmulTiling matmul(platform);
    matmul.SetDim(1);
    matmul.SetAType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, MatmulTypeOf(type));
    matmul.SetBType(matmul_tiling::TPosition::GM, matmul_tiling::CubeFormat::ND, MatmulTypeOf(type));
    matmul.SetCType(matmul_tiling::TPosition::VECIN, matmul_tiling::CubeFormat::ND, matmul_tiling::DataType::DT_FLOAT);
    matmul.SetShape(plan.cube.M, plan.cube.N, plan.cube.Ka);
    matmul.SetOrgShape(plan.cube.M, plan.cube.N, plan.cube.Ka);
    matmul.SetBias(false);
    matmul.SetFixSplit(plan.cube.baseM, plan.cube.baseN);
    matmul.SetBufferSpace(static_cast<int32_t>(cube.l1Bytes / 2), -1, -1);  // two AIVs share an AIC's L1
    TCubeTiling cubeTiling;
    if (matmul.GetTiling(cubeTiling) == -1) return ge::GRAPH_FAILED;
    // the kernel's UB plan (C blocks, column tiles) assumes the blocking it was made for
    if (matmul.GetBaseM() != plan.cube.baseM || matmul.GetBaseN() != plan.cube.baseN) return ge::GRAPH_FAILED;

    auto* raw = context->GetRawTilingData();
    std::memcpy(raw->GetData(), &plan, sizeof(plan));
    cubeTiling.SaveToBuffer(static_cast<uint8_t*>(raw->GetData()) + ascend_acts::conv_eval_tiling::kCubeTilingOffset,
                            cubeTiling.GetDataSize());
    raw->SetDataSize(ascend_acts::conv_eval_tiling::kCubeTilingOffset + cubeTiling.GetDataSize());
    context->SetBlockDim(plan.blockDim);  // AI cores: each runs one AIC and two AIVs
    context->SetTilingKey(static_cast<uint64_t>(key));
    size_t* workspace = context->GetWorkspaceSizes(1);
    workspace[0] = platform.GetLibApiWorkSpaceSize() + 2ull * plan.blockDim * plan.workspaceSlab * size;
    return ge::GRAPH_SUCCESS;
}

}  // namespace optiling

namespace ge {

// y: N x C_out x H_out x W_out from the input, the weight and the attributes.
inline graphStatus ConvOutputShape(gert::InferShapeContext* context) {
    const gert::Shape* x = context->GetInputShape(0);
    const gert::Shape* w = context->GetInputShape(1);
    const auto* attrs = context->GetAttrs();
    const int64_t* strides = attrs->GetListInt(0)->GetData();
    const int64_t* pads = attrs->GetListInt(1)->GetData();
    const int64_t* dilations = attrs->GetListInt(2)->GetData();
    gert::Shape* y = context->GetOutputShape(0);
    y->SetDimNum(4);
    y->SetDim(0, x->GetDim(0));
    y->SetDim(1, w->GetDim(0));
    for (int axis = 0; axis < 2; ++axis) {
        int64_t extent = x->GetDim(2 + axis) + pads[2 * axis] + pads[2 * axis + 1];
        y->SetDim(2 + axis, (extent - dilations[axis] * (w->GetDim(2 + axis) - 1) - 1) / strides[axis] + 1);
    }
    return GRAPH_SUCCESS;
}

}  // namespace ge
