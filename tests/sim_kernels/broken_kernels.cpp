// Deliberately broken kernels, one per emulator rule: each must make the emulator raise that rule.
// Built into a separate test library (CMakeLists.txt), never into the product kernels.
#include "kernel_operator.h"
#include "launcher/abi.h"
#include "lib/matmul_intf.h"

using namespace AscendC;

namespace {

constexpr uint32_t kFloats = 64;  // 256 bytes
GM_ADDR g_in, g_out;

void UbOverflow() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> a, b;
    pipe.InitBuffer(a, 128 * 1024);
    pipe.InitBuffer(b, 128 * 1024);  // 256 KiB > 192 KiB
}

void UnalignedDataCopy() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kFloats * 4);
    GlobalTensor<float> in;
    in.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_in), kFloats);
    DataCopy(buf.Get<float>(), in, 7);  // 28 bytes
}

void GmReadOutOfBounds() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, 2 * kFloats * 4);
    GlobalTensor<float> in;
    in.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_in), kFloats);
    DataCopy(buf.Get<float>(), in[8], kFloats);  // 8 elements past the window
}

void GmWriteOutOfBounds() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kFloats * 4);
    GlobalTensor<float> out;
    out.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_out), kFloats);
    DataCopy(out[kFloats - 8], buf.Get<float>(), 16);
}

void AllocPastDepth() {
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> queue;
    pipe.InitBuffer(queue, 1, kFloats * 4);
    LocalTensor<float> first = queue.AllocTensor<float>();
    LocalTensor<float> second = queue.AllocTensor<float>();  // the only buffer is held
    queue.FreeTensor(second);
    queue.FreeTensor(first);
}

void DeQueEmpty() {
    TPipe pipe;
    TQue<QuePosition::VECIN, 2> queue;
    pipe.InitBuffer(queue, 2, kFloats * 4);
    LocalTensor<float> t = queue.DeQue<float>();
    queue.FreeTensor(t);
}

void LeakedTensor() {
    TPipe pipe;
    TQue<QuePosition::VECOUT, 2> queue;
    pipe.InitBuffer(queue, 2, kFloats * 4);
    queue.AllocTensor<float>();  // never freed
}

void ForeignFree() {
    TPipe pipe;
    TQue<QuePosition::VECIN, 2> a, b;
    pipe.InitBuffer(a, 2, kFloats * 4);
    pipe.InitBuffer(b, 2, kFloats * 4);
    LocalTensor<float> t = a.AllocTensor<float>();
    b.FreeTensor(t);
}

// Every block writes the same first 64 floats of the output.
void OverlappingCoreWrites() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kFloats * 4);
    GlobalTensor<float> out;
    out.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_out), kFloats * GetBlockNum());
    DataCopy(out, buf.Get<float>(), kFloats);
}

// Block b writes its share, except that the last 32 bytes are never written.
void UnwrittenOutput() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kFloats * 4);
    GlobalTensor<float> out;
    out.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_out) + kFloats * GetBlockIdx(), kFloats);
    uint32_t count = GetBlockIdx() + 1 == GetBlockNum() ? kFloats - 8 : kFloats;
    DataCopy(out, buf.Get<float>(), count);
}

void UnsupportedDtype() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kFloats * 2);
    LocalTensor<bfloat16_t> t = buf.Get<bfloat16_t>();
    LeakyRelu(t, t, bfloat16_t(0.1f), kFloats);  // 910B's LeakyRelu takes half and float only
}

// A vector instruction on an operand that is not 32-byte aligned in UB.
void UnalignedLocal() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, 2 * kFloats * 4);
    LocalTensor<float> t = buf.Get<float>();
    Muls(t[3], t[3], 2.0f, kFloats);
}

void Correct() {  // the control: breaks no rule
    TPipe pipe;
    TQue<QuePosition::VECIN, 1> queue;
    pipe.InitBuffer(queue, 1, kFloats * 4);
    GlobalTensor<float> in, out;
    in.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_in) + kFloats * GetBlockIdx(), kFloats);
    out.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_out) + kFloats * GetBlockIdx(), kFloats);
    LocalTensor<float> t = queue.AllocTensor<float>();
    DataCopy(t, in, kFloats);
    Muls(t, t, 2.0f, kFloats);
    DataCopy(out, t, kFloats);
    queue.FreeTensor(t);
}

