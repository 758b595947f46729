// Simplification pass: each identity, fold and elimination on small prim graphs, checked by the
// ops that remain; the values are checked end to end by the parity and Python suites.
#include <gtest/gtest.h>

#include <cmath>

#include "graph_util.h"
#include "ir/graph.h"
#include "lowering/decompose.h"
#include "lowering/lower.h"
#include "lowering/simplify.h"

namespace lt {
namespace {

using testing::FakeData;
using testing::param;
NodePtr op(Op o, NodeList in, std::vector<int64_t> ints = {}) {
  Attrs a;
  a.ints = to_ints(ints);
  return make_node(o, std::move(in), a);
}
NodePtr c(double v, DType t = DType::Float32) { return make_constant(t, v); }

PrimGraph simplified(NodeList roots) {
  std::vector<const Node*> r;
  for (auto& n : roots) r.push_back(n.get());
  return simplify(decompose(collect_graph(r)));
}
int count(const PrimGraph& g, Op o) {
  int n = 0;
  for (auto& p : g.nodes) n += p.op == o;
  return n;
}

TEST(Simplify, NeutralElementsVanish) {
  auto x = param({3, 4});
  auto y = op(Op::Div, {op(Op::Sub, {op(Op::Add, {op(Op::Mul, {x, c(1)}), c(0)}), c(0)}), c(1)});
  auto g = simplified({op(Op::Exp, {y})});
  EXPECT_EQ(g.nodes.size(), 2u);  // x, exp
  EXPECT_EQ(count(g, Op::Exp), 1);
}

TEST(Simplify, NeutralOperandThatBroadcastsIsKept) {
  // [4] * ones[3,4] has shape [3,4]: dropping the multiply would change the shape.
  auto x = param({4});
  auto g = simplified({op(Op::Mul, {x, make_constant(DType::Float32, 1, {3, 4})})});
  EXPECT_EQ(count(g, Op::Mul), 1);
  EXPECT_EQ(g.nodes[g.outputs[0]].shape, (Shape{3, 4}));
}

TEST(Simplify, DoubleNegationAndMovementChainsFold) {
  auto x = param({2, 3, 4});
  auto p = op(Op::Permute, {op(Op::Permute, {x}, {2, 0, 1})}, {1, 2, 0});  // identity overall
  auto r = op(Op::Reshape, {op(Op::Reshape, {op(Op::Neg, {op(Op::Neg, {p})})}, {6, 4})}, {24});
  auto g = simplified({op(Op::Sin, {r})});
  EXPECT_EQ(count(g, Op::Permute), 0);
  EXPECT_EQ(count(g, Op::Neg), 0);
  EXPECT_EQ(count(g, Op::Reshape), 1);
  auto q = op(Op::Permute, {op(Op::Permute, {x}, {2, 0, 1})}, {2, 0, 1});  // composes to (1, 2, 0)
  auto g2 = simplified({q});
  ASSERT_EQ(count(g2, Op::Permute), 1);
  EXPECT_EQ(to_vector(g2.nodes[g2.outputs[0]].attrs.ints), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(g2.nodes[g2.outputs[0]].shape, (Shape{3, 4, 2}));
}

NodePtr cast_to(NodePtr x, DType t) {
  Attrs a;
  a.dtype = t;
  return make_node(Op::Cast, {std::move(x)}, a);
}

TEST(Simplify, ACastBackThroughAnExactWideningIsTheOperand) {
  // bfloat16 -> float32 -> bfloat16 returns every value: both casts go.
  auto x = param({3, 4}, DType::BFloat16);
  auto g = simplified({op(Op::Exp, {cast_to(cast_to(x, DType::Float32), DType::BFloat16)})});
  EXPECT_EQ(count(g, Op::Cast), 0);
  // float32 -> bfloat16 -> float32 rounds on the way: kept.
  auto y = param({3, 4});
  EXPECT_EQ(count(simplified({cast_to(cast_to(y, DType::BFloat16), DType::Float32)}), Op::Cast), 2);
  // float16 -> bfloat16 -> float16 loses significand (and bfloat16 holds no float16 exactly in
  // general): kept.
  auto z = param({3, 4}, DType::Float16);
  EXPECT_EQ(count(simplified({cast_to(cast_to(z, DType::BFloat16), DType::Float16)}), Op::Cast), 2);
}

TEST(Simplify, ConstantsFoldInTheResultDtype) {
  auto x = param({5});
  auto k = op(Op::Mul, {op(Op::Exp, {c(0.5)}), op(Op::Add, {c(2), c(0.1)})});
  auto g = simplified({op(Op::Mul, {x, k})});
  EXPECT_EQ(count(g, Op::Exp), 0);
  EXPECT_EQ(count(g, Op::Add), 0);
  ASSERT_EQ(count(g, Op::Constant), 1);
  // Each fold rounds to float32, as a float32 kernel would: exp(0.5f) * (2.0f + 0.1f).
  const float want = static_cast<float>(std::exp(0.5)) * (2.0f + 0.1f);
  for (auto& n : g.nodes) {
    if (n.op == Op::Constant) {
      EXPECT_EQ(n.attrs.value, static_cast<double>(want));
    }
  }
}

TEST(Simplify, SumOfAnExpandIsAMultiply) {
  auto x = param({3, 1});
  auto e = op(Op::Expand, {x}, {3, 8});
  auto g = simplified({op(Op::ReduceSum, {e}, {1})});
  EXPECT_EQ(count(g, Op::ReduceSum), 0);
  EXPECT_EQ(count(g, Op::Expand), 0);
  EXPECT_EQ(count(g, Op::Mul), 1);
  EXPECT_EQ(g.nodes[g.outputs[0]].shape, (Shape{3}));
  // A real reduction axis stays a reduction.
  auto y = param({3, 8});
  auto g2 = simplified({op(Op::ReduceSum, {op(Op::Expand, {y}, {2, 3, 8})}, {2})});
  EXPECT_EQ(count(g2, Op::ReduceSum), 1);
}

TEST(Simplify, DeadNodesGoButEveryInputKeepsItsLeaf) {
  auto x = param({4}), y = param({4});
  auto unused = op(Op::Exp, {y});
  auto g = simplified({op(Op::Sin, {x}), op(Op::Mul, {y, c(1)})});
  (void)unused;
  EXPECT_EQ(g.num_inputs, 2);
  EXPECT_EQ(count(g, Op::Param), 2);
  EXPECT_EQ(count(g, Op::Exp), 0);
  EXPECT_EQ(count(g, Op::Mul), 0);
  EXPECT_EQ(g.nodes[g.outputs[1]].op, Op::Param);  // y * 1 is y itself
}

TEST(Simplify, IdenticalSubexpressionsMergeAfterRewriting) {
  auto x = param({4});
  auto a = op(Op::Exp, {op(Op::Mul, {x, c(1)})});
  auto b = op(Op::Exp, {x});
  auto g = simplified({op(Op::Add, {a, b})});
  EXPECT_EQ(count(g, Op::Exp), 1);
}

}  // namespace
}  // namespace lt
