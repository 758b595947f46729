// The in-memory graph cache: graph key + backend -> compiled executable, least recently used out.
#pragma once
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "ir/hash.h"
#include "ir/symbolic_graph.h"
#include "runtime/donation.h"

namespace lt {

struct CachedGraph {
  std::unique_ptr<Executable> exe;
  std::vector<int> output_buffers;  // per graph root
  std::vector<BufferSpec::Kind> output_kinds;
  // Per graph root, empty when none is a view (Plan::output_offsets): the root's part of its
  // buffer as (byte offset, bytes), bytes -1 for the whole buffer.
  std::vector<std::pair<size_t, int64_t>> output_views;
  std::vector<DonationCandidate> donations;  // outputs a run may write into an input's memory
  int64_t nodes = 0;                         // prim nodes after lowering
  std::string grouping;
  std::vector<std::string> sources;
  // A symbolic compile (runtime/symbolic_compile.h): runs take the symbols' values, and replays by
  // key (lt.compile) do not use it. symbol_dims: per symbol, the input dim it stands for.
  bool symbolic = false;
  std::vector<DynamicDim> symbol_dims;
};

class GraphCache {
 public:
  explicit GraphCache(size_t capacity) : capacity_(capacity) {}
  CachedGraph* find(const Hash128& key);  // refreshes recency
  CachedGraph* insert(const Hash128& key, std::unique_ptr<CachedGraph> g);
  size_t size() const { return map_.size(); }
  void clear();

 private:
  size_t capacity_;
  std::list<Hash128> lru_;  // front = most recent
  struct Entry {
    std::unique_ptr<CachedGraph> graph;
    std::list<Hash128>::iterator pos;
  };
  std::unordered_map<Hash128, Entry, Hash128Hasher> map_;
};

}  // namespace lt
