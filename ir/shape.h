// Shapes: dimension lists, broadcasting, axis normalization, contiguous strides.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lt {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"
// NumPy/PyTorch broadcasting; `op` names the operation in the error.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Maps a possibly negative axis into [0, rank); rank 0 accepts -1 and 0 as PyTorch does.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* op);
std::vector<int64_t> contiguous_strides(const Shape& s);

}  // namespace lt
