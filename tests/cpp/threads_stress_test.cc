// More threads than threads_test.cc, for ThreadSanitizer (make test-tsan): training loops in
// several threads, each ending its steps with mark_step() (which materializes only the calling
// thread's trace: when it materialized every thread's, one thread's sync re-pointed tensors another
// thread was tracing with, a data race), metrics read while graphs run, and deferred index checks
// raised in the thread whose sync computes them.
// Results are checked against float64 host loops.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "autograd/autograd.h"
#include "runtime/index_check.h"
#include "test_util.h"

namespace lt {
namespace {

// Linear regression by gradient descent, w <- w - lr * 2/N X^T (Xw - t), in float64 on the host.
std::vector<double> host_regression(const std::vector<float>& x, const std::vector<float>& t,
                                    int64_t n, int64_t d, int steps, double lr) {
  std::vector<double> w(static_cast<size_t>(d), 0.0);
  for (int s = 0; s < steps; ++s) {
    std::vector<double> g(static_cast<size_t>(d), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      double r = -t[i];
      for (int64_t j = 0; j < d; ++j) r += x[i * d + j] * w[j];
      for (int64_t j = 0; j < d; ++j) g[j] += 2.0 / static_cast<double>(n) * x[i * d + j] * r;
    }
    for (int64_t j = 0; j < d; ++j) w[j] -= lr * g[j];
  }
  return w;
}

TEST(ThreadsStress, TrainingLoopsInThreadsWithMarkStepAndMetricsReaders) {
  constexpr int kThreads = 3, kSteps = 25;
  constexpr int64_t kN = 16, kD = 4;
  constexpr double kLr = 0.1;
  std::atomic<int> errors{0}, wrong{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {  // metrics and the pending count, read while graphs compile and run
    while (!done.load()) {
      auto c = metrics::counters();
      auto g = metrics::last_graph();
      if (c.at("syncs") < 0 || g.kernels < 0) ++wrong;
      (void)pending_tensor_count();
      (void)index_checks::pending_count();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> pool;
  for (int th = 0; th < kThreads; ++th) {
    pool.emplace_back([&, th] {
      try {
        auto xv = testing::random_floats(kN * kD, 100 + th),
             tv = testing::random_floats(kN, 200 + th);
        const Device dev = th == 2 ? Device::parse("lazy:reference") : kLazy;
        Tensor x = from_host(xv.data(), DType::Float32, {kN, kD}, dev);
        Tensor t = from_host(tv.data(), DType::Float32, {kN, 1}, dev);
        Tensor w = zeros({kD, 1}, DType::Float32, dev);
        w.requires_grad_();
        for (int s = 0; s < kSteps; ++s) {
          Tensor r = x.matmul(w) - t;
          Tensor loss = (r * r).mean();
          loss.backward();
          {
            NoGradGuard ng;
            Tensor next = w - w.grad() * kLr;
            w = next.detach();
          }
          w.requires_grad_();
          mark_step();  // as an optimizer's step() does: syncs every thread's pending tensors
        }
        auto got = w.to_vector<double>();
        auto want = host_regression(xv, tv, kN, kD, kSteps, kLr);
        for (int64_t j = 0; j < kD; ++j)
          if (std::fabs(got[j] - want[j]) > 1e-4 + 1e-4 * std::fabs(want[j])) ++wrong;
      } catch (const std::exception& e) {
        ++errors;
        std::fprintf(stderr, "thread %d: %s\n", th, e.what());
      }
    });
  }
  for (auto& p : pool) p.join();
  done = true;
  reader.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadsStress, MarkStepMaterializesOnlyTheCallingThreadsTensors) {
  Tensor mine = testing::random_tensor({3}, 1, kLazy) * 2.0;
  Tensor theirs;
  std::thread([&] { theirs = testing::random_tensor({3}, 2, kLazy) + 1.0; }).join();
  EXPECT_TRUE(mine.is_pending() && theirs.is_pending());
  mark_step();
  EXPECT_FALSE(mine.is_pending());
  EXPECT_TRUE(theirs.is_pending());  // another thread's trace: left alone
  auto want = testing::random_floats(3, 2);
  auto got = theirs.to_vector<float>();  // a sync by name computes it here
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i], want[i] + 1.0f);
  EXPECT_EQ(pending_tensor_count(), 0u);
}

TEST(ThreadsStress, IndexChecksRaiseInTheThreadWhoseSyncComputesThem) {
  constexpr int kThreads = 4, kSteps = 20;
  std::atomic<int> missed{0}, spurious{0};
  std::vector<std::thread> pool;
  for (int th = 0; th < kThreads; ++th) {
    pool.emplace_back([&, th] {
      auto av = testing::random_floats(30, th);
      Tensor a = from_host(av.data(), DType::Float32, {10, 3}, kLazy);
      for (int s = 0; s < kSteps; ++s) {
        const bool bad = (s + th) % 3 == 0;
        std::vector<float> f = {0.05f, bad ? 1.25f : 0.95f, 0.45f};  // x 10, floored: 0, 12|9, 4
        Tensor idx =
            (from_host(f.data(), DType::Float32, {3}, kLazy) * 10.0).floor().to(DType::Int64);
        Tensor out = index_select(a, 0, idx);
        try {
          auto v = out.to_vector<float>();  // syncs only this thread's tensors
          if (bad)
            ++missed;
          else if (v[0] != av[0] || v[3] != av[27] || v[6] != av[12])
            ++spurious;
        } catch (const Error& e) {
          if (!bad || e.kind() != ErrorKind::Index) ++spurious;
        }
      }
    });
  }
  for (auto& p : pool) p.join();
  EXPECT_EQ(missed.load(), 0);
  EXPECT_EQ(spurious.load(), 0);
}

}  // namespace
}  // namespace lt
