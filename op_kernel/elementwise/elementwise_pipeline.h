// The one pipeline behind every elementwise kernel: per core, tiles go CopyIn -> Compute -> CopyOut
// through double-buffered queues. Half types are cast to float for Compute and rounded back to nearest
// even, so every dtype computes like the float32 reference. The activation is a template parameter
// (inplace_abn style): it only says which buffers it needs and what it computes on float vectors.
#pragma once

#include "kernel_operator.h"
#include "../common/read_tiling.h"
#include "elementwise_tiling_data.h"

namespace ascend_acts {

// Float views of one tile, handed to the activation.
struct TileVectors {
    AscendC::LocalTensor<float> in[2];
    AscendC::LocalTensor<float> out;
    AscendC::LocalTensor<float> work[4];
    AscendC::LocalTensor<uint8_t> mask;
};

constexpr uint32_t kVectorLanes = 64;  // float lanes of a 256-byte repeat: Compute runs on whole repeats

template <typename T, typename Activation>
class ElementwisePipeline {
public:
    static constexpr ElementwiseBuffers kBuffers = BuffersOf(Activation::kOp);
    static constexpr bool kCast = !AscendC::IsSameType<T, float>::value;

    __aicore__ inline void Init(GM_ADDR const* inputs, GM_ADDR output, const ElementwiseTiling& tiling) {
        CoreRange(tiling, AscendC::GetBlockIdx(), first_, length_);
        tile_ = tiling.tileLength;
        for (uint32_t i = 0; i < kBuffers.inputs; ++i) {
            inGm_[i].SetGlobalBuffer(reinterpret_cast<__gm__ T*>(inputs[i]) + first_, length_);
            pipe_.InitBuffer(inQueue_[i], kQueueBuffers, tile_ * sizeof(T));
        }
        outGm_.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(output) + first_, length_);
        pipe_.InitBuffer(outQueue_, kQueueBuffers, tile_ * sizeof(T));
        if (kCast) pipe_.InitBuffer(castBuffer_, (kBuffers.inputs + 1) * tile_ * sizeof(float));
        uint32_t workBytes = kBuffers.workFloats * tile_ * sizeof(float) + (kBuffers.mask ? tile_ / 8 : 0);
        if (workBytes > 0) pipe_.InitBuffer(workBuffer_, workBytes);
    }

    // `firstIndex` is the flat index of this core's first element (for index-keyed activations).
    __aicore__ inline void Process(const Activation& activation, uint64_t indexBase) {
        for (uint64_t done = 0; done < length_;) {
            uint64_t left = length_ - done;
            uint32_t count = activation.TileLength(indexBase + first_ + done, left < tile_ ? uint32_t(left) : tile_);
            CopyIn(done, count);
            Compute(activation, indexBase + first_ + done, count);
            CopyOut(done, count);
            done += count;
        }
    }

private:
    static __aicore__ inline AscendC::DataCopyExtParams Bytes(uint32_t count) {
        return AscendC::DataCopyExtParams{1, static_cast<uint32_t>(count * sizeof(T)), 0, 0, 0};
    }
    static __aicore__ inline bool WholeBlocks(uint32_t count) { return count * sizeof(T) % kGmBlockBytes == 0; }

    __aicore__ inline void CopyIn(uint64_t offset, uint32_t count) {
        for (uint32_t i = 0; i < kBuffers.inputs; ++i) {
            AscendC::LocalTensor<T> local = inQueue_[i].template AllocTensor<T>();
            if (WholeBlocks(count)) {
                AscendC::DataCopy(local, inGm_[i][offset], count);
            } else {  // the tail: exact bytes from GM
                AscendC::DataCopyPad(local, inGm_[i][offset], Bytes(count),
                                     AscendC::DataCopyPadExtParams<T>{false, 0, 0, T()});
            }
            inQueue_[i].EnQue(local);
        }
    }

