// Matmul as a library GEMM step: which graphs lower to Gemm steps (no copies for transposed,
// sliced or broadcast operands), their serialization, and their results on the CPU backend
// against the reference interpreter and a float64 host loop.
#include <gtest/gtest.h>

#include <functional>

#include "backends/backend.h"
#include "graph_util.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "lowering/plan_serialize.h"
#include "runtime/indexing.h"
#include "runtime/metrics.h"
#include "test_util.h"

namespace lt {
namespace {

using testing::FakeData;
using testing::param;
NodePtr mm(NodePtr a, NodePtr b) { return make_node(Op::Matmul, {std::move(a), std::move(b)}); }
NodePtr tr(NodePtr a, std::vector<int64_t> perm) {
  Attrs at;
  at.ints = to_ints(perm);
  return make_node(Op::Permute, {std::move(a)}, at);
}
LowerOptions f32_gemm() { return LowerOptions{{DType::Float32}}; }
Plan gemm_plan(const NodeList& roots, const LowerOptions& opts = f32_gemm()) {
  return testing::plan_of(roots, opts);
}

TEST(GemmLowering, PlainMatmulIsOneGemmAndNoKernel) {
  Plan p = gemm_plan({mm(param({32, 16}), param({16, 8}))});
  ASSERT_EQ(p.gemms.size(), 1u) << p.grouping;
  EXPECT_TRUE(p.kernels.empty()) << p.grouping;
  const Gemm& g = p.gemms[0];
  EXPECT_EQ(g.M, 32);
  EXPECT_EQ(g.N, 8);
  EXPECT_EQ(g.K, 16);
  EXPECT_FALSE(g.a_transposed());
  EXPECT_FALSE(g.b_transposed());
  EXPECT_EQ(g.lda(), 16);
  EXPECT_EQ(g.ldb(), 8);
  EXPECT_TRUE(g.batch.empty());
  EXPECT_EQ(p.buffers[g.a].kind, BufferSpec::Kind::Input);
  EXPECT_EQ(p.buffers[g.b].kind, BufferSpec::Kind::Input);
  EXPECT_EQ(p.buffers[g.out].kind, BufferSpec::Kind::Output);
}

TEST(GemmLowering, TransposedOperandsAreReadInPlace) {
  // nn.Linear's x @ w.T: w [N, K] read as a transposed B, no copy.
  Plan p = gemm_plan({mm(param({32, 16}), tr(param({8, 16}), {1, 0}))});
  ASSERT_EQ(p.gemms.size(), 1u) << p.grouping;
  EXPECT_TRUE(p.kernels.empty());
  EXPECT_TRUE(p.gemms[0].b_transposed());
  EXPECT_EQ(p.gemms[0].ldb(), 16);
  // x.T @ g (a weight gradient): A transposed.
  Plan q = gemm_plan({mm(tr(param({16, 32}), {1, 0}), param({16, 8}))});
  ASSERT_EQ(q.gemms.size(), 1u) << q.grouping;
  EXPECT_TRUE(q.kernels.empty());
  EXPECT_TRUE(q.gemms[0].a_transposed());
  EXPECT_EQ(q.gemms[0].lda(), 32);
}

TEST(GemmLowering, TransposedProductIsTheSwappedGemm) {
  // A weight's gradient (x^T dy)^T, as autograd builds it for nn.Linear: the GEMM computes
  // dy^T x in the layout the reader wants (lowering/decompose.cc), with no transposing copy.
  auto x = param({128, 24}), dy = param({128, 40});
  Plan p = gemm_plan({tr(mm(tr(x, {1, 0}), dy), {1, 0})});
  ASSERT_EQ(p.gemms.size(), 1u) << p.grouping;
  EXPECT_TRUE(p.kernels.empty()) << p.grouping;
  EXPECT_EQ(p.gemms[0].M, 40);
  EXPECT_EQ(p.gemms[0].N, 24);
  EXPECT_TRUE(p.gemms[0].a_transposed());
  EXPECT_FALSE(p.gemms[0].b_transposed());
  // Batched, with B broadcast over the batch: still one GEMM step and no kernel.
  Plan b = gemm_plan({tr(mm(param({4, 6, 5}), param({5, 3})), {0, 2, 1})});
  ASSERT_EQ(b.gemms.size(), 1u) << b.grouping;
  EXPECT_TRUE(b.kernels.empty()) << b.grouping;
  // The product read untransposed too: computed once, and the transpose is a copy kernel.
  auto m = mm(param({8, 5}), param({5, 6}));
  Plan both = gemm_plan({m, tr(m, {1, 0})});
  EXPECT_EQ(both.gemms.size(), 1u) << both.grouping;
  EXPECT_EQ(both.kernels.size(), 1u) << both.grouping;
}

TEST(GemmLowering, BatchesCollapseAndBroadcastWithZeroStride) {
  Plan p = gemm_plan({mm(param({4, 6, 5}), param({4, 5, 3}))});
  ASSERT_EQ(p.gemms.size(), 1u) << p.grouping;
  EXPECT_EQ(p.gemms[0].batch, (std::vector<int64_t>{4}));
  EXPECT_EQ(p.gemms[0].a_batch_stride, (std::vector<int64_t>{30}));
  EXPECT_EQ(p.gemms[0].b_batch_stride, (std::vector<int64_t>{15}));
  // [3, 5] batch against one matrix: A's rows stack, so one GEMM of 3*5*6 rows, no batch.
  Plan q = gemm_plan({mm(param({3, 5, 6, 4}), param({4, 2}))});
  ASSERT_EQ(q.gemms.size(), 1u) << q.grouping;
  EXPECT_TRUE(q.kernels.empty());
  EXPECT_TRUE(q.gemms[0].batch.empty());
  EXPECT_EQ(q.gemms[0].M, 90);
  // A transposed in each batch (x.mT @ W): rows do not stack; a batch of 15 with B's stride 0.
  Plan t = gemm_plan({mm(tr(param({3, 5, 4, 6}), {0, 1, 3, 2}), param({4, 2}))});
  ASSERT_EQ(t.gemms.size(), 1u) << t.grouping;
  EXPECT_EQ(t.gemms[0].batch, (std::vector<int64_t>{15}));
  EXPECT_EQ(t.gemms[0].b_batch_stride, (std::vector<int64_t>{0}));
  // [3, 5] against [5]: the dims do not merge (B repeats along the outer one).
  Plan r = gemm_plan({mm(param({3, 5, 6, 4}), param({5, 4, 2}))});
  ASSERT_EQ(r.gemms.size(), 1u) << r.grouping;
  EXPECT_EQ(r.gemms[0].batch, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(r.gemms[0].a_batch_stride, (std::vector<int64_t>{120, 24}));
  EXPECT_EQ(r.gemms[0].b_batch_stride, (std::vector<int64_t>{0, 8}));
}

TEST(GemmLowering, VectorOperands) {
  for (auto [a, b] : std::vector<std::pair<Shape, Shape>>{
           {{16}, {16, 8}}, {{32, 16}, {16}}, {{16}, {16}}, {{2, 3, 16}, {16}}}) {
    Plan p = gemm_plan({mm(param(a), param(b))});
    EXPECT_EQ(p.gemms.size(), 1u) << shape_str(a) << " @ " << shape_str(b) << "\n" << p.grouping;
    // The GEMM writes the output's buffer directly, even through the final reshape.
    EXPECT_TRUE(p.kernels.empty()) << shape_str(a) << " @ " << shape_str(b) << "\n" << p.grouping;
  }
}

TEST(GemmLowering, PrologueAndEpilogueAreLoopKernelsAroundTheGemm) {
  auto x = param({32, 16}), w = param({8, 16}), bias = param({8});
  auto y =
      make_node(Op::Relu, {make_node(Op::Add, {mm(make_node(Op::Exp, {x}), tr(w, {1, 0})), bias})});
  Plan p = gemm_plan({y});
  ASSERT_EQ(p.steps.size(), 3u) << p.grouping;
  EXPECT_EQ(p.steps[0].kind, PlanStep::Kind::Kernel);  // exp(x)
  EXPECT_EQ(p.steps[1].kind, PlanStep::Kind::Gemm);
  EXPECT_EQ(p.steps[2].kind, PlanStep::Kind::Kernel);  // relu(. + bias)
  EXPECT_EQ(p.kernels[0].args.back().buffer, p.gemms[0].a);
}

TEST(GemmLowering, DeepOperandChainsStillMatchAndNeverMaterializeTheProduct) {
  // A residual stream of 400 adds (deeper than the inlining bound) feeding a matmul, as in a stack
  // of transformer blocks: the depth cut must not realize the [M, N, K] product (which would block
  // the GEMM and write M*N*K elements); it realizes the operand chain instead.
  for (int depth = 240; depth <= 270; depth += 3) {  // the product lands at and around the bound
    NodePtr x = param({16, 32});
    for (int i = 0; i < depth; ++i) x = make_node(Op::Add, {x, param({16, 32})});
    Plan p = gemm_plan({mm(x, tr(param({8, 32}), {1, 0}))});
    ASSERT_EQ(p.gemms.size(), 1u) << depth << "\n" << p.grouping;
    for (const auto& b : p.buffers) EXPECT_LT(b.numel, 16 * 8 * 32) << depth << "\n" << p.grouping;
  }
}

TEST(GemmLowering, FallsBackToLoopKernelsWhereTheLibraryCannot) {
  // No GEMM offered (the default, and backends without a library).
  EXPECT_TRUE(gemm_plan({mm(param({8, 4}), param({4, 2}))}, LowerOptions{}).gemms.empty());
  // A dtype the library lacks.
  EXPECT_TRUE(
      gemm_plan({mm(param({8, 4}, DType::Float64), param({4, 2}, DType::Float64))}).gemms.empty());
  EXPECT_TRUE(
      gemm_plan({mm(param({8, 4}, DType::Int32), param({4, 2}, DType::Int32))}).gemms.empty());
  // A sum that is not a matrix product (both factors vary with every index).
  auto a = param({2, 3, 4, 5}), b = param({2, 3, 4, 5});
  Attrs r;
  r.ints = {3};
  EXPECT_TRUE(gemm_plan({make_node(Op::ReduceSum, {make_node(Op::Mul, {a, b})}, r)}).gemms.empty());
}

TEST(GemmLowering, PlansWithGemmsSurviveSerialization) {
  Plan p = gemm_plan({make_node(Op::Relu, {mm(param({3, 5, 6, 4}), param({5, 4, 2}))})});
  ASSERT_EQ(p.gemms.size(), 1u);
  Plan q = deserialize_plan(serialize_plan(p));
  ASSERT_EQ(q.gemms.size(), 1u);
  const Gemm &a = p.gemms[0], &b = q.gemms[0];
  EXPECT_EQ(b.name, a.name);
  EXPECT_EQ(std::vector<int64_t>({b.a, b.b, b.out, b.M, b.N, b.K, b.a_offset, b.a_rs, b.a_cs,
                                  b.b_offset, b.b_rs, b.b_cs}),
            std::vector<int64_t>({a.a, a.b, a.out, a.M, a.N, a.K, a.a_offset, a.a_rs, a.a_cs,
                                  a.b_offset, a.b_rs, a.b_cs}));
  EXPECT_EQ(b.batch, a.batch);
  EXPECT_EQ(b.a_batch_stride, a.a_batch_stride);
  EXPECT_EQ(b.b_batch_stride, a.b_batch_stride);
  ASSERT_EQ(q.steps.size(), p.steps.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    EXPECT_EQ(q.steps[i].kind, p.steps[i].kind);
    EXPECT_EQ(q.steps[i].index, p.steps[i].index);
  }
  // A gemm that would read past its buffer is rejected, not run.
  Plan bad = p;
  bad.gemms[0].K = 40;
  EXPECT_THROW(deserialize_plan(serialize_plan(bad)), Error);
  // So is a step order that skips a step.
  bad = p;
  bad.steps.pop_back();
  EXPECT_THROW(deserialize_plan(serialize_plan(bad)), Error);
}

// --- results on the CPU backend ---

using Fn = std::function<Tensor(const Tensor&, const Tensor&)>;

// out[b, m, n] = sum_k a[b, m, k] * b[b, k, n] in float64 over explicit (already broadcast)
// batches.
std::vector<double> host_matmul(const std::vector<float>& a, const std::vector<float>& b,
                                int64_t batch, int64_t M, int64_t N, int64_t K, bool a_bcast,
                                bool b_bcast) {
  std::vector<double> out(static_cast<size_t>(batch * M * N));
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += static_cast<double>(a[(a_bcast ? 0 : q) * M * K + m * K + k]) *
               b[(b_bcast ? 0 : q) * K * N + k * N + n];
        out[static_cast<size_t>((q * M + m) * N + n)] = s;
      }
  return out;
}

// Runs fn on lazy:cpu and lazy:reference; checks that lazy:cpu ran `gemms` library steps (seen in
// the grouping) and both agree with each other and with `want` when given.
void check(const std::string& what, Shape sa, Shape sb, const Fn& fn, int gemms,
           const std::vector<double>* want = nullptr) {
  auto da = testing::random_floats(numel(sa), 7), db = testing::random_floats(numel(sb), 8);
  auto run = [&](const char* dev) {
    Device d = Device::parse(dev);
    Tensor r = fn(from_host(da.data(), DType::Float32, sa, d),
                  from_host(db.data(), DType::Float32, sb, d));
    return r.to_vector<double>();
  };
  auto got = run("lazy:cpu");
  auto g = metrics::last_graph();
  int seen = 0;
  for (size_t at = g.grouping.find(": gemm "); at != std::string::npos;
       at = g.grouping.find(": gemm ", at + 1))
    ++seen;
  EXPECT_EQ(seen, gemms) << what << "\n" << g.grouping;
  auto ref = run("lazy:reference");
  testing::expect_close(got, ref, 1e-4, 1e-4, what + " vs reference");
  if (want) testing::expect_close(got, *want, 1e-4, 1e-4, what + " vs float64 host loop");
}

bool cpu_has_gemm() { return !get_backend("cpu").lower_options().gemm_dtypes.empty(); }

TEST(GemmCpu, MatchesReferenceAndFloat64) {
  const int g = cpu_has_gemm() ? 1 : 0;
  auto mmf = [](const Tensor& a, const Tensor& b) { return matmul(a, b); };
  for (auto [M, N, K] :
       std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {67, 129, 33}, {128, 64, 256}}) {
    auto da = testing::random_floats(M * K, 7), db = testing::random_floats(K * N, 8);
    auto want = host_matmul(da, db, 1, M, N, K, false, false);
    check("x@w " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K), {M, K},
          {K, N}, mmf, g, &want);
  }
  check(
      "x@w.T", {33, 17}, {9, 17}, [](auto& a, auto& b) { return matmul(a, b.transpose(0, 1)); }, g);
  check(
      "x.T@w", {17, 33}, {17, 9}, [](auto& a, auto& b) { return matmul(a.transpose(0, 1), b); }, g);
  check(
      "x.T@w.T", {17, 33}, {9, 17},
      [](auto& a, auto& b) { return matmul(a.transpose(0, 1), b.transpose(0, 1)); }, g);
  {
    auto da = testing::random_floats(4 * 6 * 5, 7), db = testing::random_floats(4 * 5 * 3, 8);
    auto want = host_matmul(da, db, 4, 6, 3, 5, false, false);
    check("batched", {4, 6, 5}, {4, 5, 3}, mmf, g, &want);
  }
  {
    auto da = testing::random_floats(3 * 6 * 5, 7), db = testing::random_floats(5 * 3, 8);
    auto want = host_matmul(da, db, 3, 6, 3, 5, false, true);
    check("broadcast batch", {3, 6, 5}, {5, 3}, mmf, g, &want);
  }
  check("broadcast 2-d batch", {3, 5, 6, 4}, {5, 4, 2}, mmf, g);
  check("broadcast A", {6, 4}, {3, 4, 2}, mmf, g);
  check(
      "batched transposed", {2, 5, 7}, {2, 3, 7},
      [](auto& a, auto& b) { return matmul(a, b.transpose(1, 2)); }, g);
  check("vector @ matrix", {16}, {16, 8}, mmf, g);
  check("matrix @ vector", {8, 16}, {16}, mmf, g);
  check("dot", {16}, {16}, mmf, g);
  check("batched @ vector", {2, 3, 16}, {16}, mmf, g);
  check(
      "sliced operand", {12, 20}, {10, 6},
      [](auto& a, auto& b) { return matmul(slice(slice(a, 1, 3, 13), 0, 2, 10), b); }, g);
  check(
      "prologue + epilogue", {12, 10}, {10, 6},
      [](auto& a, auto& b) { return (matmul(a.exp(), b) + 1).relu(); }, g);
  check(
      "two chained", {12, 10}, {10, 10},
      [](auto& a, auto& b) { return matmul(matmul(a, b).tanh(), b); }, 2 * g);
}

