// Bounded memory over long runs (issue 9): 2,000 lazy training steps of an MLP (forward,
// cross_entropy, backward, AdamW, zero_grad) must leave resident memory, live IR nodes, pending
// tensors and the graph cache flat after warm-up. Prints the growth it measured.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "runtime/executor.h"
#include "runtime/tensor_impl.h"
#include "test_util.h"

namespace lt {
namespace {

int64_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;  // ASan's quarantine holds freed memory: RSS says nothing there
#else
constexpr bool kAsan = false;
#endif

TEST(Soak, TwoThousandLazyTrainingStepsStayFlat) {
  const int steps = kAsan ? 400 : 2000, warmup = kAsan ? 100 : 200;
  const Device dev = kLazy;
  manual_seed(3);
  nn::Sequential model;
  model.add(std::make_shared<nn::Linear>(16, 32, true, dev))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::Linear>(32, 4, true, dev));
  optim::AdamW opt(model.parameters(), 1e-2);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int64_t> ud(0, 3);
  std::vector<float> xb(32 * 16);
  std::vector<int64_t> yb(32);
  int64_t rss0 = 0, nodes0 = 0, cache0 = 0;
  double first_loss = 0, last_loss = 0;
  for (int step = 1; step <= steps; ++step) {
    for (auto& v : xb) v = nd(rng);
    for (size_t i = 0; i < yb.size(); ++i)
      yb[i] = xb[i * 16] > 0 ? 1 : ud(rng) % 2 + 2 * (xb[i * 16 + 1] > 0);
    Tensor x = from_host(xb.data(), DType::Float32, {32, 16}, dev);
    Tensor y = from_host(yb.data(), DType::Int64, {32}, dev);
    Tensor loss = nn::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    opt.zero_grad();
    if (step == 1) first_loss = loss.item();
    if (step == steps) last_loss = loss.item();
    if (step == warmup)
      rss0 = resident_bytes(), nodes0 = live_nodes(),
      cache0 = static_cast<int64_t>(graph_cache_size());
  }
  int64_t rss_growth = resident_bytes() - rss0, node_growth = live_nodes() - nodes0;
  int64_t cache_growth = static_cast<int64_t>(graph_cache_size()) - cache0;
  std::printf(
      "soak: %d steps, after step %d: resident memory growth %lld KiB, live IR nodes %lld -> %lld, "
      "graph cache growth %lld, pending tensors %zu, loss %.4f -> %.4f\n",
      steps, warmup, static_cast<long long>(rss_growth / 1024), static_cast<long long>(nodes0),
      static_cast<long long>(live_nodes()), static_cast<long long>(cache_growth),
      registry_snapshot().size(), first_loss, last_loss);
  EXPECT_LE(node_growth, 0) << "IR nodes are being retained across steps";
  EXPECT_EQ(cache_growth, 0) << "the step recompiled into new graphs";
  EXPECT_EQ(registry_snapshot().size(), 0u) << "tensors left pending after the last step";
  if (!kAsan)
    EXPECT_LT(rss_growth, 4 << 20) << "resident memory grew by " << rss_growth << " bytes";
  else
    std::printf(
        "soak: ASan build: resident memory is not checked (the quarantine keeps freed blocks)\n");
  EXPECT_LT(last_loss, first_loss);
}

}  // namespace
}  // namespace lt
