// backends/collective_queue.h: work runs on one worker in submission order, wait(ticket) returns
// once that ticket and every earlier one ran, an error is raised once by the next wait, and the
// destructor finishes what was queued.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backends/collective_queue.h"

namespace lt {
namespace {

TEST(CollectiveQueue, RunsInOrderAndWaitsForATicket) {
  CollectiveQueue q;
  std::vector<int> seen;
  std::atomic<bool> go{false};
  const int64_t first = q.submit([&] {
    while (!go) std::this_thread::yield();
    seen.push_back(0);
  });
  int64_t last = first;
  for (int i = 1; i < 50; ++i) last = q.submit([&seen, i] { seen.push_back(i); });
  EXPECT_EQ(last, first + 49);
  EXPECT_TRUE(seen.empty());  // the first is still held: nothing after it ran
  go = true;
  q.wait(last);
  ASSERT_EQ(seen.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], i);
}

TEST(CollectiveQueue, AfterAnErrorLaterWorkIsSkippedUntilAWaitRaisesIt) {
  CollectiveQueue q;
  std::atomic<int> ran{0};
  q.submit([] { throw std::runtime_error("peer gone"); });
  const int64_t t = q.submit([&] { ++ran; });
  EXPECT_THROW(q.wait(t), std::runtime_error);
  EXPECT_EQ(ran.load(), 0);  // skipped: the ranks no longer agree on what comes next
  q.wait_all();              // raised once: nothing pending now
  q.wait(q.submit([&] { ++ran; }));
  EXPECT_EQ(ran.load(), 1);
}

TEST(CollectiveQueue, DestructorFinishesQueuedWork) {
  std::atomic<int> ran{0};
  {
    CollectiveQueue q;
    for (int i = 0; i < 20; ++i)
      q.submit([&] {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        ++ran;
      });
  }
  EXPECT_EQ(ran.load(), 20);
}

}  // namespace
}  // namespace lt
