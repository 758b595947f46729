#include "runtime/memory_views.h"

#include "ir/ops.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {

// Where a value lies: bytes from `offset` on in `root`, a runtime-owned host buffer.
struct Region {
  BufferPtr root;
  size_t offset = 0;
  const std::string* backend = nullptr;
};

// Whether slice attributes (start, step, count per dimension) over `in` select one contiguous
// run of row-major elements; `first` is then that run's first element.
bool contiguous_slice(const Shape& in, const IntList& sss, int64_t& first) {
  const size_t rank = in.size();
  if (sss.size() != 3 * rank) return false;
  auto whole = [&](size_t d) { return sss[3 * d] == 0 && sss[3 * d + 2] == in[d]; };
  size_t k = rank;  // the last dimension not taken whole
  for (size_t d = rank; d-- > 0;)
    if (!whole(d)) {
      k = d;
      break;
    }
  if (k == rank) {
    first = 0;
    return true;
  }
  if (sss[3 * k + 1] != 1 && sss[3 * k + 2] > 1) return false;
  for (size_t d = 0; d < k; ++d)
    if (sss[3 * d + 2] != 1) return false;
  int64_t stride = 1;
  first = 0;
  for (size_t d = rank; d-- > 0;) {
    first += sss[3 * d] * stride;
    stride *= in[d];
  }
  return true;
}

// Where the data of `s` lies, when views may share it: host memory the runtime owns, or a part of
// such memory (a view's). Not a NumPy array's or DLPack producer's memory: its owner's rules apply.
bool region_of_storage(const Storage* s, Region& r) {
  if (!s || !s->buffer || !s->buffer->on_host()) return false;
  if (const auto* sub = dynamic_cast<const HostSubBuffer*>(s->buffer.get())) {
    r.root = sub->parent();
    r.offset = sub->offset();
  } else if (s->buffer->runtime_owned()) {
    r.root = s->buffer;
    r.offset = 0;
  } else {
    return false;
  }
  r.backend = &s->backend;
  return true;
}

bool region_of(const Node& n, Region& r) {
  switch (n.op) {
    case Op::Param:
      return region_of_storage(static_cast<const Storage*>(n.data.get()), r);
    case Op::Reshape:
      return region_of(*n.inputs[0], r);
    case Op::Slice: {
      int64_t first = 0;
      if (!contiguous_slice(n.inputs[0]->shape, n.attrs.ints, first) || !region_of(*n.inputs[0], r))
        return false;
      r.offset += static_cast<size_t>(first) * dtype_size(n.dtype);
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

std::shared_ptr<Storage> shared_view_storage(const Node& n) {
  if (n.op != Op::Reshape && n.op != Op::Slice) return nullptr;
  const size_t bytes = static_cast<size_t>(numel(n.shape)) * dtype_size(n.dtype);
  Region r;
  if (bytes == 0 || !region_of(n, r)) return nullptr;
  auto s = std::make_shared<Storage>();
  s->backend = *r.backend;
  if (r.offset == 0 && bytes == r.root->bytes())
    s->buffer = r.root;
  else
    s->buffer = std::make_shared<HostSubBuffer>(r.root, r.offset, bytes);
  return s;
}

namespace {

bool movement(Op op) { return is_movement(op_info(op).cls); }

// Whether `n` reads only data and run-time scalars through movement, gathers and index arithmetic
// (a slice whose start is read at run time is a gather at positions + start), in a few nodes.
bool recomputable(const Node& n, int& budget) {
  if (--budget < 0) return false;
  if (n.op == Op::Param) return n.data != nullptr;
  if (n.op == Op::Scalar) return true;
  if (!movement(n.op) && n.op != Op::Gather && n.op != Op::Add) return false;
  for (const NodePtr& in : n.inputs)
    if (!recomputable(*in, budget)) return false;
  return true;
}

}  // namespace

bool deferred_view(const Node& n) {
  int budget = 8;
  return (movement(n.op) || n.op == Op::Gather) && recomputable(n, budget);
}

bool slice_shares_memory(const TensorImpl& a, int64_t dim, int64_t step, int64_t count) {
  Region r;
  if (a.device.is_lazy() || a.pending || (step != 1 && count > 1) ||
      !region_of_storage(a.storage.get(), r))
    return false;
  for (int64_t d = 0; d < dim; ++d)
    if (a.shape[static_cast<size_t>(d)] != 1) return false;
  return true;
}

}  // namespace lt
