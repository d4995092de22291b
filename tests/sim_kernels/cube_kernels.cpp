// MIX (cube + vector) test kernels: one small correct convolution through L1 -> img2col -> Mmad ->
// Fixpipe -> vector, and one deliberately broken kernel per cube/cross-core rule
// (tests/test_emulator_cube.py).
//
// The correct kernel: x is one image [C1=1][H][W][C0] (float, C0 = 8 channels) in GM, w is Cout = 16 rows
// of K = 8 * kh * kw packed in the L0A (ZZ) fractal layout; AIC 0 computes W (16 x K) * img2col(x)^T
// (K x positions) into L0C, Fixpipe writes a float [16][positions] ring in GM, sets flag 1; both AIVs wait,
// and AIV s copies rows [8s, 8s + 8) through UB to `out`, doubling them.
#include <cstring>

#include "kernel_operator.h"
#include "launcher/abi.h"

using namespace AscendC;

namespace {

struct CubeArgs {
    uint32_t height, width, kernel, stride, pad, dilation;
};
CubeArgs g_args;
GM_ADDR g_x, g_w, g_ring, g_out;
constexpr uint32_t kC0 = 8, kCout = 16;

uint32_t OutSide(uint32_t size) {
    return (size + 2 * g_args.pad - g_args.dilation * (g_args.kernel - 1) - 1) / g_args.stride + 1;
}
uint32_t Positions() { return OutSide(g_args.height) * OutSide(g_args.width); }
uint32_t PositionsAligned() { return (Positions() + 15) / 16 * 16; }
uint32_t ReductionK() { return kC0 * g_args.kernel * g_args.kernel; }

enum class Break {
    None,
    NoFlag,
    WrongL0Position,
    UnalignedL0,
    L1Overflow,
    BadChannelSize,
    FixpipeQuant,
    CubeOnVector,
    Deadlock,
    L0cOverflow,
    OverwriteBeforeRelease
};
Break g_break = Break::None;

void CubeSide() {
    const uint32_t mapElements = g_args.height * g_args.width * kC0, k = ReductionK(), n = PositionsAligned();
    TPipe pipe;
    TBuf<TPosition::A1> mapL1;
    TBuf<TPosition::B1> weightL1;
    TBuf<TPosition::A2> weightL0;
    TBuf<TPosition::B2> columnsL0;
    TBuf<TPosition::CO1> resultL0c;
    pipe.InitBuffer(mapL1, g_break == Break::L1Overflow ? 600 * 1024 : mapElements * 4);
    pipe.InitBuffer(weightL1, kCout * k * 4);
    pipe.InitBuffer(weightL0, kCout * k * 4);
    pipe.InitBuffer(columnsL0, k * n * 4);
    pipe.InitBuffer(resultL0c, g_break == Break::L0cOverflow ? 130 * 1024 : kCout * n * 4);
    GlobalTensor<float> x, w, ring;
    x.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_x), mapElements);
    w.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_w), kCout * k);
    ring.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_ring), kCout * n);
    LocalTensor<float> map = mapL1.Get<float>(), weights = weightL1.Get<float>();
    DataCopy(map, x, DataCopyParams{1, uint16_t(mapElements * 4 / 32), 0, 0});
    DataCopy(weights, w, DataCopyParams{1, uint16_t(kCout * k * 4 / 32), 0, 0});
    LocalTensor<float> a = weightL0.Get<float>();
    if (g_break == Break::UnalignedL0) a = a[8];  // 32 bytes in: L0 operands must start on 512 bytes
    LoadData(a, weights, LoadData2DParams{0, uint8_t(kCout * k * 4 / 512), 1, 0, 0, false, 0});
    uint8_t pads[4] = {uint8_t(g_args.pad), uint8_t(g_args.pad), uint8_t(g_args.pad), uint8_t(g_args.pad)};
    LoadData3DParamsV2<float> img2col(
        pads, uint16_t(g_args.height), uint16_t(g_args.width), uint16_t(g_break == Break::BadChannelSize ? 4 : kC0),
        uint16_t(k), uint16_t(n), 0, 0, uint8_t(g_args.stride), uint8_t(g_args.stride), uint8_t(g_args.kernel),
        uint8_t(g_args.kernel), uint8_t(g_args.dilation), uint8_t(g_args.dilation), false, false, 0.0f);
    if (g_break == Break::WrongL0Position) {
        LoadData(weightL1.Get<float>(), map, img2col);  // B1 is not an img2col destination (A2 / B2)
    }
    LoadData(columnsL0.Get<float>(), map, img2col);
    LocalTensor<float> c = resultL0c.Get<float>();
    Mmad(c, weightL0.Get<float>(), columnsL0.Get<float>(),
         MmadParams(uint16_t(kCout), uint16_t(n), uint16_t(k), false, 0, false, false, false));
    FixpipeParamsV220 out(uint16_t(n), uint16_t(kCout), 16, n, false);
    if (g_break == Break::FixpipeQuant) out.quantPre = QuantMode_t::F322F16;
    Fixpipe(ring, c, out);
    if (g_break == Break::NoFlag) return;
    if (g_break == Break::Deadlock) CrossCoreWaitFlag<2, PIPE_FIX>(3);  // nobody sets 3
    CrossCoreSetFlag<2, PIPE_FIX>(1);
    if (g_break == Break::OverwriteBeforeRelease) {
        CrossCoreWaitFlag<2, PIPE_FIX>(2);  // the AIVs have taken the ring ... but not yet read it out
        Fixpipe(ring, c, out);              // so this overwrites bytes they read after their flag
    }
}

