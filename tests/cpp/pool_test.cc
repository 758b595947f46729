// The per-thread block pool behind IR nodes and tensor impls (ir/pool.h): blocks are reused, a
// thread keeps a bounded number, blocks freed on another thread or after a thread's pool is gone
// are handled, and node lifetimes are unchanged. Also SmallVec (ir/small_vec.h), the inline list
// that spills to pooled blocks, checked against std::vector as the oracle.
#include "ir/pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ir/node.h"
#include "ir/small_vec.h"

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
  EXPECT_EQ(a->hash.hex(), "97164d5a39867a4e5b89315a873c2f89");  // ir_test.cc's pinned hash
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

// Elements that count themselves: every one constructed is destroyed exactly once.
std::atomic<long> g_counted_live{0};
struct Counted {
  std::string s;  // non-trivial, so SmallVec takes its element-by-element paths
  explicit Counted(long v = 0) : s(std::to_string(v)) { ++g_counted_live; }
  Counted(const Counted& o) : s(o.s) { ++g_counted_live; }
  Counted(Counted&& o) noexcept : s(std::move(o.s)) { ++g_counted_live; }
  Counted& operator=(const Counted&) = default;
  Counted& operator=(Counted&&) noexcept = default;
  ~Counted() { --g_counted_live; }
  bool operator==(const Counted& o) const { return s == o.s; }
};

// A random sequence of every mutating operation, on a SmallVec and on a std::vector side by side,
// compared after each step; copies and moves are taken both while inline and while spilled.
template <class T, class Make>
void run_against_vector(Make make, unsigned seed) {
  std::mt19937 rng(seed);
  SmallVec<T, 4> a;
  std::vector<T> b;
  auto same = [&](const SmallVec<T, 4>& x, const std::vector<T>& y) {
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(x[i] == y[i]) << "at " << i;
  };
  for (int step = 0; step < 3000; ++step) {
    const long v = static_cast<long>(rng() % 1000);
    const size_t n = b.size();
    const size_t at = n ? rng() % (n + 1) : 0;
    switch (rng() % 12) {
      case 0:
      case 1:
        a.push_back(make(v));
        b.push_back(make(v));
        break;
      case 2:
        if (n) {
          a.pop_back();
          b.pop_back();
        }
        break;
      case 3:
        a.insert(a.begin() + at, make(v));
        b.insert(b.begin() + at, make(v));
        break;
      case 4: {
        const size_t k = rng() % 6;
        a.insert(a.begin() + at, k, make(v));
        b.insert(b.begin() + at, k, make(v));
        break;
      }
      case 5:
        if (n) {
          const size_t i = rng() % n;
          a.erase(a.begin() + i);
          b.erase(b.begin() + i);
        }
        break;
      case 6:
        if (n) {
          const size_t i = rng() % n, j = i + rng() % (n - i + 1);
          a.erase(a.begin() + i, a.begin() + j);
          b.erase(b.begin() + i, b.begin() + j);
        }
        break;
      case 7: {
        const size_t k = rng() % 12;
        a.resize(k, make(v));
        b.resize(k, make(v));
        break;
      }
      case 8:
        if (n) {
          const size_t i = rng() % n;
          a.push_back(a[i]);
          b.push_back(b[i]);
        }
        break;  // an element of itself
      case 9: {
        SmallVec<T, 4> c(a);
        a = c;
        SmallVec<T, 4> d(std::move(c));
        a = std::move(d);
        break;
      }
      case 10: {
        std::vector<T> src(rng() % 9, make(v));
        a.insert(a.begin() + at, src.begin(), src.end());
        b.insert(b.begin() + at, src.begin(), src.end());
        break;
      }
      case 11:
        if (rng() % 8 == 0) {
          a.clear();
          b.clear();
        }
        break;
    }
    same(a, b);
  }
}

TEST(SmallVec, MatchesStdVectorUnderRandomEdits) {
  run_against_vector<int64_t>([](long v) { return static_cast<int64_t>(v); }, 1);
  run_against_vector<int64_t>([](long v) { return static_cast<int64_t>(v); }, 2);
  {
    run_against_vector<Counted>([](long v) { return Counted(v); }, 3);
  }
  EXPECT_EQ(g_counted_live.load(), 0) << "elements leaked or destroyed twice";
}

TEST(SmallVec, InlineUpToNThenSpilledToAPooledBlock) {
  SmallVec<int64_t, 4> v{1, 2, 3, 4};
  const int64_t* inline_at = v.data();
  EXPECT_GE(reinterpret_cast<const char*>(inline_at), reinterpret_cast<const char*>(&v));
  EXPECT_LT(reinterpret_cast<const char*>(inline_at), reinterpret_cast<const char*>(&v + 1));
  v.push_back(5);  // spills
  EXPECT_NE(v.data(), inline_at);
  EXPECT_EQ(v, (SmallVec<int64_t, 4>{1, 2, 3, 4, 5}));
  SmallVec<int64_t, 4> moved(std::move(v));  // a spilled block is taken, not copied
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(moved.size(), 5u);
  EXPECT_LT((SmallVec<int64_t, 4>{1, 2}), (SmallVec<int64_t, 4>{1, 3}));
  EXPECT_EQ(std::span<const int64_t>(moved).size(), 5u);
  EXPECT_THROW(moved.at(5), std::out_of_range);
}

}  // namespace
}  // namespace lt
