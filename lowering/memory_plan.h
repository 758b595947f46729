// Memory planning: temporaries whose lifetimes (first step that touches them to the last) do not
// overlap share one allocation ("slot"), so a graph's peak memory is what is live at once, not the
// sum of every intermediate. Computed from a Plan's steps alone (deterministic), so backends call
// it when they compile and the on-disk plan format needs nothing more.
#pragma once
#include <cstddef>
#include <vector>

#include "lowering/plan.h"

namespace lt {

struct MemoryPlan {
  std::vector<int> slot_of;         // per plan buffer: its slot, or -1 (not a temporary)
  std::vector<size_t> slot_bytes;   // per slot: the largest temporary it holds
  size_t temp_bytes_unshared = 0;   // what the temporaries would take one allocation each
  size_t temp_bytes_planned = 0;    // sum of slot_bytes
};

MemoryPlan plan_memory(const Plan& plan);

}  // namespace lt
