#include "ir/shape.h"

#include "ir/error.h"

namespace lt {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

void check_extent_slow(std::span<const int64_t> s, std::string_view op) {
  constexpr int64_t kMaxElements = int64_t{1} << 60;
  // Zero extents count as 1: an empty tensor's strides are still products of the other extents.
  int64_t n = 1;
  bool too_many = false;
  for (auto d : s) {
    if (d < 0) fail(ErrorKind::Runtime, op, ": negative dimension ", d, " in shape ", shape_str(s));
    // Multiplying on after an overflow would be UB: remember it, and still look for negatives.
    if (!too_many && (__builtin_mul_overflow(n, std::max<int64_t>(d, 1), &n) || n > kMaxElements))
      too_many = true;
  }
  if (too_many)
    fail(ErrorKind::Runtime, op, ": shape ", shape_str(s), " has more than 2^60 elements");
}

int64_t size_add(int64_t a, int64_t b, std::string_view op) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(ErrorKind::Runtime, op, ": integer overflow in ", a, " + ", b);
  return r;
}

int64_t size_mul(int64_t a, int64_t b, std::string_view op) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(ErrorKind::Runtime, op, ": integer overflow in ", a, " * ", b);
  return r;
}

std::string shape_str(std::span<const int64_t> s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  // The common cases of every traced elementwise op: equal shapes, or a 0-d operand (a number).
  if (b.empty() || a == b) return a;
  if (a.empty()) return b;
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(ErrorKind::Runtime, op, ": shapes ", shape_str(a), " and ", shape_str(b),
           " are not broadcastable (dimension ", i, ": ", da, " vs ", db, ")");
    r[i] = da == 1 ? db : da;
  }
  return r;
}

int64_t normalize_axis(int64_t axis, int64_t rank, const char* op) {
  int64_t r = rank == 0 ? 1 : rank;
  if (axis < -r || axis >= r)
    fail(ErrorKind::Index, op, ": dimension out of range (expected to be in range of [", -r, ", ",
         r - 1, "], but got ", axis, ")");
  return axis < 0 ? axis + r : axis;
}

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

}  // namespace lt
