// A library convolution as a plan step (oneDNN on the CPU), next to loop kernels and GEMMs. Fusion
// emits one per conv prim (ir/conv.h) when the backend's LowerOptions offer convolution for its
// dtype; every operand is a contiguous buffer (NCHW data, OIHW weights), so no layout is guessed.
#pragma once
#include <string>

#include "ir/conv.h"
#include "ir/dtype.h"

namespace lt {

struct ConvStep {
  enum class Kind : uint8_t { Forward, GradInput, GradWeight };
  std::string name;
  Kind kind = Kind::Forward;
  DType dtype = DType::Float32;
  // Forward: out = relu?(conv(a, b) + bias). GradInput: out = dx from a = dy, b = w.
  // GradWeight: out = dw from a = x, b = dy. Plan buffers; bias -1 when absent (Forward only).
  int a = -1, b = -1, bias = -1, out = -1;
  bool relu = false;  // Forward only: a ReLU applied to the result (oneDNN post-op)
  Shape x, w, y;      // the forward geometry: input [N,C,H,W], weight [O,C/g,kH,kW], output
  ConvParams params;

  static Kind kind_of(Op op) {
    return op == Op::Conv2d            ? Kind::Forward
           : op == Op::Conv2dGradInput ? Kind::GradInput
                                       : Kind::GradWeight;
  }
  Op op() const {
    return kind == Kind::Forward     ? Op::Conv2d
           : kind == Kind::GradInput ? Op::Conv2dGradInput
                                     : Op::Conv2dGradWeight;
  }
};

// Checks the step's invariants (geometry consistent, buffers the right sizes); throws lt::Error
// naming `where` (a damaged cache entry, a bad plan). numel(-1) is never asked.
void validate_conv(const ConvStep& c, int64_t a_numel, int64_t b_numel, int64_t bias_numel,
                   int64_t out_numel, const char* where);

}  // namespace lt
