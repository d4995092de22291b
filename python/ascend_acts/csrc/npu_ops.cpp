// torch_npu extension ascend_acts._npu_ops: the private ops ascend_acts_npu::<kernel> (one per AscendC kernel of
// the op table) whose PrivateUse1 (NPU) kernels launch our kernels from the installed custom op package through its
// generated aclnn two-phase API.
//
// Only the shared helpers are written here; every private op (schema, registration and kernel function) is
// generated from the op table into npu_registrations.inc (scripts/op_files/npu.py), included at the end. The op
// layer's launch sequence (python/ascend_acts/ops/<op>/kernels.py, through backends/launch.py) is the same Python
// the emulator runs: it validates, allocates the outputs, runs the platform's own ops (the convolution, the weight
// packing, float32 staging) and calls one private op per launch. So these kernels check nothing the op layer
// checks: they only do what the device needs (the device guard, 32-byte aligned contiguous inputs, dtype ->
// aclDataType) and refuse outputs the caller did not allocate as the kernel writes them.
//
// COMPILED, NEVER LINKED OR RUN: this project's machines and CI have no CANN toolkit and no NPU. CI compiles it
// (syntax only) against the headers of the torch-npu wheel released for the installed torch, with
// acts_aclnn.h supplying the aclnn declarations the wheel lacks (tests/test_npu_extension.py); it has never
// been linked against CANN's libraries nor run. setup.py builds it only when CANN, torch_npu and the installed
// op package are all found (docs/npu.md).
// Written from Huawei's public documentation (aclCreateTensor, the generation rules of the aclnn API of custom
// operators, c10_npu::getCurrentNPUStream); no code is taken from CANN or torch_npu.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <torch/extension.h>

#include "acts_aclnn.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

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

// ACTS_ACLNN(ActsFoo, t, args...) calls aclnnActsFooGetWorkspaceSize(args..., &size, &executor),
// then aclnnActsFoo, with the workspace allocated on t's device.
#define ACTS_ACLNN(op, on_device, ...)                                                 \
    RunAclnn(                                                                          \
        "aclnn" #op, on_device,                                                        \
        [&](uint64_t* workspace_size, aclOpExecutor** executor) {                      \
            return aclnn##op##GetWorkspaceSize(__VA_ARGS__, workspace_size, executor); \
        },                                                                             \
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

// A contiguous tensor with its shape (the tilings read N, C, H, W; the elementwise ones the flat length), with
// row-major strides computed here (torch may report any stride for a dimension of size 1).
AclTensor AsAclShaped(const at::Tensor& t) {
    std::vector<int64_t> sizes = t.sizes().vec(), strides(sizes.size(), 1);
    for (int64_t i = static_cast<int64_t>(sizes.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * sizes[i + 1];
    aclTensor* acl = aclCreateTensor(sizes.data(), sizes.size(), AclType(t.scalar_type()), strides.data(), 0,
                                     ACL_FORMAT_ND, sizes.data(), sizes.size(), t.data_ptr());
    TORCH_CHECK(acl != nullptr, "ascend_acts: aclCreateTensor failed");
    return AclTensor(acl);
}

struct AclIntArrayDeleter {
    void operator()(aclIntArray* array) const { aclDestroyIntArray(array); }
};
using AclIntArray = std::unique_ptr<aclIntArray, AclIntArrayDeleter>;

AclIntArray AsAclList(at::IntArrayRef values) {
    aclIntArray* acl = aclCreateIntArray(values.data(), values.size());
    TORCH_CHECK(acl != nullptr, "ascend_acts: aclCreateIntArray failed");
    return AclIntArray(acl);
}

// An absent optional input is a null aclTensor (the OpDef's OPTIONAL input).
AclTensor AsAclOptional(const std::optional<at::Tensor>& t) { return t.has_value() ? AsAclShaped(*t) : AclTensor(); }

// An input as aclCreateTensor takes the device address: on the launch's device (the one of its first tensor),
// contiguous and 32-byte aligned, copied only when it is not.
at::Tensor Prepared(const at::Tensor& t, const at::Tensor& first) {
    TORCH_CHECK(t.device() == first.device(), "ascend_acts: every tensor of a launch must be on ", first.device(),
                ", got one on ", t.device());
    at::Tensor c = t.contiguous();
    return reinterpret_cast<uintptr_t>(c.data_ptr()) % 32 == 0 ? c : c.clone();
}

std::optional<at::Tensor> PreparedOptional(const std::optional<at::Tensor>& t, const at::Tensor& first) {
    return t.has_value() ? std::optional<at::Tensor>(Prepared(*t, first)) : std::nullopt;
}

// A tensor the kernel writes (an output, or an input updated in place): the caller allocates it as the kernel
// writes it, so a copy here would silently drop the results.
void CheckWritable(const at::Tensor& t, const at::Tensor& first, const char* kernel, const char* name) {
    TORCH_CHECK(t.device() == first.device() && t.is_contiguous() &&
                    reinterpret_cast<uintptr_t>(t.data_ptr()) % 32 == 0,
                "ascend_acts_npu::", kernel, ": ", name, " must be preallocated by the caller on ", first.device(),
                ", contiguous and 32-byte aligned");
}

}  // namespace

// Every private op: its schema, its PrivateUse1 registration and its kernel function, generated from the op table.
#include "npu_registrations.inc"

// An importable module: ascend_acts.backends.npu imports it, which runs the registrations above.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "ascend_acts_npu: one private op per AscendC kernel of the op package, over its aclnn API";
}
