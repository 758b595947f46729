// Autograd: gradients of every differentiable op against float64 central finite differences, on
// broadcasting shapes, eager and lazy; accumulation, retain_graph, no_grad, errors.
#include <gtest/gtest.h>

#include <functional>

#include "autograd/autograd.h"
#include "test_util.h"

namespace lt {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

std::vector<double> rand64(int64_t n, uint32_t seed, double lo, double hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// Checks d/dx_i sum(f(x) * w) against central differences in float64.
void gradcheck_impl(const std::string& what, const std::vector<Shape>& shapes, const Fn& f,
                    const Device& dev, double lo, double hi, double tol) {
  std::vector<std::vector<double>> data;
  for (size_t i = 0; i < shapes.size(); ++i)
    data.push_back(rand64(numel(shapes[i]), 7 + 13 * i, lo, hi));
  auto make = [&](size_t i, const std::vector<double>& v) {
    return from_host(v.data(), DType::Float64, shapes[i], dev);
  };
  std::vector<Tensor> in;
  for (size_t i = 0; i < shapes.size(); ++i) in.push_back(make(i, data[i]).requires_grad_());
  Tensor out = f(in);
  auto w = rand64(out.numel(), 99, 0.5, 1.5);
  Tensor wt = from_host(w.data(), DType::Float64, out.shape(), dev);
  (out * wt).sum().backward();
  mark_step();
  auto loss = [&](size_t i, const std::vector<double>& v) {
    NoGradGuard ng;
    std::vector<Tensor> xs;
    for (size_t j = 0; j < shapes.size(); ++j) xs.push_back(j == i ? make(j, v) : make(j, data[j]));
    return (f(xs) * wt).sum().item();
  };
  for (size_t i = 0; i < shapes.size(); ++i) {
    ASSERT_TRUE(in[i].grad().defined()) << what << ": no grad for input " << i;
    EXPECT_EQ(in[i].grad().shape(), shapes[i]) << what;
    auto got = in[i].grad().to_vector<double>();
    for (size_t k = 0; k < data[i].size(); ++k) {
      const double h = 1e-6;
      auto p = data[i], m = data[i];
      p[k] += h;
      m[k] -= h;
      double num = (loss(i, p) - loss(i, m)) / (2 * h);
      ASSERT_NEAR(got[k], num, tol * std::max(1.0, std::fabs(num)) * 100)
          << what << " input " << i << " elem " << k;
    }
  }
}

void gradcheck(const std::string& what, const std::vector<Shape>& shapes, const Fn& f,
               const Device& dev, double lo = -1.5, double hi = 1.5, double tol = 1e-6) {
  SCOPED_TRACE(what);
  try {
    gradcheck_impl(what, shapes, f, dev, lo, hi, tol);
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

class Grad : public ::testing::TestWithParam<const char*> {
 protected:
  Device dev() const { return Device::parse(GetParam()); }
};

TEST_P(Grad, UnaryOps) {
  std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
      {"exp", [](auto& x) { return x.exp(); }},
      {"sin", [](auto& x) { return x.sin(); }},
      {"cos", [](auto& x) { return x.cos(); }},
      {"tanh", [](auto& x) { return x.tanh(); }},
      {"sigmoid", [](auto& x) { return x.sigmoid(); }},
      {"erf", [](auto& x) { return x.erf(); }},
      {"neg", [](auto& x) { return -x; }},
      {"silu", [](auto& x) { return silu(x); }},
      {"gelu", [](auto& x) { return gelu(x); }},
      {"gelu_tanh", [](auto& x) { return gelu(x, "tanh"); }},
      {"log", [](auto& x) { return (x * x + 0.5).log(); }},
      {"sqrt", [](auto& x) { return (x * x + 0.5).sqrt(); }},
      {"rsqrt", [](auto& x) { return (x * x + 0.5).rsqrt(); }},
      {"reciprocal", [](auto& x) { return (x * x + 0.5).reciprocal(); }},
      {"relu", [](auto& x) { return (x + 0.013).relu(); }},
      {"abs", [](auto& x) { return (x + 0.013).abs(); }},
  };
  for (auto& [name, fn] : ops)
    gradcheck(
        name, {{3, 4}}, [&](auto& in) { return fn(in[0]); }, dev());
}

TEST_P(Grad, BinaryOpsWithBroadcasting) {
  std::vector<std::pair<std::string, Fn>> ops = {
      {"add", [](auto& in) { return in[0] + in[1]; }},
      {"sub", [](auto& in) { return in[0] - in[1]; }},
      {"mul", [](auto& in) { return in[0] * in[1]; }},
      {"div", [](auto& in) { return in[0] / (in[1] * in[1] + 0.5); }},
      {"pow", [](auto& in) { return pow(in[0] * in[0] + 0.5, in[1]); }},
      {"maximum", [](auto& in) { return maximum(in[0], in[1]); }},
      {"minimum", [](auto& in) { return minimum(in[0], in[1]); }},
      {"where", [](auto& in) { return where(gt(in[0], 0.0), in[0] * 3, in[1]); }},
      {"scalar_ops", [](auto& in) { return (2.0 - in[0]) / 3.0 + in[1] * 0.5; }},
  };
  for (auto& [name, fn] : ops)
    for (auto sh :
         std::vector<std::pair<Shape, Shape>>{{{3, 4}, {3, 4}}, {{3, 1}, {4}}, {{2, 3, 4}, {}}})
      gradcheck(name + shape_str(sh.first) + shape_str(sh.second), {sh.first, sh.second}, fn,
                dev());
}

TEST_P(Grad, ReductionsAndComposites) {
  Shape s = {3, 5};
  gradcheck(
      "sum", {s}, [](auto& in) { return in[0].sum({1}); }, dev());
  gradcheck(
      "sum_all", {s}, [](auto& in) { return in[0].sum(); }, dev());
  gradcheck(
      "mean_keep", {s}, [](auto& in) { return in[0].mean({0}, true); }, dev());
  gradcheck(
      "amax", {s}, [](auto& in) { return in[0].amax({1}); }, dev());
  gradcheck(
      "amin", {s}, [](auto& in) { return in[0].amin({0}); }, dev());
  gradcheck(
      "prod", {s}, [](auto& in) { return in[0].prod({1}); }, dev(), 0.5, 1.5);
  gradcheck(
      "var", {s}, [](auto& in) { return var(in[0], {1}); }, dev());
  gradcheck(
      "softmax", {s}, [](auto& in) { return softmax(in[0], 1); }, dev());
  gradcheck(
      "log_softmax", {s}, [](auto& in) { return log_softmax(in[0], -1); }, dev());
  gradcheck(
      "logsumexp", {s}, [](auto& in) { return logsumexp(in[0], {1}); }, dev());
  gradcheck(
      "layer_norm", {{4, 6}, {6}, {6}},
      [](auto& in) { return layer_norm(in[0], {6}, in[1], in[2]); }, dev());
  gradcheck(
      "layer_norm_plain", {{2, 3, 4}},
      [](auto& in) {
        return layer_norm(in[0], {3, 4});
      },
      dev());
}

TEST_P(Grad, MovementAndMatmul) {
  gradcheck(
      "permute_reshape", {{2, 3, 4}},
      [](auto& in) {
        return in[0].permute({2, 0, 1}).reshape({4, 6}) * 2;
      },
      dev());
  gradcheck(
      "expand", {{3, 1}},
      [](auto& in) {
        return in[0].expand({3, 4}) * 1.5;
      },
      dev());
  gradcheck(
      "mm", {{3, 4}, {4, 2}}, [](auto& in) { return matmul(in[0], in[1]); }, dev());
  gradcheck(
      "bmm_broadcast", {{2, 3, 4}, {4, 5}}, [](auto& in) { return matmul(in[0], in[1]); }, dev());
  gradcheck(
      "mv", {{3, 4}, {4}}, [](auto& in) { return matmul(in[0], in[1]); }, dev());
  gradcheck(
      "vv", {{4}, {4}}, [](auto& in) { return matmul(in[0], in[1]); }, dev());
  gradcheck(
      "mlp", {{5, 4}, {4, 3}, {3}}, [](auto& in) { return (matmul(in[0], in[1]) + in[2]).tanh(); },
      dev());
}

INSTANTIATE_TEST_SUITE_P(Devices, Grad, ::testing::Values("cpu", "lazy:cpu"));

// The core reaches autograd/ only through the tape it registers at load (runtime/tape.h): a link
// that dropped autograd/'s objects would record nothing. Here through the public API alone.
TEST(Autograd, TapeIsRegistered) {
  ASSERT_NE(tape(), nullptr);
  Tensor x = full({3}, 2.0, DType::Float32, kCPU).requires_grad_();
  Tensor y = (x * x).sum();
  EXPECT_EQ(y.grad_fn_name(), "reduce_sum_backward");
  y.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 4, 4}));
}

