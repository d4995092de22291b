// Invariants of the fused Conv+BN+LeakyReLU tilings (training BN split and the eval kernel's cube tiling), over a
// grid of shapes and both 910B platforms. Prints each violation; exit status = number of violations.
#include <cstdio>
#include <string>
#include <vector>

#include "../../op_host/batch_norm_leaky_relu/batch_norm_leaky_relu_tiling.h"
#include "../../op_host/conv_bn_leaky_relu_eval/conv_bn_leaky_relu_eval_tiling.h"

using namespace ascend_acts;

static int failures = 0;
#define CHECK(cond, ...)                     \
    do {                                     \
        if (!(cond)) {                       \
            ++failures;                      \
            std::printf("FAIL %s: ", #cond); \
            std::printf(__VA_ARGS__);        \
            std::printf("\n");               \
        }                                    \
    } while (0)

struct Platform {
    const char* name;
    uint32_t vectorCores;
    uint64_t ub;
};

static void CheckBatchNorm(BatchNormPass pass, uint32_t n, uint32_t c, uint64_t plane, uint32_t size, const Platform& p,
                           bool relu, uint32_t normGroups = 0) {
    BatchNormLeakyReluTiling t{};
    BatchNormOptions options;
    options.negativeSlope = 0.2f;
    options.eps = 1e-5f;
    options.momentum = 0.1f;
    options.updateRunningStats = true;
    options.relu = relu;
    options.normGroups = normGroups;
    bool ok = ComputeBatchNormLeakyReluTiling(pass, n, c, plane, size, options, p.vectorCores, p.ub, t);
    CHECK(ok, "%s N=%u C=%u G=%u plane=%llu size=%u: no tiling", p.name, n, c, normGroups, (unsigned long long)plane,
          size);
    if (!ok) return;
    using namespace batch_norm_tiling;
    // cores and group coverage (BatchNorm: channels): contiguous, disjoint, complete, no idle core
    const uint32_t groups = normGroups ? normGroups : c;
    const uint32_t perGroup = c / groups;
    CHECK(t.usedCoreNum >= 1 && t.usedCoreNum <= p.vectorCores && t.usedCoreNum <= groups, "cores %u", t.usedCoreNum);
    CHECK(t.normGroups == normGroups && t.channelsPerGroup == perGroup, "groups %u x %u", t.normGroups,
          t.channelsPerGroup);
    uint32_t next = 0, most = 0;
    for (uint32_t b = 0; b < t.usedCoreNum; ++b) {
        uint32_t first, count;
        BatchNormGroupRange(t, b, first, count);
        CHECK(first == next && count >= 1, "core %u: first %u count %u (expected first %u)", b, first, count, next);
        next = first + count;
        most = count > most ? count : most;
    }
    CHECK(next == groups, "groups covered %u of %u", next, groups);
    // capacities and alignment: an array holds a core's channels (and its groups, fewer)
    CHECK(t.statsLength >= most * perGroup && t.statsLength % kFloatsPerBlock == 0, "statsLength %u for %u",
          t.statsLength, most * perGroup);
    CHECK(t.tileLength % kFloatRepeat == 0 && (uint64_t(t.tileLength) * size) % 32 == 0, "tile %u", t.tileLength);
    // Select (the backward's, the forward's ReLU) writes a temporary in the top 8 KiB of UB (AscendC's TMP_UB_OFFSET)
    const uint64_t ub = pass == BatchNormPass::Backward || relu ? p.ub - 8 * 1024 : p.ub;
    CHECK(t.relu == (relu ? 1u : 0u), "relu %u", t.relu);
    // row mode: BatchNorm of short planes that do not fill whole 32-byte blocks, when one channel's rows fit
    const bool rowRule = normGroups == 0 && plane * size < kRowModePlaneBytes && plane * size % 32 != 0;
    CHECK(!t.rowMode || rowRule, "row mode outside its rule: plane %llu", (unsigned long long)plane);
    if (t.rowMode) {
        const uint32_t samples = t.rowSamples;
        // samples from the shape alone: the sums' order does not depend on the platform or the core count
        CHECK(samples == RowSamplesFor(n, plane) && samples >= 1 && samples <= n, "rowSamples %u", samples);
        CHECK(t.rowChannels >= 1 && t.rowChannels <= most, "rowChannels %u of %u", t.rowChannels, most);
        const uint64_t row = RoundUp(uint64_t(t.rowChannels) * plane, kRowAlign);
        CHECK(t.tileLength == t.rowLanes && t.rowLanes % kFloatRepeat == 0 && samples * row <= t.rowLanes,
              "row lanes %u for %u rows of %llu", t.rowLanes, samples, (unsigned long long)row);
        CHECK(RowUbBytes(pass, size, t.rowLanes, t.statsLength) <= ub, "row UB %llu > %llu",
              (unsigned long long)RowUbBytes(pass, size, t.rowLanes, t.statsLength), (unsigned long long)ub);
        // as many channels per chunk as the lanes hold (or all of a core's)
        const uint64_t wider = RoundUp(uint64_t(t.rowChannels + 1) * plane, kRowAlign);
        CHECK(t.rowChannels == most || samples * wider > t.rowLanes, "rowChannels %u not maximal", t.rowChannels);
        CHECK(t.inverseCount > 0 && t.unbiasFactor >= 1.0f && t.inverseBatch > 0, "count factors");
        return;
    }
    // outside the row mode by the rule, or the statistics leave one channel's rows no room
    CHECK(!rowRule || RowUbBytes(pass, size,
                                 static_cast<uint32_t>(
                                     RoundUp(RowSamplesFor(n, plane) * RoundUp(plane, kRowAlign), kFloatRepeat)),
                                 t.statsLength) > ub,
          "plane walk where the row mode fits: plane %llu", (unsigned long long)plane);
    CHECK(UbBytes(pass, size, t.tileLength, t.statsLength) <= ub, "UB %llu > %llu",
          (unsigned long long)UbBytes(pass, size, t.tileLength, t.statsLength), (unsigned long long)ub);
    CHECK(t.reduceWorkLength >= (t.tileLength + kFloatRepeat - 1) / kFloatRepeat && t.reduceWorkLength % 8 == 0,
          "reduce work %u", t.reduceWorkLength);
    // largest tile: one repeat more would not fit, or no need for it
    // (a unit's whole planes per tile when a plane fills whole 32-byte blocks, else at most one plane)
    const uint64_t wanted = plane * size % 32 == 0 ? plane * (normGroups ? perGroup : t.batch) : plane;
    bool capped = t.tileLength >= RoundUp(wanted, kFloatRepeat) || t.tileLength == kMaxTileLength;
    CHECK(capped || UbBytes(pass, size, t.tileLength + kFloatRepeat, t.statsLength) > ub, "tile %u not maximal",
          t.tileLength);
    CHECK(t.inverseCount > 0 && t.unbiasFactor >= 1.0f && t.inverseBatch > 0, "count factors");
}

static void CheckEval(const ConvGeometry& g, uint32_t size, const CubePlatform& p, const char* name) {
    ConvBnLeakyReluEvalTiling t{};
    bool ok = ComputeConvBnLeakyReluEvalTiling(g, size, 0.2f, p, t);
    CHECK(ok, "%s Cin=%u Cout=%u %ux%u k%ux%u: no tiling", name, g.inChannels, g.outChannels, g.height, g.width,
          g.kernelH, g.kernelW);
    if (!ok) return;
    using namespace conv_eval_tiling;
    // fractal alignment and the field widths of LoadData 2D / 3Dv2, Mmad, Fixpipe
    CHECK(t.c0 * size == 32 && t.blockRows % 16 == 0 && t.blockRows <= 128, "%s Mb %u", name, t.blockRows);
    CHECK(t.kChunk % t.c0 == 0 && t.kChunk / t.c0 <= 255 && t.kChunk <= 4095, "kc %u", t.kChunk);
    CHECK(t.weightSliceK % t.kChunk == 0 && (t.weightStreamed == 1 || t.weightSlices <= kMaxWeightSlices) &&
              uint64_t(t.weightSlices) * t.weightSliceK >= uint64_t(t.kFractals) * t.c0 &&
              uint64_t(t.weightSlices - 1) * t.weightSliceK < uint64_t(t.kFractals) * t.c0,
          "slices %u x %u", t.weightSlices, t.weightSliceK);
    CHECK(t.tilePositions % 16 == 0 && t.tilePositions <= 4095 && t.tilePositions >= t.tileRows * g.outWidth &&
              t.tilePositions < t.tileRows * g.outWidth + 16,
          "Npad %u", t.tilePositions);
    CHECK(t.weightStreamed <= 1 && WeightBuffers(t) == (t.weightStreamed ? kStreamBuffers : t.weightSlices),
          "weight buffers");
    // capacities: L0A / L0B double-buffered, L0C, L1 (W' slice buffers + two bands), UB (prologue + epilogue)
    CHECK(2ull * t.itemPositions * t.kChunk * size <= p.l0aBytes, "L0A");
    CHECK(2ull * t.kChunk * t.blockRows * size <= p.l0bBytes, "L0B");
    CHECK(t.kChunk / t.c0 * (t.blockRows / 16) <= 255, "LoadData 2D repeat");
    CHECK(uint64_t(t.l0cBuffers) * t.blockRows * t.itemPositions * 4 <= p.l0cBytes && t.l0cBuffers >= 1, "L0C");
    CHECK(L1Bytes(t, size) <= p.l1Bytes, "L1 %llu", (unsigned long long)L1Bytes(t, size));
    CHECK(PrologueUbBytes(t.prologueRows, t.prologueGroups, g.width, t.c0, size) +
                  EpilogueUbBytes(t.epilogueRows, t.tilePositions, t.blockRows, size) <=
              p.ubBytes,
          "UB");
    CHECK(t.imagesPerItem >= 1 && t.imagesPerItem <= g.batch && (t.imagesPerItem == 1 || t.tilesPerImage == 1) &&
              t.itemPositions == t.imagesPerItem * t.tilePositions && t.itemPositions <= 4095 &&
              t.workItems == t.coutBlocks * ((g.batch + t.imagesPerItem - 1) / t.imagesPerItem) * t.tilesPerImage,
          "images per item %u", t.imagesPerItem);
    CHECK(t.prologueGroups >= 1 && t.prologueGroups <= (t.channelGroups + 1) / 2 && t.prologueGroups * t.c0 <= 4095,
          "prologue groups %u", t.prologueGroups);
    CHECK(t.prologueRows >= 1 && t.prologueRows <= t.bandRows && t.epilogueRows >= 1 &&
              t.epilogueRows <= RoundUp((t.blockRows + 1) / 2, 8),
          "passes %u %u", t.prologueRows, t.epilogueRows);
    CHECK(uint64_t(t.inputSlotBytes) >=
                  uint64_t(t.imagesPerItem) * t.channelGroups * t.c0 * t.bandRows * g.width * size &&
              t.inputSlotBytes % 512 == 0 && t.outputSlotBytes == t.blockRows * t.itemPositions * 4,
          "slots");
    CHECK(WorkspaceBytes(t) == uint64_t(t.blockDim) * kRingSlots * (t.inputSlotBytes + t.outputSlotBytes), "workspace");
    // work coverage: blocks x images x tiles, every AI core a contiguous, balanced, non-empty range
    CHECK(t.coutBlocks * t.blockRows >= g.outChannels && (t.coutBlocks - 1) * t.blockRows < g.outChannels, "blocks");
    CHECK(t.tilesPerImage * t.tileRows >= g.outHeight && (t.tilesPerImage - 1) * t.tileRows < g.outHeight, "tiles");
    CHECK(t.blockDim >= 1 && t.blockDim <= p.cubeCoreNum && t.blockDim <= t.workItems, "blockDim %u", t.blockDim);
    uint32_t next = 0;
    for (uint32_t core = 0; core < t.blockDim; ++core) {
        uint32_t first, count;
        ItemRange(t, core, first, count);
        CHECK(first == next && count >= t.workItems / t.blockDim && count <= t.workItems / t.blockDim + 1,
              "core %u range %u+%u", core, first, count);
        next = first + count;
    }
    CHECK(next == t.workItems, "items covered %u of %u", next, t.workItems);
    // every tile reads at least one input row, at most bandRows, and LoadData 3Dv2 gives it exactly its rows
    const uint64_t effH = uint64_t(g.kernelH - 1) * g.dilationH + 1;
    for (uint32_t tile = 0; tile < t.tilesPerImage; ++tile) {
        ConvTile c = TileOf(t, tile);
        CHECK(c.inRows >= 1 && c.inRows <= t.bandRows && c.firstInRow + c.inRows <= g.height, "band");
        CHECK((c.padTop + c.inRows + c.padBottom - effH) / g.strideH + 1 == c.outRows && c.padTop <= 255 &&
                  c.padBottom <= 255,
              "tile %u rows", tile);
    }
}

static ConvGeometry Geometry(uint32_t n, uint32_t cin, uint32_t h, uint32_t w, uint32_t cout, uint32_t k,
                             uint32_t stride, uint32_t pad, uint32_t dilation) {
    ConvGeometry g{n, cin, h, w, cout, k, k, stride, stride, pad, pad, dilation, dilation, 0, 0};
    g.outHeight = (h + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
    g.outWidth = (w + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
    return g;
}

// argv: one platform per argument, "name:cubeCores:vectorCores:ub:l1:l0a:l0b:l0c" (the emulator's platform table,
// ascend_acts._sim.platforms(), passed by tests/test_conv_bn_tiling.py: there is no second table here).
int main(int argc, char** argv) {
    std::vector<std::string> names;
    std::vector<CubePlatform> cubes;
    std::vector<Platform> bnPlatforms;
    for (int i = 1; i < argc; ++i) {
        char name[64];
        unsigned long long v[7];
        if (std::sscanf(argv[i], "%63[^:]:%llu:%llu:%llu:%llu:%llu:%llu:%llu", name, &v[0], &v[1], &v[2], &v[3], &v[4],
                        &v[5], &v[6]) != 8) {
            std::printf("bad platform argument %s\n", argv[i]);
            return 2;
        }
        names.emplace_back(name);
        cubes.push_back({uint32_t(v[0]), uint32_t(v[1]), v[2], v[3], v[4], v[5], v[6]});
    }
    if (names.empty()) {
        std::printf("no platform given\n");
        return 2;
    }
    for (size_t i = 0; i < names.size(); ++i)
        bnPlatforms.push_back({names[i].c_str(), cubes[i].vectorCoreNum, uint32_t(cubes[i].ubBytes)});
    // GetCoreMemSize(UB) as CANN's host reports it on 910B: 196352 bytes
    bnPlatforms.push_back({"host-reported UB", cubes[0].vectorCoreNum, 196352});
    const uint32_t channels[] = {1, 3, 7, 40, 47, 48, 49, 97, 512, 1000, 4096, 4099};
    const uint64_t planes[] = {1, 3, 7, 64, 65, 100, 255, 1000, 4096, 16385, 1ull << 33};
    for (const Platform& p : bnPlatforms)
        for (BatchNormPass pass : {BatchNormPass::Forward, BatchNormPass::Backward})
            for (uint32_t c : channels)
                for (uint64_t plane : planes)
                    for (uint32_t size : {2u, 4u})
                        for (bool relu : {false, true}) CheckBatchNorm(pass, 3, c, plane, size, p, relu);
    // the row mode's samples per tile: all of a small batch, at most kRowSamples
    for (const Platform& p : bnPlatforms)
        for (BatchNormPass pass : {BatchNormPass::Forward, BatchNormPass::Backward})
            for (uint32_t n : {1u, 2u, 64u, 130u})
                for (uint32_t c : {1u, 17u, 1024u, 4099u})
                    for (uint64_t plane : {uint64_t(1), uint64_t(5), uint64_t(200)})
                        for (uint32_t size : {2u, 4u})
                            CheckBatchNorm(pass, n, c, plane, size, p, pass == BatchNormPass::Forward);

    // grouped statistics: instance norm (G = C), GroupNorm with fewer and more groups than cores, one group
    const uint32_t groupedChannels[] = {1, 7, 96, 512};
    for (const Platform& p : bnPlatforms)
        for (BatchNormPass pass : {BatchNormPass::Forward, BatchNormPass::Backward})
            for (uint32_t c : groupedChannels)
                for (uint32_t g : {1u, c / 2 ? c / 2 : 1u, c})
                    for (uint64_t plane : {uint64_t(7), uint64_t(64), uint64_t(16385)})
                        for (uint32_t size : {2u, 4u}) CheckBatchNorm(pass, 3, c, plane, size, p, false, g);

    // refusals: empty shapes; statistics of one core's channels larger than UB
    BatchNormLeakyReluTiling bn{};
    BatchNormOptions options;
    CHECK(!ComputeBatchNormLeakyReluTiling(BatchNormPass::Forward, 0, 4, 16, 4, options, 48, 192 * 1024, bn), "N=0");
    CHECK(!ComputeBatchNormLeakyReluTiling(BatchNormPass::Forward, 2, 4, 0, 4, options, 48, 192 * 1024, bn), "HW=0");
    CHECK(!ComputeBatchNormLeakyReluTiling(BatchNormPass::Forward, 2, 1u << 20, 4, 4, options, 1, 192 * 1024, bn),
          "stats");
    options.normGroups = 1;  // one group of 2**20 channels: its gamma and beta do not fit
    CHECK(!ComputeBatchNormLeakyReluTiling(BatchNormPass::Forward, 2, 1u << 20, 4, 4, options, 48, 192 * 1024, bn),
          "grouped stats");

    const std::vector<ConvGeometry> geometries = {
        Geometry(1, 1, 1, 1, 1, 1, 1, 0, 1),       Geometry(2, 3, 8, 8, 16, 3, 1, 1, 1),
        Geometry(2, 3, 9, 7, 5, 3, 2, 1, 1),       Geometry(1, 64, 32, 32, 128, 4, 2, 1, 1),
        Geometry(4, 128, 16, 16, 256, 4, 2, 1, 1), Geometry(1, 256, 8, 8, 512, 3, 1, 2, 2),
        Geometry(1, 3, 224, 224, 64, 7, 2, 3, 1),  Geometry(2, 16, 5, 500, 33, 3, 1, 1, 1),
        Geometry(1, 512, 4, 4, 1024, 1, 1, 0, 1),  Geometry(1, 8, 512, 512, 8, 5, 1, 2, 1),
    };
    for (const ConvGeometry& g : geometries)
        for (uint32_t size : {2u, 4u}) {
            for (size_t i = 0; i < names.size(); ++i) CheckEval(g, size, cubes[i], names[i].c_str());
        }
    ConvBnLeakyReluEvalTiling eval{};
    CHECK(!ComputeConvBnLeakyReluEvalTiling(Geometry(0, 3, 8, 8, 4, 3, 1, 1, 1), 4, 0.2f, cubes[0], eval), "N=0 eval");
    // padding a whole filter height (a tile would read no input row); a stride past LoadData 3Dv2's 63
    CHECK(!ComputeConvBnLeakyReluEvalTiling(Geometry(1, 3, 8, 8, 4, 3, 1, 3, 1), 4, 0.2f, cubes[0], eval), "pad");
    CHECK(!ComputeConvBnLeakyReluEvalTiling(Geometry(1, 3, 200, 200, 4, 3, 64, 0, 1), 4, 0.2f, cubes[0], eval),
          "stride 64");
    // tiles are whole output rows: a row wider than a double-buffered L0B fractal column (16-bit: 1008 positions
    // need 2 * 16 * 1008 * 2 > 64 KiB) is refused, not split
    CHECK(!ComputeConvBnLeakyReluEvalTiling(Geometry(1, 8, 64, 1000, 8, 3, 1, 1, 1), 2, 0.2f, cubes[0], eval),
          "wide rows");
    std::printf("%d failures\n", failures);
    return failures;
}
