// CANN host glue shared by every kernel family: dtype -> tiling key, the launch of a kernel whose tiling is
// one plain struct, and the InferShape/InferDataType functions several families name.
// Written from CANN's documented custom-operator interfaces; it needs the CANN toolkit to compile.
#pragma once

#include <cstdint>
#include <cstring>

#include "../../op_kernel/common/dtype_key.h"
#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"

namespace optiling {

inline bool TilingKeyOf(ge::DataType type, ascend_acts::DtypeKey& key, uint32_t& size) {
    switch (type) {
        case ge::DT_FLOAT:
            key = ascend_acts::DtypeKey::Float32;
            size = 4;
            return true;
        case ge::DT_FLOAT16:
            key = ascend_acts::DtypeKey::Float16;
            size = 2;
            return true;
        case ge::DT_BF16:
            key = ascend_acts::DtypeKey::BFloat16;
            size = 2;
            return true;
        default: return false;
    }
}

// What every vector TilingFunc starts from: the platform's UB bytes (GetCoreMemSize) and input 0's dtype key and
// element size; false for a dtype the kernels do not take.
inline bool ReadVectorBasics(gert::TilingContext* context, const platform_ascendc::PlatformAscendC& platform,
                             uint64_t& ubBytes, ascend_acts::DtypeKey& key, uint32_t& elementSize) {
    ubBytes = 0;
    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);
    return TilingKeyOf(context->GetInputDesc(0)->GetDataType(), key, elementSize);
}

// Input 0 as (N, C, S) of the per-channel kernels: dims 0 and 1 and the product of the rest; false below rank 2.
inline bool ReadChannelLayout(gert::TilingContext* context, uint64_t& batch, uint64_t& channels, uint64_t& spatial) {
    const auto& shape = context->GetInputShape(0)->GetStorageShape();
    if (shape.GetDimNum() < 2) return false;
    batch = static_cast<uint64_t>(shape.GetDim(0));
    channels = static_cast<uint64_t>(shape.GetDim(1));
    spatial = 1;
    for (size_t i = 2; i < shape.GetDimNum(); ++i) spatial *= static_cast<uint64_t>(shape.GetDim(i));
    return true;
}

// The launch of a kernel whose tiling is one plain struct: blockDim, the dtype key, the struct copied into
// the raw tiling data, and the system workspace only (no user workspace).
template <typename Tiling>
ge::graphStatus SetPlainTiling(gert::TilingContext* context, const platform_ascendc::PlatformAscendC& platform,
                               uint32_t blockDim, ascend_acts::DtypeKey key, const Tiling& tiling) {
    context->SetBlockDim(blockDim);
    context->SetTilingKey(static_cast<uint64_t>(key));
    auto* raw = context->GetRawTilingData();
    std::memcpy(raw->GetData(), &tiling, sizeof(tiling));
    raw->SetDataSize(sizeof(tiling));
    size_t* workspace = context->GetWorkspaceSizes(1);
    workspace[0] = platform.GetLibApiWorkSpaceSize();
    return ge::GRAPH_SUCCESS;
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

// Every output gets input 0's dtype.
inline graphStatus AllTypesAsInput0(gert::InferDataTypeContext* context) {
    for (size_t i = 0; i < context->GetComputeNodeOutputNum(); ++i) {
        context->SetOutputDataType(i, context->GetInputDataType(0));
    }
    return GRAPH_SUCCESS;
}

// Outputs: 0 like input 0; the others are per-channel vectors of C = dim 1 of input 0 (BatchNorm's statistics,
// the fused bias's grad_bias).
inline graphStatus FirstLikeInputRestPerChannel(gert::InferShapeContext* context) {
    const gert::Shape* x = context->GetInputShape(0);
    *context->GetOutputShape(0) = *x;
    for (size_t i = 1; i < context->GetComputeNodeOutputNum(); ++i) {
        gert::Shape* channel = context->GetOutputShape(i);
        channel->SetDimNum(1);
        channel->SetDim(0, x->GetDim(1));
    }
    return GRAPH_SUCCESS;
}

}  // namespace ge
