#include "backends/cuda/caching_allocator.h"

#include <algorithm>
#include <cstdio>

#include "ir/error.h"

namespace lt {
namespace {

constexpr size_t kSmallGranule = 512;
constexpr size_t kLargeThreshold = size_t(1) << 20;
constexpr size_t kLargeGranule = size_t(2) << 20;

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

size_t CudaCachingAllocator::round_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  size_t g = bytes < kLargeThreshold ? kSmallGranule : kLargeGranule;
  return (bytes + g - 1) / g * g;
}

CudaCachingAllocator::~CudaCachingAllocator() {
  std::lock_guard<std::mutex> g(mu_);
  // No throwing from a destructor; at process exit the driver may be gone already.
  const CudaDriver& d = dev_->driver();
  try {
    dev_->bind();
  } catch (...) {
    return;
  }
  d.cuStreamSynchronize(dev_->stream());  // cached blocks may still be used by queued work
  for (auto& [size, blocks] : bins_)
    for (CUdeviceptr p : blocks) d.cuMemFree_v2(p);
  bins_.clear();
}

CUdeviceptr CudaCachingAllocator::allocate(size_t bytes, CUdeviceptr prefer) {
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> g(mu_);
  auto it = bins_.find(size);
  CUdeviceptr p = 0;
  if (it != bins_.end() && !it->second.empty()) {
    std::vector<CUdeviceptr>& bin = it->second;
    // The preferred block, searched from the most recently freed end (a run's outputs die
    // shortly before the next run wants them back), swapped to the back to be taken.
    auto hit = prefer ? std::find(bin.rbegin(), bin.rend(), prefer) : bin.rend();
    if (hit != bin.rend()) {
      std::iter_swap(hit, bin.rbegin());
      ++stats_.preferred_hits;
    }
    p = bin.back();
    bin.pop_back();
    stats_.cached_bytes -= size;
    ++stats_.cache_hits;
  } else {
    const CudaDriver& d = dev_->driver();
    dev_->bind();
    CUresult r = d.cuMemAlloc_v2(&p, size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      ++stats_.oom_retries;
      empty_cache_locked();
      r = d.cuMemAlloc_v2(&p, size);
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      size_t free = 0, total = 0;
      d.cuMemGetInfo_v2(&free, &total);
      fail(ErrorKind::Runtime,
           "CUDA out of memory (CUDA_ERROR_OUT_OF_MEMORY in cuMemAlloc): tried to allocate ",
           mib(size), " on device ", dev_->ordinal(), " (", dev_->name(), "); lazytensor holds ",
           mib(stats_.allocated_bytes), " in live buffers; ", mib(free), " free of ", mib(total),
           " after releasing its cache");
    }
    d.check(r, "cuMemAlloc");
    ++stats_.device_allocs;
  }
  stats_.allocated_bytes += size;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return p;
}

void CudaCachingAllocator::release(CUdeviceptr p, size_t bytes) {
  if (!p) return;
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> g(mu_);
  bins_[size].push_back(p);
  stats_.allocated_bytes -= size;
  stats_.cached_bytes += size;
}

void CudaCachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> g(mu_);
  empty_cache_locked();
}

void CudaCachingAllocator::empty_cache_locked() {
  const CudaDriver& d = dev_->driver();
  dev_->synchronize();  // a cached block may still be read or written by queued work

  for (auto& [size, blocks] : bins_) {
    for (CUdeviceptr p : blocks) {
      d.cuMemFree_v2(p);
      ++stats_.device_frees;
    }
  }
  bins_.clear();
  stats_.cached_bytes = 0;
}

CudaAllocatorStats CudaCachingAllocator::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

}  // namespace lt
