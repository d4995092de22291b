// torch_npu extension ascend_acts._npu_ops: the private ops ascend_acts_npu::<op> (one per functional ascend_acts
// op, same schema) whose PrivateUse1 (NPU) kernels run our AscendC kernels from the installed custom op package
// through its generated aclnn two-phase API.
//
// The op layer calls them (python/ascend_acts/backends/npu.py) from the PrivateUse1 kernel it registers for every
// ascend_acts op, as it runs the CPU backends: after the one validation every device shares (ops/: argument checks,
// in-place targets), with detached contiguous tensors, running `X_` as `X(..., out=self)`, and giving the results
// the memory format the fake kernels promise. So these kernels check nothing the op layer checks: they only do what
// the device needs (32-byte aligned addresses, dtype -> aclDataType, the device guard, the seed moved to the device,
// float32 staging of the running statistics) and return contiguous tensors.
//
// COMPILED, NEVER LINKED OR RUN: this project's machines and CI have no CANN toolkit and no NPU. CI compiles it
// (syntax only) against the headers of the torch-npu wheel released for the installed torch, with
// acts_aclnn.h supplying the aclnn declarations the wheel lacks (tests/test_npu_extension.py); it has never
// been linked against CANN's libraries nor run. setup.py builds it only when CANN, torch_npu and the installed
// op package are all found (docs/npu.md). Generated from the op table (scripts/generate_op_files.py): the aclnn
// declarations (acts_aclnn_ops.h) and the private ops' schemas and registrations with each kernel's declaration
// from the schema (npu_registrations.inc; each kernel here is CamelCase(op name)).
// tests/test_npu_extension.py checks that each kernel calls the aclnn op of its table kernel with the inputs,
// attributes and outputs in the declared order.
// Written from Huawei's public documentation (aclCreateTensor, the generation rules of the aclnn API of custom
// operators, c10_npu::getCurrentNPUStream); no code is taken from CANN or torch_npu.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string_view>
#include <tuple>
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

// ACTS_ACLNN(ActsLeakyRelu, t, args...) calls aclnnActsLeakyReluGetWorkspaceSize(args..., &size, &executor),
// then aclnnActsLeakyRelu, with the workspace allocated on t's device.
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

// A contiguous tensor with its shape (the BatchNorm and convolution tilings read N, C, H, W), with
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

// Contiguous and 32-byte aligned, as aclCreateTensor documents for the device address. The op layer's tensors are
// contiguous already; the ones made here (convolution outputs, float32 copies) may not be.
at::Tensor Prepared(const at::Tensor& t) {
    at::Tensor c = t.contiguous();
    return reinterpret_cast<uintptr_t>(c.data_ptr()) % 32 == 0 ? c : c.clone();
}

// The RReLU seed (a one-element int64 tensor, checked by the op layer) may be on the CPU: the kernel reads it on
// the device.
at::Tensor SeedOn(const at::Tensor& seed, const at::Tensor& like) {
    return Prepared(seed.reshape({1}).to(like.device()));
}

// --- the kernels (schemas in python/ascend_acts/op_table.py) -----------------------------------------------
at::Tensor LeakyRelu(const at::Tensor& self, double negative_slope) {
    c10::OptionalDeviceGuard guard(at::device_of(self));
    at::Tensor x = Prepared(self);
    at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
    if (x.numel() == 0) return out;
    AclTensor x_acl = AsAcl(x), out_acl = AsAcl(out);
    ACTS_ACLNN(ActsLeakyRelu, x, x_acl.get(), negative_slope, out_acl.get());
    return out;
}

at::Tensor LeakyReluBackward(const at::Tensor& grad_output, const at::Tensor& self, double negative_slope,
                             bool /*saved_is_result: the op layer checked it*/) {
    c10::OptionalDeviceGuard guard(at::device_of(self));
    at::Tensor dy = Prepared(grad_output), saved = Prepared(self);
    at::Tensor out = at::empty_like(saved, at::MemoryFormat::Contiguous);
    if (saved.numel() == 0) return out;
    AclTensor dy_acl = AsAcl(dy), saved_acl = AsAcl(saved), out_acl = AsAcl(out);
    ACTS_ACLNN(ActsLeakyReluGrad, saved, dy_acl.get(), saved_acl.get(), negative_slope, out_acl.get());
    return out;
}

