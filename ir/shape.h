// Shapes: dimension lists, broadcasting, axis normalization, contiguous strides.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
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
std::string shape_str(std::span<const int64_t> s);  // "[2, 3]"; any list of extents
inline std::string shape_str(std::initializer_list<int64_t> s) { return shape_str(std::span(s.begin(), s.size())); }
// NumPy/PyTorch broadcasting; `op` names the operation in the error.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Maps a possibly negative axis into [0, rank); rank 0 accepts -1 and 0 as PyTorch does.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* op);
std::vector<int64_t> contiguous_strides(const Shape& s);

}  // namespace lt
