// backends/parallel_work.h: the balancing both compile paths (CPU LLVM groups, CUDA NVRTC
// programs) use, and the parallel run that carries exceptions back.
#include "backends/parallel_work.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <string>

namespace lt {
namespace {

TEST(ParallelWork, LargestFirstToTheLeastLoadedGroup) {
  // 5 -> g0; 4 -> g1; 2 -> g1 (4 < 5); 1 -> g0 (5 < 6).
  EXPECT_EQ(balance_groups({5, 1, 4, 2}, 2), (std::vector<size_t>{0, 0, 1, 1}));
  EXPECT_EQ(balance_groups({3, 3, 3}, 1), (std::vector<size_t>{0, 0, 0}));
  EXPECT_EQ(balance_groups({}, 4), std::vector<size_t>{});
  // Equal work spreads in index order.
  EXPECT_EQ(balance_groups({1, 1, 1, 1}, 4), (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(ParallelWork, RunsEachIndexOnceAndRethrowsTheLowestFailure) {
  std::vector<std::atomic<int>> ran(6);
  run_in_parallel(6, [&](size_t i) { ran[i]++; });
  for (auto& r : ran) EXPECT_EQ(r.load(), 1);
  try {
    run_in_parallel(5, [&](size_t i) {
      if (i == 1 || i == 3) throw std::runtime_error("item " + std::to_string(i));
    });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "item 1");
  }
  run_in_parallel(0, [&](size_t) { ADD_FAILURE() << "ran with n = 0"; });
}

}  // namespace
}  // namespace lt