at::Tensor Rrelu(const at::Tensor& self, const at::Tensor& seed, double lower, double upper) {
    c10::OptionalDeviceGuard guard(at::device_of(self));
    at::Tensor x = Prepared(self), key = SeedOn(seed, self);
    at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
    if (x.numel() == 0) return out;
    AclTensor x_acl = AsAcl(x), seed_acl = AsAcl(key), out_acl = AsAcl(out);
    ACTS_ACLNN(ActsRrelu, x, x_acl.get(), seed_acl.get(), lower, upper, out_acl.get());
    return out;
}

at::Tensor RreluBackward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& seed, double lower,
                         double upper, bool /*saved_is_result: the op layer checked it*/) {
    c10::OptionalDeviceGuard guard(at::device_of(self));
    at::Tensor dy = Prepared(grad_output), saved = Prepared(self), key = SeedOn(seed, self);
    at::Tensor out = at::empty_like(saved, at::MemoryFormat::Contiguous);
    if (saved.numel() == 0) return out;
    AclTensor dy_acl = AsAcl(dy), saved_acl = AsAcl(saved), seed_acl = AsAcl(key), out_acl = AsAcl(out);
    ACTS_ACLNN(ActsRreluGrad, saved, dy_acl.get(), saved_acl.get(), seed_acl.get(), lower, upper, out_acl.get());
    return out;
}

// --- the fused Conv2d + BatchNorm2d + LeakyReLU -----------------------------------------------------------------
// Training: torch_npu's convolution, then our BatchNorm + LeakyReLU kernels; eval: torch_npu's convolution with the
// BN-folded weights, then our LeakyReLU kernel (our one-launch eval kernel on request: ConvBnLeakyReluEval). The
// convolution's backward is torch_npu's. Padding is (top, bottom, left, right); the statistics and the BN
// parameters the kernels take are float32.
at::Tensor Padded(const at::Tensor& input, at::IntArrayRef padding) {
    return at::constant_pad_nd(input, {padding[2], padding[3], padding[0], padding[1]});
}

at::Tensor PlatformConv(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                        at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
    return at::convolution(Padded(input, padding), weight, bias, stride, {0, 0}, dilation, false, {0, 0}, groups)
        .contiguous();
}

// (grad_input, grad_weight, grad_bias) of PlatformConv, from the gradient of its output.
std::tuple<at::Tensor, at::Tensor, at::Tensor> PlatformConvBackward(const at::Tensor& grad, const at::Tensor& input,
                                                                    const at::Tensor& weight, at::IntArrayRef stride,
                                                                    at::IntArrayRef padding, at::IntArrayRef dilation,
                                                                    int64_t groups) {
    at::Tensor padded = Padded(input, padding);
    auto [grad_padded, grad_weight, grad_bias] = at::convolution_backward(
        grad, padded, weight, at::OptionalIntArrayRef(weight.sizes().slice(0, 1)), stride, {0, 0}, dilation, false,
        {0, 0}, groups, {true, true, true});
    at::Tensor grad_input = grad_padded.slice(2, padding[0], padded.size(2) - padding[1])
                                .slice(3, padding[2], padded.size(3) - padding[3])
                                .contiguous();
    return {grad_input, grad_weight, grad_bias};
}

at::Tensor Floats(const at::Tensor& t) { return Prepared(t.to(at::kFloat)); }

at::Tensor Channel(const at::Tensor& v) { return v.reshape({1, -1, 1, 1}); }

