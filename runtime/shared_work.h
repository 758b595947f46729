// Which other live tensors a sync materializes with the ones it was asked for.
//
// The rule (DESIGN.md, "Sync"): a sync of some pending tensors also materializes every live pending
// tensor, traced by the same thread, whose pending graph shares a computed node with theirs. Such a
// tensor would otherwise keep that shared work as history: a parameter updated by hand under
// no_grad and read by the next step's `loss.item()` (its update node is in the loss graph), a
// token buffer grown by `cat` and read through a slice, a gradient read by two host reads of
// different functions of it, and the values autograd saved for a backward still to come (a
// `loss.item()` before `backward()`; runtime/saved.h). Materialized at the sync, the next
// step starts from data, every step's graph has the same size and hash, and shared work is
// computed once. Tensors whose graphs only read the same device data (leaves) are independent and
// stay pending, and so do bases that only their views hold.
#pragma once
#include <memory>
#include <vector>

namespace lt {

struct TensorImpl;

// The live pending tensors of this thread, not in `requested`, whose graphs share a computed node
// with the pending graphs of `requested`.
std::vector<std::shared_ptr<TensorImpl>> tensors_sharing_work(
    const std::vector<std::shared_ptr<TensorImpl>>& requested);

}  // namespace lt
