// ActsLeakyRelu: y = x > 0 ? x : x * negative_slope.
#include "elementwise_op_host.h"

namespace ops {
class ActsLeakyRelu : public OpDef {
public:
    explicit ActsLeakyRelu(const char* name) : OpDef(name) {
        this->Input("x")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("y")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Attr("negative_slope").AttrType(OPTIONAL).Float(0.01);
        this->SetInferShape(ge::SameShapeAsInput0).SetInferDataType(ge::SameTypeAsInput0);
        this->AICore().SetTiling(optiling::ElementwiseTilingFunc<ascend_acts::ElementwiseOp::LeakyRelu>);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");  // Atlas A3: 910B's cores (docs/npu.md)
    }
};
OP_ADD(ActsLeakyRelu);
}  // namespace ops
