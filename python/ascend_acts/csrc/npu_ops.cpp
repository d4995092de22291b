// torch_npu extension ascend_acts._npu_ops: PrivateUse1 (NPU) kernels for the ascend_acts ops that run our
// AscendC kernels from the installed custom op package through its generated aclnn two-phase API.
//
// NEVER COMPILED: this project's machines and CI have no CANN toolkit, no torch_npu and no NPU, so this file
// has not been compiled, linked or run anywhere yet. setup.py builds it only when CANN, torch_npu and the
// installed op package are all found (docs/npu.md). tests/test_npu_build.py checks its text: it registers
// exactly the ops of ascend_acts.npu.KERNELS with C++ signatures matching their torch.library schemas, and
// declares and calls the aclnn functions of the OpDefs in op_host/ with their inputs and attributes in order.
// Written from Huawei's public documentation (aclCreateTensor, the generation rules of the aclnn API of custom
// operators, c10_npu::getCurrentNPUStream); no code is taken from CANN or torch_npu.
#include <cstdint>
#include <memory>

#include <ATen/MemoryOverlap.h>
#include <torch/extension.h>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

// The API the op package build generates for each OpDef (documented rule: the inputs in order as
// const aclTensor*, the attributes in order with float as double and names in lowerCamelCase, the single
// output as aclTensor* out, then the workspace size and the executor). Declared here rather than included
// so nothing depends on the generated header names.
extern "C" {
aclnnStatus aclnnActsLeakyReluGetWorkspaceSize(const aclTensor* x, double negativeSlope, aclTensor* out,
                                               uint64_t* workspaceSize, aclOpExecutor** executor);
aclnnStatus aclnnActsLeakyRelu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);
aclnnStatus aclnnActsLeakyReluGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* saved, double negativeSlope,
                                                   aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor);
aclnnStatus aclnnActsLeakyReluGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                   aclrtStream stream);
aclnnStatus aclnnActsRReluGetWorkspaceSize(const aclTensor* x, const aclTensor* seed, double lower, double upper,
                                           aclTensor* out, uint64_t* workspaceSize, aclOpExecutor** executor);
aclnnStatus aclnnActsRRelu(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);
aclnnStatus aclnnActsRReluGradGetWorkspaceSize(const aclTensor* dy, const aclTensor* saved, const aclTensor* seed,
                                               double lower, double upper, aclTensor* out, uint64_t* workspaceSize,
                                               aclOpExecutor** executor);
aclnnStatus aclnnActsRReluGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream);
}

