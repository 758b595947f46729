// When a graph's sizes are symbolic (issue 30, dynamic shapes): the input dims a user marked with
// lt.mark_dynamic, and the dims a call site has seen change. The second is torch.compile's
// automatic dynamic shapes: a sync whose graph misses the cache and is the program its call site
// compiled before, at other sizes, makes the dims that changed symbolic at that site from then on,
// so this compile is already symbolic (lowering/generalize.h) and serves the sizes that follow.
// LT_DYNAMIC=0 turns the automatic part off (marks still count). Callers hold the runtime mutex.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/symbolic_graph.h"

namespace lt {

struct Storage;

// A symbolic input dim of a run and its size there (lt.metrics.last_graph()["symbolic_dims"]).
struct SymbolicDimSize {
  int input, dim;
  int64_t size;
};

// Marks dim `dim` of the data in `s` dynamic: every graph it enters as an input has that dim
// symbolic (unless its size is 0 or 1, which stay static as in torch).
void mark_dynamic(Storage& s, int dim);

// What to make symbolic in g, compiled at call site `site`, and why (for LT_DEBUG).
struct DynamicChoice {
  std::vector<DynamicDim> dims;
  std::string why;  // "input 0 dim 1 changed from 17 to 18 at train.py:40"; marks; empty
};
DynamicChoice dynamic_dims(int32_t site, const Graph& g);

// Records that g was compiled statically at `site` (its sizes are what a later graph is compared
// with).
void note_static_compile(int32_t site, const Graph& g);

// Forgets what call sites compiled and which dims they made dynamic (with the graph cache).
void forget_dynamic_dims();

// Whether automatic dynamic shapes are on (LT_DYNAMIC is not 0).
bool automatic_dynamic();

}  // namespace lt
