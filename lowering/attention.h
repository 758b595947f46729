// A library attention as a plan step (CUDA's flash kernels), next to loop kernels, GEMMs and
// convolutions. Fusion emits one step per group of attention prims (ir/attention.h) over the
// same (q, k, v) and attributes: the forward writes the output and/or the row logsumexp in one
// pass; the backward writes any of dq, dk, dv. Every operand is a contiguous buffer
// [batch, rows, head dim] (the batch dims flattened), so no layout is guessed.
#pragma once
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace lt {

struct AttentionStep {
  enum class Kind : uint8_t { Forward, Backward };
  std::string name;
  Kind kind = Kind::Forward;
  DType dtype = DType::Float32;  // of q, k, v, out, dout and the gradients
  bool causal = false;
  double scale = 1;
  int64_t batch = 1, L = 0, S = 0, E = 0, Ev = 0;
  // Plan buffers; -1 when absent. Forward: reads q, k, v; writes out and/or lse.
  // Backward: reads q, k, v, dout, lse, dsum; writes any of dq, dk, dv.
  int q = -1, k = -1, v = -1, out = -1, lse = -1;
  int dout = -1, dsum = -1, dq = -1, dk = -1, dv = -1;

  std::vector<int> reads() const;
  std::vector<int> writes() const;
};

// Checks the step's invariants against its buffers' sizes and dtypes (a damaged cache entry, a
// bad plan); throws lt::Error naming `where`. numel/dtype of buffer b: numel(b), dtype(b).
void validate_attention(const AttentionStep& a, const std::vector<int64_t>& buffer_numel,
                        const std::vector<DType>& buffer_dtype, const char* where);

}  // namespace lt
