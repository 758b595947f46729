// Issue 30's symbolic sizes, first layer: size expressions (ir/size_expr.h), their guards, and the
// symbolic view of traced graphs (ir/symbolic_graph.h). A small GPT block (layer norm, attention
// through reshapes and transposes, GELU MLP, the last position's logits, a cross-entropy loss and
// its backward) traced at several sequence lengths gets one symbolic key; other programs, other
// duck-sizing patterns and static dims get others.
#include <gtest/gtest.h>

#include <random>

#include "graph_util.h"
#include "ir/symbolic_graph.h"
#include "nn/nn.h"
#include "runtime/attention.h"
#include "runtime/indexing.h"
#include "symbolic_util.h"
#include "test_util.h"

namespace lt {
// gtest prints size expressions as polynomials.
void PrintTo(const SizeExpr& e, std::ostream* os) { *os << e.str(); }
}  // namespace lt

namespace lt::symbolic_graph_test {
namespace {

using namespace symbolic_test;  // NOLINT(google-build-using-namespace): the shared programs

const SizeExpr s0 = SizeExpr::symbol(0), s1 = SizeExpr::symbol(1);

TEST(SizeExpr, PolynomialsAreCanonical) {
  EXPECT_EQ((s0 + 1) * (s0 - 1), s0 * s0 - 1);
  EXPECT_EQ(s1 * s0 * 3 + s0, s0 * (s1 * 3 + 1));
  EXPECT_EQ((s0 * 768 - s0 * 768).str(), "0");
  EXPECT_TRUE((s0 * 768 - s0 * 768).is_const());
  EXPECT_EQ((s0 * s1 * 2 - s0 + 5).str(), "-s0 + 2*s0*s1 + 5");
  Hasher a, b;
  (s0 * 768 + 0).hash_into(a);
  (SizeExpr(768) * s0).hash_into(b);
  EXPECT_EQ(a.digest(), b.digest());
  Hasher c;
  (s1 * 768).hash_into(c);
  EXPECT_NE(a.digest(), c.digest());
  EXPECT_EQ((s0 * 768).symbols(), std::vector<SymId>{0});
  EXPECT_TRUE((s0 * s1).uses(1));
  EXPECT_FALSE((s0 * 4).uses(1));
}

TEST(SizeExpr, EvaluatesAndDividesExactly) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t a = 2 + rng() % 1000, b = 2 + rng() % 1000;
    const std::vector<int64_t> v = {a, b};
    const SizeExpr e = s0 * s1 * 12 + s0 * 64 - 3;
    EXPECT_EQ(e.eval(v), a * b * 12 + a * 64 - 3);
    EXPECT_EQ((s0 * s1 * 768).div_exact(s0 * 12)->eval(v), b * 64);
  }
  EXPECT_EQ(*(s0 * 768).div_exact(64), s0 * 12);
  EXPECT_FALSE((s0 * 768 + 1).div_exact(64));
  EXPECT_FALSE((s0 * 4).div_exact(s1));
  EXPECT_FALSE((s0 + 4).div_exact(s0));  // the constant term is no multiple of s0
  EXPECT_EQ(*(s0 * s0 * 3 + s0 * 6).div_exact(s0 * 3), s0 + 2);
  EXPECT_THROW((s0 * s1).eval(std::vector<int64_t>{3}), Error);  // s1 has no value
  EXPECT_THROW((s0 * s0 * s0).eval(std::vector<int64_t>{int64_t{1} << 40}), Error);  // overflow
}

TEST(SizeExpr, SignHoldsForEveryBindingOrIsUnknown) {
  EXPECT_EQ((s0 - 1).sign(2), 1);
  EXPECT_EQ((s0 * s1 + s0).sign(2), 1);
  EXPECT_EQ((-s0 - 3).sign(2), -1);
  EXPECT_EQ(SizeExpr(0).sign(2), 0);
  EXPECT_FALSE((s0 - 2).sign(2));  // 0 at s0 = 2, positive after
  EXPECT_FALSE((s0 - s1).sign(2));
  EXPECT_FALSE((s0 - 5).sign(2));
}

