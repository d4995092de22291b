// What the RReLU kernels share: the seed from GM, the 2^31 tile split, and the noise of a tile.
#pragma once

#include "elementwise_pipeline.h"
#include "rrelu_rng.h"

namespace ascend_acts {

struct RreluNoise {
    rng::Keys keys;
    float lower, span;

    __aicore__ inline static RreluNoise FromSeed(GM_ADDR seed, const ElementwiseTiling& tiling) {
        AscendC::GlobalTensor<int64_t> seedGm;
        seedGm.SetGlobalBuffer(reinterpret_cast<__gm__ int64_t*>(seed), 1);
        return RreluNoise{rng::RoundKeys(static_cast<uint64_t>(seedGm.GetValue(0))), tiling.lower, tiling.span};
    }

    // A tile stops at the next multiple of 2^31: the high index word is one scalar per tile, and the
    // low words of a tile are all below 2^31 or all above (rng::Noise adds them without overflow).
    __aicore__ inline uint32_t TileLength(uint64_t firstIndex, uint32_t count) const {
        uint64_t toBoundary = rng::kIndexSplit - (firstIndex & (rng::kIndexSplit - 1));
        return toBoundary < count ? static_cast<uint32_t>(toBoundary) : count;
    }

    // work[0] = noise of the tile; work[1..3] = hash registers.
    __aicore__ inline void Fill(const TileVectors& v, uint64_t firstIndex, uint32_t lanes) const {
        rng::HashBuffers hash{v.work[1].ReinterpretCast<uint32_t>(), v.work[2].ReinterpretCast<uint32_t>(),
                              v.work[3].ReinterpretCast<uint32_t>()};
        rng::Noise(v.work[0], hash, keys, firstIndex, lanes, lower, span);
    }
};

}  // namespace ascend_acts
