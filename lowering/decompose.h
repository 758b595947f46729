// Decomposition: rewrites composites into primitives and flattens the graph into a PrimGraph,
// merging structurally identical nodes (CSE). One rule per composite op, in one table.
#pragma once
#include <functional>

#include "ir/graph.h"
#include "lowering/prim_graph.h"

namespace lt {

// A rule builds the primitive form of node `n` from its (already primitive) operands.
using DecompRule = std::function<NodePtr(const Node& n, const NodeList& in)>;
// nullptr when `op` has no rule (primitives have none).
const DecompRule* decomposition(Op op);

PrimGraph decompose(const Graph& g);

}  // namespace lt
