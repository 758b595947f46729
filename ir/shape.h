// Shapes: dimension lists, broadcasting, axis normalization, contiguous strides.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/small_vec.h"

namespace lt {

// Dimension lists, inline up to rank 4 and in pooled blocks past it (ir/small_vec.h): every traced
// op makes a shape for its node and copies it into its tensor. Attribute lists (axes,
// permutations) share the type, being shapes as often as not.
using IntList = SmallVec<int64_t, 4>;
using Shape = IntList;

// Between IntList and the std::vector<int64_t> of public signatures (reshape, sum, ...).
inline IntList to_ints(std::span<const int64_t> v) { return IntList(v.begin(), v.end()); }
inline std::vector<int64_t> to_vector(std::span<const int64_t> v) { return {v.begin(), v.end()}; }
inline bool same_ints(std::span<const int64_t> a, std::span<const int64_t> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

int64_t numel(const Shape& s);
// Every node's shape passes this once (make_node, make_param, make_constant), so numel() and
// numel * dtype size never overflow afterwards: it fails, naming `op` and the shape, on a negative
// dimension or more than 2^60 elements (2^63 bytes of the widest dtype).
void check_extent_slow(std::span<const int64_t> s, std::string_view op);
inline void check_extent(std::span<const int64_t> s, std::string_view op) {
  // Fast path, a few instructions per traced op: rank r <= 6 with every extent below 2^(60/r)
  // (OR-ing them also catches a negative one, whose top bit is set).
  static constexpr int kBits[7] = {60, 60, 30, 20, 15, 12, 10};
  if (s.size() <= 6) {
    uint64_t any = 0;
    for (auto d : s) any |= static_cast<uint64_t>(d);
    if ((any >> kBits[s.size()]) == 0) return;
  }
  check_extent_slow(s, op);
}
// Size arithmetic on numbers from user input (attributes, trace files, Python arguments): an
// overflow fails naming `op` where plain int64 arithmetic would be undefined behaviour.
int64_t size_add(int64_t a, int64_t b, std::string_view op);
int64_t size_mul(int64_t a, int64_t b, std::string_view op);
std::string shape_str(std::span<const int64_t> s);  // "[2, 3]"; any list of extents
inline std::string shape_str(std::initializer_list<int64_t> s) {
  return shape_str(std::span(s.begin(), s.size()));
}
// NumPy/PyTorch broadcasting; `op` names the operation in the error.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Maps a possibly negative axis into [0, rank); rank 0 accepts -1 and 0 as PyTorch does.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* op);
std::vector<int64_t> contiguous_strides(const Shape& s);

}  // namespace lt
