// Simplification of a primitive graph, run between decomposition and fusion: algebraic identities
// (x*1, x+0, x-0, x/1, x**1, --x), movement folding (reshape of reshape, permute of permute,
// expand of expand, no-op reshape/permute/expand/cast), constant folding of elementwise math on
// baked constants, reductions of broadcast values (sum of an expand is a multiply), then CSE and
// dead-code elimination. Graph inputs keep their leaves (fusion maps inputs to buffers by them).
#pragma once
#include "lowering/prim_graph.h"

namespace lt {

PrimGraph simplify(const PrimGraph& g);

}  // namespace lt
