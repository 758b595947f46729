// The attention prims (ir/ops.def: attention, attention_lse, attention_grad_{q,k,v}): their
// attributes and shape rule, shared by the runtime that traces them, lowering and the backends.
#pragma once
#include "ir/node.h"

namespace lt {

struct AttentionParams {
  bool causal = false;  // key j is visible to query i when j <= i (top-left aligned)
  double scale = 1;
  Attrs attrs() const;
  // Reads the attrs of an Attention class op; throws naming the op when malformed.
  static AttentionParams from(Op op, const Attrs& a);
};

// The dtype of the row statistics (lse, dsum): float32 for 16-bit inputs, else the input's.
DType attention_stats_dtype(DType t);

// Shape/dtype rule of the Attention class prims (ir/infer.cc): q [.., L, E], k [.., S, E],
// v [.., S, Ev] with identical batch dims and one floating dtype; the gradients' dout [.., L, Ev]
// and lse, dsum [.., L, 1] in attention_stats_dtype.
Inferred infer_attention(Op op, const NodeList& in, const Attrs& a);

}  // namespace lt