// Few rows times a large row-major B: the CPU backend runs oneDNN on a transposed copy of B
// (onednn_gemm.cc, transpose_b_first). Ragged sizes (not multiples of 8) and a B sliced out of a
// wider buffer (row stride 1100, offset 3) go through the copy too.
TEST(GemmCpu, SmallMTimesLargeRowMajorBMatchesFloat64) {
  if (!cpu_has_gemm()) GTEST_SKIP() << "cpu backend built without oneDNN";
  const int64_t M = 96, K = 1027, N = 1030, W = 1100;
  auto da = testing::random_floats(M * K, 11), dw = testing::random_floats(K * W, 12);
  std::vector<float> db(static_cast<size_t>(K * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      db[static_cast<size_t>(k * N + n)] = dw[static_cast<size_t>(k * W + 3 + n)];
  auto want = host_matmul(da, db, 1, M, N, K, false, false);
  Device d = Device::parse("lazy:cpu");
  Tensor a = from_host(da.data(), DType::Float32, {M, K}, d);
  Tensor whole = from_host(db.data(), DType::Float32, {K, N}, d);
  testing::expect_close(matmul(a, whole).to_vector<double>(), want, 1e-4, 1e-4, "contiguous B");
  Tensor wide = from_host(dw.data(), DType::Float32, {K, W}, d);
  testing::expect_close(matmul(a, slice(wide, 1, 3, 3 + N)).to_vector<double>(), want, 1e-4, 1e-4,
                        "sliced B");
  auto g = metrics::last_graph();
  EXPECT_NE(g.grouping.find(": gemm "), std::string::npos) << g.grouping;
}

TEST(GemmCpu, KernelCountCountsTheGemm) {
  if (!cpu_has_gemm()) GTEST_SKIP() << "cpu backend built without oneDNN";
  Device d = Device::parse("lazy:cpu");
  Tensor x = testing::random_tensor({8, 4}, 1, d), w = testing::random_tensor({6, 4}, 2, d),
         b = testing::random_tensor({6}, 3, d);
  Tensor y = (matmul(x, w.transpose(0, 1)) + b).relu();  // named: no live temporaries at the sync
  y.to_vector<double>();
  EXPECT_EQ(metrics::last_graph().kernels, 2);  // the GEMM and its fused epilogue
}

}  // namespace
}  // namespace lt
