// Decomposition: rewrites composites into primitives and flattens the graph into a PrimGraph,
// merging structurally identical nodes (CSE). One rule per composite op, in one table; library
// prims the target backend runs no library step for expand the same way (lowering/
// expand_attention.h), so the runtime traces one graph for every backend.
#pragma once
#include <functional>

#include "ir/graph.h"
#include "lowering/plan.h"
#include "lowering/prim_graph.h"

namespace lt {

// A rule builds the primitive form of node `n` from its (already primitive) operands.
using DecompRule = std::function<NodePtr(const Node& n, const NodeList& in)>;
// nullptr when `op` has no rule (primitives have none).
const DecompRule* decomposition(Op op);

// opts: the target backend's library steps (Backend::lower_options()); the default has none.
PrimGraph decompose(const Graph& g, const LowerOptions& opts = {});

}  // namespace lt
