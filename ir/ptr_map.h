// A flat open-addressing map from pointers to small values. collect_graph runs on every sync,
// cache hits included, and inserts every node of the graph into a few maps: std::unordered_map
// allocates a heap node per entry, which made these maps most of the cost of a warm sync. This
// one keeps its entries in one array (linear probing, power-of-two capacity, at most half full).
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "ir/error.h"

namespace lt {

template <typename K, typename V>
class PtrMap {
 public:
  PtrMap() = default;
  explicit PtrMap(size_t expected) { reserve(expected); }

  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > slots_.size()) rehash(cap);
  }

  // Inserts (k, v) unless k is present; returns the entry's value and whether it was inserted.
  std::pair<V*, bool> emplace(const K* k, V v) {
    if (2 * (size_ + 1) > slots_.size()) rehash(slots_.empty() ? 16 : 2 * slots_.size());
    size_t i = probe(k);
    if (slots_[i].key == k) return {&slots_[i].value, false};
    slots_[i] = {k, std::move(v)};
    ++size_;
    return {&slots_[i].value, true};
  }

  const V* find(const K* k) const {
    if (slots_.empty()) return nullptr;
    const Slot& s = slots_[probe(k)];
    return s.key == k ? &s.value : nullptr;
  }

  const V& at(const K* k) const {
    if (const V* v = find(k)) return *v;
    fail(ErrorKind::Runtime, "internal: pointer missing from a graph map");
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t count(const K* k) const { return find(k) ? 1 : 0; }

 private:
  struct Slot {
    const K* key = nullptr;
    V value{};
  };

  // The slot holding k, or the empty slot where it would go. Keys are never null.
  size_t probe(const K* k) const {
    const size_t mask = slots_.size() - 1;
    size_t i =
        static_cast<size_t>((reinterpret_cast<uintptr_t>(k) >> 4) * 0x9e3779b97f4a7c15ull >> 20) &
        mask;
    while (slots_[i].key && slots_[i].key != k) i = (i + 1) & mask;
    return i;
  }

  void rehash(size_t cap) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{});
    for (Slot& s : old)
      if (s.key) slots_[probe(s.key)] = std::move(s);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace lt
