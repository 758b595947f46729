// Symbolic plans (issue 30, dynamic shapes) by lowering a program at several sizes and reading
// off how the plan's numbers depend on them.
//
// Lowering works on concrete sizes throughout (decompose, simplify, fuse, index arithmetic,
// memory planning), as it must for its size-driven choices. Rather than carry expressions through
// every pass, generalize_plan lowers the program at a few bindings of its size symbols ("probes":
// primes spread over a range around the current sizes, ir/symbolic_graph.h's instantiate) and
// compares the plans: they must agree in everything but numbers, and each number that differs
// must be one polynomial of the symbols (integer coefficients, degree <= 2 in each) at every probe,
// fitted on a grid of probes and confirmed at others. Those numbers become size parameters
// (PlanSymbols); the plan holds their values at the current sizes. A last check instantiates the
// symbolic plan at every probe and requires it to equal, byte for byte, that probe's own plan, so
// no field that changes with the sizes is missed.
//
// Why the result is right at every binding in the probes' range (PlanSymbols::ranges), not only at
// the probes: lowering's choices that depend on sizes are of two kinds. Thresholds (split a long
// reduction, where a row fits) are monotone in each size, so a choice the same at both ends of a
// range is the same inside it. Divisibility (folding a reshape's div/mod) changes only how an
// index is written, never its value, and primes keep the probes off coincidences, so the plan
// takes the general form, which is right for every size. Lowering keeps to these two kinds
// (lowering/README.md); a size-dependent number of another kind differs between probes in a way
// no polynomial fits, and the program is compiled statically instead.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ir/graph.h"
#include "ir/symbolic_graph.h"
#include "lowering/plan.h"

namespace lt {

struct GeneralizedPlan {
  std::optional<Plan> plan;  // symbolic, its numbers at sg's hints; empty when not generalizable
  std::string why_not;       // why there is no plan (LT_DEBUG), e.g. "kernel k3_sum: a size ..."
  int lowerings = 0;         // how many times the program was lowered
  std::string narrowed;      // why a wider range was given up, when it was (LT_DEBUG)
};

// A symbolic, completed plan for g whose size symbols are sg's (at least one free symbol), or why
// not. opts: the target backend's library steps (as lower()).
GeneralizedPlan generalize_plan(const Graph& g, const SymbolicGraph& sg, const LowerOptions& opts);

// The static plan that symbolic plan `plan` is at symbol values `symbols` (one per symbol): every
// size field evaluated, no size parameters left, completed. What the symbolic kernels compute at
// those sizes; tests compile it to compare.
Plan instantiate_plan(const Plan& plan, std::span<const int64_t> symbols);

}  // namespace lt