void VectorSide() {
    if (g_break == Break::CubeOnVector) {
        TPipe pipe;
        TBuf<TPosition::A1> l1;
        pipe.InitBuffer(l1, 1024);
    }
    const uint32_t n = PositionsAligned(), rows = kCout / 2, first = GetSubBlockIdx() * rows;
    if (g_break != Break::NoFlag) CrossCoreWaitFlag<2, PIPE_MTE2>(1);
    if (g_break == Break::OverwriteBeforeRelease) CrossCoreSetFlag<2, PIPE_MTE2>(2);  // too early: before the reads
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, rows * n * 4);
    GlobalTensor<float> ring, out;
    ring.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_ring), kCout * n);
    out.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(g_out), kCout * Positions());
    LocalTensor<float> block = buf.Get<float>();
    DataCopy(block, ring[first * n], rows * n);
    Muls(block, block, 2.0f, rows * n);
    DataCopyPad(out[first * Positions()], block,
                DataCopyExtParams{uint16_t(rows), uint32_t(Positions() * 4),
                                  uint32_t((n * 4 - (Positions() * 4 + 31) / 32 * 32) / 32), 0, 0});
}

void Entry() {
    if ASCEND_IS_AIC {
        CubeSide();
    } else {
        VectorSide();
    }
}

struct Named {
    const char* name;
    Break which;
};
const Named kCubeKernels[] = {
    {"cube_correct", Break::None},
    {"cube_missing_flag", Break::NoFlag},
    {"cube_wrong_position", Break::WrongL0Position},
    {"cube_unaligned_l0", Break::UnalignedL0},
    {"cube_l1_overflow", Break::L1Overflow},
    {"cube_bad_channel_size", Break::BadChannelSize},
    {"cube_fixpipe_quant", Break::FixpipeQuant},
    {"cube_api_on_vector", Break::CubeOnVector},
    {"cube_deadlock", Break::Deadlock},
    {"cube_l0c_overflow", Break::L0cOverflow},
    {"cube_overwrite_before_release", Break::OverwriteBeforeRelease},
};

}  // namespace

// geometry: height, width, kernel, stride, pad, dilation. x: [H][W][8] float; w: 16 x (8 k k) in ZZ;
// out: 16 x positions float (2 * the convolution). Buffers in launch order: x, w, ring, out.
extern "C" int acts_sim_test_cube_kernel(const char* name, const uint32_t* geometry, float* x, float* w, float* out,
                                         ActsSimStats* stats, char* error, uint64_t errorLength, int64_t* errorBlock) {
    for (const auto& kernel : kCubeKernels) {
        if (std::strcmp(kernel.name, name) != 0) continue;
        g_args = CubeArgs{geometry[0], geometry[1], geometry[2], geometry[3], geometry[4], geometry[5]};
        g_break = kernel.which;
        std::vector<float> ring(uint64_t(kCout) * PositionsAligned());
        std::memset(ring.data(), 0xFF, ring.size() * 4);
        g_x = reinterpret_cast<GM_ADDR>(x);
        g_w = reinterpret_cast<GM_ADDR>(w);
        g_ring = reinterpret_cast<GM_ADDR>(ring.data());
        g_out = reinterpret_cast<GM_ADDR>(out);
        const uint64_t xBytes = uint64_t(g_args.height) * g_args.width * kC0 * 4,
                       wBytes = uint64_t(kCout) * ReductionK() * 4;
        auto result = ascendc_sim::LaunchMix(name, ascendc_sim::kPlatforms[0], 1, 0,
                                             {{x, xBytes, false},
                                              {w, wBytes, false},
                                              {ring.data(), ring.size() * 4, false},
                                              {out, uint64_t(kCout) * Positions() * 4, true}},
                                             Entry);
        return ascend_acts_sim::Report(result, stats, error, errorLength, errorBlock);
    }
    return ACTS_SIM_BAD_ARGUMENT;
}