TEST(ShapeEnv, DecidesWhatItCanAndGuardsTheRest) {
  ShapeEnv env;
  EXPECT_EQ(env.add_symbol(37), 0u);
  EXPECT_EQ(env.add_symbol(12), 1u);
  EXPECT_THROW(env.add_symbol(1), Error);  // 0 and 1 stay static
  EXPECT_FALSE(env.eq(s0, 1));             // s0 >= 2: no guard needed
  EXPECT_TRUE(env.lt(s1, s1 + 1));
  EXPECT_TRUE(env.guards().empty());
  EXPECT_FALSE(env.eq(s0, s1));  // 37 != 12 on these hints, guarded
  EXPECT_TRUE(env.lt(s1 * 3, s0));
  ASSERT_EQ(env.guards().size(), 2u);
  EXPECT_EQ(env.guards()[0].str(), "s0 - s1 != 0");
  EXPECT_TRUE(env.guards_hold(std::vector<int64_t>{40, 13}));
  EXPECT_FALSE(env.guards_hold(std::vector<int64_t>{13, 13}));  // s0 == s1 now
  EXPECT_FALSE(env.guards_hold(std::vector<int64_t>{38, 13}));  // 3*s1 < s0 fails
  EXPECT_FALSE(env.guards_hold(std::vector<int64_t>{40, 1}));   // below the least symbol
  EXPECT_FALSE(env.guards_hold(std::vector<int64_t>{40}));      // a symbol short
}

TEST(ShapeEnv, SolvesEqualitiesForTheirHighestSymbol) {
  ShapeEnv env;
  env.add_symbol(5);
  env.add_symbol(10);
  EXPECT_TRUE(env.eq(s0 * 2, s1));  // s1 := 2*s0
  EXPECT_EQ(env.simplify(s1 * 3 + s0), s0 * 7);
  EXPECT_TRUE(env.eq(s1, s0 * 2));  // now 0 == 0: no second guard
  ASSERT_EQ(env.guards().size(), 1u);
  EXPECT_EQ(env.guards()[0].str(), "2*s0 - s1 == 0");
  EXPECT_TRUE(env.guards_hold(std::vector<int64_t>{7, 14}));
  EXPECT_FALSE(env.guards_hold(std::vector<int64_t>{7, 15}));
  // Not solvable for a lone linear symbol: kept as a guard only.
  ShapeEnv sq;
  sq.add_symbol(4);
  sq.add_symbol(16);
  EXPECT_TRUE(sq.eq(s0 * s0, s1 * 1));  // s1 := s0*s0 (s1 linear, higher)
  EXPECT_EQ(sq.simplify(s1), s0 * s0);
  ShapeEnv cube;
  cube.add_symbol(3);
  EXPECT_TRUE(cube.eq(s0 * s0, 9));  // no linear symbol: a guard, no solution
  EXPECT_EQ(cube.simplify(s0), s0);
  EXPECT_FALSE(cube.guards_hold(std::vector<int64_t>{4}));
}

TEST(SymbolicGraph, OneKeyForEverySequenceLength) {
  const Block first = gpt_block(2, 37, 1);
  const SymbolicGraph base = sym_of(first);
  ASSERT_EQ(base.env.num_symbols(), 2u) << describe(base);  // T and B*T
  EXPECT_TRUE(base.pinned_by.empty()) << describe(base);
  // Lengths whose T and 2T equal none of the block's constant sizes (2, 3, 4, 8, 11, 32, 64, 96):
  // a length that does is matched to them by chance and costs a key of its own (CoincidentSizes).
  for (int64_t T : {5, 9, 13, 23, 41, 53, 61}) {
    const int trial = static_cast<int>(T);
    const Block b = gpt_block(2, T, 10 + trial);
    EXPECT_NE(b.traced.graph.key, first.traced.graph.key) << "T " << T;  // static keys differ
    const SymbolicGraph sg = sym_of(b);
    EXPECT_EQ(sg.key, base.key) << "T " << T << "\n" << describe(sg) << describe(base);
    EXPECT_TRUE(base.env.guards_hold(sg.env.hints())) << "T " << T << "\n" << describe(base);
  }
}

TEST(SymbolicGraph, ShapesAndAttributesAreExpressionsOfTheSymbols) {
  const Block b = gpt_block(2, 37, 1);
  const SymbolicGraph sg = sym_of(b);
  const Graph& g = b.traced.graph;
  const SizeExpr T = SizeExpr::symbol(0), BT = SizeExpr::symbol(1);  // x's T first, then B*T
  EXPECT_EQ(sg.env.hints()[0], 37);
  EXPECT_EQ(sg.env.hints()[1], 74);
  bool saw_last_slice = false, saw_head_reshape = false, saw_flat_reshape = false;
  for (size_t i = 0; i < g.order.size(); ++i) {
    const Node& n = *g.order[i];
    const SymShape& s = sg.shapes[i];
    if (n.op == Op::Slice && n.shape.size() == 3 && n.shape[1] == 1 && n.shape[2] == 11) {
      // select(logits, 1, -1): start T - 1, size 1 along dim 1.
      EXPECT_EQ(sg.size_attrs[i][3], T - 1);
      EXPECT_EQ(sg.size_attrs[i][5], SizeExpr(1));
      saw_last_slice = true;
    }
    if (n.op == Op::Reshape && n.shape.size() == 4 && n.shape[2] == 4) {
      EXPECT_EQ(s, (SymShape{2, T, 4, 8}));
      saw_head_reshape = true;
    }
    if (n.op == Op::Reshape && n.shape == Shape{74, 11}) {
      EXPECT_EQ(s, (SymShape{T * 2, 11}));  // the product of the input's dims, not B*T's symbol
      saw_flat_reshape = true;
    }
  }
  EXPECT_TRUE(saw_last_slice && saw_head_reshape && saw_flat_reshape);
  // The input gradient (third root) has x's symbolic shape; the labels' B*T is the second symbol.
  for (size_t i = 0; i < g.order.size(); ++i)
    if (g.order[i] == g.roots[2]) {
      EXPECT_EQ(sg.shapes[i], (SymShape{2, T, 32}));
    }
  EXPECT_EQ(sg.symbol_dims[1], (DynamicDim{b.target_input, 0}));
  EXPECT_EQ(sg.env.hint(BT), 74);
}