TEST(Autograd, AccumulatesRetainsAndErrors) {
  Tensor x = testing::random_tensor({3}, 1, kCPU).requires_grad_();
  Tensor y = (x * x).sum();
  y.backward({}, true);
  y.backward();  // retained once: accumulates
  auto g = x.grad().to_vector<float>();
  auto xv = x.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], 4 * xv[i], 1e-5);
  EXPECT_THROW(y.backward(), Error);  // freed
  Tensor z = x * 2;
  EXPECT_THROW(z.backward(), Error);  // not a scalar
  Tensor c = testing::random_tensor({3}, 2, kCPU);
  EXPECT_THROW((c * 2).sum().backward(), Error);  // nothing requires grad
  EXPECT_THROW(x += 1.0, Error);                  // in-place on a leaf that requires grad
  {
    NoGradGuard ng;
    x += 1.0;  // allowed under no_grad (optimizer updates)
    EXPECT_FALSE((x * 2).requires_grad());
  }
  EXPECT_TRUE((x * 2).requires_grad());
  EXPECT_FALSE((x * 2).detach().requires_grad());
  Tensor i = from_host(std::vector<int64_t>{1, 2}.data(), DType::Int64, {2}, kCPU);
  EXPECT_THROW(i.requires_grad_(), Error);
}

