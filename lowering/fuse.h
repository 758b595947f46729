// Fusion and scheduling: groups a PrimGraph into loop-IR kernels (see lowering/loop_ir.h).
//
// Rules. Every graph output and every reduction with several users is materialized (gets a
// buffer); everything else is inlined into the kernels that use it, memoized per (node, index) so
// shared subexpressions are computed once per kernel. A kernel rooted at a materialized node hosts
// the unmaterialized reductions under it as Reduce stages when they reduce the same axes of the
// same shape (softmax: max and sum; layer_norm: mean and variance) and the root reads them at the
// current row; otherwise the offending reduction is materialized and fusion restarts. Movement ops
// are index arithmetic (lowering/symbolic.h), never copies. Where opts allow, a decomposed matmul
// becomes a library Gemm step (lowering/gemm.h) over its operands' buffers, and its epilogue a
// loop kernel reading the GEMM's output. Every conv prim becomes a library Conv step
// (lowering/conv.h), with a ReLU that is its only user fused as a post-op; attention prims over
// the same operands become one Attention step (lowering/attention.h). The library steps come from
// a table of matchers (lowering/library_match.h).
#pragma once
#include "lowering/plan.h"

namespace lt {

Plan fuse(PrimGraph g, const LowerOptions& opts = {});

}  // namespace lt
