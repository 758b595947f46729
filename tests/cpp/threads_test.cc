// Tracing from several threads at once: each thread builds its own lazy graphs and syncs them;
// results must be right and the shared state (registry, graph cache, metrics) must stay coherent.
// The runtime serializes tracing-state changes and syncs with one recursive lock (runtime_mutex).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "test_util.h"

namespace lt {
namespace {

TEST(Threads, ConcurrentTracingAndSyncsGiveRightAnswers) {
  constexpr int kThreads = 4, kSteps = 60;
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([t, &wrong, &errors] {
      try {
        for (int s = 0; s < kSteps; ++s) {
          auto xv = testing::random_floats(24, 1000 * t + s);
          // Shapes differ per thread so threads compile different graphs and share others.
          Shape shape = {t % 2 ? 4 : 6, t % 2 ? 6 : 4};
          Device dev = s % 3 == 0 ? kCPU : kLazy;
          Tensor x = from_host(xv.data(), DType::Float32, shape, dev);
          double scale = 0.5 + t;
          auto got = ((x * scale).sin() + x).sum({1}).to_vector<double>();
          for (int64_t r = 0; r < shape[0]; ++r) {
            double want = 0;
            for (int64_t c = 0; c < shape[1]; ++c) {
              float v = xv[r * shape[1] + c];
              want += std::sin(static_cast<double>(v * static_cast<float>(scale))) + v;
            }
            if (std::fabs(got[r] - want) > 1e-4) ++wrong;
          }
        }
      } catch (const std::exception& e) {
        ++errors;
        std::fprintf(stderr, "thread %d: %s\n", t, e.what());
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace lt
