// gather and scatter_add as primitives: the loop IR reads through a loaded
// index (an indexed load inside the fused kernel) and scatter_add's kernel
// accumulates; values against plain host loops on lazy:cpu, lazy:reference and
// eager cpu (sizes large enough for the CPU thread pool, with many duplicate
// indices); kernel counts of embedding forward and backward pinned.
#include <gtest/gtest.h>

#include <random>

#include "graph_util.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "runtime/indexing.h"
#include "runtime/metrics.h"
#include "test_util.h"

namespace lt {
namespace {

std::vector<int64_t> random_ints(int64_t n, int64_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(0, hi - 1);
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (auto &x : v) x = d(rng);
  return v;
}

class GatherScatter : public ::testing::TestWithParam<const char *> {
 protected:
  Device dev() const { return Device::parse(GetParam()); }
};

TEST_P(GatherScatter, EmbeddingRowsAndTheirGradientMatchHostLoops) {
  const int64_t V = 3000, D = 24,
                N = 4000;  // N*D well above the thread pool's threshold
  auto w = testing::random_floats(V * D, 7);
  auto ids = random_ints(N, 50, 8);  // 4000 tokens over 50 rows: heavy duplication
  Tensor tw = from_host(w.data(), DType::Float32, {V, D}, dev());
  tw.requires_grad_(true);
  Tensor ti = from_host(ids.data(), DType::Int64, {N}, dev());
  Tensor y = embedding(tw, ti);
  auto g = testing::random_floats(N * D, 9);
  y.backward(from_host(g.data(), DType::Float32, {N, D}, dev()));
  std::vector<double> want_y(static_cast<size_t>(N * D)), want_g(static_cast<size_t>(V * D), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      want_y[n * D + d] = w[ids[n] * D + d];
      want_g[ids[n] * D + d] += g[n * D + d];
    }
  testing::expect_close(y.to_vector<double>(), want_y, 0, 0, "embedding rows");
  testing::expect_close(tw.grad().to_vector<double>(), want_g, 1e-5, 1e-4, "embedding gradient");
}

TEST_P(GatherScatter, IntegerScatterAddWrapsAndGatherCopiesExactly) {
  const int64_t R = 40, C = 1000;
  auto ids = random_ints(R * C, 7, 3);
  std::vector<int64_t> src(static_cast<size_t>(R * C));
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = (static_cast<int64_t>(i) * 2654435761LL) % 1000003;
  Tensor base = zeros({7, C}, DType::Int32, dev());
  Tensor s = from_host(src.data(), DType::Int64, {R, C}, dev()).to(DType::Int32);
  Tensor idx = from_host(ids.data(), DType::Int64, {R, C}, dev());
  Tensor out = scatter_add(base, 0, idx, s);
  std::vector<int64_t> want(7 * C, 0);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) want[ids[r * C + c] * C + c] += src[r * C + c];
  EXPECT_EQ(out.to_vector<int64_t>(), want);
  Tensor back = gather(out.to(DType::Int64), 0, idx);
  auto b = back.to_vector<int64_t>();
  for (int64_t i = 0; i < R * C; ++i) ASSERT_EQ(b[i], want[ids[i] * C + i % C]) << i;
}

INSTANTIATE_TEST_SUITE_P(Devices, GatherScatter,
                         ::testing::Values("lazy:cpu", "lazy:reference", "cpu"));

using testing::FakeData;
using testing::param;
using testing::plan_of;
NodePtr indexed(Op op, NodeList in, int64_t axis) {
  Attrs a;
  a.ints = {axis};
  return make_node(op, std::move(in), a);
}

TEST(GatherScatterLowering, GatherIsAnIndexedLoadFusedWithItsNeighbours) {
  // exp(w[idx[i, j], j] * 2): one elementwise kernel whose load of w is indexed
  // by the loaded idx.
  NodePtr w = param({50000, 64}), idx = param({128, 64}, DType::Int64);
  NodePtr two = make_constant(DType::Float32, 2);
  NodePtr y = make_node(Op::Exp, {make_node(Op::Mul, {indexed(Op::Gather, {w, idx}, 0), two})});
  Plan p = plan_of({y});
  ASSERT_EQ(p.kernels.size(), 1u) << p.grouping;
  const loop::Kernel &k = p.kernels[0];
  EXPECT_EQ(k.outer, (Shape{128, 64}));  // the output's space, not [128, 64, 50000]
  EXPECT_TRUE(k.inner.empty());
  int indexed_loads = 0;
  for (const auto &in : k.stages[0].body)
    if (in.kind == loop::IKind::Load && loop::uses_value(k, in.index)) ++indexed_loads;
  EXPECT_EQ(indexed_loads, 1);
  EXPECT_FALSE(k.accumulates());
}

TEST(GatherScatterLowering, ScatterAddIsAnInitAndOneAccumulatingKernel) {
  NodePtr base = param({1000, 8}), idx = param({300, 8}, DType::Int64), src = param({300, 8});
  NodePtr y = indexed(Op::ScatterAdd, {base, idx, make_node(Op::Tanh, {src})}, 0);
  Plan p = plan_of({y});
  ASSERT_EQ(p.kernels.size(), 2u) << p.grouping;
  EXPECT_FALSE(p.kernels[0].accumulates());
  EXPECT_EQ(p.kernels[0].outer, (Shape{1000, 8}));
  EXPECT_TRUE(p.kernels[1].accumulates());
  EXPECT_EQ(p.kernels[1].outer, (Shape{300, 8}));  // the index's space; tanh fused in
}

TEST(GatherScatterLowering, BadOperandsNameTheOpAndShapes) {
  auto message = [](const std::function<void()> &f) {
    try {
      f();
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  NodePtr x = param({3, 4});
  std::string m = message([&] { indexed(Op::Gather, {x, param({3, 2}, DType::Int32)}, 1); });
  EXPECT_NE(m.find("gather: expected an int64 index, got int32 (input [3, 4], "
                   "index [3, 2])"),
            std::string::npos)
      << m;
  m = message([&] { indexed(Op::Gather, {x, param({3}, DType::Int64)}, 0); });
  EXPECT_NE(m.find("rank"), std::string::npos) << m;
  m = message([&] { indexed(Op::Gather, {x, param({3, 2}, DType::Int64)}, 2); });
  EXPECT_NE(m.find("dimension out of range"), std::string::npos) << m;
  m = message([&] { indexed(Op::ScatterAdd, {x, param({3, 4}, DType::Int64), param({2, 4})}, 0); });
  EXPECT_NE(m.find("scatter_add: index is larger than src"), std::string::npos) << m;
  m = message([&] {
    indexed(Op::ScatterAdd, {x, param({3, 4}, DType::Int64), param({3, 4}, DType::Float64)}, 0);
  });
  EXPECT_NE(m.find("src dtype float64 differs from input dtype float32"), std::string::npos) << m;
}

TEST(GatherScatterKernels, EmbeddingForwardAndBackwardCounts) {
  const Device lazy = Device::parse("lazy:cpu");
  auto w = testing::random_floats(500 * 16, 1);
  auto ids = random_ints(64, 500, 2);
  Tensor tw = from_host(w.data(), DType::Float32, {500, 16}, lazy);
  tw.requires_grad_(true);
  Tensor pos = testing::random_tensor({64, 16}, 3, lazy);
  mark_step();
  Tensor y = embedding(tw, from_host(ids.data(), DType::Int64, {64}, lazy)) * 0.5 + pos;
  mark_step();
  EXPECT_EQ(metrics::last_graph().kernels,
            1);  // gather + scale + add: one kernel
  (y * y).sum().backward();
  mark_step();
  // Backward: zero fill of the [500, 16] gradient, one scatter kernel (d(y*y)
  // fused into it); plus the forward recomputed for y*y's gradient inside it.
  // No [64, 500] one-hot, no GEMM.
  EXPECT_LE(metrics::last_graph().kernels, 3);
}

}  // namespace
}  // namespace lt
