// CANN host glue shared by every kernel family: dtype -> tiling key, the one TilingFunc (over each family's pure
// TilingFor, op_host/common/tiling_request.h), and the InferShape/InferDataType functions the op table names.
// Written from CANN's documented custom-operator interfaces; it needs the CANN toolkit to compile.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "../../op_kernel/common/dtype_key.h"
#include "tiling_request.h"
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

// The TilingFunc of every kernel (the generated OpDef <base>.cpp names it with the kernel's struct, variant, inputs
// and attributes as the op table declares them): the TilingRequest from the context, the family's pure TilingFor,
// then blockDim (an empty launch still launches one block, which finds an empty range and returns), the dtype key,
// the struct copied into the raw tiling data, and the system workspace plus the family's GM workspace.
template <typename Tiling>
ge::graphStatus RequestTilingFunc(gert::TilingContext* context, uint32_t variant,
                                  std::initializer_list<bool> optionalInputs,
                                  std::initializer_list<ascend_acts::AttrKind> attrKinds) {
    auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    ascend_acts::TilingRequest request;
    request.variant = variant;
    ascend_acts::DtypeKey key;
    if (!TilingKeyOf(context->GetInputDesc(0)->GetDataType(), key, request.elementSize)) return ge::GRAPH_FAILED;
    size_t input = 0;
    for (bool optional : optionalInputs) {
        const gert::StorageShape* shape = optional ? context->GetOptionalInputShape(input)
                                                   : context->GetRequiredInputShape(input);
        if (shape == nullptr && !optional) return ge::GRAPH_FAILED;
        std::vector<int64_t> dims;
        if (shape != nullptr) {
            const gert::Shape& storage = shape->GetStorageShape();
            for (size_t i = 0; i < storage.GetDimNum(); ++i) dims.push_back(storage.GetDim(i));
        }
        request.shapes.push_back(dims);
        request.present.push_back(shape != nullptr);
        ++input;
    }
    const auto* attrs = context->GetAttrs();
    size_t index = 0;
    for (ascend_acts::AttrKind kind : attrKinds) {
        ascend_acts::AttrValue value;
        if (kind == ascend_acts::AttrKind::Float) {
            value.number = *attrs->GetAttrPointer<float>(index);
        } else if (kind == ascend_acts::AttrKind::Bool) {
            value.number = *attrs->GetAttrPointer<bool>(index) ? 1 : 0;
        } else if (kind == ascend_acts::AttrKind::Int) {
            value.integer = *attrs->GetInt(index);  // RuntimeAttrs::GetInt (exe_graph/runtime/runtime_attrs.h:36)
        } else {
            const auto* list = attrs->GetListInt(index);
            value.ints.assign(list->GetData(), list->GetData() + list->GetSize());
        }
        request.attrs.push_back(value);
        ++index;
    }
    using platform_ascendc::CoreMemType;
    ascend_acts::PlatformLimits& limits = request.platform;
    limits.vectorCores = platform.GetCoreNumAiv();
    limits.cubeCores = platform.GetCoreNumAic();
    platform.GetCoreMemSize(CoreMemType::UB, limits.ubBytes);
    platform.GetCoreMemSize(CoreMemType::L1, limits.l1Bytes);
    platform.GetCoreMemSize(CoreMemType::L0_A, limits.l0aBytes);
    platform.GetCoreMemSize(CoreMemType::L0_B, limits.l0bBytes);
    platform.GetCoreMemSize(CoreMemType::L0_C, limits.l0cBytes);

    Tiling tiling{};
    std::string why;
    if (!TilingFor(request, tiling, why)) return ge::GRAPH_FAILED;
    const uint32_t blocks = LaunchBlocks(tiling);
    context->SetBlockDim(blocks > 0 ? blocks : 1);
    context->SetTilingKey(static_cast<uint64_t>(key));
    auto* raw = context->GetRawTilingData();
    std::memcpy(raw->GetData(), &tiling, sizeof(tiling));
    raw->SetDataSize(sizeof(tiling));
    size_t* workspace = context->GetWorkspaceSizes(1);
    workspace[0] = platform.GetLibApiWorkSpaceSize() + ascend_acts::WorkspaceBytesOf(tiling);
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

// The BatchNorm + activation forward's outputs: y like x; save_mean and save_invstd per channel (C), or (N, G) with
// the attribute norm_groups = G > 0 (index 5, op table); the running statistics per channel.
inline graphStatus BatchNormForwardShapes(gert::InferShapeContext* context) {
    graphStatus status = FirstLikeInputRestPerChannel(context);
    const int64_t* groups = context->GetAttrs()->GetInt(5);  // RuntimeAttrs::GetInt (runtime_attrs.h:36)
    if (status != GRAPH_SUCCESS || groups == nullptr || *groups == 0) return status;
    for (size_t output : {1, 2}) {
        gert::Shape* saved = context->GetOutputShape(output);
        saved->SetDimNum(2);
        saved->SetDim(0, context->GetInputShape(0)->GetDim(0));
        saved->SetDim(1, *groups);
    }
    return GRAPH_SUCCESS;
}

// Output 0's dtype is input 0's; the others (BatchNorm's per-channel statistics) are float32.
inline graphStatus FirstLikeInputRestFloat(gert::InferDataTypeContext* context) {
    context->SetOutputDataType(0, context->GetInputDataType(0));
    for (size_t i = 1; i < context->GetComputeNodeOutputNum(); ++i) context->SetOutputDataType(i, DT_FLOAT);
    return GRAPH_SUCCESS;
}

// The eval convolution's y: N x C_out x H_out x W_out from x, the packed weight (C1, kh, kw, M1, 16, C0: kh and kw
// are dims 1 and 2), the bias (C_out) and the attributes strides, pads (top, bottom, left, right), dilations.
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
        y->SetDim(2 + axis, (extent - dilations[axis] * (w->GetDim(1 + axis) - 1) - 1) / strides[axis] + 1);
    }
    return GRAPH_SUCCESS;
}

}  // namespace ge
