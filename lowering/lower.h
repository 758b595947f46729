// The lowering pipeline run on a cache miss: decompose -> simplify -> fuse into a Plan, then find
// the outputs that may update an input in place (lowering/donation.h), and complete it (memory
// plan, distinct kernels: lowering/complete_plan.h), so backends get every decision as data.
#pragma once
#include "ir/graph.h"
#include "lowering/plan.h"

namespace lt {

// opts: what the target backend's libraries compute (Backend::lower_options()).
Plan lower(const Graph& g, const LowerOptions& opts = {});

}  // namespace lt
