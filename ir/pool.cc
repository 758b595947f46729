#include "ir/pool.h"

#include <cstdint>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define LT_POOL_BYPASS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LT_POOL_BYPASS 1
#endif
#endif
#ifndef LT_POOL_BYPASS
#define LT_POOL_BYPASS 0
#endif

namespace lt::pool {
namespace {

constexpr std::size_t kGrain = 16;                  // size classes: multiples of 16 bytes ...
constexpr std::size_t kClasses = 33;                // ... up to 512 bytes; larger go to new/delete
constexpr std::size_t kMaxBytesPerClass = 1 << 20;  // what a thread keeps of one class

struct Block {
  Block* next;
};

// Trivially destructible, so it stays usable after the guard below has drained it at thread exit
// (a thread_local destroyed later may still free nodes: those go straight to delete).
struct Cache {
  Block* head[kClasses];
  std::uint32_t count[kClasses];
  enum : std::uint8_t { kFresh, kLive, kDead } state;
};
thread_local Cache t_cache;

// Constructed on the first block a thread keeps; its destructor returns the thread's blocks.
struct Guard {
  bool armed = false;
  ~Guard() {
    Cache& c = t_cache;
    for (std::size_t k = 0; k < kClasses; ++k)
      while (Block* b = c.head[k]) {
        c.head[k] = b->next;
        ::operator delete(b);
      }
    for (auto& n : c.count) n = 0;
    c.state = Cache::kDead;
  }
};
thread_local Guard t_guard;

std::size_t size_class(std::size_t bytes) { return (bytes + kGrain - 1) / kGrain; }

}  // namespace

void* allocate(std::size_t bytes) {
  const std::size_t k = size_class(bytes);
  if (LT_POOL_BYPASS || k >= kClasses) return ::operator new(bytes);
  Cache& c = t_cache;
  if (Block* b = c.head[k]) {
    c.head[k] = b->next;
    --c.count[k];
    return b;
  }
  return ::operator new(k * kGrain);  // the whole class size: any block of a class fits any use
}

void deallocate(void* p, std::size_t bytes) noexcept {
  const std::size_t k = size_class(bytes);
  Cache& c = t_cache;
  const bool keep = !LT_POOL_BYPASS && k < kClasses && c.state != Cache::kDead &&
                    (c.count[k] + 1) * k * kGrain <= kMaxBytesPerClass;
  if (!keep) {
    ::operator delete(p);
    return;
  }
  if (c.state == Cache::kFresh) {  // first block kept on this thread: arm the drain at its exit
    t_guard.armed = true;
    c.state = Cache::kLive;
  }
  auto* b = static_cast<Block*>(p);
  b->next = c.head[k];
  c.head[k] = b;
  ++c.count[k];
}

std::size_t cached_blocks() {
  std::size_t n = 0;
  for (std::size_t k = 0; k < kClasses; ++k) n += t_cache.count[k];
  return n;
}

bool enabled() { return !LT_POOL_BYPASS; }

}  // namespace lt::pool
