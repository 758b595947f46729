// The per-thread block pool behind IR nodes and tensor impls (ir/pool.h): blocks are reused, a
// thread keeps a bounded number, blocks freed on another thread or after a thread's pool is gone
// are handled, and node lifetimes are unchanged.
#include "ir/pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "ir/node.h"

namespace lt {
namespace {

TEST(Pool, FreedBlockIsReusedForTheSameSizeClass) {
  if (!pool::enabled()) GTEST_SKIP() << "pool bypassed under AddressSanitizer";
  void* a = pool::allocate(200);
  pool::deallocate(a, 200);
  const std::size_t held = pool::cached_blocks();
  EXPECT_GE(held, 1u);
  void* b = pool::allocate(193);  // same 16-byte class as 200
  EXPECT_EQ(a, b);
  EXPECT_EQ(pool::cached_blocks(), held - 1);
  pool::deallocate(b, 193);
}

TEST(Pool, LargeBlocksBypassTheLists) {
  const std::size_t held = pool::cached_blocks();
  void* p = pool::allocate(4096);
  pool::deallocate(p, 4096);
  EXPECT_EQ(pool::cached_blocks(), held);
}

TEST(Pool, AThreadKeepsABoundedNumberOfBlocks) {
  std::size_t kept = 0;
  std::thread([&] {
    std::vector<void*> blocks;
    for (int i = 0; i < 20000; ++i) blocks.push_back(pool::allocate(208));
    for (void* p : blocks) pool::deallocate(p, 208);
    kept = pool::cached_blocks();
  }).join();
  if (pool::enabled()) {
    EXPECT_GT(kept, 1000u);
    EXPECT_LE(kept * 208, std::size_t{1} << 20);  // 1 MiB per size class
  } else {
    EXPECT_EQ(kept, 0u);
  }
}

TEST(Pool, NodesMadeOnOneThreadDieOnAnother) {
  const int64_t live0 = live_nodes();
  NodeList made;
  std::thread([&] {
    NodePtr x = make_param(DType::Float32, {3}, nullptr);
    for (int i = 0; i < 1000; ++i) {
      x = make_node(Op::Add, {x, make_scalar(DType::Float32, i)});
      made.push_back(x);
    }
  }).join();
  EXPECT_EQ(live_nodes() - live0, 2001);
  std::thread([&] {
    made.clear();  // the whole chain dies here, into this thread's lists, which drain at its exit
    EXPECT_EQ(live_nodes(), live0);
  }).join();
  // The blocks are reused correctly: a fresh chain hashes as before.
  NodePtr a = make_node(Op::Mul, {make_param(DType::Float32, {4, 8}, nullptr),  //
                                  make_scalar(DType::Float32, 2)});
  EXPECT_EQ(a->hash.hex(), "5e051236e56eda75bea086cbe1d39cc1");  // ir_test.cc's pinned hash
}

// Destroyed after the pool's own thread-exit cleanup (constructed before it): the node it holds
// is freed when the thread's lists are gone, and must go straight back to the heap.
std::atomic<std::size_t> g_cached_after_exit{~std::size_t{0}};
struct LateHolder {
  NodePtr node;
  ~LateHolder() {
    node.reset();
    g_cached_after_exit = pool::cached_blocks();
  }
};

TEST(Pool, BlocksFreedAfterTheThreadsPoolIsGoneGoToTheHeap) {
  const int64_t live0 = live_nodes();
  std::thread([] {
    static thread_local LateHolder holder;  // constructed first, so destroyed last
    holder.node = make_scalar(DType::Float32, 1);
    NodePtr other = make_scalar(DType::Float32, 2);
    other.reset();  // a block kept: the pool's cleanup is armed after the holder exists
  }).join();
  EXPECT_EQ(g_cached_after_exit.load(), 0u);
  EXPECT_EQ(live_nodes(), live0);
}

}  // namespace
}  // namespace lt
