// Deliberately broken kernels, one per emulator rule: each must make the emulator raise that rule.
// Built into a separate test library (CMakeLists.txt), never into the product kernels.
#include "kernel_operator.h"
#include "kernel_table.h"
#include "lib/matmul_intf.h"
#include "rrelu_rng.h"  // op_kernel/ (CMake include directories)

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

void DataCopyPadTooManyBlocks() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, 4096 * 32);
    GlobalTensor<float> in;
    in.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_in), kFloats);
    // 4096 blocks of one float: blockCount has 12 bits
    DataCopyPad(buf.Get<float>(), in, DataCopyExtParams{4096, 4, 0, 0, 0}, DataCopyPadExtParams<float>{});
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

// Kernels that register a Matmul are named as they are launched: REGIST_MATMUL_OBJ must be expanded in
// the kernel entry.
void matmul_l0_overflow() {
    TPipe pipe;
    SmallMatmul mm;
    TCubeTiling tiling = SquareTiling(16);
    tiling.baseM = tiling.baseN = 256;  // 256 x 256 floats of C, double-buffered: 512 KiB > L0C's 128 KiB
    tiling.depthA1 = tiling.depthB1 = 1;
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
}

// The Matmul steps after its registration up to C, stored to the output (`iterate`: whether Iterate
// comes before GetTensorC).
void MatmulSteps(TPipe& pipe, SmallMatmul& mm, bool iterate, bool end) {
    TBuf<QuePosition::VECCALC> c;
    pipe.InitBuffer(c, 256 * 4);
    GlobalTensor<float> in, out;
    in.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_in), kFloats);
    out.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_out), kFloats);
    mm.SetTensorA(in);
    mm.SetTensorB(in);
    if (iterate) mm.Iterate();
    mm.GetTensorC(c.Get<float>());
    DataCopy(out, c.Get<float>(), kFloats);  // C is 4 x 16: rows 16 floats apart
    if (end) mm.End();
}

void matmul_correct() {  // the control: breaks no rule
    TPipe pipe;
    SmallMatmul mm;
    TCubeTiling tiling = SquareTiling(16);
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    MatmulSteps(pipe, mm, true, true);
}

void matmul_without_iterate() {
    TPipe pipe;
    SmallMatmul mm;
    TCubeTiling tiling = SquareTiling(16);
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    MatmulSteps(pipe, mm, false, true);
}

void matmul_after_initbuffer() {
    TPipe pipe;
    SmallMatmul mm;
    TCubeTiling tiling = SquareTiling(16);
    TBuf<QuePosition::VECCALC> early;
    pipe.InitBuffer(early, 32);
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    MatmulSteps(pipe, mm, true, true);
}

void matmul_without_end() {
    TPipe pipe;
    SmallMatmul mm;
    TCubeTiling tiling = SquareTiling(16);
    REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling);
    MatmulSteps(pipe, mm, true, false);
}

// The registration expanded in an Init() of the kernel's class, as main had it before (issue 12, D3).
class RegistersInInit {
public:
    void Init() {
        tiling_ = SquareTiling(16);
        REGIST_MATMUL_OBJ(&pipe_, GetSysWorkSpacePtr(), mm_, &tiling_);
    }
    void Process() { MatmulSteps(pipe_, mm_, true, true); }

private:
    TPipe pipe_;
    SmallMatmul mm_;
    TCubeTiling tiling_;
};

void matmul_registered_in_init() {
    RegistersInInit op;
    op.Init();
    op.Process();
}

// Registered in the entry, but used after the block it was expanded in.
void matmul_after_its_scope() {
    TPipe pipe;
    SmallMatmul mm;
    TCubeTiling tiling = SquareTiling(16);
    { REGIST_MATMUL_OBJ(&pipe, GetSysWorkSpacePtr(), mm, &tiling); }
    MatmulSteps(pipe, mm, true, true);
}

// Buffers up to 186 KiB of UB, then Select: its temporary at 184 KiB lands in them.
void SelectInReservedUb() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> mask, values, big;
    pipe.InitBuffer(mask, 32);
    pipe.InitBuffer(values, kFloats * 4);
    pipe.InitBuffer(big, 186 * 1024 - 32 - kFloats * 4);
    LocalTensor<float> v = values.Get<float>();
    Duplicate(mask.Get<uint8_t>().ReinterpretCast<uint16_t>(), uint16_t(0xFFFF), 16);
    Select(v, mask.Get<uint8_t>(), v, v, SELMODE::VSEL_TENSOR_TENSOR_MODE, kFloats);
}

