// lt.compile's capture layer (runtime/capture.h): a captured step replays with new arguments and
// the current state without tracing, matching the same step run as plain code; stale programs
// and data-dependent steps are refused rather than replayed wrongly.
#include "runtime/capture.h"

#include "runtime/ops.h"
#include "runtime/tensor_impl.h"
#include "test_util.h"

namespace lt {
namespace {

using testing::random_floats;
using testing::random_tensor;

using testing::kLazyCpu;

// The step: w <- w - 0.5 * x * w; returns sum(w * x) (of the new w) and x + 1.
std::vector<Tensor> step(Tensor& w, const Tensor& x) {
  w.assign(w - x * w * 0.5);
  return {(w * x).sum(), x + 1.0};
}

std::vector<double> host_step(std::vector<double>& w, const std::vector<float>& x) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = w[i] - x[i] * w[i] * 0.5;
    s += w[i] * x[i];
  }
  return {s};
}

TEST(Capture, ReplayMatchesPlainStepsWithoutTracing) {
  Tensor w = random_tensor({64}, 1, kLazyCpu);
  mark_step();
  std::vector<double> hw = w.to_vector<double>();
  std::vector<std::vector<float>> xs;
  for (uint32_t s = 0; s < 4; ++s) xs.push_back(random_floats(64, 10 + s));

  Tensor x0 = from_host(xs[0].data(), DType::Float32, {64}, kLazyCpu);
  capture::begin({x0});
  auto rets = step(w, x0);
  auto c = capture::end({x0}, rets);
  ASSERT_TRUE(c.program) << c.why_not;
  EXPECT_NEAR(rets[0].item(), host_step(hw, xs[0])[0], 1e-4);

  for (size_t i = 1; i < xs.size(); ++i) {
    Tensor x = from_host(xs[i].data(), DType::Float32, {64}, kLazyCpu);
    int64_t traced = metrics::counters()["traced_ops"];
    auto r = capture::replay(*c.program, {x});
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(metrics::counters()["traced_ops"], traced);
    ASSERT_EQ(r->size(), 2u);
    EXPECT_NEAR((*r)[0].item(), host_step(hw, xs[i])[0], 1e-4);
    auto plus1 = (*r)[1].to_vector<double>();
    for (size_t k = 0; k < 64; ++k) EXPECT_FLOAT_EQ(static_cast<float>(plus1[k]), xs[i][k] + 1.f);
    EXPECT_NE((*r)[0].impl(), rets[0].impl());  // fresh tensors per call
  }
  testing::expect_close(w.to_vector<double>(), hw, 1e-5, 1e-6, "state after replays");
}

TEST(Capture, StaleStateAndWrongArgumentsAreRefused) {
  auto w = std::make_shared<Tensor>(random_tensor({8}, 2, kLazyCpu));
  Tensor x = random_tensor({8}, 3, kLazyCpu);
  mark_step();
  capture::begin({x});
  auto rets = step(*w, x);
  auto c = capture::end({x}, rets);
  ASSERT_TRUE(c.program) << c.why_not;
  EXPECT_FALSE(
      capture::replay(*c.program, {random_tensor({9}, 4, kLazyCpu)}).has_value());  // shape
  EXPECT_FALSE(capture::replay(*c.program, {}).has_value());                        // count
  EXPECT_TRUE(capture::replay(*c.program, {x}).has_value());
  w.reset();  // the state it reads is gone: a replay must re-trace, not read freed data
  EXPECT_FALSE(capture::replay(*c.program, {x}).has_value());
}

TEST(Capture, DataDependentStepsAreNotReplayable) {
  Tensor x = random_tensor({4}, 5, kLazyCpu);
  mark_step();
  capture::begin({x});
  double v =
      x.to_vector<double>()[0] + (x * 2.0).sum().item();  // host reads: trace depends on data
  Tensor y = x * v;
  auto c = capture::end({x}, {y});
  EXPECT_FALSE(c.program);
  EXPECT_NE(c.why_not.find("host"), std::string::npos) << c.why_not;
  EXPECT_FALSE(y.is_pending());  // the step still ran

  capture::begin({x});
  Tensor z = (x + 1.0).to(kCPU);  // an eager device mid-step
  auto c2 = capture::end({x}, {z});
  EXPECT_FALSE(c2.program);
  EXPECT_FALSE(capture::active());
}

TEST(Capture, AbortLeavesWorkPendingAndNestingFails) {
  Tensor x = random_tensor({4}, 6, kLazyCpu);
  capture::begin({x});
  EXPECT_THROW(capture::begin({x}), Error);
  Tensor y = x * 3.0;
  capture::abort();
  EXPECT_FALSE(capture::active());
  EXPECT_TRUE(y.is_pending());
  EXPECT_NEAR(y.sum().item(), x.sum().item() * 3.0, 1e-4);
  EXPECT_THROW(capture::end({x}, {y}), Error);  // no capture running
}

}  // namespace
}  // namespace lt
