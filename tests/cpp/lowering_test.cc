// Lowering: symbolic index simplification, decomposition, and pinned kernel counts of fusion.
#include <gtest/gtest.h>

#include "graph_util.h"
#include "ir/graph.h"
#include "lowering/decompose.h"
#include "lowering/lower.h"
#include "lowering/symbolic.h"

namespace lt {
namespace {

using testing::FakeData;
using testing::param;
using testing::plan_of;
NodePtr op(Op o, NodeList in, std::vector<int64_t> ints = {}, bool keepdim = false) {
  Attrs a;
  a.ints = to_ints(ints);
  a.keepdim = keepdim;
  return make_node(o, std::move(in), a);
}

TEST(Symbolic, ReshapeOfContiguousDimsFoldsBack) {
  SymCtx s({4, 8});
  Lin i = s.var(0), j = s.var(1);
  Lin flat = s.flatten({i, j}, {4, 8});
  auto back = s.unflatten(flat, {4, 8});
  EXPECT_EQ(back[0], i);
  EXPECT_EQ(back[1], j);
  // Split 8 into 2x4 and merge again: still affine.
  auto split = s.unflatten(flat, {4, 2, 4});
  Lin again = s.flatten(split, {4, 2, 4});
  EXPECT_EQ(again, flat);
  std::vector<loop::IExpr> ex;
  auto ix = s.to_index(again, ex);
  EXPECT_TRUE(ix.affine());
  EXPECT_EQ(ix.strides, (std::vector<int64_t>{8, 1}));
}

TEST(Symbolic, SplitIntoSeveralDimsFoldsBack) {
  // A conv weight [8, 3, 3, 3] read as [8, 27]: the three-way split of 27 must fold back to plain
  // strides (nested x // 3 // 3 is stored as x // 9, so x % 3 % ... finds its partner through it).
  SymCtx s({8, 27});
  Lin flat = s.flatten({s.var(0), s.var(1)}, {8, 27});
  Lin again = s.flatten(s.unflatten(flat, {8, 3, 3, 3}), {8, 3, 3, 3});
  EXPECT_EQ(again, flat);
  Lin five = s.flatten(s.unflatten(flat, {2, 4, 3, 3, 3}), {2, 4, 3, 3, 3});
  EXPECT_EQ(five, flat);
}

TEST(Symbolic, NonContiguousReshapeStaysGeneral) {
  // A transposed [8,4] view reshaped to [32]: index needs div/mod.
  SymCtx s({32});
  Lin f = s.var(0);
  auto idx = s.unflatten(f, {8, 4});              // (f/4, f%4) of the permuted view
  Lin src = s.flatten({idx[1], idx[0]}, {4, 8});  // element of the [4,8] source
  std::vector<loop::IExpr> ex;
  auto ix = s.to_index(src, ex);
  EXPECT_FALSE(ix.affine());
  EXPECT_FALSE(ex.empty());
}

TEST(Symbolic, RangeFolds) {
  SymCtx s({3, 5});
  Lin j = s.var(1);
  EXPECT_EQ(s.floordiv(j, 5), SymCtx::constant(0));
  EXPECT_EQ(s.mod(j, 5), j);
  EXPECT_EQ(s.floordiv(s.add(s.mul(s.var(0), 5), j), 5), s.var(0));
  EXPECT_EQ(s.mod(s.add(s.mul(s.var(0), 10), j), 5), j);
}

TEST(Decompose, CompositesBecomePrimitives) {
  auto x = param({4, 6});
  auto pg =
      decompose(collect_graph({op(Op::Mean, {op(Op::Sigmoid, {op(Op::Relu, {x})})}, {1}).get()}));
  for (auto& n : pg.nodes) EXPECT_TRUE(op_info(n.op).primitive) << op_name(n.op);
  auto mm = decompose(collect_graph({make_node(Op::Matmul, {param({3, 4}), param({4, 5})}).get()}));
  for (auto& n : mm.nodes) EXPECT_TRUE(op_info(n.op).primitive) << op_name(n.op);
}

TEST(Decompose, CseMergesDuplicates) {
  auto x = param({8});
  auto a = op(Op::Sin, {x}), b = op(Op::Sin, {x});  // two nodes, same computation
  auto pg = decompose(collect_graph({make_node(Op::Add, {a, b}).get()}));
  EXPECT_EQ(pg.nodes.size(), 3u);  // x, sin, add
}

TEST(Fusion, ElementwiseChainIsOneKernel) {
  NodePtr x = param({1 << 10});
  for (int i = 0; i < 20; ++i) x = make_node(Op::Add, {x, op(Op::Sin, {x})});
  auto p = plan_of({x});
  EXPECT_EQ(p.kernels.size(), 1u) << p.grouping;
}

TEST(Fusion, ReductionWithPrologueAndEpilogueIsOneKernel) {
  auto x = param({32, 64}), w = param({64}), b = param({64});
  auto y =
      op(Op::ReduceSum,
         {op(Op::Relu, {op(Op::Sin, {make_node(Op::Add, {make_node(Op::Mul, {x, w}), b})})})}, {1});
  auto p = plan_of({make_node(Op::Mul, {y, make_scalar(DType::Float32, 2)})});
  EXPECT_EQ(p.kernels.size(), 1u) << p.grouping;
  EXPECT_EQ(p.kernels[0].stages.size(), 2u);
}

TEST(Fusion, SoftmaxIsOneRowKernel) {
  auto x = param({16, 32});
  auto m = op(Op::ReduceMax, {x}, {1}, true);
  auto e = op(Op::Exp, {make_node(Op::Sub, {x, m})});
  auto s = op(Op::ReduceSum, {e}, {1}, true);
  auto p = plan_of({make_node(Op::Div, {e, s})});
  ASSERT_EQ(p.kernels.size(), 1u) << p.grouping;
  EXPECT_EQ(p.kernels[0].stages.size(), 3u);
  EXPECT_EQ(p.kernels[0].stages[2].kind, loop::StageKind::MapInner);
}

TEST(Fusion, LayerNormIsOneRowKernel) {
  auto x = param({8, 64});
  auto mean = op(Op::Mean, {x}, {1}, true);
  auto xc = make_node(Op::Sub, {x, mean});
  auto var = op(Op::Mean, {make_node(Op::Mul, {xc, xc})}, {1}, true);
  auto y = make_node(
      Op::Mul,
      {xc, op(Op::Rsqrt, {make_node(Op::Add, {var, make_constant(DType::Float32, 1e-5)})})});
  auto p = plan_of({y});
  EXPECT_EQ(p.kernels.size(), 1u) << p.grouping;
}

TEST(Fusion, CompositeSoftmaxLogSoftmaxLayerNormAreOneKernelEach) {
  auto x = param({16, 48});
  EXPECT_EQ(plan_of({op(Op::Softmax, {x}, {-1})}).kernels.size(), 1u);
  EXPECT_EQ(plan_of({op(Op::LogSoftmax, {x}, {1})}).kernels.size(), 1u);
  Attrs ln;
  ln.ints = {1, 0, 0};
  ln.value = 1e-5;
  EXPECT_EQ(plan_of({make_node(Op::LayerNorm, {x}, ln)}).kernels.size(), 1u);
}

TEST(Fusion, GeluOfLayerNormPlusResidualIsOneKernel) {
  auto x = param({8, 64}), w = param({64}), b = param({64}), r = param({8, 64});
  Attrs ln;
  ln.ints = {1, 1, 1};
  ln.value = 1e-5;
  auto y = make_node(Op::Add, {make_node(Op::Gelu, {make_node(Op::LayerNorm, {x, w, b}, ln)}), r});
  auto p = plan_of({y});
  EXPECT_EQ(p.kernels.size(), 1u) << p.grouping;
}

TEST(Fusion, PermuteReshapeIsIndexArithmeticNotACopy) {
  auto x = param({8, 4}), y = param({32});
  auto t = op(Op::Reshape, {op(Op::Permute, {x}, {1, 0})}, {32});
  auto p =
      plan_of({make_node(Op::Add, {make_node(Op::Mul, {t, make_scalar(DType::Float32, 2)}), y})});
  EXPECT_EQ(p.kernels.size(), 1u) << p.grouping;
}

TEST(Fusion, MatmulIsOneKernelWithItsEpilogueSeparate) {
  auto a = param({8, 16}), b = param({16, 4}), bias = param({4});
  auto mm = make_node(Op::Matmul, {a, b});
  auto p = plan_of({op(Op::Relu, {make_node(Op::Add, {mm, bias})})});
  EXPECT_LE(p.kernels.size(), 2u) << p.grouping;
}

TEST(Fusion, MatmulOperandsAreNotRecomputedOrReadStrided) {
  auto x = param({32, 16}), w = param({16, 8}), wt = param({8, 16});
  // x @ w.T: both operands are read contiguously along k: one kernel, no copy.
  EXPECT_EQ(plan_of({op(Op::Matmul, {x, op(Op::Permute, {wt}, {1, 0})})}).kernels.size(), 1u);
  // x @ w (w is [k, n]): a transposed copy of w first, then a unit-stride matmul.
  EXPECT_EQ(plan_of({op(Op::Matmul, {x, w})}).kernels.size(), 2u);
  // exp(x) * 3 + 1 as an operand is computed once, not once per output column.
  auto costly = op(Op::Add, {op(Op::Mul, {op(Op::Exp, {x}), make_constant(DType::Float32, 3)}),
                             make_constant(DType::Float32, 1)});
  Plan p = plan_of({op(Op::Matmul, {costly, op(Op::Permute, {wt}, {1, 0})})});
  EXPECT_EQ(p.kernels.size(), 2u);
  // A cheap operand (one op) still fuses into the matmul.
  EXPECT_EQ(
      plan_of({op(Op::Matmul, {op(Op::Neg, {x}), op(Op::Permute, {wt}, {1, 0})})}).kernels.size(),
      1u);
}

TEST(Fusion, ReductionReadAtAnotherShapeIsMaterialized) {
  auto x = param({4, 8});
  auto s = op(Op::ReduceSum, {x}, {1});  // [4]
  auto y =
      make_node(Op::Add, {op(Op::Reshape, {s}, {4, 1}), param({4, 3})});  // read as [4,3] != [4,8]
  auto p = plan_of({y});
  EXPECT_EQ(p.kernels.size(), 2u) << p.grouping;
}

// A reduction read by two kernels is computed by the first of them, which also stores it.
TEST(Fusion, RowMaxReadByTwoKernelsComesFromTheSumsKernel) {
  auto x = param({16, 10});
  auto m = op(Op::ReduceMax, {x}, {1}, true);
  auto s = op(Op::ReduceSum, {op(Op::Exp, {make_node(Op::Sub, {x, m})})}, {1}, true);
  // log_softmax summed over everything: reads m and s over all rows, not over m's rows.
  auto lsm = make_node(Op::Sub, {make_node(Op::Sub, {x, m}), op(Op::Log, {s})});
  auto p = plan_of({op(Op::ReduceSum, {lsm}, {0, 1})});
  ASSERT_EQ(p.kernels.size(), 2u) << p.grouping;
  const loop::Kernel& rows = p.kernels[0];
  ASSERT_EQ(rows.stages.size(), 3u) << p.grouping;  // max, sum of exp, the per-row stores
  EXPECT_EQ(rows.stages[0].reduce_op, Op::ReduceMax);
  EXPECT_EQ(rows.stages[2].stores.size(), 2u);  // the sum and the max
  // As a graph output the max is stored the same way, still by one row kernel.
  EXPECT_EQ(plan_of({m, op(Op::ReduceSum, {lsm}, {0, 1})}).kernels.size(), 2u);
}

// Read twice by one kernel only (not an output): hosted there, stored nowhere.
TEST(Fusion, ReductionReadOnlyByOneKernelIsNotStored) {
  auto x = param({8, 32});
  auto s = op(Op::ReduceSum, {x}, {1}, true);
  auto y = make_node(Op::Mul, {make_node(Op::Sub, {x, s}), op(Op::Exp, {s})});
  auto p = plan_of({y});
  ASSERT_EQ(p.kernels.size(), 1u) << p.grouping;
  size_t stores = 0;
  for (const auto& st : p.kernels[0].stages) stores += st.stores.size();
  EXPECT_EQ(stores, 1u);
}

// The first reader reduces other rows: the reduction keeps its own kernel, placed before it.
TEST(Fusion, ReductionOverOtherRowsThanItsReaderKeepsItsKernel) {
  auto x = param({6, 10});
  auto r = op(Op::ReduceSum, {x}, {1}, true);                           // rows of x
  auto c = op(Op::ReduceSum, {make_node(Op::Mul, {x, r})}, {0}, true);  // columns, reads r
  auto p = plan_of({c, make_node(Op::Add, {r, make_scalar(DType::Float32, 1)})});
  ASSERT_EQ(p.kernels.size(), 3u) << p.grouping;
  EXPECT_NE(p.grouping.find("reduce_sum: outer [6] inner [10]"), std::string::npos) << p.grouping;
}

TEST(Fusion, OutputsOfOneNodeShareOneBuffer) {
  auto x = op(Op::Sin, {param({5})});
  auto p = plan_of({x, x});
  EXPECT_EQ(p.output_buffers[0], p.output_buffers[1]);
  EXPECT_EQ(p.kernels.size(), 1u);
}

// Two-stage reductions (lowering/split_reduce.cc): few outputs over a long reduced space.
int64_t outer_points(const loop::Kernel& k) {
  int64_t n = 1;
  for (auto e : k.outer) n *= e;
  return n;
}

TEST(Fusion, WholeTensorSumIsTwoWideStages) {
  auto x = param({8, 512, 768});
  auto p = plan_of({op(Op::Mul, {op(Op::ReduceSum, {op(Op::Mul, {x, x})}, {0, 1, 2}), param({})})});
  ASSERT_EQ(p.kernels.size(), 2u) << p.grouping;
  EXPECT_EQ(outer_points(p.kernels[0]), 8192) << p.grouping;  // the square fused, 8192 rows of 384
  EXPECT_EQ(outer_points(p.kernels[1]), 1) << p.grouping;     // the partials, with the epilogue
}

TEST(Fusion, ColumnSumGetsMoreColumns) {
  // A bias gradient: [4096, 768] summed down the rows. 768 columns alone are too few rows.
  auto p = plan_of({op(Op::ReduceSum, {param({4096, 768})}, {0})});
  ASSERT_EQ(p.kernels.size(), 2u) << p.grouping;
  EXPECT_EQ(outer_points(p.kernels[0]), 8 * 768) << p.grouping;
  // Two reduced runs ([64, 100, 300] over axes 0 and 2): the outer run (64) is too short to split.
  EXPECT_EQ(plan_of({op(Op::ReduceSum, {param({64, 100, 300})}, {0, 2})}).kernels.size(), 1u);
  // Many outputs already: one kernel.
  EXPECT_EQ(plan_of({op(Op::ReduceSum, {param({4096, 8192})}, {0})}).kernels.size(), 1u);
}

// Batch norm's statistics over N, H, W of [128, 64, 32, 32], read back by the normalization.
TEST(Fusion, ReadBackStatisticsAreSplitOnlyForManyThreads) {
  auto x = param({128, 64, 32, 32});
  auto mean = op(Op::Mean, {x}, {0, 2, 3}, true);
  NodeList roots{op(Op::Sub, {x, mean})};
  // Default (CPU): one row kernel per channel computes the mean and the difference.
  EXPECT_EQ(plan_of(roots).kernels.size(), 1u) << plan_of(roots).grouping;
  // Many threads (CUDA): 64 rows of 131072 become 64 x 128 rows of 1024 (the run over N alone
  // is 128 long: every reduced axis counts), their 128 partials, then the difference.
  LowerOptions many;
  many.split_for_many_threads = true;
  auto p = plan_of(roots, many);
  ASSERT_EQ(p.kernels.size(), 3u) << p.grouping;
  EXPECT_EQ(outer_points(p.kernels[0]), 128 * 64) << p.grouping;
  // Long rows read back stay whole when they are many or short: softmax of [64, 20000].
  auto sm = plan_of({op(Op::Softmax, {param({64, 20000})}, {1})}, many);
  EXPECT_EQ(sm.kernels.size(), 1u) << sm.grouping;
}

TEST(Fusion, SmallReductionsAndMatmulsAreNotSplit) {
  EXPECT_EQ(plan_of({op(Op::ReduceSum, {param({4, 1000})}, {1})}).kernels.size(), 1u);
  // A [1, 65536] @ [65536, 4] product is a matmul's sum: left whole for GEMM matching.
  auto a = param({1, 65536}), b = param({65536, 4});
  auto dot = plan_of({op(Op::Matmul, {a, b})});
  int sums = 0;
  for (const auto& n : dot.prims.nodes) sums += n.op == Op::ReduceSum;
  EXPECT_EQ(sums, 1) << dot.grouping;
  // The same length as a plain sum is split.
  auto plain = plan_of({op(Op::ReduceSum, {a}, {1})});
  sums = 0;
  for (const auto& n : plain.prims.nodes) sums += n.op == Op::ReduceSum;
  EXPECT_EQ(sums, 2) << plain.grouping;
}

TEST(Fusion, VeryDeepChainIsSplitNotCrashing) {
  NodePtr x = param({16});
  for (int i = 0; i < 5000; ++i) x = op(Op::Sin, {x});
  auto p = plan_of({x});
  EXPECT_GE(p.kernels.size(), 5000u / 257);
}

}  // namespace
}  // namespace lt