// The kernel updates running_mean/running_var in place (torch's formula: momentum, unbiased variance) on float32
// buffers; buffers of another dtype or layout go through float32 copies, written back after the launch.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> ConvBnLeakyReluTrain(
    const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
    const at::Tensor& bn_weight, const at::Tensor& bn_bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, int64_t groups, double momentum, double eps, double negative_slope, bool save_output) {
    c10::OptionalDeviceGuard guard(at::device_of(input));
    const bool update = running_mean.has_value();  // the op layer checked that both or neither are given
    at::Tensor y = Prepared(PlatformConv(input, weight, bias, stride, padding, dilation, groups));
    TORCH_CHECK(y.numel() > 0, "conv_bn_leaky_relu: training needs at least one value per channel, got output ",
                y.sizes());
    at::Tensor gamma = Floats(bn_weight), beta = Floats(bn_bias);
    at::Tensor out = at::empty_like(y), mean = at::empty_like(gamma), invstd = at::empty_like(gamma);
    at::Tensor staged_mean = update ? Floats(*running_mean) : at::zeros_like(gamma);
    at::Tensor staged_var = update ? Floats(*running_var) : at::ones_like(gamma);
    AclTensor y_acl = AsAclShaped(y), gamma_acl = AsAcl(gamma), beta_acl = AsAcl(beta),
              running_mean_acl = AsAcl(staged_mean), running_var_acl = AsAcl(staged_var), out_acl = AsAclShaped(out),
              mean_acl = AsAcl(mean), invstd_acl = AsAcl(invstd);
    ACTS_ACLNN(ActsBatchNormLeakyRelu, y, y_acl.get(), gamma_acl.get(), beta_acl.get(), running_mean_acl.get(),
               running_var_acl.get(), negative_slope, eps, momentum, update, out_acl.get(), mean_acl.get(),
               invstd_acl.get());
    if (update) {
        if (!staged_mean.is_same(*running_mean)) running_mean->copy_(staged_mean);
        if (!staged_var.is_same(*running_var)) running_var->copy_(staged_var);
    }
    return {out, save_output ? at::empty({0}, input.options()) : y, mean, invstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> ConvBnLeakyReluTrainBackward(
    const at::Tensor& grad_out, const at::Tensor& saved, bool saved_is_result, const at::Tensor& input,
    const at::Tensor& weight, const at::Tensor& bn_weight, const at::Tensor& bn_bias, const at::Tensor& mean,
    const at::Tensor& invstd, at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
    double negative_slope) {
    c10::OptionalDeviceGuard guard(at::device_of(input));
    at::Tensor gamma = Floats(bn_weight), beta = Floats(bn_bias), grad_y, grad_gamma, grad_beta;
    if (saved_is_result) {  // InPlace-ABN: our kernel inverts LeakyReLU and the affine
        at::Tensor dy = Prepared(grad_out), y = Prepared(saved), scale = Floats(invstd);
        grad_y = at::empty_like(y);
        grad_gamma = at::empty_like(gamma);
        grad_beta = at::empty_like(beta);
        AclTensor dy_acl = AsAclShaped(dy), y_acl = AsAclShaped(y), gamma_acl = AsAcl(gamma), beta_acl = AsAcl(beta),
                  invstd_acl = AsAcl(scale), grad_y_acl = AsAclShaped(grad_y), grad_gamma_acl = AsAcl(grad_gamma),
                  grad_beta_acl = AsAcl(grad_beta);
        ACTS_ACLNN(ActsBatchNormLeakyReluGrad, y, dy_acl.get(), y_acl.get(), gamma_acl.get(), beta_acl.get(),
                   invstd_acl.get(), negative_slope, grad_y_acl.get(), grad_gamma_acl.get(), grad_beta_acl.get());
    } else {  // the conv output was kept (slope <= 0 or a zero bn_weight): the reference's maths with torch ops
        at::Tensor xhat = (saved.to(at::kFloat) - Channel(mean.to(at::kFloat))) * Channel(invstd.to(at::kFloat));
        at::Tensor z = xhat * Channel(gamma) + Channel(beta), grad = grad_out.to(at::kFloat);
        at::Tensor dz = at::where(z > 0, grad, grad * negative_slope);
        grad_gamma = (dz * xhat).sum({0, 2, 3});
        grad_beta = dz.sum({0, 2, 3});
        at::Tensor dxhat = dz * Channel(gamma);
        grad_y = (Channel(invstd.to(at::kFloat)) *
                  (dxhat - dxhat.mean({0, 2, 3}, true) - xhat * (dxhat * xhat).mean({0, 2, 3}, true)))
                     .to(input.scalar_type());
    }
    auto [grad_input, grad_weight, grad_bias] = PlatformConvBackward(grad_y, input, weight, stride, padding, dilation,
                                                                     groups);
    return {grad_input, grad_weight, grad_bias, grad_gamma.to(bn_weight.scalar_type()),
            grad_beta.to(bn_bias.scalar_type())};
}

// Which eval path runs: ASCEND_ACTS_EVAL_KERNEL unset or "aclnn" (the default), or "fused" (our one-launch kernel,
// to measure it on an NPU). Anything else is an error rather than a silent default.
bool FusedEvalKernelRequested() {
    const char* choice = std::getenv("ASCEND_ACTS_EVAL_KERNEL");
    if (choice == nullptr || std::string_view(choice) == "aclnn") return false;
    TORCH_CHECK_VALUE(std::string_view(choice) == "fused",
                      "ascend_acts: ASCEND_ACTS_EVAL_KERNEL must be \"aclnn\" or \"fused\", got \"", choice, "\"");
    return true;
}

// W' (C_out, C_in, kh, kw) -> (C1, kh, kw, M1, 16, C0), C0 = 32 bytes of T, zero-padded: CANN's FRACTAL_Z order,
// whose fractals the fused eval kernel copies to L1 and from there into L0B (op_kernel/conv_bn_leaky_relu_eval/,
// the tiling data header). Once per call, as aclnn's convolution transforms its weight to FRACTAL_Z.
at::Tensor PackEvalWeight(const at::Tensor& weight) {
    const int64_t c0 = 32 / static_cast<int64_t>(weight.element_size());
    const int64_t cout = weight.size(0), cin = weight.size(1), kh = weight.size(2), kw = weight.size(3);
    const int64_t m1 = (cout + 15) / 16, c1 = (cin + c0 - 1) / c0;
    at::Tensor padded = at::constant_pad_nd(weight, {0, 0, 0, 0, 0, c1 * c0 - cin, 0, m1 * 16 - cout});
    return padded.view({m1, 16, c1, c0, kh, kw}).permute({2, 4, 5, 0, 1, 3}).contiguous();
}

// Eval: torch_npu's convolution (aclnnConvolution) on the folded W', b', then our LeakyReLU kernel, unless the
// fused kernel is asked for. The fused kernel (cube-side img2col, weight-stationary, one launch) has never been
// measured on an NPU (its modelled figures: benchmarks/results/), so it stays opt-in until
// `scripts/npu_selftest.py eval-kernel` has measured it. It is groups = 1 only.
at::Tensor ConvBnLeakyReluEval(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                               at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                               int64_t groups, double negative_slope) {
    c10::OptionalDeviceGuard guard(at::device_of(input));
    if (groups != 1 || !FusedEvalKernelRequested()) {
        at::Tensor y = Prepared(PlatformConv(input, weight, bias, stride, padding, dilation, groups));
        at::Tensor out = at::empty_like(y);
        if (y.numel() == 0) return out;
        AclTensor y_acl = AsAcl(y), out_acl = AsAcl(out);
        ACTS_ACLNN(ActsLeakyRelu, y, y_acl.get(), negative_slope, out_acl.get());
        return out;
    }
    at::Tensor x = Prepared(input), w = PackEvalWeight(Prepared(weight.to(input.scalar_type()))), b = Floats(bias);
    std::vector<int64_t> shape = {x.size(0), weight.size(0)};
    for (int axis = 0; axis < 2; ++axis) {
        int64_t extent = x.size(2 + axis) + padding[2 * axis] + padding[2 * axis + 1];
        shape.push_back((extent - dilation[axis] * (weight.size(2 + axis) - 1) - 1) / stride[axis] + 1);
    }
    at::Tensor out = at::empty(shape, x.options());
    if (out.numel() == 0) return out;
    AclTensor x_acl = AsAclShaped(x), w_acl = AsAclShaped(w), b_acl = AsAcl(b), out_acl = AsAclShaped(out);
    AclIntArray strides = AsAclList(stride), pads = AsAclList(padding), dilations = AsAclList(dilation);
    ACTS_ACLNN(ActsConvBnLeakyReluEval, x, x_acl.get(), w_acl.get(), b_acl.get(), strides.get(), pads.get(),
               dilations.get(), negative_slope, out_acl.get());
    return out;
}

// Only needed to train through an eval-mode block: torch_npu's ops, the pre-activation recomputed.
std::tuple<at::Tensor, at::Tensor, at::Tensor> ConvBnLeakyReluEvalBackward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups, double negative_slope) {
    c10::OptionalDeviceGuard guard(at::device_of(input));
    at::Tensor pre = PlatformConv(input, weight, bias, stride, padding, dilation, groups);
    at::Tensor dz = at::where(pre > 0, grad_out, grad_out * negative_slope);
    return PlatformConvBackward(dz, input, weight, stride, padding, dilation, groups);
}

// --- StyleGAN2's fused bias + LeakyReLU ------------------------------------------------------------------------
// The kernels read the input's shape (N, C, then the rest as one spatial extent); the bias is (C,) in the input's
// dtype, or absent (a null optional aclTensor), as the op layer checked.

std::optional<at::Tensor> PreparedBias(const std::optional<at::Tensor>& bias) {
    return bias.has_value() ? std::optional<at::Tensor>(Prepared(*bias)) : std::nullopt;
}

AclTensor AsAclOptional(const std::optional<at::Tensor>& t) { return t.has_value() ? AsAcl(*t) : AclTensor(); }

at::Tensor FusedBiasLeakyRelu(const at::Tensor& input, const std::optional<at::Tensor>& bias, double negative_slope,
                              double scale) {
    c10::OptionalDeviceGuard guard(at::device_of(input));
    at::Tensor x = Prepared(input);
    std::optional<at::Tensor> b = PreparedBias(bias);
    at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
    if (x.numel() == 0) return out;
    AclTensor x_acl = AsAclShaped(x), bias_acl = AsAclOptional(b), out_acl = AsAclShaped(out);
    ACTS_ACLNN(ActsFusedBiasLeakyRelu, x, x_acl.get(), bias_acl.get(), negative_slope, scale, out_acl.get());
    return out;
}

std::tuple<at::Tensor, at::Tensor> FusedBiasLeakyReluBackward(const at::Tensor& grad_output, const at::Tensor& saved,
                                                              const std::optional<at::Tensor>& bias,
                                                              double negative_slope, double scale,
                                                              bool saved_is_result) {
    c10::OptionalDeviceGuard guard(at::device_of(saved));
    at::Tensor dy = Prepared(grad_output), kept = Prepared(saved);
    std::optional<at::Tensor> b = PreparedBias(bias);
    at::Tensor grad_input = at::empty_like(kept, at::MemoryFormat::Contiguous);
    at::Tensor grad_bias = at::empty({kept.size(1)}, kept.options());
    if (kept.numel() == 0) return {grad_input, grad_bias.zero_()};
    AclTensor dy_acl = AsAclShaped(dy), saved_acl = AsAclShaped(kept), bias_acl = AsAclOptional(b),
              grad_input_acl = AsAclShaped(grad_input), grad_bias_acl = AsAcl(grad_bias);
    ACTS_ACLNN(ActsFusedBiasLeakyReluGrad, kept, dy_acl.get(), saved_acl.get(), bias_acl.get(), negative_slope, scale,
               saved_is_result, grad_input_acl.get(), grad_bias_acl.get());
    return {grad_input, grad_bias};
}

}  // namespace

// The declarations of the kernels above from their schemas, the private ops and their PrivateUse1 kernels.
#include "npu_registrations.inc"

// An importable module: ascend_acts.backends.npu imports it, which runs the registrations above.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "ascend_acts_npu: the ascend_acts ops' NPU kernels over the AscendC op package's aclnn API";
}
