// ActsLeakyReluGrad: dx = saved > 0 ? dy : dy * negative_slope (saved: x, or y when negative_slope >= 0).
#include "elementwise_op_host.h"

namespace ops {
class ActsLeakyReluGrad : public OpDef {
public:
    explicit ActsLeakyReluGrad(const char* name) : OpDef(name) {
        this->Input("dy")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("saved")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("dx")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Attr("negative_slope").AttrType(OPTIONAL).Float(0.01);
        this->SetInferShape(ge::SameShapeAsInput0).SetInferDataType(ge::SameTypeAsInput0);
        this->AICore().SetTiling(optiling::ElementwiseTilingFunc<ascend_acts::ElementwiseOp::LeakyReluGrad>);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");  // Atlas A3: 910B's cores (docs/npu.md)
    }
};
OP_ADD(ActsLeakyReluGrad);
}  // namespace ops
