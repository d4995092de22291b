// ActsBatchNormLeakyRelu: y = leaky_relu(batch_norm(x) * weight + bias) with batch statistics (training);
// save_mean, save_invstd per channel; running_mean/running_var updated in place when update_running_stats
// (an input and an output of the same name: one tensor, a "Ref" parameter of the aclnn API). The conv
// before it is the platform's.
#include "batch_norm_leaky_relu_op_host.h"

namespace ops {
class ActsBatchNormLeakyRelu : public OpDef {
public:
    explicit ActsBatchNormLeakyRelu(const char* name) : OpDef(name) {
        this->Input("x")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("weight")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("bias")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("running_mean")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Input("running_var")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("y")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT16, ge::DT_BF16})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("save_mean")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("save_invstd")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("running_mean")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Output("running_var")
            .ParamType(REQUIRED)
            .DataType({ge::DT_FLOAT, ge::DT_FLOAT, ge::DT_FLOAT})
            .Format({ge::FORMAT_ND, ge::FORMAT_ND, ge::FORMAT_ND});
        this->Attr("negative_slope").AttrType(OPTIONAL).Float(0.01);
        this->Attr("eps").AttrType(OPTIONAL).Float(1e-05);
        this->Attr("momentum").AttrType(OPTIONAL).Float(0.1);
        this->Attr("update_running_stats").AttrType(OPTIONAL).Bool(true);
        this->SetInferShape(ge::FirstLikeInputRestPerChannel).SetInferDataType(ge::FirstLikeInputRestFloat);
        this->AICore().SetTiling(optiling::BatchNormLeakyReluTilingFunc<ascend_acts::BatchNormPass::Forward>);
        this->AICore().AddConfig("ascend910b");
        this->AICore().AddConfig("ascend910_93");  // Atlas A3: 910B's cores (docs/npu.md)
    }
};
OP_ADD(ActsBatchNormLeakyRelu);
}  // namespace ops
