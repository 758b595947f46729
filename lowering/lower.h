// The lowering pipeline run on a cache miss: decompose -> fuse (-> schedule) into a Plan.
#pragma once
#include "ir/graph.h"
#include "lowering/plan.h"

namespace lt {

Plan lower(const Graph& g);

}  // namespace lt
