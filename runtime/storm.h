// Recompilation-storm detection: a call site whose syncs keep producing new graph keys (a shape or
// dtype that changes every step) costs a compile per step. Warns once per site, naming the input
// whose shape or dtype changed between the last two graphs and each of its dims that keeps changing
// (with the sizes it took): the dimension to mark dynamic (issue 30), pad or bucket.
#pragma once
#include <optional>
#include <string>

#include "ir/graph.h"

namespace lt {

// Records a compile of `g` at call site `site`; returns the warning to print, once, when the site
// passes `limit` distinct graph keys.
std::optional<std::string> note_compile(int32_t site, const Graph& g, int limit = 8);

}  // namespace lt
