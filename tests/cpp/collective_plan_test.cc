// The collective prims (all_reduce, broadcast, all_gather; ir/ops.def) through shape inference and
// lowering, without a process group: each is one library Collective step between the kernels
// that produce its operand and consume its result, plans with them round-trip through the cache
// format and damaged ones are errors, and bad attributes are errors naming the op. Running them
// needs ranks: tests/python/test_distributed.py.
#include <gtest/gtest.h>

#include "graph_util.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "lowering/plan_serialize.h"

namespace lt {
namespace {

using testing::param;
using testing::plan_of;

NodePtr collective(Op op, NodePtr x, int64_t first, int64_t world) {
  Attrs a;
  a.ints = {first, world};
  return make_node(op, {std::move(x)}, a);
}

TEST(CollectivePlan, ShapesAndBadAttributes) {
  auto x = param({3, 5});
  EXPECT_EQ(collective(Op::AllReduce, x, 0, 4)->shape, (Shape{3, 5}));
  EXPECT_EQ(collective(Op::Broadcast, x, 3, 4)->shape, (Shape{3, 5}));
  EXPECT_EQ(collective(Op::AllGather, x, 0, 4)->shape, (Shape{4, 3, 5}));
  EXPECT_EQ(collective(Op::AllGather, param({}), 0, 2)->shape, (Shape{2}));
  EXPECT_THROW(collective(Op::AllReduce, x, 3, 2), Error);  // no reduce op 3
  EXPECT_THROW(collective(Op::Broadcast, x, 2, 2), Error);  // root past the group
  EXPECT_THROW(collective(Op::AllGather, x, 0, 0), Error);  // an empty group
  EXPECT_THROW(collective(Op::AllReduce, param({4}, DType::Int32), 1, 2), Error);  // int avg
  Attrs one;
  one.ints = {0};
  EXPECT_THROW(make_node(Op::AllReduce, {x}, one), Error);
}

TEST(CollectivePlan, OneStepBetweenKernels) {
  auto x = param({64, 33});
  auto summed = collective(Op::AllReduce, make_node(Op::Exp, {x}), 1, 3);
  auto y = make_node(Op::Mul, {summed, summed});
  auto gathered = collective(Op::AllGather, y, 0, 3);
  Plan p = plan_of({gathered});
  ASSERT_EQ(p.collectives.size(), 2u) << p.grouping;
  ASSERT_EQ(p.steps.size(), 4u) << p.grouping;  // exp, all_reduce, mul, all_gather
  EXPECT_EQ(p.steps[0].kind, PlanStep::Kind::Kernel);
  EXPECT_EQ(p.steps[1].kind, PlanStep::Kind::Collective);
  EXPECT_EQ(p.steps[2].kind, PlanStep::Kind::Kernel);
  EXPECT_EQ(p.steps[3].kind, PlanStep::Kind::Collective);
  const CollectiveStep& ar = p.collectives[0];
  EXPECT_EQ(ar.op, Op::AllReduce);
  EXPECT_EQ(ar.reduce, 1);
  EXPECT_EQ(ar.world, 3);
  EXPECT_EQ(ar.count, 64 * 33);
  EXPECT_NE(ar.in, ar.out);  // a library output never aliases its operand
  const CollectiveStep& ag = p.collectives[1];
  EXPECT_EQ(p.buffers[ag.out].numel, 3 * 64 * 33);
  EXPECT_EQ(p.output_buffers[0], ag.out);
  EXPECT_EQ(p.grouping.find("all_reduce float32 [64, 33] over 3 ranks") != std::string::npos, true)
      << p.grouping;
}

// A collective traced after unrelated work (DDP's all_reduce after the whole backward pass) runs
// right after its operand is ready, so a backend's collective worker overlaps the rest.
TEST(CollectivePlan, RunsAsSoonAsItsOperandIsReady) {
  auto x = param({64, 33}), y = param({300});
  auto a = make_node(Op::Exp, {x});
  auto b = make_node(Op::Mul, {make_node(Op::Sin, {y}), make_node(Op::Cos, {y})});
  auto c = collective(Op::AllReduce, a, 0, 2);
  Plan p = plan_of({make_node(Op::Neg, {c}), b});
  ASSERT_EQ(p.steps.size(), 4u) << p.grouping;
  EXPECT_EQ(p.steps[0].kind, PlanStep::Kind::Kernel);      // exp
  EXPECT_EQ(p.steps[1].kind, PlanStep::Kind::Collective);  // then at once the all_reduce
  EXPECT_EQ(p.steps[2].kind, PlanStep::Kind::Kernel);
  EXPECT_EQ(p.steps[3].kind, PlanStep::Kind::Kernel);
  // Every step still runs after what it reads.
  const CollectiveStep& ar = p.collectives[0];
  const loop::Kernel& first = p.kernels[p.steps[0].index];
  bool writes_operand = false;
  for (const auto& arg : first.args) writes_operand |= arg.output && arg.buffer == ar.in;
  EXPECT_TRUE(writes_operand) << p.grouping;
}

TEST(CollectivePlan, RoundTripsAndRejectsDamage) {
  auto x = param({10});
  Plan p = plan_of({collective(Op::Broadcast, make_node(Op::Sin, {x}), 1, 2)});
  const std::string bytes = serialize_plan(p);
  const Plan back = deserialize_plan(bytes);
  EXPECT_EQ(serialize_plan(back), bytes);
  ASSERT_EQ(back.collectives.size(), 1u);
  EXPECT_EQ(back.collectives[0].root, 1);
  for (size_t n = 0; n < bytes.size(); n += 7)
    EXPECT_THROW(deserialize_plan(std::string_view(bytes).substr(0, n)), Error) << n;
  // A root outside the group, or a count that disagrees with the buffers: rejected on load.
  Plan bad = p;
  bad.collectives[0].root = 2;
  EXPECT_THROW(deserialize_plan(serialize_plan(bad)), Error);
  bad = p;
  bad.collectives[0].count = 11;
  EXPECT_THROW(deserialize_plan(serialize_plan(bad)), Error);
}

}  // namespace
}  // namespace lt
