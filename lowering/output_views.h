// Graph roots that are views of another computed value (lowering's half of output views).
//
// A root that is a reshape or a contiguous slice (or a chain of them) of a value the graph
// computes costs a copy kernel and a buffer of its own, when the value's buffer already holds its
// elements in order. DDP's flat averaging slices every gradient back out of one all_reduced
// bucket (148 copy kernels and 1 GB of traffic a GPT-2 124M step); q, k, v split from one
// projection and kept (a KV cache) are the same. Here such a root reads the value's buffer from
// an offset instead: the runtime hands out that part of the buffer (Backend::sub_buffer), as
// PyTorch's views share their base's memory.
//
// So that a small view never keeps a large buffer alive (the last position's logits out of a
// [B, T, vocab] tensor, kept across a generation loop), a value's views are used only when the
// value is itself a root or its views together cover at least half of it.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/shape.h"
#include "lowering/prim_graph.h"

namespace lt {

struct OutputViews {
  std::vector<int64_t> offsets;  // per root: its first element in the value it now names; empty
                                 // when no root is a view
  std::vector<Shape> shapes;     // per root: its own shape (the view's), as before the rewrite
};

// Rewrites g.outputs so that each root taken as a view names its base value, and returns where
// each root starts in it. Leaves g unchanged (and returns no offsets) when no root qualifies.
OutputViews take_output_views(PrimGraph& g);

}  // namespace lt
