// A library matrix product as a plan step (cuBLAS, oneDNN), next to the fused loop kernels.
// Fusion emits one where a decomposed matmul (a [.., M, N, K] product summed over K) reads both
// operands from buffers with plain strides, so x @ w.T or a broadcast batch needs no copy.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace lt {

// For every batch point b: out[b] = A[b] @ B[b], with
//   A[b](m, k) = a[a_offset + sum_d b_d * a_batch_stride[d] + m * a_rs + k * a_cs]
//   B[b](k, n) = b[b_offset + sum_d b_d * b_batch_stride[d] + k * b_rs + n * b_cs]
// and out contiguous [batch..., M, N]. Each operand is row-major (cs == 1, rs >= its columns) or
// transposed (rs == 1, cs >= its rows); a batch stride of 0 broadcasts that operand.
struct Gemm {
  std::string name;
  DType dtype = DType::Float32;  // of A, B and out (accumulation in the same type)
  int a = -1, b = -1, out = -1;  // plan buffers
  int64_t M = 0, N = 0, K = 0;
  int64_t a_offset = 0, a_rs = 0, a_cs = 0;
  int64_t b_offset = 0, b_rs = 0, b_cs = 0;
  std::vector<int64_t> batch, a_batch_stride, b_batch_stride;

  int64_t batch_count() const {
    int64_t n = 1;
    for (int64_t e : batch) n *= e;
    return n;
  }
  // Whether the operand is stored transposed (column-major): its row stride is the unit one.
  bool a_transposed() const { return a_cs != 1; }
  bool b_transposed() const { return b_cs != 1; }
  int64_t lda() const { return a_transposed() ? a_cs : a_rs; }
  int64_t ldb() const { return b_transposed() ? b_cs : b_rs; }
};

// One step of a plan: a fused loop kernel, a library GEMM, convolution or attention, by index
// into Plan::kernels / gemms / convs / attentions.
struct PlanStep {
  enum class Kind : uint8_t { Kernel, Gemm, Conv, Attention, Collective } kind;
  int index;
};

// Whether a rows x cols operand with strides (rs, cs) has a layout a BLAS library accepts;
// normalizes the stride of an extent-1 dimension (any value reads the same elements) first.
bool normalize_matrix_layout(int64_t rows, int64_t cols, int64_t* rs, int64_t* cs);

// Checks the step's invariants against its buffers' sizes (a damaged cache entry, a bad plan);
// throws lt::Error naming `where`.
void validate_gemm(const Gemm& g, int64_t a_numel, int64_t b_numel, int64_t out_numel,
                   const char* where);

}  // namespace lt
