// Tracing an op allocates nothing from the heap once the thread's pool lists are warm: nodes,
// tensors and operand lists (NodeList) come from ir/pool.h, shapes (IntList) up to rank 4 live
// inline (ir/small_vec.h). glibc's malloc
// and free for the operand list and the two shapes were a fifth of the per-op tracing cost (bench/
// README.md, tenth session). This binary replaces the global operator new to count calls; the
// library's allocations go through it too (the executable's definition wins for the process).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

#include "ir/pool.h"
#include "runtime/ops.h"
#include "test_util.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_news{0};
}  // namespace

// GCC sees free() of what its operator new returned; these are the matching pair.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace lt {
namespace {

// Heap allocations (operator new calls) made while running f.
template <class F>
long news_during(F&& f) {
  g_news = 0;
  g_counting = true;
  f();
  g_counting = false;
  return g_news.load();
}

// 40 rounds of 8 ops: y * c + x, unsqueeze, squeeze, flatten, exp, two reshapes. reshape's public
// signature takes a std::vector: the callers' vectors are made beforehand and moved in, so that
// only the library's own allocations are counted.
Tensor trace_rounds(Tensor y, const Tensor& x, std::vector<std::vector<int64_t>>& shapes) {
  for (size_t i = 0; i + 1 < shapes.size(); i += 2) {
    y = ((y * 1.0001) + x).unsqueeze(0).squeeze(0).flatten();
    y = y.exp().reshape(std::move(shapes[i])).reshape(std::move(shapes[i + 1]));
  }
  return y;
}

std::vector<std::vector<int64_t>> round_shapes() {
  std::vector<std::vector<int64_t>> s;
  for (int i = 0; i < 40; ++i) s.push_back({64, 8}), s.push_back({8, 64});
  return s;
}

TEST(TraceAllocations, ElementwiseAndShapeOpsAllocateNothingOnceWarm) {
  if (!pool::enabled()) GTEST_SKIP() << "ir/pool.h hands every block to new/delete under ASan";
  Tensor x = testing::random_tensor({8, 64}, 3, Device::parse("lazy:cpu"));
  mark_step();
  for (int warm = 0; warm < 3; ++warm) {  // fills the pool's lists
    auto shapes = round_shapes();
    Tensor y = trace_rounds(x, x, shapes);
    mark_step();
  }
  auto shapes = round_shapes();
  Tensor y;
  EXPECT_EQ(news_during([&] { y = trace_rounds(x, x, shapes); }), 0)
      << "heap allocations while tracing 320 ops";
  EXPECT_EQ(y.shape(), (Shape{8, 64}));
  // The counter sees the library's allocations: a sync compiles and allocates.
  EXPECT_GT(news_during([] { mark_step(); }), 0);
}

}  // namespace
}  // namespace lt
