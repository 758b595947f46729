// A float32 matrix transpose for the CPU backend's own scratch copies (onednn_gemm.cc turns a
// row-major GEMM operand into the layout oneDNN runs fastest).
#pragma once
#include <cstdint>

namespace lt::cpu {

// dst[j * rows + i] = src[i * src_row_stride + j] for i < rows, j < cols: dst is the [cols, rows]
// transpose, contiguous. Split over the global thread pool in bands of rows; AVX2 hosts move
// 8 x 8 blocks through registers. src and dst must not overlap.
void transpose_f32(const float* src, int64_t src_row_stride, int64_t rows, int64_t cols,
                   float* dst);

}  // namespace lt::cpu
