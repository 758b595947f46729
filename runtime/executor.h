// Runs a graph: key -> cache (memory) -> on a miss lower + compile -> bind inputs -> run.
// The one code path of both lazy syncs and eager ops.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/tensor.h"
#include "runtime/tensor_impl.h"

namespace lt {

// Computes `roots` on `backend`; returns one Storage per root.
std::vector<std::shared_ptr<Storage>> execute_graph(const std::vector<const Node*>& roots,
                                                    const std::string& backend, SyncReason reason);
// Drops every cached executable (tests, `lazytensor cache clear`).
void clear_graph_cache();
size_t graph_cache_size();

}  // namespace lt
