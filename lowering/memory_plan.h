// Memory planning: temporaries whose lifetimes (first step that touches them to the last) do not
// overlap share one allocation ("slot"), so a graph's peak memory is what is live at once, not the
// sum of every intermediate. Computed from a Plan's steps alone (deterministic), so complete_plan
// fills Plan::memory with it and the on-disk plan format needs nothing more.
#pragma once
#include "lowering/plan.h"

namespace lt {

MemoryPlan plan_memory(const Plan& plan);

}  // namespace lt
