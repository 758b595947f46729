#include "backends/cpu/transpose.h"

#include <algorithm>

#include "backends/cpu/thread_pool.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LT_TRANSPOSE_AVX2 1
#endif

namespace lt::cpu {
namespace {

// Columns per band pass: 64 floats of each of 8 source rows (2 KiB) stay in L1 while their 64
// destination runs of 8 floats are written.
constexpr int64_t kColBlock = 64;

void transpose_rows_scalar(const float* src, int64_t ls, int64_t cols, int64_t ld, int64_t r0,
                           int64_t r1, float* dst) {
  for (int64_t j0 = 0; j0 < cols; j0 += kColBlock) {
    const int64_t j1 = std::min(cols, j0 + kColBlock);
    for (int64_t i0 = r0; i0 < r1; i0 += 8) {
      const int64_t i1 = std::min(r1, i0 + 8);
      for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = i0; i < i1; ++i) dst[j * ld + i] = src[i * ls + j];
    }
  }
}

#ifdef LT_TRANSPOSE_AVX2
// One 8 x 8 block: 8 row loads, three shuffle stages, 8 column stores.
__attribute__((target("avx2"))) inline void block8(const float* s, int64_t ls, float* d,
                                                   int64_t ld) {
  __m256 r[8], u[8], v[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(s + k * ls);
  for (int k = 0; k < 8; k += 2) {
    u[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    u[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    v[k] = _mm256_shuffle_ps(u[k], u[k + 2], 0x44);
    v[k + 1] = _mm256_shuffle_ps(u[k], u[k + 2], 0xEE);
    v[k + 2] = _mm256_shuffle_ps(u[k + 1], u[k + 3], 0x44);
    v[k + 3] = _mm256_shuffle_ps(u[k + 1], u[k + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(d + k * ld, _mm256_permute2f128_ps(v[k], v[k + 4], 0x20));
    _mm256_storeu_ps(d + (k + 4) * ld, _mm256_permute2f128_ps(v[k], v[k + 4], 0x31));
  }
}

__attribute__((target("avx2"))) void transpose_rows_avx2(const float* src, int64_t ls, int64_t cols,
                                                         int64_t ld, int64_t r0, int64_t r1,
                                                         float* dst) {
  const int64_t full_rows = r0 + (r1 - r0) / 8 * 8, full_cols = cols / 8 * 8;
  for (int64_t j0 = 0; j0 < full_cols; j0 += kColBlock) {
    const int64_t j1 = std::min(full_cols, j0 + kColBlock);
    for (int64_t i = r0; i < full_rows; i += 8)
      for (int64_t j = j0; j < j1; j += 8) block8(src + i * ls + j, ls, dst + j * ld + i, ld);
  }
  // The edges: rows past the last block of 8, then columns past it.
  if (full_rows < r1) transpose_rows_scalar(src, ls, cols, ld, full_rows, r1, dst);
  if (full_cols < cols)
    transpose_rows_scalar(src + full_cols, ls, cols - full_cols, ld, r0, full_rows,
                          dst + full_cols * ld);
}
#endif

// Rows [r0, r1) of the transpose, in 8 x 8 register blocks where the host has AVX2.
void transpose_rows(const float* src, int64_t ls, int64_t cols, int64_t ld, int64_t r0, int64_t r1,
                    float* dst) {
#ifdef LT_TRANSPOSE_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return transpose_rows_avx2(src, ls, cols, ld, r0, r1, dst);
#endif
  transpose_rows_scalar(src, ls, cols, ld, r0, r1, dst);
}

}  // namespace

void transpose_f32(const float* src, int64_t src_row_stride, int64_t rows, int64_t cols,
                   float* dst) {
  if (rows <= 0 || cols <= 0) return;
  // Chunks of at least 64 rows, in whole blocks of 8 (align), so no 8 x 8 block straddles two.
  ThreadPool::global().parallel_for(0, rows, 64, 8, [&](int64_t r0, int64_t r1) {
    transpose_rows(src, src_row_stride, cols, rows, r0, r1, dst);
  });
}

}  // namespace lt::cpu
