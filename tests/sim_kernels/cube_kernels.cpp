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
#include "kernel_table.h"

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
    OverwriteBeforeRelease,
    LoadPastL0,
    CopyPastL1,
    MmadZeroM,
    MmadWinograd,
    FlagIdPast15
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
    // the weights fill weightL1 exactly; the gap after the (only) block is not written, so it need not fit
    const uint16_t weightBlocks = uint16_t(kCout * k * 4 / 32 + (g_break == Break::CopyPastL1 ? 1 : 0));
    DataCopy(weights, w, DataCopyParams{1, weightBlocks, 0, 4});
    LocalTensor<float> a = weightL0.Get<float>();
    if (g_break == Break::UnalignedL0) a = a[8];  // 32 bytes in: L0 operands must start on 512 bytes
    const uint32_t fractals = kCout * k * 4 / 512 + (g_break == Break::LoadPastL0 ? 1 : 0);  // one past L0A
    LoadData(a, weights, LoadData2DParams{0, uint8_t(fractals), 1, 0, 0, false, 0});
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
    const uint16_t m = g_break == Break::MmadZeroM ? 0 : kCout;
    const bool winograd = g_break == Break::MmadWinograd;  // not modelled
    Mmad(c, weightL0.Get<float>(), columnsL0.Get<float>(),
         MmadParams(m, uint16_t(n), uint16_t(k), false, 0, false, winograd, false));
    FixpipeParamsV220 out(uint16_t(n), uint16_t(kCout), 16, n, false);
    if (g_break == Break::FixpipeQuant) out.quantPre = QuantMode_t::F322F16;
    Fixpipe(ring, c, out);
    if (g_break == Break::NoFlag) return;
    if (g_break == Break::Deadlock) CrossCoreWaitFlag<2, PIPE_FIX>(3);  // nobody sets 3
    CrossCoreSetFlag<2, PIPE_FIX>(g_break == Break::FlagIdPast15 ? 16 : 1);
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

// The MIX test kernels' GM: x, w (read), y (written); the ring is the launch's workspace; the tiling holds
// the geometry (6 uint32: height, width, kernel, stride, pad, dilation).
void ReadGeometry(GM_ADDR tiling) {
    uint32_t g[6];
    std::memcpy(g, tiling, sizeof(g));
    g_args = CubeArgs{g[0], g[1], g[2], g[3], g[4], g[5]};
}

template <Break Which>
void Run(GM_ADDR const* gm, GM_ADDR workspace, GM_ADDR tiling) {
    ReadGeometry(tiling);
    g_break = Which;
    g_x = gm[0];
    g_w = gm[1];
    g_out = gm[2];
    g_ring = workspace;
    Entry();
}

uint64_t RingBytes(const uint8_t* tiling, uint64_t tilingBytes) {
    if (tilingBytes < 6 * sizeof(uint32_t)) return 0;
    ReadGeometry(const_cast<GM_ADDR>(tiling));
    return uint64_t(kCout) * PositionsAligned() * 4;
}

}  // namespace

namespace ascend_acts_sim {

// x: [H][W][8] float; w: 16 x (8 k k) in ZZ; y: 16 x positions float (2 * the convolution). One AI core.
std::vector<KernelEntry> CubeKernels() {
    const std::vector<Param> params = {{"x", Direction::In}, {"w", Direction::In}, {"y", Direction::Out}};
    auto row = [&](const char* name, Runner run) {
        return KernelEntry{name, name, TilingKind::Raw, 0, false, /*mix=*/true, params, run, RingBytes};
    };
    return {
        row("cube_correct", Run<Break::None>),
        row("cube_missing_flag", Run<Break::NoFlag>),
        row("cube_wrong_position", Run<Break::WrongL0Position>),
        row("cube_unaligned_l0", Run<Break::UnalignedL0>),
        row("cube_l1_overflow", Run<Break::L1Overflow>),
        row("cube_bad_channel_size", Run<Break::BadChannelSize>),
        row("cube_fixpipe_quant", Run<Break::FixpipeQuant>),
        row("cube_api_on_vector", Run<Break::CubeOnVector>),
        row("cube_deadlock", Run<Break::Deadlock>),
        row("cube_l0c_overflow", Run<Break::L0cOverflow>),
        row("cube_overwrite_before_release", Run<Break::OverwriteBeforeRelease>),
        row("cube_load_past_l0", Run<Break::LoadPastL0>),
        row("cube_copy_past_l1", Run<Break::CopyPastL1>),
        row("cube_mmad_zero_m", Run<Break::MmadZeroM>),
        row("cube_mmad_winograd", Run<Break::MmadWinograd>),
        row("cube_flag_id_past_15", Run<Break::FlagIdPast15>),
    };
}

}  // namespace ascend_acts_sim