TEST(SymbolicGraph, OtherProgramsAndPatternsGetOtherKeys) {
  const Block a = gpt_block(2, 37, 1);
  const Hash128 key = sym_of(a).key;
  // Another program over the same inputs.
  Tensor x = leaf({2, 37, 32}, 1);
  Traced other = collect({(x * 2).sum()});
  EXPECT_NE(symbolic_graph(other.graph, std::vector<DynamicDim>{{0, 1}}).key, key);
  // A length of 1 stays static (broadcasting and emptiness change there).
  const Block one = gpt_block(2, 1, 1);
  EXPECT_NE(sym_of(one).key, key);
  EXPECT_EQ(sym_of(one).env.num_symbols(), 1u);  // only B*T = 2
  // Duck sizing: with B == T the two dims share a symbol, a different pattern from B != T.
  const Block square = gpt_block(6, 6, 1), oblong = gpt_block(6, 9, 1),
              oblong2 = gpt_block(7, 9, 1);
  EXPECT_EQ(sym_of(square, true).env.num_symbols(), 2u);  // 6, and 36 for the labels
  EXPECT_EQ(sym_of(oblong, true).env.num_symbols(), 3u);
  EXPECT_NE(sym_of(square, true).key, sym_of(oblong, true).key);
  EXPECT_EQ(sym_of(oblong2, true).key, sym_of(oblong, true).key);
  // Dynamic dims out of range are ignored; none at all is a static view with no symbols.
  const SymbolicGraph none =
      symbolic_graph(a.traced.graph, std::vector<DynamicDim>{{99, 0}, {0, 9}});
  EXPECT_FALSE(none.symbolic());
}

TEST(SymbolicGraph, CoincidentSizesCostAKeyNeverAWrongShape) {
  // T = 32 equals the model width: narrow's length 32 of q, k and v is matched to T, the head
  // reshape of that [2, T, T] view cannot divide T by 4 * 8, and pins T to 32 with a guard. Another
  // key (and compile) for that length, never a wrong size: each shape evaluates to the node's
  // (symbolic_graph checks every one), and the guards refuse any other binding.
  const SymbolicGraph base = sym_of(gpt_block(2, 37, 1));
  const SymbolicGraph coincident = sym_of(gpt_block(2, 32, 1));
  EXPECT_NE(coincident.key, base.key);
  EXPECT_EQ(coincident.pinned_by, std::vector<std::string>{"reshape"}) << describe(coincident);
  EXPECT_TRUE(coincident.env.guards_hold(std::vector<int64_t>{32, 64}));
  EXPECT_FALSE(coincident.env.guards_hold(std::vector<int64_t>{33, 66}));
  // T = 8 equals the head dim: the head reshape's division by the known size fails and the
  // constant 8 stands, so nothing is pinned and the key is every other length's.
  const SymbolicGraph head = sym_of(gpt_block(2, 8, 1));
  EXPECT_TRUE(head.pinned_by.empty()) << describe(head);
  EXPECT_EQ(head.key, base.key);
}

TEST(SymbolicGraph, AConvPinsItsSymbolsWithGuards) {
  Tensor x = leaf({2, 3, 12, 12}, 1), w = leaf({4, 3, 3, 3}, 2);
  Traced t = collect({conv2d(x, w, Tensor(), {1, 1}, {1, 1}).sum()});
  const SymbolicGraph sg =
      symbolic_graph(t.graph, std::vector<DynamicDim>{{input_of(t, x), 0}, {input_of(t, x), 2}});
  ASSERT_EQ(sg.pinned_by, std::vector<std::string>{"conv2d"});
  EXPECT_TRUE(sg.env.guards_hold(std::vector<int64_t>{2, 12}));
  EXPECT_FALSE(sg.env.guards_hold(std::vector<int64_t>{2, 14}));
}

}  // namespace
}  // namespace lt::symbolic_graph_test
