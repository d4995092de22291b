// See layout.h.
#include "layout.h"

#include <algorithm>

namespace ascend_acts_cpu {

namespace {

// 16 x 16 tiles, visited in blocks of 1024 source rows a column strip of 16 at a time: a tile reads and writes
// whole 64-byte lines, the block stays in L2 while its strips are read, and the destination gets 16 streams at a
// time, which the hardware prefetchers follow (all of a block's columns at once, 64 streams in NHWC -> NCHW of 64
// channels, made it about 2-4x slower on the Xeon of docs/benchmarks.md).
constexpr int64_t kTile = 16;
constexpr int64_t kBlockRows = 1024;

void TransposePlane(const float* in, float* out, int64_t rows, int64_t cols) {
    for (int64_t block = 0; block < rows; block += kBlockRows) {
        const int64_t block_end = std::min(block + kBlockRows, rows);
        for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
            const int64_t c1 = std::min(c0 + kTile, cols);
            for (int64_t r0 = block; r0 < block_end; r0 += kTile) {
                const int64_t r1 = std::min(r0 + kTile, block_end);
                for (int64_t c = c0; c < c1; ++c) {
                    for (int64_t r = r0; r < r1; ++r) {
                        out[c * rows + r] = in[r * cols + c];
                    }
                }
            }
        }
    }
}

}  // namespace

void TransposePlanes(const float* src, float* dst, int64_t batches, int64_t rows, int64_t cols) {
    const int64_t plane = rows * cols;
    for (int64_t b = 0; b < batches; ++b) {
        TransposePlane(src + b * plane, dst + b * plane, rows, cols);
    }
}

}  // namespace ascend_acts_cpu
