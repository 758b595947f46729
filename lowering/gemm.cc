#include "lowering/gemm.h"

#include <algorithm>

#include "ir/error.h"

namespace lt {

bool normalize_matrix_layout(int64_t rows, int64_t cols, int64_t* rs, int64_t* cs) {
  if (rows == 1) *rs = *cs == 1 ? std::max<int64_t>(1, cols) : 1;
  if (cols == 1) *cs = *rs == 1 ? std::max<int64_t>(1, rows) : 1;
  if (*cs == 1 && *rs >= std::max<int64_t>(1, cols)) return true;
  return *rs == 1 && *cs >= std::max<int64_t>(1, rows);
}

void validate_gemm(const Gemm& g, int64_t a_numel, int64_t b_numel, int64_t out_numel,
                   const char* where) {
  auto bad = [&](const char* why) {
    fail(ErrorKind::Runtime, where, ": gemm ", g.name, " (M=", g.M, " N=", g.N, " K=", g.K,
         "): ", why);
  };
  if (g.M < 1 || g.N < 1 || g.K < 1) bad("empty dimension");
  if (g.batch.size() != g.a_batch_stride.size() || g.batch.size() != g.b_batch_stride.size())
    bad("batch strides do not match the batch rank");
  int64_t a_rs = g.a_rs, a_cs = g.a_cs, b_rs = g.b_rs, b_cs = g.b_cs;
  if (!normalize_matrix_layout(g.M, g.K, &a_rs, &a_cs) || a_rs != g.a_rs || a_cs != g.a_cs)
    bad("A's strides are not a row-major or transposed layout");
  if (!normalize_matrix_layout(g.K, g.N, &b_rs, &b_cs) || b_rs != g.b_rs || b_cs != g.b_cs)
    bad("B's strides are not a row-major or transposed layout");
  // The last element each operand reads must lie in its buffer (all strides are non-negative).
  int64_t a_last = g.a_offset + (g.M - 1) * g.a_rs + (g.K - 1) * g.a_cs;
  int64_t b_last = g.b_offset + (g.K - 1) * g.b_rs + (g.N - 1) * g.b_cs;
  for (size_t d = 0; d < g.batch.size(); ++d) {
    if (g.batch[d] < 1 || g.a_batch_stride[d] < 0 || g.b_batch_stride[d] < 0) bad("bad batch dim");
    a_last += (g.batch[d] - 1) * g.a_batch_stride[d];
    b_last += (g.batch[d] - 1) * g.b_batch_stride[d];
  }
  if (g.a_offset < 0 || g.b_offset < 0 || a_last >= a_numel || b_last >= b_numel)
    bad("an operand reads past its buffer");
  if (g.batch_count() * g.M * g.N != out_numel) bad("the output buffer has the wrong size");
}

}  // namespace lt
