// Eager view ops without a kernel (deferred_view: with no kernel of their own). On a host backend a
// reshape of materialized data is the same bytes, and a contiguous slice (every dimension before
// the sliced one of size 1 in the result, every one after it whole) is a contiguous part of them:
// such a result shares its base's memory, as PyTorch's views do, instead of running a one-op graph
// that copies. Values stay immutable (writes make new storage; buffers shared this way are never
// donated), so sharing is invisible except to the clock and to writes through NumPy/DLPack exports,
// which then reach every view, as in PyTorch.
#pragma once
#include <memory>

#include "ir/node.h"

namespace lt {

struct Storage;
struct TensorImpl;

// The storage of `n`'s value when n is a reshape or a contiguous slice (or a chain of them) over
// the data of a host Param leaf whose memory the runtime owns; null otherwise (and for empty
// results).
std::shared_ptr<Storage> shared_view_storage(const Node& n);

// Whether `n` is a strided view of data: movement ops (permute, expand, slice, reshape) and
// gathers (a slice at a run-time start) over Param leaves and run-time scalars. An eager op making
// one does not run: the tensor keeps `n` as its pending value, computed inside the graph of each op
// that reads it (a transposed GEMM operand, a fused elementwise kernel) or by a host read.
// PyTorch's strided views cost no copy either.
bool deferred_view(const Node& n);

// Whether slicing `a` along `dim` (`count` elements, `step` apart) on an eager device will share
// a's memory: a materialized host tensor, every dimension before `dim` of size 1, and a unit step
// (or a single element).
bool slice_shares_memory(const TensorImpl& a, int64_t dim, int64_t step, int64_t count);

}  // namespace lt
