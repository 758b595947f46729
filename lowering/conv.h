// A library convolution as a plan step (oneDNN on the CPU), next to loop kernels and GEMMs. Fusion
// emits one per conv prim (ir/conv.h) when the backend's LowerOptions offer convolution for its
// dtype; every operand is a contiguous buffer (NCHW data, OIHW weights), unless the channels-last
// pass (lowering/channels_last.h) stored a data operand NHWC, which `channels_last` then says.
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
  // The operands whose buffers hold their values channels-last (lowering/channels_last.h): data
  // ([N,C,H,W] values in NHWC order) and weights or dw ([O,C/g,kH,kW] in OHWI order, cuDNN's NHWC
  // filter format); a mask of kLastA, kLastB, kLastOut (0: all plain).
  uint8_t channels_last = 0;
  static constexpr uint8_t kLastA = 1, kLastB = 2, kLastOut = 4;

  // Whether the weight (Forward, GradInput) or dw (GradWeight) is OHWI.
  bool w_channels_last() const {
    return channels_last & (kind == Kind::GradWeight ? kLastOut : kLastB);
  }
  // Whether the forward input x / output y (or their gradients) are stored NHWC.
  bool x_channels_last() const {
    return channels_last & (kind == Kind::GradInput ? kLastOut : kLastA);
  }
  bool y_channels_last() const {
    return channels_last & (kind == Kind::Forward     ? kLastOut
                            : kind == Kind::GradInput ? kLastA
                                                      : kLastB);
  }

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