namespace {

using AclnnRun = aclnnStatus (*)(void*, uint64_t, aclOpExecutor*, aclrtStream);

void CheckAclnn(aclnnStatus status, const char* api) {
    if (status == 0) return;
    const char* detail = aclGetRecentErrMsg();
    TORCH_CHECK(false, "ascend_acts: ", api, " failed with status ", status, ": ", detail ? detail : "(no message)",
                " (is the op package installed for this SoC? python -m ascend_acts info)");
}

// The shared two-phase call: workspace size and executor, the workspace as an NPU tensor, then the launch on
// the current NPU stream. stream() first empties torch_npu's task queue, so work queued before runs first.
// The workspace tensor goes back to the caching allocator after the launch; the allocator reuses it only
// for work on the same stream, which runs after this kernel.
template <typename GetWorkspaceSize>
void RunAclnn(const char* api, const at::Tensor& on_device, GetWorkspaceSize get_workspace_size, AclnnRun run) {
    uint64_t workspace_size = 0;
    aclOpExecutor* executor = nullptr;
    CheckAclnn(get_workspace_size(&workspace_size, &executor), api);
    at::Tensor workspace;
    void* workspace_ptr = nullptr;
    if (workspace_size > 0) {
        workspace = at::empty({static_cast<int64_t>(workspace_size)}, on_device.options().dtype(at::kByte));
        workspace_ptr = workspace.data_ptr();
    }
    CheckAclnn(run(workspace_ptr, workspace_size, executor, c10_npu::getCurrentNPUStream().stream()), api);
}

// ACTS_ACLNN(ActsLeakyRelu, t, args...) calls aclnnActsLeakyReluGetWorkspaceSize(args..., &size, &executor),
// then aclnnActsLeakyRelu, with the workspace allocated on t's device.
#define ACTS_ACLNN(op, on_device, ...)                                                              \
    RunAclnn("aclnn" #op, on_device,                                                                \
             [&](uint64_t* workspace_size, aclOpExecutor** executor) {                              \
                 return aclnn##op##GetWorkspaceSize(__VA_ARGS__, workspace_size, executor);         \
             },                                                                                     \
             aclnn##op)

aclDataType AclType(at::ScalarType type) {
    switch (type) {
        case at::kFloat: return ACL_FLOAT;
        case at::kHalf: return ACL_FLOAT16;
        case at::kBFloat16: return ACL_BF16;
        case at::kLong: return ACL_INT64;
        default: break;
    }
    TORCH_CHECK(false, "ascend_acts: the NPU kernels take float32, float16 or bfloat16 tensors, got ", type);
    return ACL_DT_UNDEFINED;
}

struct AclTensorDeleter {
    void operator()(aclTensor* tensor) const { aclDestroyTensor(tensor); }
};
using AclTensor = std::unique_ptr<aclTensor, AclTensorDeleter>;

// A contiguous tensor as a flat ND aclTensor: the kernels work on the row-major flat range (the RReLU noise is
// keyed on the flat index), so the shape does not matter to them.
AclTensor AsAcl(const at::Tensor& t) {
    const int64_t size = t.numel();
    const int64_t stride = 1;
    aclTensor* acl = aclCreateTensor(&size, 1, AclType(t.scalar_type()), &stride, 0, ACL_FORMAT_ND, &size, 1,
                                     t.data_ptr());
    TORCH_CHECK(acl != nullptr, "ascend_acts: aclCreateTensor failed");
    return AclTensor(acl);
}

// Contiguous and 32-byte aligned, as aclCreateTensor documents for the device address.
at::Tensor Prepared(const at::Tensor& t) {
    at::Tensor c = t.contiguous();
    return reinterpret_cast<uintptr_t>(c.data_ptr()) % 32 == 0 ? c : c.clone();
}

void CheckPair(const at::Tensor& grad_output, const at::Tensor& saved) {
    TORCH_CHECK(grad_output.sizes() == saved.sizes() && grad_output.scalar_type() == saved.scalar_type(),
                "ascend_acts: grad_output and self must have the same shape and dtype, got ", grad_output.sizes(),
                " ", grad_output.scalar_type(), " and ", saved.sizes(), " ", saved.scalar_type());
}

// The same error as ascend_acts.ops._library.check_result_based_backward.
void CheckResultBasedBackward(const char* op, bool slope_may_be_negative, bool self_is_result) {
    TORCH_CHECK(!(self_is_result && slope_may_be_negative), "In-place ", op,
                " backward calculation is triggered with a negative slope which is not supported. This is caused "
                "by calling in-place forward function with a negative slope, please call out-of-place version "
                "instead.");
}

at::Tensor SeedOn(const at::Tensor& seed, const at::Tensor& like) {
    TORCH_CHECK_VALUE(seed.numel() == 1 && seed.scalar_type() == at::kLong,
                      "rrelu: seed must be a one-element int64 tensor, got ", seed.scalar_type(), " ", seed.sizes());
    return Prepared(seed.reshape({1}).to(like.device()));
}

// --- the kernels (schemas in python/ascend_acts/ops/leaky_relu.py and rrelu.py) ---------------------------
at::Tensor LeakyRelu(const at::Tensor& self, double negative_slope) {
    c10::OptionalDeviceGuard guard(at::device_of(self));
    at::Tensor x = Prepared(self);
    at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
    if (x.numel() == 0) return out;
    AclTensor x_acl = AsAcl(x), out_acl = AsAcl(out);
    ACTS_ACLNN(ActsLeakyRelu, x, x_acl.get(), negative_slope, out_acl.get());
    return out;
}

void LeakyReluInplace(at::Tensor& self, double negative_slope) {
    at::assert_no_internal_overlap(self);
    self.copy_(LeakyRelu(self, negative_slope));
}

at::Tensor LeakyReluBackward(const at::Tensor& grad_output, const at::Tensor& self, double negative_slope,
                             bool self_is_result) {
    CheckResultBasedBackward("leakyReLu", negative_slope < 0, self_is_result);
    CheckPair(grad_output, self);
    c10::OptionalDeviceGuard guard(at::device_of(self));
    at::Tensor dy = Prepared(grad_output), saved = Prepared(self);
    at::Tensor out = at::empty_like(saved, at::MemoryFormat::Contiguous);
    if (saved.numel() == 0) return out;
    AclTensor dy_acl = AsAcl(dy), saved_acl = AsAcl(saved), out_acl = AsAcl(out);
    ACTS_ACLNN(ActsLeakyReluGrad, saved, dy_acl.get(), saved_acl.get(), negative_slope, out_acl.get());
    return out;
}

at::Tensor RRelu(const at::Tensor& self, const at::Tensor& seed, double lower, double upper) {
    c10::OptionalDeviceGuard guard(at::device_of(self));
    at::Tensor x = Prepared(self), key = SeedOn(seed, self);
    at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
    if (x.numel() == 0) return out;
    AclTensor x_acl = AsAcl(x), seed_acl = AsAcl(key), out_acl = AsAcl(out);
    ACTS_ACLNN(ActsRRelu, x, x_acl.get(), seed_acl.get(), lower, upper, out_acl.get());
    return out;
}

void RReluInplace(at::Tensor& self, const at::Tensor& seed, double lower, double upper) {
    at::assert_no_internal_overlap(self);
    self.copy_(RRelu(self, seed, lower, upper));
}

at::Tensor RReluBackward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& seed, double lower,
                         double upper, bool self_is_result) {
    CheckResultBasedBackward("RReLU", lower < 0, self_is_result);
    CheckPair(grad_output, self);
    c10::OptionalDeviceGuard guard(at::device_of(self));
    at::Tensor dy = Prepared(grad_output), saved = Prepared(self), key = SeedOn(seed, self);
    at::Tensor out = at::empty_like(saved, at::MemoryFormat::Contiguous);
    if (saved.numel() == 0) return out;
    AclTensor dy_acl = AsAcl(dy), saved_acl = AsAcl(saved), seed_acl = AsAcl(key), out_acl = AsAcl(out);
    ACTS_ACLNN(ActsRReluGrad, saved, dy_acl.get(), saved_acl.get(), seed_acl.get(), lower, upper, out_acl.get());
    return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(ascend_acts, PrivateUse1, m) {
    m.impl("leaky_relu", TORCH_FN(LeakyRelu));
    m.impl("leaky_relu_", TORCH_FN(LeakyReluInplace));
    m.impl("leaky_relu_backward", TORCH_FN(LeakyReluBackward));
    m.impl("rrelu_with_seed", TORCH_FN(RRelu));
    m.impl("rrelu_with_seed_", TORCH_FN(RReluInplace));
    m.impl("rrelu_with_seed_backward", TORCH_FN(RReluBackward));
}

// An importable module: ascend_acts.npu imports it, which runs the registrations above.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "PrivateUse1 (NPU) kernels of the ascend_acts ops over the AscendC op package's aclnn API";
}
