// Buffer donation at run time (runtime/donation.h): an optimizer step on lazy writes parameters
// and optimizer state into the buffers they were read from (data pointers stay put), with the
// results of the non-donated path and of the eager cpu device; donation is refused whenever
// someone else can still see the old values (a second tensor over the storage, a pending view
// left for a later sync), and those holders keep seeing the old values. Executables give the same
// results with any subset of their candidates donated (CPU code generated both ways, the
// reference interpreter).
#include <gtest/gtest.h>

#include <memory>

#include "backends/backend.h"
#include "donation_util.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "nn/nn.h"
#include "nn/optim.h"
#include "runtime/indexing.h"
#include "runtime/metrics.h"
#include "runtime/sync.h"
#include "runtime/tensor_impl.h"
#include "test_util.h"

namespace lt {
namespace {

using testing::kLazyCpu;

const void* data_ptr(const Tensor& t) { return t.impl()->storage->buffer->data(); }
int64_t donated() { return metrics::counters().at("donated_buffers"); }

struct TrainRun {
  std::vector<std::vector<const void*>> ptrs;  // per step (0 = before training): each parameter's
  std::vector<double> losses;
  std::vector<std::vector<double>> params;  // after the last step
  int64_t donated = 0;
};

// A two-layer MLP with fixed initial weights, trained `steps` steps. With `hold`, every parameter's
// storage is also held by a second tensor during each step (so nothing may be donated), and the
// held tensors must still show the values from before the step.
TrainRun train(const Device& d, const std::string& opt, int steps, bool hold) {
  std::vector<Tensor> ps = {testing::random_tensor({32, 12}, 11, d, -0.3f, 0.3f),
                            testing::random_tensor({32}, 12, d, -0.1f, 0.1f),
                            testing::random_tensor({4, 32}, 13, d, -0.3f, 0.3f),
                            testing::random_tensor({4}, 14, d, -0.1f, 0.1f)};
  for (auto& p : ps) p.requires_grad_();
  Tensor x = testing::random_tensor({16, 12}, 15, d), y = testing::random_tensor({16, 4}, 16, d);
  std::unique_ptr<optim::Optimizer> o;
  if (opt == "sgd")
    o = std::make_unique<optim::SGD>(ps, 0.05, 0.9, 1e-3);
  else if (opt == "adam")
    o = std::make_unique<optim::Adam>(ps, 1e-2);
  else
    o = std::make_unique<optim::AdamW>(ps, 1e-2, 0.9, 0.999, 1e-8, 0.05);
  TrainRun r;
  auto record_ptrs = [&] {
    r.ptrs.emplace_back();
    for (auto& p : ps) r.ptrs.back().push_back(data_ptr(p));
  };
  record_ptrs();
  const int64_t before = donated();
  for (int s = 0; s < steps; ++s) {
    o->zero_grad();
    Tensor h = (matmul(x, ps[0].transpose(0, 1)) + ps[1]).relu();
    Tensor loss = nn::mse_loss(matmul(h, ps[2].transpose(0, 1)) + ps[3], y);
    loss.backward();
    std::vector<Tensor> held;
    std::vector<std::vector<double>> old;
    if (hold)
      for (auto& p : ps) {
        held.emplace_back(make_data_tensor(p.impl()->storage, p.dtype(), p.shape(), p.device()));
        old.push_back(held.back().to_vector<double>());
      }
    o->step();
    if (!d.is_lazy()) mark_step();
    r.losses.push_back(loss.to_vector<double>()[0]);
    record_ptrs();
    for (size_t i = 0; i < held.size(); ++i)
      EXPECT_EQ(held[i].to_vector<double>(), old[i]) << "held param " << i;
  }
  r.donated = donated() - before;
  for (auto& p : ps) r.params.push_back(p.to_vector<double>());
  return r;
}

void expect_same_training(const TrainRun& got, const TrainRun& want, double rtol,
                          const std::string& what) {
  testing::expect_close(got.losses, want.losses, rtol, 1e-7, what + " losses");
  for (size_t i = 0; i < want.params.size(); ++i)
    testing::expect_close(got.params[i], want.params[i], rtol, 1e-7,
                          what + " param " + std::to_string(i));
}

class OptimizerDonation : public ::testing::TestWithParam<const char*> {};

TEST_P(OptimizerDonation, StepUpdatesParametersInPlace) {
  const std::string opt = GetParam();
  const int steps = 4;
  TrainRun lazy = train(kLazyCpu, opt, steps, false);
  for (int s = 1; s <= steps; ++s) EXPECT_EQ(lazy.ptrs[s], lazy.ptrs[0]) << opt << " step " << s;
  // Every parameter and every state tensor (momentum; Adam's two moments) each step, and Adam's
  // step counts from the second step on (the first reads the count scalar_tensor made, a 0-d
  // scalar passed by value, not a buffer).
  const int64_t per_param = opt == "sgd" ? 2 : 3;
  const int64_t counts = opt == "sgd" ? 0 : 4 * (steps - 1);
  EXPECT_EQ(lazy.donated, per_param * 4 * steps + counts) << opt;

  TrainRun kept = train(kLazyCpu, opt, steps, true);
  // The parameters are held, so only the optimizer state (in the same kernels) is donated.
  EXPECT_EQ(kept.donated, (per_param - 1) * 4 * steps + counts) << opt;
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NE(kept.ptrs[1][i], kept.ptrs[0][i]) << opt << " param " << i;
  expect_same_training(lazy, kept, 1e-6, opt + " donated vs kept");

  TrainRun eager = train(kCPU, opt, steps, false);
  expect_same_training(lazy, eager, 1e-5, opt + " lazy vs cpu");
}

INSTANTIATE_TEST_SUITE_P(Optimizers, OptimizerDonation, ::testing::Values("sgd", "adam", "adamw"));

TEST(Donation, SecondTensorOverTheStorageKeepsOldValues) {
  Tensor p = testing::random_tensor({64}, 1, kLazyCpu);
  const std::vector<double> old = p.to_vector<double>();
  Tensor q(make_data_tensor(p.impl()->storage, p.dtype(), p.shape(), p.device()));
  const void* before = data_ptr(p);
  p.assign(p * 2.0 + 1.0);
  mark_step();
  EXPECT_NE(data_ptr(p), before);
  EXPECT_EQ(q.to_vector<double>(), old);
  std::vector<double> want;
  for (double v : old) want.push_back(static_cast<double>(static_cast<float>(v * 2.0 + 1.0)));
  testing::expect_close(p.to_vector<double>(), want, 1e-6, 1e-6, "p");
  // Once q is gone the next update is in place.
  q = Tensor();
  const void* now = data_ptr(p);
  p.assign(p - 1.0);
  mark_step();
  EXPECT_EQ(data_ptr(p), now);
}

TEST(Donation, PendingViewLeftForALaterSyncKeepsOldValues) {
  Tensor p = testing::random_tensor({8, 8}, 2, kLazyCpu);
  const std::vector<double> old = p.to_vector<double>();
  const void* before = data_ptr(p);
  Tensor view = p.transpose(0, 1).reshape({64});  // pending, reads p's leaf
  p.assign(p * 3.0);
  sync({p});  // view stays pending: p's old memory must survive for it
  ASSERT_TRUE(view.is_pending());
  EXPECT_NE(data_ptr(p), before);
  std::vector<double> want(64);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      want[static_cast<size_t>(j * 8 + i)] = old[static_cast<size_t>(i * 8 + j)];
  EXPECT_EQ(view.to_vector<double>(), want);
}

TEST(Donation, ViewSyncedTogetherStillSeesOldValues) {
  Tensor p = testing::random_tensor({8, 8}, 3, kLazyCpu);
  const std::vector<double> old = p.to_vector<double>();
  Tensor view = p.reshape({64}) + 0.0;
  p.assign(p * 3.0);
  mark_step();  // both in one graph: donate only if the view's read comes first
  EXPECT_EQ(view.to_vector<double>(), old);
}

TEST(Donation, ReferenceBackendUpdatesInPlace) {
  const Device ref = Device::parse("lazy:reference");
  Tensor p = testing::random_tensor({33}, 4, ref);
  const std::vector<double> old = p.to_vector<double>();
  const void* before = data_ptr(p);
  p.assign(p * 0.5 - 2.0);
  mark_step();
  EXPECT_EQ(data_ptr(p), before);
  std::vector<double> want;
  for (double v : old)
    want.push_back(static_cast<double>(static_cast<float>(static_cast<float>(v * 0.5) - 2.0f)));
  testing::expect_close(p.to_vector<double>(), want, 1e-6, 1e-6, "p");
}

// The executables themselves: an Adam-like update with three candidates, run with every subset
// donated, on a size that the CPU backend splits across threads and whose tail is not a whole
// vector; every subset gives the same numbers.
TEST(Donation, ExecutablesAgreeForEverySubsetOfDonations) {
  const int64_t n = 70001;
  Tensor p = testing::random_tensor({n}, 1, kLazyCpu), m = testing::random_tensor({n}, 2, kLazyCpu);
  Tensor v = testing::random_tensor({n}, 3, kLazyCpu, 0.f, 1.f),
         g = testing::random_tensor({n}, 4, kLazyCpu);
  Tensor m2 = m * 0.9 + g * 0.1;
  Tensor v2 = v * 0.999 + g * g * 0.001;
  Tensor p2 = p - m2 / ((v2 * 1.5).sqrt() + 1e-8) * 0.01;
  NodeList keep = {p2.node(), m2.node(), v2.node()};
  Graph graph = collect_graph({keep[0].get(), keep[1].get(), keep[2].get()});
  for (const char* name : {"cpu", "reference"}) {
    Backend& be = get_backend(name);
    Plan plan = lower(graph, be.lower_options());
    ASSERT_EQ(plan.donations.size(), 3u) << name;
    auto exe = be.compile(plan);
    std::vector<std::vector<float>> want;
    for (int mask = 0; mask < 8; ++mask) {
      auto got = testing::run_with_donations(be, graph, plan, *exe, mask, n);
      ASSERT_EQ(got.size(), 3u) << name;
      if (mask == 0) want = got;
      for (size_t r = 0; r < 3; ++r)
        EXPECT_EQ(got[r], want[r]) << name << " mask " << mask << " root " << r;
    }
  }
}

TEST(Donation, ExecutableRejectsAPairThePlanDoesNotAllow) {
  Tensor a = testing::random_tensor({16}, 1, kLazyCpu),
         b = testing::random_tensor({16}, 2, kLazyCpu);
  Tensor r = a + flip(b, {0});
  NodeList keep = {r.node()};
  Graph graph = collect_graph({keep[0].get()});
  Plan plan = lower(graph, get_backend("cpu").lower_options());
  auto exe = get_backend("cpu").compile(plan);
  std::vector<RunInput> in(graph.inputs.size());
  int b_input = -1;
  for (size_t j = 0; j < graph.inputs.size(); ++j) {
    in[j].buffer = static_cast<const Storage*>(graph.inputs[j]->data.get())->buffer.get();
    if (graph.inputs[j]->data.get() == b.impl()->storage.get()) b_input = static_cast<int>(j);
  }
  ASSERT_GE(b_input, 0);
  in[static_cast<size_t>(b_input)].donated_output = plan.output_buffers[0];
  EXPECT_THROW(exe->run(in, nullptr), Error);
}

}  // namespace
}  // namespace lt
