// The geometry of a 2-D convolution (NCHW input, OIHW weight), shared by the shape rule, lowering,
// the backends and the runtime, so every stage agrees on output sizes and on what is rejected.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "ir/node.h"

namespace lt {

struct ConvParams {
  std::array<int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  // The attrs.ints of a conv prim: {stride h, w, padding h, w, dilation h, w, groups} + `extra`.
  IntList ints(std::vector<int64_t> extra = {}) const;
  // Reads attrs.ints of `op` (a Conv class op); throws naming the op when malformed.
  static ConvParams from(Op op, const Attrs& a);
};

// Checks input x [N, C, H, W] against weight w [O, C/groups, kH, kW] and returns the output shape
// [N, O, OH, OW]; throws lt::Error naming `op` and both shapes when they do not fit (channel
// mismatch, groups not dividing, kernel larger than the padded input, ...).
Shape conv_output_shape(Op op, const Shape& x, const Shape& w, const ConvParams& p);

// The extra attrs the backward prims carry: the input's {H, W} (grad_input) or kernel's {kH, kW}.
std::array<int64_t, 2> conv_extra(Op op, const Attrs& a);

// Shape/dtype rule of the three Conv class prims (ir/infer.cc).
Inferred infer_conv(Op op, const NodeList& in, const Attrs& a);

}  // namespace lt
