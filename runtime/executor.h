// Runs a graph: key -> cache (memory, then disk) -> on a miss lower + compile -> bind inputs ->
// run. The one code path of both lazy syncs and eager ops.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/donation.h"
#include "runtime/storage.h"
#include "runtime/tensor.h"

namespace lt {

// What lt.compile's capture keeps of a graph it ran: the cache key and the collected graph (its
// inputs in binding order), so that a replay binds new data and runs without re-collecting.
struct GraphRecord {
  Hash128 key;
  Graph graph;
};

// Computes `roots` on `backend`; returns one Storage per root. With `record`, also fills it.
// With `root_refs` (a sync that re-points tensors at the results), outputs may be written into
// the memory of inputs nothing else can see any more (runtime/donation.h); a donated output's
// Storage then shares the input's buffer.
std::vector<std::shared_ptr<Storage>> execute_graph(const std::vector<const Node*>& roots,
                                                    const std::string& backend, SyncReason reason,
                                                    GraphRecord* record = nullptr,
                                                    const RootRefs* root_refs = nullptr);

// One bound input of a replayed graph: a buffer (with the Storage owning it) or a runtime scalar.
struct BoundInput {
  std::shared_ptr<Storage> storage;  // null for scalars
  DType dtype = DType::Float32;
  double scalar = 0;
  int64_t scalar_i = 0;
  // The root whose result replaces this input's tensor, when that tensor is the storage's only
  // other holder: the input may then be donated to the root's output (runtime/donation.h).
  int owner_root = -1;
};
// Runs the executable cached under `key` (from a GraphRecord) on `inputs`, skipping collection
// and hashing; returns one Storage per root, or nullopt when the executable left the cache.
std::optional<std::vector<std::shared_ptr<Storage>>> run_cached(
    const Hash128& key, const std::string& backend, const std::vector<BoundInput>& inputs,
    size_t roots);
// Generated kernel sources of the last executed graph (empty when none).
std::vector<std::string> last_kernel_sources();
// Writes <dir>/<key>.json/.txt/.dot and kernel sources (and data when outputs are given):
// what LT_DUMP_DIR does for each compiled graph. `inputs` are the graph's input bytes as read
// before the run (dump_inputs), since a run may write results into donated inputs.
using InputBytes = std::vector<std::vector<unsigned char>>;
void dump_compiled(const std::string& dir, const Graph& g, const std::string& key,
                   const std::string& backend, const std::vector<std::string>& sources,
                   const std::vector<std::shared_ptr<Storage>>* outputs,
                   const InputBytes* inputs = nullptr);
// The bytes of g's device-data inputs now (empty entries for scalars), for dump_compiled.
InputBytes dump_inputs(const Graph& g);
// Drops every executable cached in memory (tests); the disk cache is runtime/disk_cache.h.
void clear_graph_cache();
size_t graph_cache_size();

}  // namespace lt
