// lt.compile's capture layer (capture/capture.h): a captured step replays with new arguments and
// the current state without tracing, matching the same step run as plain code; stale programs
// and data-dependent steps are refused rather than replayed wrongly; index range checks (of
// argument data, of indices computed in the step) are redone on every replay.
#include "capture/capture.h"

#include "runtime/indexing.h"
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

Tensor int_tensor(const std::vector<int64_t>& v) {
  return from_host(v.data(), DType::Int64, {static_cast<int64_t>(v.size())}, kLazyCpu);
}

// The message of the IndexError that `f` raises ("" when it raises none).
template <class F>
std::string index_error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index) << e.what();
    return e.what();
  }
  return "";
}

TEST(Capture, EmbeddingOfArgumentIdsReplaysAndChecksEachReplaysIds) {
  const std::vector<float> table = random_floats(5 * 3, 20);
  Tensor w = from_host(table.data(), DType::Float32, {5, 3}, kLazyCpu);
  const std::vector<int64_t> picks = {4, 0};
  // The ids are argument data in host memory: checked at the op, on the host. `picks` is a
  // constant made in the step: checked once.
  auto step = [&](const Tensor& ids) {
    return std::vector<Tensor>{embedding(w, ids) * 2.0, index_select(w, 0, int_tensor(picks))};
  };
  auto expect_rows = [&](const Tensor& got, const std::vector<int64_t>& rows, double scale) {
    std::vector<double> want;
    for (int64_t r : rows)
      for (int64_t c = 0; c < 3; ++c) want.push_back(scale * table[static_cast<size_t>(r * 3 + c)]);
    testing::expect_close(got.to_vector<double>(), want, 1e-6, 1e-6, "rows");
  };
  mark_step();

  Tensor ids0 = int_tensor({1, 3, 3, 0});
  capture::begin({ids0});
  auto rets = step(ids0);
  auto c = capture::end({ids0}, rets);
  ASSERT_TRUE(c.program) << c.why_not;
  expect_rows(rets[0], {1, 3, 3, 0}, 2.0);

  for (const std::vector<int64_t>& ids : {std::vector<int64_t>{4, 2, 0, 1}, {3, 3, 3, 3}}) {
    int64_t traced = metrics::counters()["traced_ops"];
    auto r = capture::replay(*c.program, {int_tensor(ids)});
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(metrics::counters()["traced_ops"], traced);
    expect_rows((*r)[0], ids, 2.0);
    expect_rows((*r)[1], picks, 1.0);
  }
  std::string err = index_error_of([&] {
    capture::replay(*c.program, {int_tensor({0, 7, 1, 2})});
  });
  EXPECT_NE(err.find("embedding"), std::string::npos) << err;
  EXPECT_NE(err.find("index 7"), std::string::npos) << err;
  EXPECT_NE(err.find("[5, 3]"), std::string::npos) << err;
  EXPECT_NE(index_error_of([&] { capture::replay(*c.program, {int_tensor({0, -1, 1, 2})}); }), "");
  auto r = capture::replay(*c.program, {int_tensor({2, 2, 1, 0})});  // still replays afterwards
  ASSERT_TRUE(r.has_value());
  expect_rows((*r)[0], {2, 2, 1, 0}, 2.0);
}

TEST(Capture, IndicesComputedInTheStepReplayWithTheirRangeChecks) {
  // acc += scatter of x into rows 2 * ids; the index is computed in the step (a deferred check).
  Tensor acc = zeros({6}, DType::Float32, kLazyCpu);
  std::vector<double> host_acc(6, 0.0);
  auto step = [&](const Tensor& ids, const Tensor& x) {
    acc.assign(scatter_add(acc, 0, ids * 2, x));
    return std::vector<Tensor>{argmax(acc)};
  };
  auto host_step = [&](const std::vector<int64_t>& ids, const std::vector<float>& x) {
    for (size_t i = 0; i < ids.size(); ++i) host_acc[static_cast<size_t>(2 * ids[i])] += x[i];
    return std::max_element(host_acc.begin(), host_acc.end()) - host_acc.begin();
  };
  mark_step();

  std::vector<float> x0 = random_floats(3, 30, 0.f, 1.f);
  Tensor ids0 = int_tensor({0, 2, 2});
  Tensor xt0 = from_host(x0.data(), DType::Float32, {3}, kLazyCpu);
  capture::begin({ids0, xt0});
  auto rets = step(ids0, xt0);
  auto c = capture::end({ids0, xt0}, rets);
  ASSERT_TRUE(c.program) << c.why_not;
  EXPECT_EQ(static_cast<int64_t>(rets[0].item()), host_step({0, 2, 2}, x0));

  for (uint32_t k = 0; k < 3; ++k) {
    std::vector<int64_t> ids = {k, 1, (k + 1) % 3};
    std::vector<float> x = random_floats(3, 31 + k, 0.f, 1.f);
    int64_t traced = metrics::counters()["traced_ops"];
    Tensor xt = from_host(x.data(), DType::Float32, {3}, kLazyCpu);
    auto r = capture::replay(*c.program, {int_tensor(ids), xt});
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(metrics::counters()["traced_ops"], traced);
    EXPECT_EQ(static_cast<int64_t>((*r)[0].item()), host_step(ids, x));
    testing::expect_close(acc.to_vector<double>(), host_acc, 1e-6, 1e-6, "acc after a replay");
  }
  // ids 3 -> row 6 of 6: raised after the replay ran, naming the op, the value and the shapes.
  std::vector<float> ones(3, 1.f);
  std::string err = index_error_of([&] {
    Tensor xt = from_host(ones.data(), DType::Float32, {3}, kLazyCpu);
    capture::replay(*c.program, {int_tensor({1, 3, 0}), xt});
  });
  EXPECT_NE(err.find("scatter_add"), std::string::npos) << err;
  EXPECT_NE(err.find("index 6"), std::string::npos) << err;
  EXPECT_NE(err.find("size 6"), std::string::npos) << err;
  host_acc[2] += 1.0;  // the replay's results are assigned (the bad position adds nothing)
  host_acc[0] += 1.0;
  testing::expect_close(acc.to_vector<double>(), host_acc, 1e-6, 1e-6, "acc after the bad replay");
}

}  // namespace
}  // namespace lt
