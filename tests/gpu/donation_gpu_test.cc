// Buffer donation on the GPU (lazy:cuda): an SGD/Adam step writes parameters and optimizer state
// into the device buffers they were read from (pointers stay put, nothing new is allocated), with
// the results of the non-donated path and of the eager cpu device; the CUDA executable gives the
// same numbers with any subset of its candidates donated. Skips without a GPU.
#include <gtest/gtest.h>

#include <memory>

#include "../cpp/donation_util.h"
#include "../cpp/test_util.h"
#include "backends/backend.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "nn/nn.h"
#include "nn/optim.h"
#include "runtime/metrics.h"
#include "runtime/sync.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {

const void* data_ptr(const Tensor& t) { return t.impl()->storage->buffer->data(); }
int64_t donated() { return metrics::counters().at("donated_buffers"); }

struct Trained {
  std::vector<const void*> before, after;
  std::vector<std::vector<double>> params;
  int64_t donated = 0;
};

Trained train(const Device& d, const std::string& opt, bool hold) {
  std::vector<Tensor> ps = {testing::random_tensor({64, 24}, 11, d, -0.3f, 0.3f),
                            testing::random_tensor({64}, 12, d, -0.1f, 0.1f),
                            testing::random_tensor({4, 64}, 13, d, -0.3f, 0.3f),
                            testing::random_tensor({4}, 14, d, -0.1f, 0.1f)};
  for (auto& p : ps) p.requires_grad_();
  Tensor x = testing::random_tensor({32, 24}, 15, d), y = testing::random_tensor({32, 4}, 16, d);
  std::unique_ptr<optim::Optimizer> o;
  if (opt == "sgd")
    o = std::make_unique<optim::SGD>(ps, 0.05, 0.9, 1e-3);
  else
    o = std::make_unique<optim::AdamW>(ps, 1e-2, 0.9, 0.999, 1e-8, 0.05);
  Trained r;
  for (auto& p : ps) r.before.push_back(d.is_lazy() ? data_ptr(p) : nullptr);
  const int64_t start = donated();
  for (int s = 0; s < 4; ++s) {
    o->zero_grad();
    Tensor h = (matmul(x, ps[0].transpose(0, 1)) + ps[1]).relu();
    nn::mse_loss(matmul(h, ps[2].transpose(0, 1)) + ps[3], y).backward();
    std::vector<Tensor> held;
    if (hold)
      for (auto& p : ps)
        held.emplace_back(make_data_tensor(p.impl()->storage, p.dtype(), p.shape(), d));
    o->step();
    if (!d.is_lazy()) mark_step();
  }
  r.donated = donated() - start;
  for (auto& p : ps) {
    if (d.is_lazy()) r.after.push_back(data_ptr(p));
    r.params.push_back(p.to_vector<double>());
  }
  return r;
}

TEST(DonationGpu, OptimizerStepUpdatesDeviceBuffersInPlace) {
  if (!backend_available("cuda")) GTEST_SKIP() << "no CUDA device";
  const Device lz = Device::parse("lazy:cuda");
  for (const std::string opt : {"sgd", "adamw"}) {
    Trained got = train(lz, opt, false);
    EXPECT_EQ(got.after, got.before) << opt;
    // Each parameter and its state (momentum; AdamW's two moments) every step, and AdamW's step
    // counts from the second step on (the first reads a 0-d scalar passed by value).
    EXPECT_EQ(got.donated, (opt == "sgd" ? 2 : 3) * 4 * 4 + (opt == "sgd" ? 0 : 4 * 3)) << opt;
    Trained kept = train(lz, opt, true);
    Trained cpu = train(kCPU, opt, false);
    // A held parameter is never donated (its optimizer state still is). Its address may still
    // come back after a few steps: the caching allocator hands the freed old block out again.
    EXPECT_EQ(got.donated - kept.donated, 4 * 4) << opt;
    for (size_t i = 0; i < 4; ++i) {
      testing::expect_close(got.params[i], kept.params[i], 1e-6, 1e-7, opt + " donated vs kept");
      testing::expect_close(got.params[i], cpu.params[i], 1e-4, 1e-5, opt + " cuda vs cpu");
    }
  }
}

TEST(DonationGpu, ExecutableAgreesForEverySubsetOfDonations) {
  if (!backend_available("cuda")) GTEST_SKIP() << "no CUDA device";
  const Device lz = Device::parse("lazy:cuda");
  const int64_t n = 1 << 20 | 3;  // a tail that is not a whole vector of 4
  Tensor p = testing::random_tensor({n}, 1, lz), m = testing::random_tensor({n}, 2, lz);
  Tensor v = testing::random_tensor({n}, 3, lz, 0.f, 1.f), g = testing::random_tensor({n}, 4, lz);
  Tensor m2 = m * 0.9 + g * 0.1;
  Tensor v2 = v * 0.999 + g * g * 0.001;
  Tensor p2 = p - m2 / ((v2 * 1.5).sqrt() + 1e-8) * 0.01;
  NodeList keep = {p2.node(), m2.node(), v2.node()};
  Graph graph = collect_graph({keep[0].get(), keep[1].get(), keep[2].get()});
  Backend& be = get_backend("cuda");
  Plan plan = lower(graph, be.lower_options());
  ASSERT_EQ(plan.donations.size(), 3u);
  auto exe = be.compile(plan);
  std::vector<std::vector<float>> want;
  for (int mask = 0; mask < 8; ++mask) {
    auto got = testing::run_with_donations(be, graph, plan, *exe, mask, n);
    ASSERT_EQ(got.size(), 3u);
    if (mask == 0) want = got;
    for (size_t r = 0; r < 3; ++r) EXPECT_EQ(got[r], want[r]) << "mask " << mask << " root " << r;
  }
}

}  // namespace
}  // namespace lt