// Matmul: C (4 x 16) = A (4 x 4) * B (4 x 16), both read from the block's 64 input floats.
using MatmulA = matmul::MatmulType<TPosition::GM, CubeFormat::ND, float>;
using MatmulC = matmul::MatmulType<TPosition::VECIN, CubeFormat::ND, float>;
using SmallMatmul = matmul::Matmul<MatmulA, MatmulA, MatmulC, MatmulC>;

TCubeTiling SquareTiling(int32_t baseK) {
    return TCubeTiling{1, 4, 16, 4, 4, 4, 16, 4, 16, 16, baseK, 1, 1, 1, 1, 1, 1, 0, 0, 2, 2, 2};
}

void MatmulL0Overflow() {
    TPipe pipe;
    SmallMatmul mm;
    TCubeTiling tiling = SquareTiling(16);
    tiling.baseM = tiling.baseN = 256;  // 256 x 256 floats of C, double-buffered: 512 KiB > L0C's 128 KiB
    tiling.depthA1 = tiling.depthB1 = 1;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
}

// The Matmul steps up to C (`iterate`: whether Iterate comes before GetTensorC).
void MatmulSteps(bool registerFirst, bool iterate, bool end) {
    TPipe pipe;
    SmallMatmul mm;
    TCubeTiling tiling = SquareTiling(16);
    TBuf<QuePosition::VECCALC> c;
    if (registerFirst) REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    pipe.InitBuffer(c, 256 * 4);
    if (!registerFirst) REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    GlobalTensor<float> in;
    in.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_in), kFloats);
    mm.SetTensorA(in);
    mm.SetTensorB(in);
    if (iterate) mm.Iterate();
    mm.GetTensorC(c.Get<float>());
    if (end) mm.End();
}

void MatmulWithoutIterate() { MatmulSteps(true, false, true); }
void MatmulAfterInitBuffer() { MatmulSteps(false, true, true); }
void MatmulWithoutEnd() { MatmulSteps(true, true, false); }

void GatherOutOfBounds() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> src, dst, offsets;
    pipe.InitBuffer(src, kFloats * 4);
    pipe.InitBuffer(dst, kFloats * 4);
    pipe.InitBuffer(offsets, kFloats * 4);
    Duplicate(offsets.Get<uint32_t>(), uint32_t(kFloats * 4), kFloats);  // one element past the source
    Gather(dst.Get<float>(), src.Get<float>(), offsets.Get<uint32_t>(), 0u, kFloats);
}

struct Named {
    const char* name;
    void (*body)();
};

const Named kKernels[] = {
    {"ub_overflow", UbOverflow}, {"unaligned_datacopy", UnalignedDataCopy},
    {"gm_read_out_of_bounds", GmReadOutOfBounds}, {"gm_write_out_of_bounds", GmWriteOutOfBounds},
    {"alloc_past_depth", AllocPastDepth}, {"deque_empty", DeQueEmpty}, {"leaked_tensor", LeakedTensor},
    {"foreign_free", ForeignFree}, {"overlapping_core_writes", OverlappingCoreWrites},
    {"unwritten_output", UnwrittenOutput}, {"unsupported_dtype", UnsupportedDtype},
    {"unaligned_local", UnalignedLocal}, {"matmul_l0_overflow", MatmulL0Overflow},
    {"matmul_without_iterate", MatmulWithoutIterate}, {"matmul_after_initbuffer", MatmulAfterInitBuffer},
    {"matmul_without_end", MatmulWithoutEnd}, {"gather_out_of_bounds", GatherOutOfBounds},
    {"correct", Correct},
};

}  // namespace

// Runs test kernel `name` on `blockDim` blocks of platform 0 with an input and an output of
// 64 floats per block. Returns like acts_sim_elementwise.
extern "C" int acts_sim_test_kernel(const char* name, uint32_t blockDim, float* in, float* out, ActsSimStats* stats,
                                    char* error, uint64_t errorLength, int64_t* errorBlock) {
    for (const auto& kernel : kKernels) {
        if (std::strcmp(kernel.name, name) != 0) continue;
        g_in = reinterpret_cast<GM_ADDR>(in);
        g_out = reinterpret_cast<GM_ADDR>(out);
        uint64_t bytes = uint64_t(kFloats) * 4 * blockDim;
        auto result = ascendc_sim::Launch(name, ascendc_sim::kPlatforms[0], blockDim, 0,
                                          {{in, bytes, false}, {out, bytes, true}}, kernel.body);
        return ascend_acts_sim::Report(result, stats, error, errorLength, errorBlock);
    }
    return ACTS_SIM_BAD_ARGUMENT;
}