TEST(Autograd, GradFunctionDoesNotAccumulate) {
  Tensor x = testing::random_tensor({4}, 3, kCPU).requires_grad_();
  Tensor w = testing::random_tensor({4}, 4, kCPU).requires_grad_();
  auto gs = grad({(x * w).sum()}, {x, w});
  EXPECT_FALSE(x.grad().defined());
  auto gx = gs[0].to_vector<float>(), wv = w.to_vector<float>();
  for (size_t i = 0; i < gx.size(); ++i) EXPECT_NEAR(gx[i], wv[i], 1e-6);
}

TEST(Autograd, LazyTrainingStepIsOneGraph) {
  Device lazy = Device::parse("lazy:cpu");
  Tensor w = testing::random_tensor({8, 4}, 5, lazy).requires_grad_();
  Tensor x = testing::random_tensor({16, 8}, 6, lazy);
  mark_step();
  metrics::reset();
  for (int step = 0; step < 5; ++step) {
    Tensor loss = (matmul(x, w).tanh() * 0.5).sum();
    loss.backward();
    {
      NoGradGuard ng;
      w -= w.grad() * 0.01;
    }
    w.set_grad(Tensor());
    mark_step();
  }
  EXPECT_EQ(metrics::counters()["graph_compiles"], 1);
  EXPECT_EQ(metrics::counters()["graph_cache_hits"], 4);
  EXPECT_EQ(pending_tensor_count(), 0u);
}

// queue_callback: callbacks run once each, in queue order (one queued while they run too), after
// the backward has accumulated every gradient, and only after the next backward (not after grad).
TEST(Autograd, QueuedCallbacksRunOnceInOrderAfterTheBackward) {
  for (const Device& dev : {kCPU, testing::kLazyCpu}) {
    const uint32_t seed = std::random_device{}();
    Tensor x = testing::random_tensor({5}, seed, dev).requires_grad_();
    Tensor w = testing::random_tensor({5}, seed + 1, dev).requires_grad_();
    std::vector<std::string> ran;
    std::vector<float> seen;  // x.grad as the first callback sees it
    queue_callback([&] {
      ran.push_back("first");
      seen = x.grad().to_vector<float>();
      queue_callback([&] { ran.push_back("queued by first"); });
    });
    queue_callback([&] { ran.push_back("second"); });
    grad({(x * w).sum()}, {x});  // lt::grad leaves the queue alone
    EXPECT_TRUE(ran.empty()) << dev.str();
    Tensor loss = (x * w).sum() + (x * x).sum();  // two paths into x: accumulated before callbacks
    loss.backward();
    EXPECT_EQ(ran, (std::vector<std::string>{"first", "second", "queued by first"})) << dev.str();
    const std::vector<float> xv = x.to_vector<float>(), wv = w.to_vector<float>();
    ASSERT_EQ(seen.size(), xv.size());
    for (size_t i = 0; i < xv.size(); ++i)
      EXPECT_NEAR(seen[i], wv[i] + 2 * xv[i], 1e-5) << dev.str() << " seed " << seed;
    ran.clear();
    (x * w).sum().backward();  // the queue was emptied: nothing runs again
    EXPECT_TRUE(ran.empty()) << dev.str();
  }
}

// A callback that throws: the error reaches the backward's caller, the callbacks after it are
// dropped, and the next backward runs only what was queued for it. A backward that fails drops the
// queue too.
TEST(Autograd, QueuedCallbacksAreClearedAfterAnError) {
  Tensor x = testing::random_tensor({3}, std::random_device{}(), kCPU).requires_grad_();
  int later = 0, next = 0;
  queue_callback([] { fail(ErrorKind::Value, "callback failed"); });
  queue_callback([&] { ++later; });
  try {
    (x * x).sum().backward();
    ADD_FAILURE() << "the callback's error did not reach backward's caller";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
    EXPECT_STREQ(e.what(), "callback failed");
  }
  EXPECT_EQ(later, 0);
  queue_callback([&] { ++next; });
  (x * x).sum().backward();
  EXPECT_EQ(later, 0);
  EXPECT_EQ(next, 1);

  queue_callback([&] { ++later; });
  Tensor y = (x * x).sum();
  y.backward();
  EXPECT_EQ(later, 1);
  queue_callback([&] { ++later; });
  EXPECT_THROW(y.backward(), Error);  // its graph was freed
  EXPECT_THROW(backward(std::vector<Tensor>{}, {}), Error);
  (x * x).sum().backward();
  EXPECT_EQ(later, 1);  // the failed pass's callback was dropped, not run by this one
  EXPECT_THROW(queue_callback(nullptr), Error);
}

}  // namespace
}  // namespace lt
