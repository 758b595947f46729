#include "backends/cpu/small_gemm.h"

#include <algorithm>
#include <vector>

namespace lt::cpu {
namespace {

// Multiply-adds up to which the loop beats oneDNN (bench: 16^3 = 4,096 took 0.25 us here against
// oneDNN's 1.0 us; at 32^3 the two were even).
constexpr int64_t kSmallGemmWork = 16384;

}  // namespace

bool small_gemm_fits(const Gemm& g) {
  return g.dtype == DType::Float32 && g.batch_count() * g.M * g.N * g.K <= kSmallGemmWork;
}

void small_gemm(const Gemm& g, const float* a, const float* b, float* out) {
  // Rows of B contiguous for the inner loop (out[i, :] += a[i, k] * b[k, :], which vectorizes):
  // a B stored otherwise (x @ w.t()) is copied first, per thread as executables may run at once.
  thread_local std::vector<float> packed;
  const int64_t count = g.batch_count();
  for (int64_t bi = 0; bi < count; ++bi) {
    int64_t ao = 0, bo = 0, rest = bi;
    for (size_t d = g.batch.size(); d-- > 0; rest /= g.batch[d]) {
      const int64_t i = rest % g.batch[d];
      ao += i * g.a_batch_stride[d];
      bo += i * g.b_batch_stride[d];
    }
    const float* A = a + ao;
    const float* B = b + bo;
    int64_t b_rs = g.b_rs;
    if (g.b_cs != 1 && g.N > 1) {
      packed.resize(static_cast<size_t>(g.K * g.N));
      for (int64_t k = 0; k < g.K; ++k)
        for (int64_t j = 0; j < g.N; ++j)
          packed[static_cast<size_t>(k * g.N + j)] = B[k * g.b_rs + j * g.b_cs];
      B = packed.data();
      b_rs = g.N;
    }
    float* C = out + bi * g.M * g.N;
    for (int64_t i = 0; i < g.M; ++i) {
      float* c = C + i * g.N;
      std::fill(c, c + g.N, 0.f);
      for (int64_t k = 0; k < g.K; ++k) {
        const float av = A[i * g.a_rs + k * g.a_cs];
        const float* brow = B + k * b_rs;
        for (int64_t j = 0; j < g.N; ++j) c[j] += av * brow[j];
      }
    }
  }
}

}  // namespace lt::cpu
