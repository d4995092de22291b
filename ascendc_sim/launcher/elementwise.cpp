// Host side of the elementwise kernels on the emulator: tiling, launch, counters.
#include "../../op_host/elementwise/elementwise_tiling.h"
#include "abi.h"

extern "C" {
void acts_leaky_relu(GM_ADDR x, GM_ADDR y, GM_ADDR workspace, GM_ADDR tiling);
void acts_leaky_relu_grad(GM_ADDR dy, GM_ADDR saved, GM_ADDR dx, GM_ADDR workspace, GM_ADDR tiling);
void acts_r_relu(GM_ADDR x, GM_ADDR seed, GM_ADDR y, GM_ADDR workspace, GM_ADDR tiling);
void acts_r_relu_grad(GM_ADDR dy, GM_ADDR saved, GM_ADDR seed, GM_ADDR dx, GM_ADDR workspace, GM_ADDR tiling);
}

using ascend_acts::ElementwiseOp;
using ascend_acts::ElementwiseTiling;

extern "C" int acts_sim_elementwise_tiling(uint32_t op, uint64_t totalLength, uint32_t elementSize, uint32_t platform,
                                           uint32_t vectorCores, ElementwiseTiling* tiling) {
    if (op > 3 || platform >= ascendc_sim::kPlatformCount) return ACTS_SIM_BAD_ARGUMENT;
    const auto& p = ascendc_sim::kPlatforms[platform];
    bool ok = ascend_acts::ComputeElementwiseTiling(static_cast<ElementwiseOp>(op), totalLength, elementSize,
                                                    vectorCores == 0 ? p.vectorCores : vectorCores, p.ubBytes, *tiling);
    return ok ? ACTS_SIM_OK : ACTS_SIM_BAD_ARGUMENT;
}

// Runs one elementwise op. dtype: 0 float32, 1 float16, 2 bfloat16. vectorCores: 0 = the platform's;
// otherwise tile for that many cores (tests). `in1` is the saved tensor of the gradients, `seed` RReLU's.
extern "C" int acts_sim_elementwise(uint32_t op, uint32_t dtype, uint32_t platform, uint32_t vectorCores,
                                    uint64_t totalLength, void* in0, void* in1, int64_t* seed, void* out,
                                    float slope, float lower, float span, uint64_t indexBase, ActsSimStats* stats,
                                    char* error, uint64_t errorLength, int64_t* errorBlock) {
    // msopgen 8.1's names for our op types (op_gen/interface/utils.py fix_name_lower_with_under: ActsRRelu ->
    // acts_r_relu), which the kernel entries must carry
    static const char* const kNames[] = {"acts_leaky_relu", "acts_leaky_relu_grad", "acts_r_relu", "acts_r_relu_grad"};
    if (dtype > 2) return ACTS_SIM_BAD_ARGUMENT;
    uint32_t elementSize = dtype == 0 ? 4 : 2;
    ElementwiseTiling tiling;
    int status = acts_sim_elementwise_tiling(op, totalLength, elementSize, platform, vectorCores, &tiling);
    if (status != ACTS_SIM_OK) return status;
    tiling.slope = slope;
    tiling.lower = lower;
    tiling.span = span;
    tiling.indexBase = indexBase;
    if (stats != nullptr) *stats = ActsSimStats{};
    if (tiling.blockDim == 0) return ACTS_SIM_OK;  // nothing to launch

    uint64_t bytes = totalLength * elementSize;
    auto* x = static_cast<uint8_t*>(in0);
    auto* saved = static_cast<uint8_t*>(in1);
    auto* y = static_cast<uint8_t*>(out);
    auto* s = reinterpret_cast<uint8_t*>(seed);
    auto* t = reinterpret_cast<uint8_t*>(&tiling);
    std::vector<ascendc_sim::LaunchBuffer> buffers = {{x, bytes, false}, {y, bytes, true}, {t, sizeof(tiling), false}};
    if (op == 1 || op == 3) buffers.push_back({saved, bytes, false});
    if (op >= 2) buffers.push_back({s, sizeof(int64_t), false});

    auto runBlock = [&] {
        switch (static_cast<ElementwiseOp>(op)) {
            case ElementwiseOp::LeakyRelu: acts_leaky_relu(x, y, nullptr, t); break;
            case ElementwiseOp::LeakyReluGrad: acts_leaky_relu_grad(x, saved, y, nullptr, t); break;
            case ElementwiseOp::RRelu: acts_r_relu(x, s, y, nullptr, t); break;
            case ElementwiseOp::RReluGrad: acts_r_relu_grad(x, saved, s, y, nullptr, t); break;
        }
    };
    // The RNG's hash multiplies and adds on int32 and keeps the low 32 bits (docs/rng.md): it relies on
    // the wraparound 910B does not document, a hardware check (docs/emulator.md, "integer_overflow").
    bool rng = op == uint32_t(ElementwiseOp::RRelu) || op == uint32_t(ElementwiseOp::RReluGrad);
    auto result = ascendc_sim::Launch(kNames[op], ascendc_sim::kPlatforms[platform], tiling.blockDim, dtype, buffers,
                                      runBlock, /*wrapsIntegers=*/rng);
    int reported = ascend_acts_sim::Report(result, stats, error, errorLength, errorBlock);
    if (stats != nullptr) stats->tileLength = tiling.tileLength;
    return reported;
}
