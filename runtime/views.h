// Views that alias their base, as PyTorch's: `b[1:].zero_()`, `b.t()[0] = 9`, `p.data.add_(u)`
// change `b` / `p`, and every other view of the same base sees the change.
//
// Values stay functional underneath (functionalization, as PyTorch's LazyTensor Core and torch_xla
// do): a view is a tensor of its own, computed from its base by a chain of view steps, and linked
// to that base. An in-place op on a view computes the view's new value, scatters it back through
// the chain into a new value of the base (pad + where, reshape, permute: ops with VJP rules, so
// autograd follows the write), rebinds the base to it and bumps the base's version. A view whose
// base moved on is recomputed from the base when it is next read (node_of, host reads, sync).
// Chains are flattened: a view of a view links to the root base, never to an intermediate.
//
// Only the user-facing view ops make links (Tensor::reshape/view/permute/transpose/expand/
// unsqueeze/squeeze/flatten/detach, lt::slice/narrow/select/split/chunk); the runtime's own
// uses of movement ops on temporaries go through the node-level functions and keep nothing alive.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "ir/small_vec.h"
#include "runtime/tensor.h"

namespace lt {

struct TensorImpl;

struct ViewStep {
  enum class Kind { Alias, Reshape, Permute, Slice, Expand };
  Kind kind = Kind::Alias;
  Shape in_shape;  // the shape this step reads
  IntList ints;    // Permute: the permutation; Slice: {dim, start, step, count}
};

struct ViewLink {
  // The root (never a view itself). Null once nothing else held the base when this view was
  // written: no one can observe the base then, so the view goes on alone (strides kept).
  std::shared_ptr<TensorImpl> base;
  // Inline and pooled storage throughout: view ops are traced per op and allocate nothing once
  // warm (tests/cpp/trace_alloc_test.cc).
  SmallVec<ViewStep, 3> steps;  // base -> this tensor
  IntList strides;              // PyTorch's strides and offset in the base's elements
  int64_t offset = 0;
  uint64_t seen = 0;      // base->version this tensor's value was computed from
  bool detached = false;  // made by detach() / .data: shares values, not history
  bool grad = true;       // recomputations record autograd (false when made under no_grad)
  ~ViewLink();            // releases its count on the base (TensorImpl::view_refs)
  void drop_base();       // the view goes on alone
};

// Links `out` (just computed from `src` by one view op) to src's base through `step`. Returns
// `out`. A `Reshape` that cannot be expressed with strides (PyTorch copies there) makes no link.
Tensor link_view(const Tensor& src, const Tensor& out, ViewStep step);

// Recomputes t from its base when the base was written since (cheap check first).
void refresh_view(TensorImpl& t);

// The in-place write of `value` (t's shape and dtype) into view t: the base and t change.
void write_through_view(TensorImpl& t, const Tensor& value);

// PyTorch's strides of t (contiguous for a tensor that is not a view) and contiguity.
IntList view_strides(const TensorImpl& t);
bool is_contiguous(const TensorImpl& t);
// Whether a view of t can take `shape` without copying (PyTorch's view rule).
bool can_view_as(const TensorImpl& t, const Shape& shape);

}  // namespace lt
