// Process-wide counters and the description of the last executed graph (CONTRACT.md key names).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/dynamic_shapes.h"

namespace lt::metrics {

std::map<std::string, int64_t> counters();         // traced_ops, syncs, graph_compiles, ...
std::map<std::string, int64_t> syncs_by_reason();  // mark_step, item, numpy, print, to_cpu, ...

struct GraphInfo {
  std::string hash;
  int64_t nodes = 0, kernels = 0, inputs = 0, outputs = 0;
  std::string cache;  // "memory" | "disk" | "compiled"
  double compile_ms = 0, run_ms = 0;
  std::string backend;
  std::string grouping;  // kernel grouping (LT_DEBUG=2)
  // The graph's symbolic input dims (issue 30), each with its size in this run.
  std::vector<SymbolicDimSize> symbolic_dims;
};
GraphInfo last_graph();
std::string report();
void reset();

}  // namespace lt::metrics
