// Convolution as a library prim: the shape rule and its errors, lowering to Conv plan steps (bias
// and ReLU fused, exact step counts), the plan format, and values and gradients on eager cpu,
// lazy:cpu (oneDNN) and float64 (lowering's sliding-window expansion) against the reference
// interpreter's direct loops and float64 finite differences.
#include "ir/conv.h"

#include <gtest/gtest.h>

#include <cmath>

#include "autograd/autograd.h"
#include "backends/backend.h"
#include "graph_util.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "lowering/plan_serialize.h"
#include "runtime/conv.h"
#include "runtime/debug.h"
#include "runtime/metrics.h"
#include "runtime/sync.h"
#include "runtime/windows.h"
#include "test_util.h"

namespace lt {
namespace {

using testing::FakeData;
using testing::param;
ConvParams params(int64_t s, int64_t p, int64_t d, int64_t g) {
  ConvParams c;
  c.stride = {s, s}, c.padding = {p, p}, c.dilation = {d, d}, c.groups = g;
  return c;
}
NodePtr conv(NodeList in, const ConvParams& p) {
  Attrs a;
  a.ints = p.ints();
  return make_node(Op::Conv2d, std::move(in), a);
}
LowerOptions with_conv() {
  LowerOptions o;
  o.gemm_dtypes = {DType::Float32};
  o.conv_dtypes = {DType::Float32};
  return o;
}
Plan conv_plan(const NodeList& roots, const LowerOptions& opts = with_conv()) {
  return testing::plan_of(roots, opts);
}
int count(const Plan& p, PlanStep::Kind k) {
  int n = 0;
  for (const PlanStep& s : p.steps) n += s.kind == k;
  return n;
}

template <typename F>
void expect_error(F f, std::vector<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << needles[0];
  } catch (const Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(ConvShape, OutputSizesAndClearErrors) {
  EXPECT_EQ(conv({param({2, 4, 9, 7}), param({6, 2, 3, 2})}, params(2, 1, 1, 2))->shape,
            (Shape{2, 6, 5, 4}));
  EXPECT_EQ(
      conv({param({1, 3, 11, 11}), param({5, 3, 3, 3}), param({5})}, params(1, 0, 2, 1))->shape,
      (Shape{1, 5, 7, 7}));
  expect_error(
      [] {
        conv({param({1, 3, 5, 5}), param({4, 2, 3, 3})}, params(1, 0, 1, 1));
      },
      {"conv2d", "[1, 3, 5, 5]", "[4, 2, 3, 3]", "groups=1"});
  expect_error(
      [] {
        conv({param({1, 4, 5, 5}), param({3, 2, 3, 3})}, params(1, 0, 1, 2));
      },
      {"conv2d", "[3, 2, 3, 3]", "divisible by groups"});
  expect_error(
      [] {
        conv({param({1, 3, 2, 2}), param({4, 3, 4, 4})}, params(1, 0, 1, 1));
      },
      {"conv2d", "[1, 3, 2, 2]", "[4, 3, 4, 4]", "smaller than the kernel extent 4"});
  expect_error(
      [] {
        conv({param({1, 3, 5, 5}), param({4, 3, 3, 3}), param({3})}, params(1, 0, 1, 1));
      },
      {"conv2d", "bias of shape [4]"});
  Attrs gi, gw;
  gi.ints = params(1, 0, 1, 1).ints({6, 6});  // dy [1, 4, 3, 3] is not the output of a 6x6 input
  expect_error(
      [&] {
        make_node(Op::Conv2dGradInput, {param({1, 4, 3, 3}), param({4, 3, 3, 3})}, gi);
      },
      {"conv2d_grad_input", "[1, 4, 3, 3]", "[1, 3, 6, 6]"});
  gi.ints = params(1, 0, 1, 1).ints({5, 5});
  gw.ints = params(1, 0, 1, 1).ints({3, 3});
  EXPECT_EQ(make_node(Op::Conv2dGradInput, {param({1, 4, 3, 3}), param({4, 3, 3, 3})}, gi)->shape,
            (Shape{1, 3, 5, 5}));
  EXPECT_EQ(make_node(Op::Conv2dGradWeight, {param({1, 3, 5, 5}), param({1, 4, 3, 3})}, gw)->shape,
            (Shape{4, 3, 3, 3}));
  expect_error(
      [&] {
        make_node(Op::Conv2dGradWeight, {param({1, 3, 6, 5}), param({1, 4, 3, 3})}, gw);
      },
      {"conv2d_grad_weight", "[1, 4, 3, 3]", "[1, 3, 6, 5]"});
}

TEST(ConvLowering, ConvBiasReluIsOneLibraryStepAndNoKernel) {
  NodePtr y = conv({param({2, 3, 10, 10}), param({8, 3, 3, 3}), param({8})}, params(1, 1, 1, 1));
  Plan p = conv_plan({make_node(Op::Relu, {y})});
  ASSERT_EQ(p.steps.size(), 1u) << p.grouping;
  ASSERT_EQ(p.convs.size(), 1u);
  EXPECT_TRUE(p.convs[0].relu);
  EXPECT_GE(p.convs[0].bias, 0);
  EXPECT_EQ(p.kernels.size(), 0u);
}

TEST(ConvLowering, ReluWithAnotherUserStaysAKernel) {
  // The conv output is read twice (relu and the mask relu's gradient would use): not fused.
  NodePtr y = conv({param({2, 3, 8, 8}), param({4, 3, 3, 3})}, params(1, 1, 1, 1));
  NodePtr r = make_node(Op::Relu, {y});
  Plan p = conv_plan({r, make_node(Op::Exp, {y})});
  EXPECT_EQ(count(p, PlanStep::Kind::Conv), 1);
  EXPECT_FALSE(p.convs[0].relu);
  EXPECT_EQ(count(p, PlanStep::Kind::Kernel), 2) << p.grouping;  // relu, exp (outputs both)
}

TEST(ConvLowering, BackwardPrimsAreTheirOwnSteps) {
  const ConvParams cp = params(2, 1, 1, 1);
  Attrs gi, gw;
  gi.ints = cp.ints({9, 9});
  gw.ints = cp.ints({3, 3});
  NodePtr x = param({2, 3, 9, 9}), w = param({4, 3, 3, 3}), dy = param({2, 4, 5, 5});
  NodePtr dx = make_node(Op::Conv2dGradInput, {make_node(Op::Exp, {dy}), w}, gi);
  NodePtr dw = make_node(Op::Conv2dGradWeight, {x, dy}, gw);
  Plan p = conv_plan({dx, dw});
  EXPECT_EQ(count(p, PlanStep::Kind::Conv), 2);
  EXPECT_EQ(count(p, PlanStep::Kind::Kernel), 1);  // exp(dy): an operand gets its own buffer
  EXPECT_EQ(p.convs[0].kind, ConvStep::Kind::GradInput);
  EXPECT_EQ(p.convs[1].kind, ConvStep::Kind::GradWeight);
}

// Without a conv library (or for an empty batch, which library steps skip), decompose expands the
// three prims into the sliding-window + im2col GEMM form (lowering/expand_conv.h): no conv step,
// no conv prim left, the padding masks from iota prims (no input of the graph).
TEST(ConvLowering, WithoutALibraryThePrimsExpand) {
  const ConvParams cp = params(2, 1, 1, 1);
  Attrs gi, gw;
  gi.ints = cp.ints({9, 9});
  gw.ints = cp.ints({3, 3});
  for (int64_t n : {2, 0}) {
    NodePtr x = param({n, 3, 9, 9}), w = param({4, 3, 3, 3}), dy = param({n, 4, 5, 5});
    NodePtr y = conv({x, w, param({4})}, cp);
    NodePtr dx = make_node(Op::Conv2dGradInput, {dy, w}, gi);
    NodePtr dwt = make_node(Op::Conv2dGradWeight, {x, dy}, gw);
    for (const LowerOptions& opts : {LowerOptions{}, with_conv()}) {
      if (n != 0 && !opts.conv_dtypes.empty()) continue;  // library steps: the tests above
      Plan p = conv_plan({y, dx, dwt}, opts);
      EXPECT_EQ(count(p, PlanStep::Kind::Conv), 0);
      int iotas = 0;
      for (const PNode& q : p.prims.nodes) {
        EXPECT_NE(op_info(q.op).cls, OpClass::Conv) << op_name(q.op);
        iotas += q.op == Op::Iota;
      }
      if (n != 0) {
        EXPECT_GT(iotas, 0);
      }
      EXPECT_EQ(p.prims.num_inputs, 4);  // x, w, bias, dy
    }
  }
}

TEST(ConvLowering, PlanFormatRoundTripsConvStepsAndRejectsDamage) {
  NodePtr y = conv({param({1, 4, 6, 6}), param({4, 2, 3, 3}), param({4})}, params(1, 1, 2, 2));
  Plan p = conv_plan({make_node(Op::Relu, {y})});
  Plan q = deserialize_plan(serialize_plan(p));
  ASSERT_EQ(q.convs.size(), 1u);
  EXPECT_EQ(q.convs[0].params.ints(), p.convs[0].params.ints());
  EXPECT_EQ(q.convs[0].x, p.convs[0].x);
  EXPECT_EQ(q.convs[0].relu, p.convs[0].relu);
  EXPECT_EQ(serialize_plan(q), serialize_plan(p));
  Plan bad = p;
  bad.convs[0].y = {1, 4, 5, 5};  // not the geometry's output
  expect_error([&] { deserialize_plan(serialize_plan(bad)); }, {"cached plan", "conv"});
}

Tensor rnd(Shape s, uint32_t seed, const Device& d, DType t = DType::Float32) {
  auto v = testing::random_floats(numel(s), seed);
  Tensor r = from_host(v.data(), DType::Float32, s, d);
  return t == DType::Float32 ? r : r.to(t);
}

struct ConvCase {
  Shape x, w;
  ConvParams p;
};
const ConvCase kCases[] = {
    {{2, 3, 9, 8}, {4, 3, 3, 3}, params(1, 1, 1, 1)},
    {{2, 4, 11, 10}, {6, 2, 3, 2}, params(2, 1, 1, 2)},
    {{1, 2, 12, 12}, {3, 2, 3, 3}, params(3, 2, 2, 1)},
    {{3, 4, 7, 7}, {4, 1, 3, 3}, params(1, 1, 1, 4)},  // depthwise
};

// conv2d with bias, and the gradients of sum(y * r) w.r.t. x, w, b, on device d.
std::vector<std::vector<double>> forward_backward(const ConvCase& c, const Device& d, DType t) {
  Tensor x = rnd(c.x, 1, d, t).requires_grad_(), w = rnd(c.w, 2, d, t).requires_grad_();
  Tensor b = rnd({c.w[0]}, 3, d, t).requires_grad_();
  Tensor y = conv2d_nchw(x, w, b, c.p);
  Tensor r = rnd(y.shape(), 4, d, t);
  (y * r).sum().backward();
  return {y.to_vector<double>(), x.grad().to_vector<double>(), w.grad().to_vector<double>(),
          b.grad().to_vector<double>()};
}

TEST(ConvValues, CpuAndLazyAndFloat64ExpansionMatchTheReferenceLoops) {
  const char* names[] = {"y", "dx", "dw", "db"};
  for (const ConvCase& c : kCases) {
    auto want = forward_backward(c, Device::parse("lazy:reference"), DType::Float64);
    for (auto [dev, t] :
         {std::pair{"cpu", DType::Float32}, std::pair{"lazy:cpu", DType::Float32},
          std::pair{"lazy:cpu", DType::Float64}, std::pair{"lazy:reference", DType::Float32}}) {
      auto got = forward_backward(c, Device::parse(dev), t);
      const double tol = t == DType::Float64 ? 1e-10 : 2e-4;
      for (size_t i = 0; i < 4; ++i)
        testing::expect_close(got[i], want[i], tol, tol,
                              std::string(dev) + " " + std::string(dtype_name(t)) + " " + names[i] +
                                  " x" + shape_str(c.x));
    }
  }
}

// The prims are traced on every backend and dtype; lowering decides: a conv step exactly where the
// backend's LowerOptions offer the dtype (oneDNN: float32 only; the reference: every float dtype).
TEST(ConvValues, PrimsEverywhereLibraryExactlyWhereOffered) {
  const bool onednn = !get_backend("cpu").lower_options().conv_dtypes.empty();
  for (auto [dev, t, library] : {std::tuple{"lazy:cpu", DType::Float32, onednn},
                                 std::tuple{"lazy:cpu", DType::Float64, false},
                                 std::tuple{"lazy:reference", DType::Float64, true}}) {
    Device d = Device::parse(dev);
    Tensor y = conv2d_nchw(rnd({1, 2, 5, 5}, 1, d, t), rnd({3, 2, 3, 3}, 2, d, t), Tensor(),
                           params(1, 0, 1, 1));
    EXPECT_EQ(y.node()->op, Op::Conv2d) << dev;
    const Plan p = testing::plan_of({y.node()}, get_backend(d.backend_name()).lower_options());
    EXPECT_EQ(count(p, PlanStep::Kind::Conv), library ? 1 : 0) << dev << " " << dtype_name(t);
  }
}

// d/d(operand) of sum(op(a, b) * r) in float64 on lazy:reference, against central differences:
// the gradient prims' own VJPs (conv is bilinear, so these are exact up to rounding).
TEST(ConvGrad, BackwardPrimsHaveCorrectVjpsByFiniteDifferences) {
  Device d = Device::parse("lazy:reference");
  const ConvParams p = params(2, 1, 1, 2);
  const Shape xs = {1, 4, 7, 6}, ws = {4, 2, 3, 2};
  const Shape ys = conv_output_shape(Op::Conv2d, xs, ws, p);
  for (bool wrt_input_prim : {true, false}) {
    Tensor a = wrt_input_prim ? rnd(ys, 5, d, DType::Float64) : rnd(xs, 5, d, DType::Float64);
    Tensor b = wrt_input_prim ? rnd(ws, 6, d, DType::Float64) : rnd(ys, 6, d, DType::Float64);
    auto f = [&](const Tensor& u, const Tensor& v) {
      return wrt_input_prim ? conv2d_grad_input(u, v, p, xs[2], xs[3])
                            : conv2d_grad_weight(u, v, p, ws[2], ws[3]);
    };
    Tensor r = rnd(wrt_input_prim ? xs : ws, 7, d, DType::Float64);
    a.requires_grad_(), b.requires_grad_();
    auto g = grad({(f(a, b) * r).sum()}, {a, b});
    for (int which = 0; which < 2; ++which) {
      std::vector<double> base = (which ? b : a).to_vector<double>(), numeric(base.size());
      for (size_t i = 0; i < base.size(); i += 3) {
        auto at = [&](double delta) {
          std::vector<double> v = base;
          v[i] += delta;
          Tensor t = from_host(v.data(), DType::Float64, (which ? b : a).shape(), d);
          NoGradGuard ng;
          return (f(which ? a.detach() : t, which ? t : b.detach()) * r).sum().item();
        };
        numeric[i] = (at(1e-3) - at(-1e-3)) / 2e-3;
      }
      std::vector<double> got = g[which].to_vector<double>();
      for (size_t i = 0; i < base.size(); i += 3)
        EXPECT_NEAR(got[i], numeric[i], 1e-8) << (wrt_input_prim ? "grad_input" : "grad_weight")
                                              << " operand " << which << " at " << i;
    }
  }
}

// A trace whose conv prims the replaying backend has no library for (float64 on the CPU: oneDNN
// is float32 only) replays through lowering's sliding-window expansion and matches the recorded
// outputs.
TEST(ConvReplay, ConvPrimsReplayWhereTheBackendHasNoConvLibrary) {
  Device d = Device::parse("lazy:reference");
  const ConvParams p = params(2, 1, 1, 2);
  Tensor x = rnd({2, 4, 9, 8}, 1, d, DType::Float64), w = rnd({6, 2, 3, 3}, 2, d, DType::Float64);
  Tensor b = rnd({6}, 3, d, DType::Float64), dy = rnd({2, 6, 5, 4}, 4, d, DType::Float64);
  Tensor y = conv2d_nchw(x, w, b, p).relu();
  Tensor dx = conv2d_grad_input(dy, w, p, 9, 8), dw = conv2d_grad_weight(x, dy, p, 3, 3);
  ASSERT_EQ(y.node()->inputs[0]->op, Op::Conv2d);
  const std::string path = ::testing::TempDir() + "/conv_replay.json";
  debug::dump(path, {y, dx, dw}, true);
  debug::ReplayReport r = debug::replay(path, "cpu", true, 1e-10);
  EXPECT_TRUE(r.ok && r.checked) << r.message;
  EXPECT_EQ(r.outputs, 3);
  debug::BisectReport br = debug::bisect(path, "cpu", 1e-10);
  EXPECT_FALSE(br.diverged) << br.message;
}

TEST(ConvCounts, LazyForwardAndTrainStepStepsArePinned) {
  if (get_backend("cpu").lower_options().conv_dtypes.empty())
    GTEST_SKIP() << "built without oneDNN";
  Device d = Device::parse("lazy:cpu");
  Tensor x = rnd({4, 3, 12, 12}, 1, d), w = rnd({8, 3, 3, 3}, 2, d), b = rnd({8}, 3, d);
  mark_step();
  Tensor y = conv2d(x, w, b, {1, 1}, {1, 1}).relu();
  mark_step();
  auto g = metrics::last_graph();
  EXPECT_EQ(g.kernels, 1) << g.grouping;  // one oneDNN call: conv + bias + relu post-op
  EXPECT_NE(g.grouping.find("+bias +relu"), std::string::npos) << g.grouping;

  // A train step of one conv layer: forward conv (bias fused), relu + loss reduction, the two
  // backward convs, the bias gradient, and the SGD updates.
  w.requires_grad_(), b.requires_grad_();
  Tensor loss = (conv2d(x, w, b, {2, 2}, {1, 1}).relu() * rnd({4, 8, 6, 6}, 9, d)).sum();
  loss.backward();
  {
    NoGradGuard ng;
    Tensor w2 = w - w.grad() * 0.1, b2 = b - b.grad() * 0.1;
    mark_step();
  }
  g = metrics::last_graph();
  int convs = 0;
  for (size_t at = g.grouping.find(": conv "); at != std::string::npos;
       at = g.grouping.find(": conv ", at + 1))
    ++convs;
  EXPECT_EQ(convs, 2) << g.grouping;  // forward and grad_weight; x needs no gradient
  // + the loss (relu fused), relu's backward and the two SGD updates; the bias gradient (a
  // reduction read only by the bias update) is computed inside the update's kernel.
  EXPECT_EQ(g.kernels, 6) << g.grouping;
}

}  // namespace
}  // namespace lt
