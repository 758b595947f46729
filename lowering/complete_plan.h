// Fills the fields of a Plan that are derived from the rest (Plan::memory, Plan::distinct), so
// that a Plan handed to a backend carries every decision lowering makes and data flows down only
// (DESIGN.md: ir <- lowering <- backends). lower() and deserialize_plan call it; so must anyone
// who builds or edits a Plan by hand (tests) before compiling it.
#pragma once
#include <vector>

#include "lowering/plan.h"

namespace lt {

void complete_plan(Plan& plan);

// Groups kernels by kernel_code (lowering/kernel_code.h): what fills Plan::distinct.
DistinctKernels distinct_kernels(const std::vector<loop::Kernel>& kernels);

// A completed copy of a plan built by hand.
inline Plan completed(Plan plan) {
  complete_plan(plan);
  return plan;
}

}  // namespace lt
