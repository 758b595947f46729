// The mutable side of lt::metrics, for the runtime's own use.
#pragma once
#include <atomic>
#include <cstdint>

#include "runtime/metrics.h"
#include "runtime/tensor.h"  // SyncReason

namespace lt::metrics {

enum class Counter {
  TracedOps,
  Syncs,
  GraphCompiles,
  GraphCacheHits,
  DiskCacheHits,
  KernelsCompiled,
  KernelLaunches,
  Fallbacks,
  DonatedBuffers,
  DonatedBytes,
  CudaGraphLaunches,
  SymbolicCompiles,
  kCount
};
void bump(Counter c, int64_t by = 1);
void record_sync(SyncReason r);
void set_last_graph(GraphInfo g);

}  // namespace lt::metrics
