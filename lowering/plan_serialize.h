// A compact binary form of a Plan (what an executable needs: buffers, kernels' loop IR, outputs,
// grouping; not the prim graph) for the on-disk compile cache, written with ir/bytes.h. The reader
// checks every length, index and enum it decodes and throws lt::Error on anything that does not
// fit, so a damaged entry is an error, never a crash or an out-of-range plan.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "lowering/plan.h"

namespace lt {

// Kernels whose loop IR is equal but for name and buffer ids compile to the same code (a stack of
// identical layers repeats its kernels), so backends compile one of each. first[c] is the first
// kernel with code c; code_of[i] is kernel i's code.
struct DistinctKernels {
  std::vector<size_t> first;
  std::vector<size_t> code_of;
};
DistinctKernels distinct_kernels(const std::vector<loop::Kernel>& kernels);

std::string serialize_plan(const Plan& plan);
// The inverse of serialize_plan; the result's prims are empty. Throws lt::Error on bad bytes.
Plan deserialize_plan(std::string_view bytes);

}  // namespace lt
