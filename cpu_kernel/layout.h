// Layout changes of float32 tensors for the platform's convolutions (python/ascend_acts/ops/conv_bn_leaky_relu/
// channels_last.py): oneDNN's transposed convolution on this CPU runs about 3x faster on channels_last tensors, and
// torch's own NCHW <-> NHWC copy reads one value per cache line (some 10 ms for 16 MiB).
#pragma once

#include <cstdint>

namespace ascend_acts_cpu {

// dst[b][c][r] = src[b][r][c] for each of `batches` row-major (rows, cols) matrices: NCHW -> NHWC is
// (N, C, H*W), NHWC -> NCHW is (N, H*W, C); bits are copied unchanged. src and dst must not overlap.
void TransposePlanes(const float* src, float* dst, int64_t batches, int64_t rows, int64_t cols);

}  // namespace ascend_acts_cpu
