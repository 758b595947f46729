// Runs a graph: key -> cache (memory, then disk) -> on a miss lower + compile -> bind inputs -> run.
// The one code path of both lazy syncs and eager ops.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"
#include "runtime/tensor_impl.h"

namespace lt {

// Computes `roots` on `backend`; returns one Storage per root.
std::vector<std::shared_ptr<Storage>> execute_graph(const std::vector<const Node*>& roots,
                                                    const std::string& backend, SyncReason reason);
// Generated kernel sources of the last executed graph (empty when none).
std::vector<std::string> last_kernel_sources();
// Writes <dir>/<key>.json/.txt/.dot and kernel sources (and data when outputs are given):
// what LT_DUMP_DIR does for each compiled graph.
void dump_compiled(const std::string& dir, const Graph& g, const std::string& key, const std::string& backend,
                   const std::vector<std::string>& sources, const std::vector<std::shared_ptr<Storage>>* outputs);
// Drops every executable cached in memory (tests); the disk cache is runtime/disk_cache.h.
void clear_graph_cache();
size_t graph_cache_size();

}  // namespace lt
