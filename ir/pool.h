// Per-thread free lists for the small objects every traced op makes (IR nodes, tensor impls).
// glibc's per-thread cache keeps only 7 blocks of a size, so the burst of frees when a step's
// graph dies spills into the slower arena paths, and the next step's allocations pay again; here a
// thread reuses up to 1 MiB of blocks per 16-byte size class. A block may be freed on another
// thread than the one that made it: it then joins that thread's lists. Under AddressSanitizer the
// lists are bypassed (plain new/delete), so use-after-free stays detectable.
#pragma once
#include <cstddef>
#include <memory>
#include <utility>

namespace lt {
namespace pool {
void* allocate(std::size_t bytes);
void deallocate(void* p, std::size_t bytes) noexcept;
// Blocks this thread holds for reuse (tests: the lists fill, stay bounded and drain).
std::size_t cached_blocks();
// False under AddressSanitizer, where every block goes straight to new/delete.
bool enabled();
}  // namespace pool

template <class T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() noexcept = default;
  template <class U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}  // NOLINT: rebinding, as allocators do
  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t), "pool blocks are max_align_t aligned");
    return static_cast<T*>(pool::allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { pool::deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PoolAllocator<U>&) const noexcept {
    return true;
  }
};

// std::make_shared, with the object and its control block in one pooled block.
template <class T, class... A>
std::shared_ptr<T> make_pooled(A&&... a) {
  return std::allocate_shared<T>(PoolAllocator<T>(), std::forward<A>(a)...);
}

}  // namespace lt
