// Sync points. A sync materializes pending lazy tensors: it collects their IR, looks the graph
// key up in the cache (compiling on a miss), runs the executable and re-points each tensor at its
// new data. Each sync records its reason and the call site.
#pragma once
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace lt {

const char* sync_reason_name(SyncReason r);

// Materializes every live pending lazy tensor that the calling thread traced (the end of a
// training step). Each thread has its own trace: tensors traced by other threads stay pending
// (sync them by name, or in their thread); a tensor shared between threads needs the user's own
// synchronization around a sync of it, as any object mutated by one thread and read by another.
void mark_step();
// Materializes these tensors (and what they depend on); other pending tensors stay pending.
void sync(const std::vector<Tensor>& tensors, SyncReason reason = SyncReason::Sync);
// Number of live lazy tensors with pending IR (tests use it to prove nothing leaks across steps).
size_t pending_tensor_count();

}  // namespace lt