// Select first, then a buffer reaching into its temporary.
void AllocationAfterSelectInReservedUb() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> mask, values, big;
    pipe.InitBuffer(mask, 32);
    pipe.InitBuffer(values, kFloats * 4);
    LocalTensor<float> v = values.Get<float>();
    Duplicate(mask.Get<uint8_t>().ReinterpretCast<uint16_t>(), uint16_t(0xFFFF), 16);
    Select(v, mask.Get<uint8_t>(), v, v, SELMODE::VSEL_TENSOR_TENSOR_MODE, kFloats);
    pipe.InitBuffer(big, 185 * 1024);
}

// Flat indices from 2^24: CANN 8.x's CreateVecIndex<int32_t> rounds its first block through float.
void VecIndexPast2To24() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kFloats * 4);
    CreateVecIndex(buf.Get<int32_t>(), int32_t(1) << 24, kFloats);
}

// An int32 multiply whose product leaves int32: 910B documents no wraparound.
void IntegerWraparound() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kFloats * 4);
    LocalTensor<int32_t> t = buf.Get<int32_t>();
    Duplicate(t, int32_t(1) << 20, kFloats);
    Muls(t, t, int32_t(1) << 12, kFloats);
}

// The old BatchNorm forward's variance clamp, Maxs(var, 0), on a channel whose batch had an inf (var NaN): the
// result of a max/min of NaN is unspecified.
void MaxsOfNan() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> buf;
    pipe.InitBuffer(buf, kFloats * 4);
    LocalTensor<float> variance = buf.Get<float>();
    Duplicate(variance, std::numeric_limits<float>::quiet_NaN(), kFloats);
    Maxs(variance, variance, 0.0f, kFloats);
}

// The RReLU kernels' own hash (op_kernel/rrelu_rng.h) launched without declaring its wraparound.
void RngWithoutDeclaredWraparound() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> noise, h, scratch, scratch2;
    for (auto* buf : {&noise, &h, &scratch, &scratch2}) pipe.InitBuffer(*buf, kFloats * 4);
    ascend_acts::rng::HashBuffers hash{h.Get<uint32_t>(), scratch.Get<uint32_t>(), scratch2.Get<uint32_t>()};
    ascend_acts::rng::Noise(noise.Get<float>(), hash, ascend_acts::rng::RoundKeys(7), 0, kFloats, 0.1f, 0.2f);
}

void GatherOutOfBounds() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> src, dst, offsets;
    pipe.InitBuffer(src, kFloats * 4);
    pipe.InitBuffer(dst, kFloats * 4);
    pipe.InitBuffer(offsets, kFloats * 4);
    Duplicate(offsets.Get<uint32_t>(), uint32_t(kFloats * 4), kFloats);  // one element past the source
    Gather(dst.Get<float>(), src.Get<float>(), offsets.Get<uint32_t>(), 0u, kFloats);
}

// TransDataTo5HD over 16 "channel rows" of 128 bytes each (x: 512 floats) -> y, four repeats of 16 blocks:
// source i is row i, advanced one block per repeat; destination d is block d of the repeat's 16.
template <typename T>
void TransDataRows(const TransDataTo5HDParams& params, uint32_t srcShift = 0, uint32_t dstShift = 0) {
    constexpr uint32_t kRowBytes = 128, kBytes = 16 * kRowBytes, kBlock = 32 / sizeof(T);
    TPipe pipe;
    TBuf<QuePosition::VECCALC> src, dst;
    pipe.InitBuffer(src, kBytes);
    pipe.InitBuffer(dst, kBytes);
    GlobalTensor<T> in, out;
    in.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(g_in), kBytes / sizeof(T));
    out.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(g_out), kBytes / sizeof(T));
    LocalTensor<T> rows = src.Get<T>(), blocks = dst.Get<T>();
    DataCopy(rows, in, kBytes / sizeof(T));
    LocalTensor<T> srcList[NCHW_CONV_ADDR_LIST_SIZE], dstList[NCHW_CONV_ADDR_LIST_SIZE];
    for (uint32_t i = 0; i < NCHW_CONV_ADDR_LIST_SIZE; ++i) {
        srcList[i] = rows[i * kRowBytes / sizeof(T) + srcShift];
        dstList[i] = blocks[i * kBlock + dstShift];
    }
    TransDataTo5HD(dstList, srcList, params);
    DataCopy(out, blocks, kBytes / sizeof(T));
}

void TransDataFloat() { TransDataRows<float>(TransDataTo5HDParams(false, false, 4, 16, 1)); }
void TransDataHalf() { TransDataRows<uint16_t>(TransDataTo5HDParams(false, false, 4, 16, 1)); }
void TransDataZeroRepeats() { TransDataRows<float>(TransDataTo5HDParams(false, false, 0, 16, 1)); }
void TransDataHighHalf() { TransDataRows<half>(TransDataTo5HDParams(true, false, 4, 16, 1)); }
// the fifth repeat of the last destination block runs past the buffer
void TransDataPastBuffer() { TransDataRows<float>(TransDataTo5HDParams(false, false, 5, 16, 1)); }
// sources 4 bytes into their blocks
void TransDataUnaligned() { TransDataRows<float>(TransDataTo5HDParams(false, false, 4, 16, 1), 1); }

