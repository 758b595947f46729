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

struct Cache {
  Block* head[kClasses];
  std::uint32_t count[kClasses];
  bool dead;  // the shared g_dead below
};

// The thread's lists, reached through one pointer in the initial-exec TLS model: in a shared
// library the default model calls __tls_get_addr on every access, twice per pooled object (a
// tenth of the per-op tracing cost). One initial-exec variable puts the library's whole TLS block
// (about 200 bytes) in the static TLS block, of which a library loaded by dlopen (the Python
// module) may only take a little: glibc keeps ~1.5 KB spare. Hence one pointer, not the 400-byte
// lists. Null until the thread's first pooled block; after its exit cleanup, the shared empty
// g_dead below, which is never written: its lists are empty and nothing is kept in it.
[[gnu::tls_model("initial-exec")]] thread_local Cache* t_cache = nullptr;
Cache g_dead = {{}, {}, true};

// Constructed with the thread's cache; its destructor returns the thread's blocks.
struct Guard {
  bool armed = false;
  ~Guard() {
    Cache* c = t_cache;
    if (!c || c->dead) return;
    for (std::size_t k = 0; k < kClasses; ++k)
      while (Block* b = c->head[k]) {
        c->head[k] = b->next;
        ::operator delete(b);
      }
    delete c;
    t_cache = &g_dead;  // a thread_local destroyed later may still free blocks: straight to delete
  }
};
thread_local Guard t_guard;

Cache& cache() {
  if (Cache* c = t_cache) return *c;
  t_guard.armed = true;  // constructs the guard: the cache dies with the thread
  t_cache = new Cache{{}, {}, false};
  return *t_cache;
}

std::size_t size_class(std::size_t bytes) { return (bytes + kGrain - 1) / kGrain; }

}  // namespace

void* allocate(std::size_t bytes) {
  const std::size_t k = size_class(bytes);
  if (LT_POOL_BYPASS || k >= kClasses) return ::operator new(bytes);
  Cache& c = cache();
  if (Block* b = c.head[k]) {
    c.head[k] = b->next;
    --c.count[k];
    return b;
  }
  return ::operator new(k* kGrain);  // the whole class size: any block of a class fits any use
}

void deallocate(void* p, std::size_t bytes) noexcept {
  const std::size_t k = size_class(bytes);
  if (LT_POOL_BYPASS || k >= kClasses) {
    ::operator delete(p);
    return;
  }
  Cache& c = cache();
  if (c.dead || (c.count[k] + 1) * k * kGrain > kMaxBytesPerClass) {
    ::operator delete(p);
    return;
  }
  auto* b = static_cast<Block*>(p);
  b->next = c.head[k];
  c.head[k] = b;
  ++c.count[k];
}

std::size_t cached_blocks() {
  std::size_t n = 0;
  if (const Cache* c = t_cache)  // a query: a thread with no cache yet holds nothing
    for (std::size_t k = 0; k < kClasses; ++k) n += c->count[k];
  return n;
}

bool enabled() { return !LT_POOL_BYPASS; }

}  // namespace lt::pool
