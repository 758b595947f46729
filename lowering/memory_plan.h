// Memory planning: temporaries whose lifetimes (first step that touches them to the last) do not
// overlap share one allocation ("slot"), so a graph's peak memory is what is live at once, not the
// sum of every intermediate. Computed from a Plan's steps alone (deterministic), so complete_plan
// fills Plan::memory with it and the on-disk plan format needs nothing more.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "lowering/plan.h"

namespace lt {

MemoryPlan plan_memory(const Plan& plan);

// A symbolic plan's slot sizes for one binding (size parameter values `values`): each slot as
// large as the largest temporary it holds at those sizes. The slot assignment itself holds for
// every binding: it rests on lifetimes, and sizes only chose among slots free at once.
std::vector<size_t> slot_bytes_at(const Plan& plan, std::span<const int64_t> values);

}  // namespace lt