// An operand that is no tensor in UB (a default LocalTensor).
void NotInUb() {
    TPipe pipe;
    LocalTensor<float> nowhere;
    Muls(nowhere, nowhere, 2.0f, kFloats);
}

// CompareScalar over 10 floats: not whole 256-byte repeats.
void CompareScalarPartialRepeat() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> values, mask;
    pipe.InitBuffer(values, kFloats * 4);
    pipe.InitBuffer(mask, 32);
    CompareScalar(mask.Get<uint8_t>(), values.Get<float>(), 0.0f, CMPMODE::GT, 10);
}

// Select on two tensors in a scalar mode.
void SelectInScalarMode() {
    TPipe pipe;
    TBuf<QuePosition::VECCALC> mask, values;
    pipe.InitBuffer(mask, 32);
    pipe.InitBuffer(values, kFloats * 4);
    LocalTensor<float> v = values.Get<float>();
    Select(v, mask.Get<uint8_t>(), v, v, SELMODE::VSEL_TENSOR_SCALAR_MODE, kFloats);
}

// CrossCoreSetFlag needs a MIX launch (AIC + 2 AIVs); this is a vector-only one.
void FlagOutsideMix() { CrossCoreSetFlag<2, PIPE_MTE3>(1); }

// Runs `Body` on the launch's GM buffers: x (64 floats per block, read) and y (as many, written).
template <void (*Body)()>
void Run(GM_ADDR const* gm, GM_ADDR, GM_ADDR) {
    g_in = gm[0];
    g_out = gm[1];
    Body();
}

}  // namespace

namespace ascend_acts_sim {

// The vector test kernels for ascend_acts._sim_tests.launch (tiling None, block_dim given).
std::vector<KernelEntry> BrokenKernels() {
    const std::vector<Param> params = {{"x", Direction::In}, {"y", Direction::Out}};
    auto row = [&](const char* name, Runner run) {
        return KernelEntry{name, name, TilingKind::Raw, 0, false, false, params, run};
    };
    return {
        row("ub_overflow", Run<UbOverflow>),
        row("unaligned_datacopy", Run<UnalignedDataCopy>),
        row("datacopy_pad_too_many_blocks", Run<DataCopyPadTooManyBlocks>),
        row("gm_read_out_of_bounds", Run<GmReadOutOfBounds>),
        row("gm_write_out_of_bounds", Run<GmWriteOutOfBounds>),
        row("alloc_past_depth", Run<AllocPastDepth>),
        row("deque_empty", Run<DeQueEmpty>),
        row("leaked_tensor", Run<LeakedTensor>),
        row("foreign_free", Run<ForeignFree>),
        row("overlapping_core_writes", Run<OverlappingCoreWrites>),
        row("unwritten_output", Run<UnwrittenOutput>),
        row("unsupported_dtype", Run<UnsupportedDtype>),
        row("unaligned_local", Run<UnalignedLocal>),
        row("matmul_l0_overflow", Run<matmul_l0_overflow>),
        row("matmul_without_iterate", Run<matmul_without_iterate>),
        row("matmul_after_initbuffer", Run<matmul_after_initbuffer>),
        row("matmul_without_end", Run<matmul_without_end>),
        row("matmul_registered_in_init", Run<matmul_registered_in_init>),
        row("matmul_after_its_scope", Run<matmul_after_its_scope>),
        row("matmul_correct", Run<matmul_correct>),
        row("gather_out_of_bounds", Run<GatherOutOfBounds>),
        row("select_in_reserved_ub", Run<SelectInReservedUb>),
        row("allocation_after_select_in_reserved_ub", Run<AllocationAfterSelectInReservedUb>),
        row("vec_index_past_2_24", Run<VecIndexPast2To24>),
        row("integer_wraparound", Run<IntegerWraparound>),
        row("maxs_of_nan", Run<MaxsOfNan>),
        row("rng_without_declared_wraparound", Run<RngWithoutDeclaredWraparound>),
        row("not_in_ub", Run<NotInUb>),
        row("compare_scalar_partial_repeat", Run<CompareScalarPartialRepeat>),
        row("select_in_scalar_mode", Run<SelectInScalarMode>),
        row("flag_outside_mix", Run<FlagOutsideMix>),
        row("transdata_float", Run<TransDataFloat>),
        row("transdata_half", Run<TransDataHalf>),
        row("transdata_zero_repeats", Run<TransDataZeroRepeats>),
        row("transdata_high_half", Run<TransDataHighHalf>),
        row("transdata_past_buffer", Run<TransDataPastBuffer>),
        row("transdata_unaligned", Run<TransDataUnaligned>),
        row("correct", Run<Correct>),
    };
}

}  // namespace ascend_acts_sim
