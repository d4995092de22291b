// ActsRRelu: training RReLU: y = x > 0 ? x : x * noise(seed, flat index), docs/rng.md; no noise tensor.
#include "elementwise_op_host.h"

namespace ops {
class ActsRRelu : public OpDef {
public:
    explicit ActsRRelu(const char* name) : OpDef(name) {
        this->Input("x")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("seed")
            .ParamType(REQUIRED)
            .DataType({ge::DT_INT64, ge::DT_INT64, ge::DT_INT64})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("y")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Attr("lower").AttrType(OPTIONAL).Float(0.125);
        this->Attr("upper").AttrType(OPTIONAL).Float(0.333333343);
        this->SetInferShape(ge::SameShapeAsInput0).SetInferDataType(ge::SameTypeAsInput0);
        this->AICore().SetTiling(optiling::ElementwiseTilingFunc<ascend_acts::ElementwiseOp::RRelu>);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");  // Atlas A3: 910B's cores (docs/npu.md)
    }
};
OP_ADD(ActsRRelu);
}  // namespace ops
