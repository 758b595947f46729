// A training forward's compiled backward (capture/capture_backward.cc): a captured call that
// returns a tensor requiring grad replays with a node whose backward is a replayed graph too.
// Checked against gradients written out by hand in double precision on the host.
#include "capture/capture.h"

#include "runtime/ops.h"
#include "test_util.h"

namespace lt {
namespace {

using testing::kLazyCpu;
using testing::random_floats;

constexpr int64_t kB = 5, kI = 4, kO = 3;

// y = tanh(x @ w + b); with upstream gradient g: dw = x^T (g (1 - y^2)), db = sum_rows(g (1 -
// y^2)), dx = (g (1 - y^2)) w^T.
struct HostGrads {
  std::vector<double> dw, db, dx;
};
HostGrads host_grads(const std::vector<float>& x, const std::vector<float>& w,
                     const std::vector<float>& b, const std::vector<float>& g) {
  HostGrads r{std::vector<double>(kI * kO), std::vector<double>(kO), std::vector<double>(kB * kI)};
  for (int64_t i = 0; i < kB; ++i)
    for (int64_t o = 0; o < kO; ++o) {
      double z = b[o];
      for (int64_t k = 0; k < kI; ++k) z += double(x[i * kI + k]) * w[k * kO + o];
      double y = std::tanh(z), d = g[i * kO + o] * (1 - y * y);
      r.db[o] += d;
      for (int64_t k = 0; k < kI; ++k) {
        r.dw[k * kO + o] += double(x[i * kI + k]) * d;
        r.dx[i * kI + k] += d * w[k * kO + o];
      }
    }
  return r;
}

Tensor lazy(const std::vector<float>& v, Shape s) {
  return from_host(v.data(), DType::Float32, std::move(s), kLazyCpu);
}

TEST(CaptureBackward, ReplayedForwardAndBackwardMatchHandWrittenGradients) {
  auto wv = random_floats(kI * kO, 1), bv = random_floats(kO, 2);
  Tensor w = lazy(wv, {kI, kO}), b = lazy(bv, {kO});
  w.requires_grad_(true);
  b.requires_grad_(true);
  auto fwd = [&](const Tensor& x) { return std::vector<Tensor>{(matmul(x, w) + b).tanh()}; };

  std::shared_ptr<capture::Program> program;
  for (uint32_t step = 0; step < 4; ++step) {
    auto xv = random_floats(kB * kI, 10 + step), gv = random_floats(kB * kO, 20 + step);
    Tensor x = lazy(xv, {kB, kI});
    x.requires_grad_(true);
    Tensor g = lazy(gv, {kB, kO});
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    std::vector<Tensor> y;
    int64_t traced = metrics::counters()["traced_ops"];
    if (step == 0) {
      capture::begin({x});
      y = fwd(x);
      auto c = capture::end({x}, y);
      ASSERT_TRUE(c.program) << c.why_not;
      program = c.program;
    } else {
      auto r = capture::replay(*program, {x});
      ASSERT_TRUE(r.has_value());
      y = *r;
    }
    ASSERT_TRUE(y[0].requires_grad());
    EXPECT_EQ(y[0].grad_fn_name(), "CompiledFunctionBackward");
    y[0].backward(g);
    if (step > 0) {
      EXPECT_EQ(metrics::counters()["traced_ops"], traced) << "step " << step;
    }
    HostGrads want = host_grads(xv, wv, bv, gv);
    testing::expect_close(w.grad().to_vector<double>(), want.dw, 1e-5, 1e-5, "dw");
    testing::expect_close(b.grad().to_vector<double>(), want.db, 1e-5, 1e-5, "db");
    testing::expect_close(x.grad().to_vector<double>(), want.dx, 1e-5, 1e-5, "dx");
  }
}

TEST(CaptureBackward, ReturningANewLeafThatRequiresGradIsNotReplayed) {
  Tensor x = lazy(random_floats(6, 3), {6});
  mark_step();
  capture::begin({x});
  Tensor leaf = x * 2.0;
  leaf = leaf.detach();
  leaf.requires_grad_(true);
  std::vector<Tensor> y{(leaf * x).sum()};
  auto c = capture::end({x}, y);
  EXPECT_FALSE(c.program);
  EXPECT_NE(c.why_not.find("new leaf"), std::string::npos) << c.why_not;
  y[0].backward();  // the traced call's own history still works
  EXPECT_TRUE(leaf.grad().defined());
}

}  // namespace
}  // namespace lt
