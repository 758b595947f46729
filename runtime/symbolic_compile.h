// Graphs whose sizes are symbolic (issue 30): at a sync whose graph is not in the cache, the input
// dims to make symbolic (runtime/dynamic_shapes.h) give the graph's symbolic view and key
// (ir/symbolic_graph.h). A compiled plan under that key serves this trace when the trace's sizes
// satisfy the plan's guards and lie in its range; otherwise the graph is lowered symbolically
// (lowering/generalize.h) and compiled once for all the sizes it admits. A key can hold several
// such compiles (another range, other guards). Graphs that do not generalize are compiled
// statically as before, and the key remembers that: after two such bindings it is not tried again.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/graph.h"
#include "ir/hash.h"
#include "runtime/dynamic_shapes.h"
#include "runtime/graph_cache.h"

namespace lt {

struct SymbolicRun {
  CachedGraph* entry;
  Hash128 cache_key;             // the entry's key in the graph cache
  std::vector<int64_t> symbols;  // this trace's value of each symbol
  std::vector<SymbolicDimSize> dims;
  bool compiled = false;  // compiled now (else found in the cache): counted by the caller
  double compile_ms = 0;
};

// The symbolic compile serving g on `backend`, compiled now if needed; nullopt when g stays static
// (no dynamic dims, a backend without symbolic sizes, or a graph that does not generalize).
// `prefix`: the backend's part of the graph key (name, library options); `site`: the sync's call
// site. Callers hold the runtime mutex.
std::optional<SymbolicRun> symbolic_entry(const Graph& g, Backend& backend,
                                          const LowerOptions& opts, const Hash128& prefix,
                                          GraphCache& cache, int32_t site);

// Forgets the symbolic keys' compiles and failures (with the graph cache, which holds them).
void forget_symbolic_compiles();

// A cache entry for a compiled plan (static or symbolic).
std::unique_ptr<CachedGraph> make_cached_graph(const Plan& plan, std::unique_ptr<Executable> exe,
                                               int64_t nodes);

}  // namespace lt