    __aicore__ inline void Compute(const Activation& activation, uint64_t firstIndex, uint32_t count) {
        uint32_t lanes = (count + kVectorLanes - 1) / kVectorLanes * kVectorLanes;
        AscendC::LocalTensor<T> inputs[2];
        TileVectors v;
        for (uint32_t i = 0; i < kBuffers.inputs; ++i) {
            inputs[i] = inQueue_[i].template DeQue<T>();
            v.in[i] = AsFloat(inputs[i], i, lanes);
        }
        AscendC::LocalTensor<T> out = outQueue_.template AllocTensor<T>();
        if constexpr (kCast) {
            v.out = castBuffer_.template Get<float>()[kBuffers.inputs * tile_];
        } else {
            v.out = out;
        }
        for (uint32_t w = 0; w < kBuffers.workFloats; ++w) v.work[w] = workBuffer_.template Get<float>()[w * tile_];
        if (kBuffers.mask) {
            v.mask = workBuffer_.template Get<uint8_t>()[kBuffers.workFloats * tile_ * sizeof(float)];
        }
        activation.Compute(v, firstIndex, lanes);
        if constexpr (kCast) AscendC::Cast(out, v.out, AscendC::RoundMode::CAST_RINT, lanes);
        for (uint32_t i = 0; i < kBuffers.inputs; ++i) inQueue_[i].FreeTensor(inputs[i]);
        outQueue_.EnQue(out);
    }

    __aicore__ inline AscendC::LocalTensor<float> AsFloat(const AscendC::LocalTensor<T>& local, uint32_t slot,
                                                          uint32_t lanes) {
        if constexpr (kCast) {
            AscendC::LocalTensor<float> converted = castBuffer_.template Get<float>()[slot * tile_];
            AscendC::Cast(converted, local, AscendC::RoundMode::CAST_NONE, lanes);
            return converted;
        } else {
            return local;
        }
    }

    __aicore__ inline void CopyOut(uint64_t offset, uint32_t count) {
        AscendC::LocalTensor<T> local = outQueue_.template DeQue<T>();
        if (WholeBlocks(count)) {
            AscendC::DataCopy(outGm_[offset], local, count);
        } else {
            AscendC::DataCopyPad(outGm_[offset], local, Bytes(count));
        }
        outQueue_.FreeTensor(local);
    }

    AscendC::TPipe pipe_;
    AscendC::TQue<AscendC::QuePosition::VECIN, kQueueBuffers> inQueue_[2];
    AscendC::TQue<AscendC::QuePosition::VECOUT, kQueueBuffers> outQueue_;
    AscendC::TBuf<AscendC::QuePosition::VECCALC> castBuffer_, workBuffer_;
    AscendC::GlobalTensor<T> inGm_[2], outGm_;
    uint64_t first_ = 0, length_ = 0;
    uint32_t tile_ = 0;
};

template <typename T, typename Activation>
__aicore__ inline void RunPipeline(GM_ADDR const* inputs, GM_ADDR output, const ElementwiseTiling& tiling,
                                   const Activation& activation) {
    ElementwisePipeline<T, Activation> pipeline;
    pipeline.Init(inputs, output, tiling);
    pipeline.Process(activation, tiling.indexBase);
}

static_assert(static_cast<uint32_t>(DtypeKey::Float32) == 0 && static_cast<uint32_t>(DtypeKey::Float16) == 1 &&
                  static_cast<uint32_t>(DtypeKey::BFloat16) == 2,
              "RunElementwise tests the keys as literals");

// Runs `activation` over the tensors of a launch, in the dtype the tiling key (DtypeKey) names.
// TILING_KEY_IS takes literals: CANN collects the keys from the preprocessed kernel with a regex.
template <typename Activation>
__aicore__ inline void RunElementwise(GM_ADDR const* inputs, GM_ADDR output, const ElementwiseTiling& tiling,
                                      const Activation& activation) {
    if (TILING_KEY_IS(0)) {
        RunPipeline<float>(inputs, output, tiling, activation);
    } else if (TILING_KEY_IS(1)) {
        RunPipeline<half>(inputs, output, tiling, activation);
    } else if (TILING_KEY_IS(2)) {
        RunPipeline<bfloat16_t>(inputs, output, tiling, activation);
    }
}

// Activations whose result does not depend on the element index take tiles as they come.
struct IndexFree {
    __aicore__ inline uint32_t TileLength(uint64_t, uint32_t count) const { return count; }
};

// out = test > 0 ? value : scaled (scaled already computed); the branch rule of every op here.
__aicore__ inline void SelectPositive(const TileVectors& v, const AscendC::LocalTensor<float>& test,
                                      const AscendC::LocalTensor<float>& value,
                                      const AscendC::LocalTensor<float>& scaled, uint32_t lanes) {
    AscendC::CompareScalar(v.mask, test, 0.0f, AscendC::CMPMODE::GT, lanes);
    AscendC::Select(v.out, v.mask, value, scaled, AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, lanes);
}

}  // namespace ascend_acts
