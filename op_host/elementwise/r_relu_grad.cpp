// ActsRReluGrad: dx = saved > 0 ? dy : dy * noise(seed, flat index), the noise regenerated from the seed.
#include "elementwise_op_host.h"

namespace ops {
class ActsRReluGrad : public OpDef {
public:
    explicit ActsRReluGrad(const char* name) : OpDef(name) {
        this->Input("dy")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("saved")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("seed")
            .ParamType(REQUIRED)
            .DataType({ge::DT_INT64, ge::DT_INT64, ge::DT_INT64})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("dx")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Attr("lower").AttrType(OPTIONAL).Float(0.125);
        this->Attr("upper").AttrType(OPTIONAL).Float(0.333333343);
        this->SetInferShape(ge::SameShapeAsInput0).SetInferDataType(ge::SameTypeAsInput0);
        this->AICore().SetTiling(optiling::ElementwiseTilingFunc<ascend_acts::ElementwiseOp::RReluGrad>);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");  // Atlas A3: 910B's cores (docs/npu.md)
    }
};
OP_ADD(ActsRReluGrad);
}  // namespace ops
