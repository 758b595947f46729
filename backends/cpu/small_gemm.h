// Small float32 matrix products as plain loops. oneDNN's matmul costs about a microsecond per call
// whatever the size (primitive execution, three memory objects, its scratchpad), which for the
// products of a small eager op or a tiny layer is most of the op: a 16 x 16 x 16 eager `a @ b`
// cost 2.1 us against PyTorch's 1.3. Below a few thousand multiply-adds a loop is faster.
#pragma once
#include "lowering/gemm.h"

namespace lt::cpu {

// Whether `g` is small enough for small_gemm (float32, batch * M * N * K multiply-adds at most a
// bound measured on the development machine: see small_gemm.cc).
bool small_gemm_fits(const Gemm& g);

// out [batch..., M, N] (contiguous) = A x B with g's strides; a and b point at the operands'
// first elements (offsets applied).
void small_gemm(const Gemm& g, const float* a, const float* b, float* out);

}  // namespace lt::cpu
