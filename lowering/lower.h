// The lowering pipeline run on a cache miss: decompose -> simplify -> fuse into a Plan.
#pragma once
#include "ir/graph.h"
#include "lowering/plan.h"

namespace lt {

Plan lower(const Graph& g);

}  // namespace lt
