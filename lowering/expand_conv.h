// The conv prims (ir/conv.h: conv2d, conv2d_grad_input, conv2d_grad_weight) on a backend without a
// convolution library step: decompose (lowering/decompose.h) expands them like composites, so the
// runtime traces the prims on every backend and one model has one graph everywhere. The expansion
// is what the runtime used to trace: a sliding-window view of the (padded) input made of movement
// prims only (expand, reshape, strided slice; tinygrad's trick of repeating the row and reading it
// at a new row length), reshaped to an im2col matrix times the weight (a GEMM). The gradients are
// that view's and that product's VJPs: grad_weight is the im2col matrix times the output gradient,
// grad_input the product's gradient taken back through the view (col2im: the repeat's gradient is
// a sum, which fuses into one reduction kernel). Padding masks come from iota positions.
#pragma once
#include "ir/node.h"
#include "lowering/plan.h"

namespace lt {

// Whether lowering for `opts` expands the conv-class prim `n`: the backend has no library step for
// its dtype, or the batch is empty (library steps skip empty outputs).
bool expands_conv(const Node& n, const LowerOptions& opts);

// The expansion of conv-class prim `n` over operands `in` (stand-ins of n's operands).
NodePtr expand_conv(const Node& n, const NodeList& in);

}  // namespace lt
