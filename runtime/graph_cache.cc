#include "runtime/graph_cache.h"

namespace lt {

CachedGraph* GraphCache::find(const Hash128& key) {
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.pos);
  return it->second.graph.get();
}

CachedGraph* GraphCache::insert(const Hash128& key, std::unique_ptr<CachedGraph> g) {
  if (auto* existing = find(key)) return existing;
  while (map_.size() >= capacity_ && !lru_.empty()) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(key);
  auto* raw = g.get();
  map_.emplace(key, Entry{std::move(g), lru_.begin()});
  return raw;
}

void GraphCache::clear() {
  map_.clear();
  lru_.clear();
}

}  // namespace lt
