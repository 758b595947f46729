// Internals of the reference interpreter: the value of a node and the loops every rule is built on.
//
// A value keeps its elements widened, contiguous and row-major: float64 for floating dtypes (every
// float16/bfloat16/float32 value is exact in a double) and int64 for integral ones, already rounded
// (or wrapped) to the node's dtype. So rules compute in double / int64 without a per-element dtype
// switch, and the node's dtype only matters when the interpreter rounds a fresh result
// (finalize) and when it converts to and from host buffers.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "ir/error.h"
#include "lowering/prim_graph.h"

namespace lt::ref {

struct Value {
  DType dtype = DType::Float32;
  Shape shape;
  std::vector<double> f;   // floating dtypes
  std::vector<int64_t> i;  // integral dtypes (bool as 0/1)
  bool floating() const { return is_floating(dtype); }

  Value() = default;
  Value(Value&&) = default;
  Value& operator=(Value&&) = default;
  ~Value();  // hands large element vectors back to the pool
};

// A process-wide pool of large element vectors, reused across nodes and runs: a fresh allocation
// costs a page fault per 4 KiB on first touch and an munmap on release, which otherwise dominates
// the interpreter's time. Bounded (least recently returned vectors go first); thread-safe.
// take_* returns a vector of exactly n elements with unspecified contents.
std::vector<double> take_doubles(size_t n);
std::vector<int64_t> take_ints(size_t n);

// What a rule sees: the node, its operand values, the run's inputs, and the value to fill (dtype
// and shape already set from the node; the rule sizes and fills `f` or `i`).
struct Ctx {
  const PNode& node;
  int index;  // of the node, for error messages
  std::vector<const Value*> in;
  const std::vector<RunInput>& inputs;
  Value& out;
};

using EvalFn = void (*)(Ctx&);
// The rule of a primitive op, or nullptr when the reference interpreter has none
// (reference_ops.cc).
EvalFn reference_rule(Op op);

using Strides = std::vector<int64_t>;

// Per output dimension, the stride of an operand of shape `in` broadcast (right-aligned) to `out`:
// 0 along new leading dims and along size-1 dims. Throws when `in` does not broadcast to `out`.
Strides broadcast_strides(const Shape& in, const Shape& out);

// Calls f(o, off) for each element o (row-major) of `shape`, where off[k] is the element offset in
// operand k that has per-dimension strides st[k]. Handles rank 0 (one element) and empty shapes.
template <size_t N, class F>
void strided_loop(const Shape& shape, const std::array<const Strides*, N>& st, F&& f) {
  int64_t n = numel(shape);
  if (n <= 0) return;
  std::array<int64_t, N> off{};
  const size_t r = shape.size();
  if (r == 0) {
    f(int64_t{0}, off);
    return;
  }
  const int64_t inner = shape[r - 1];
  std::array<int64_t, N> step;
  for (size_t k = 0; k < N; ++k) step[k] = (*st[k])[r - 1];
  std::vector<int64_t> idx(r, 0);
  for (int64_t o = 0; o < n; o += inner) {
    std::array<int64_t, N> cur = off;
    for (int64_t j = 0; j < inner; ++j) {
      f(o + j, cur);
      for (size_t k = 0; k < N; ++k) cur[k] += step[k];
    }
    // Odometer over the outer dims.
    for (size_t d = r - 1; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += (*st[k])[d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= (*st[k])[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// Checks a freshly computed value's size and rounds it to its dtype: floats to the nearest value of
// the dtype, integers wrapped to the dtype's width (bool: != 0). `exact`: already in the dtype.
void finalize(Value& v, bool exact = false);

// Host buffer <-> value conversions. load_buffer fills v (dtype and shape set) from a buffer.
void load_buffer(const Buffer& b, Value& v);
BufferPtr value_to_buffer(const Value& v);
// Writes v's elements in its dtype's storage format to dst (numel * dtype_size bytes).
void value_to_memory(const Value& v, void* dst);

}  // namespace lt::ref
