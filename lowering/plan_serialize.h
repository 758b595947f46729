// A compact binary form of a Plan (what an executable needs: buffers, kernels' loop IR, outputs,
// grouping; not the prim graph, nor what complete_plan derives) for the on-disk compile cache,
// written with ir/bytes.h. The reader checks every length, index and enum it decodes and throws
// lt::Error on anything that does not fit, so a damaged entry is an error, never a crash or an
// out-of-range plan.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "lowering/plan.h"

namespace lt {

std::string serialize_plan(const Plan& plan);
// The inverse of serialize_plan: the result's prims are empty, and complete_plan has filled what
// it derives. Throws lt::Error on bad bytes.
Plan deserialize_plan(std::string_view bytes);

}  // namespace lt
