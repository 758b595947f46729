// The attention prims (ir/attention.h) on a backend without an attention library step: decompose
// (lowering/decompose.h) expands them like composites, so the runtime traces the prims on every
// backend and one model has one graph everywhere. The expansion is the graph the runtime used to
// trace for scaled_dot_product_attention: matmuls, the softmax composite and elementwise ops.
#pragma once
#include "ir/node.h"
#include "lowering/plan.h"

namespace lt {

// Whether lowering for `opts` expands the attention-class prim `n`: the backend has no library
// step for its dtype and head dims.
bool expands_attention(const Node& n, const LowerOptions& opts);

// The expansion of attention-class prim `n` over operands `in` (stand-ins of n's operands).
// attention: cast(softmax(cast(S, st)), t) v with st the statistics dtype and S = q k^T * scale,
// causal: where(key position <= query position, S, -inf), the positions iota prims (ir/ops.def).
// attention_lse: the row logsumexp of the scaled scores.
// The gradients compute P and D = rowsum(dP * P) from q, k, v and dout instead of reading their
// lse and dsum operands: that is what the runtime's decomposition traced, and decompose's CSE
// merges P with the forward's, so a training step lowers to the same kernels as before (the
// runtime traces lse and dsum consistently, so the values agree; the unread ones are dead code).
NodePtr expand_attention(const Node& n, const NodeList& in);

}  // namespace lt
