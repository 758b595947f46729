// Device memory through a caching allocator: cuMemAlloc is slow and synchronizes the device, so
// freed blocks go back to a bin of their size class and the next request of that class reuses
// them. Sizes round up to 512 bytes below 1 MiB and to 2 MiB above. When cuMemAlloc runs out of
// memory the cache is released and the allocation retried once before a clear lt::Error.
//
// Blocks are returned when their Buffer dies, on the host's timeline, while queued work may still
// use them: that is safe because the backend issues all work on one stream (cuda_device.h), so
// the next user of a block is ordered after the last one. Freeing to the driver (empty_cache,
// the out-of-memory retry) synchronizes the stream first.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backends/cuda/cuda_device.h"

namespace lt {

struct CudaAllocatorStats {
  size_t allocated_bytes = 0;  // in live blocks (rounded sizes)
  size_t cached_bytes = 0;     // in free blocks held by the cache
  size_t peak_allocated_bytes = 0;
  int64_t device_allocs = 0;   // cuMemAlloc calls
  int64_t device_frees = 0;    // cuMemFree calls
  int64_t cache_hits = 0;      // requests served from a bin
  int64_t preferred_hits = 0;  // of those, requests given the block they preferred
  int64_t oom_retries = 0;     // out-of-memory retries after emptying the cache
};

class CudaCachingAllocator {
 public:
  explicit CudaCachingAllocator(std::shared_ptr<CudaDevice> dev) : dev_(std::move(dev)) {}
  ~CudaCachingAllocator();

  // The size class of a request (what a block of it really occupies).
  static size_t round_size(size_t bytes);
  // A block of round_size(bytes) bytes; throws lt::Error when the device is out of memory.
  // `prefer`: the block the caller held for the same purpose last time (an executable's output or
  // temporary of its previous run), taken when it is free in this size class. Graphs whose
  // outputs cross into torch and back (torch.compile's forward saves activations for its
  // backward) then see the same addresses step after step, so their CUDA graphs replay without
  // recapturing library steps (cuda_graph.h); any free block of the class is equally correct.
  CUdeviceptr allocate(size_t bytes, CUdeviceptr prefer = 0);
  // Returns a block from allocate(bytes) to its bin.
  void release(CUdeviceptr p, size_t bytes);
  // Frees every cached block back to the driver.
  void empty_cache();
  CudaAllocatorStats stats() const;
  const std::shared_ptr<CudaDevice>& device() const { return dev_; }

 private:
  void empty_cache_locked();
  std::shared_ptr<CudaDevice> dev_;
  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<CUdeviceptr>> bins_;  // size class -> free blocks
  CudaAllocatorStats stats_;
};

}  // namespace lt
