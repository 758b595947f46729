#include "runtime/views.h"

#include "ir/error.h"
#include "ir/pool.h"
#include "runtime/indexing.h"
#include "runtime/ops.h"
#include "runtime/tape.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {

IntList dense_strides(const Shape& s) {
  IntList st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * std::max<int64_t>(s[i], 1);
  return st;
}

// PyTorch's computeStride: the strides of `to` over memory laid out as (from, strides), or none
// when some new dimension would span two non-contiguous chunks.
std::optional<IntList> reshaped_strides(const Shape& from, const IntList& strides,
                                        const Shape& to) {
  if (numel(from) == 0 || from.empty()) return dense_strides(to);
  IntList out(to.size(), 1);
  int64_t view_d = static_cast<int64_t>(to.size()) - 1;
  int64_t chunk_base = strides.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(from.size()) - 1; d >= 0; --d) {
    tensor_numel *= from[d];
    if (d == 0 || (from[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || to[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base;
        view_numel *= to[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base = strides[d - 1];
        tensor_numel = view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

// The shape step i of `link` produces (the next step's input, or the view's own shape).
const Shape& step_out_shape(const ViewLink& link, size_t i, const Shape& final_shape) {
  return i + 1 < link.steps.size() ? link.steps[i + 1].in_shape : final_shape;
}

// One step forward, with node-level ops (no links: these values are internal).
Tensor apply_step(const Tensor& x, const ViewStep& s, const Shape& out_shape) {
  switch (s.kind) {
    case ViewStep::Kind::Alias:
      return x;
    case ViewStep::Kind::Reshape:
      return reshape_to(x, out_shape);
    case ViewStep::Kind::Permute:
      return permute(x, std::vector<int64_t>(s.ints.begin(), s.ints.end()));
    case ViewStep::Kind::Expand:
      return expand(x, std::vector<int64_t>(out_shape.begin(), out_shape.end()));
    case ViewStep::Kind::Slice:
      return slice_dim_prim(x, s.ints[0], s.ints[1], s.ints[2], s.ints[3]);
  }
  return x;
}

// `v` (shape [..., count, ...] along dim) spread `step` apart and padded to `n` from `start`.
Tensor place_along(const Tensor& v, int64_t dim, int64_t start, int64_t step, int64_t count,
                   int64_t n) {
  Tensor t = v;
  if (step > 1 && count > 1) {
    Shape s = t.shape();
    Shape dilated = s;
    dilated[dim] = count * step;
    s.insert(s.begin() + dim + 1, 1);
    t = pad_dim(reshape_to(t, s), dim + 1, 0, step - 1, 0.0);
    t = slice_dim_prim(reshape_to(t, dilated), dim, 0, 1, (count - 1) * step + 1);
  }
  int64_t length = (count - 1) * step + 1;
  return pad_dim(t, dim, start, n - start - length, 0.0);
}

// The parent's new value once `value` is written into the part of it that step `s` reads.
Tensor scatter_step(const Tensor& parent, const Tensor& value, const ViewStep& s) {
  switch (s.kind) {
    case ViewStep::Kind::Alias:
      return value;
    case ViewStep::Kind::Reshape:
      return reshape_to(value, s.in_shape);
    case ViewStep::Kind::Permute: {
      std::vector<int64_t> inv(s.ints.size());
      for (size_t i = 0; i < s.ints.size(); ++i) inv[s.ints[i]] = static_cast<int64_t>(i);
      return permute(value, inv);
    }
    case ViewStep::Kind::Expand:
      fail(ErrorKind::Runtime,
           "not implemented: an in-place write through an expanded view (expanded from ",
           shape_str(s.in_shape), " to ", shape_str(value.shape()),
           ") on every backend; clone() it first");
    case ViewStep::Kind::Slice: {
      const int64_t dim = s.ints[0], start = s.ints[1], step = s.ints[2], count = s.ints[3];
      const int64_t n = s.in_shape[dim];
      if (count == 0) return parent;
      if (start == 0 && step == 1 && count == n) return value;
      Tensor placed = place_along(value, dim, start, step, count, n);
      Shape ones_shape(s.in_shape.size(), 1);
      ones_shape[dim] = count;
      Tensor mask =
          place_along(ones(ones_shape, DType::Int32, parent.device()), dim, start, step, count, n);
      return where(ne(mask, Scalar(int64_t{0})), placed, parent);
    }
  }
  return value;
}

bool has_overlap(const Shape& shape, const IntList& strides) {
  for (size_t i = 0; i < shape.size(); ++i)
    if (strides[i] == 0 && shape[i] > 1) return true;
  return false;
}

}  // namespace

ViewLink::~ViewLink() { drop_base(); }

void ViewLink::drop_base() {
  if (base) base->view_refs.fetch_sub(1, std::memory_order_relaxed);
  base.reset();
}

IntList view_strides(const TensorImpl& t) {
  return t.view ? t.view->strides : dense_strides(t.shape);
}

bool is_contiguous(const TensorImpl& t) {
  if (!t.view || numel(t.shape) == 0) return true;
  IntList expected = dense_strides(t.shape);
  for (size_t i = 0; i < t.shape.size(); ++i)
    if (t.shape[i] != 1 && t.view->strides[i] != expected[i]) return false;
  return true;
}

bool can_view_as(const TensorImpl& t, const Shape& shape) {
  return numel(shape) == numel(t.shape) &&
         reshaped_strides(t.shape, view_strides(t), shape).has_value();
}

Tensor link_view(const Tensor& src, const Tensor& out, ViewStep step) {
  TensorImpl& s = *src.impl();
  TensorImpl& o = *out.impl();
  if (&s == &o || o.view) return out;  // the op returned its input (a no-op view): already aliased
  auto link = make_pooled<ViewLink>();
  IntList st = view_strides(s);
  link->offset = s.view ? s.view->offset : 0;
  switch (step.kind) {
    case ViewStep::Kind::Alias:
      link->strides = st;
      break;
    case ViewStep::Kind::Reshape: {
      auto r = reshaped_strides(s.shape, st, o.shape);
      if (!r) return out;  // PyTorch's reshape copies here: `out` is a value of its own
      link->strides = *r;
      break;
    }
    case ViewStep::Kind::Permute:
      for (int64_t p : step.ints) link->strides.push_back(st[p]);
      break;
    case ViewStep::Kind::Expand: {
      size_t lead = o.shape.size() - s.shape.size();
      link->strides.assign(lead, 0);
      for (size_t i = 0; i < s.shape.size(); ++i)
        link->strides.push_back(s.shape[i] == 1 && o.shape[lead + i] != 1 ? 0 : st[i]);
      break;
    }
    case ViewStep::Kind::Slice:
      link->strides = st;
      link->strides[step.ints[0]] *= step.ints[2];
      if (step.ints[3] > 0) link->offset += step.ints[1] * st[step.ints[0]];
      break;
  }
  step.in_shape = s.shape;
  if (s.view && s.view->base) {
    link->base = s.view->base;
    link->steps = s.view->steps;
    link->detached = s.view->detached;
    link->grad = s.view->grad;
  } else {
    link->base = src.impl();
  }
  link->steps.push_back(std::move(step));
  link->detached = link->detached || link->steps.back().kind == ViewStep::Kind::Alias;
  link->grad = link->grad && grad_enabled();
  link->seen = link->base->version;
  link->base->view_refs.fetch_add(1, std::memory_order_relaxed);
  o.view = std::move(link);
  return out;
}

void refresh_view(TensorImpl& t) {
  ViewLink& link = *t.view;
  Tensor x(link.base);
  {
    std::optional<NoGradGuard> no_grad;
    std::optional<EnableGradGuard> with_grad;
    if (link.detached || !link.grad)
      no_grad.emplace();
    else
      with_grad.emplace();
    for (size_t i = 0; i < link.steps.size(); ++i)
      x = apply_step(x, link.steps[i], step_out_shape(link, i, t.shape));
    rebind(t, x, /*history=*/!link.detached);
  }
  link.seen = link.base->version;
}

void write_through_view(TensorImpl& t, const Tensor& value) {
  ViewLink& link = *t.view;
  if (has_overlap(t.shape, link.strides))
    fail(ErrorKind::Runtime,
         "unsupported operation: more than one element of the written-to tensor (shape ",
         shape_str(t.shape),
         ", an expanded view) refers to a single memory location. Please clone() the tensor "
         "before performing the operation.");
  if (link.base && link.base.use_count() == 1) link.drop_base();  // only this view held it
  if (!link.base) {  // nothing else sees the base: a plain in-place update (e.g. a Parameter's)
    rebind(t, keep_overwritten_history(t, value), /*history=*/true);
    ++t.version;
    return;
  }
  TensorImpl& base = *link.base;
  const bool base_is_leaf =
      base.autograd && base.autograd->requires_grad && !base.autograd->grad_fn;
  if (!link.detached && grad_enabled() && base_is_leaf)
    fail(ErrorKind::Runtime,
         "a view of a leaf Variable that requires grad is being used in an in-place operation "
         "(view shape ",
         shape_str(t.shape), ", leaf shape ", shape_str(base.shape), ")");
  std::optional<NoGradGuard> no_grad;
  if (link.detached) no_grad.emplace();
  // The chain's intermediate values, base first, then the write carried back up through them.
  std::vector<Tensor> parents{Tensor(link.base)};
  for (size_t i = 0; i + 1 < link.steps.size(); ++i)
    parents.push_back(apply_step(parents.back(), link.steps[i], step_out_shape(link, i, t.shape)));
  Tensor v = value;
  for (size_t i = link.steps.size(); i-- > 0;) v = scatter_step(parents[i], v, link.steps[i]);
  if (!link.detached) v = keep_overwritten_history(base, v);
  rebind(base, v, /*history=*/!link.detached);
  ++base.version;
  no_grad.reset();
  // The view itself continues the value's history, a detached one too (PyTorch: `d = x.detach();
  // d.add_(y)` makes d require grad through y, while x's history stays as it was).
  rebind(t, keep_overwritten_history(t, value), /*history=*/true);
  ++t.version;
  link.seen = base.version;
}

}  // namespace lt
