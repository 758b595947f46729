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

// A bucket's concat (ir/ops.def) has one writer per gradient, each writing its range of the
// bucket (BufferSpec::alias). Its all_reduce runs after the last of them, and the last is not
// moved ahead of the others: here it reads only a graph input, so "the operand's own kernel comes
// along" (hoist_collectives) would have put it, and the all_reduce, before the first gradient.
TEST(CollectivePlan, ABucketsAllReduceFollowsEveryWriterOfTheBucket) {
  auto x = param({64}), w = param({300}), z = param({128});
  auto first = make_node(Op::Exp, {x});
  auto unrelated = make_node(Op::Mul, {make_node(Op::Sin, {w}), make_node(Op::Cos, {w})});
  auto last = make_node(Op::Neg, {z});
  auto bucket = make_node(Op::Concat, {first, last});
  auto reduced = collective(Op::AllReduce, bucket, 1, 2);
  Plan p = plan_of({make_node(Op::Neg, {reduced}), unrelated});
  ASSERT_EQ(p.collectives.size(), 1u) << p.grouping;
  const int base = p.collectives[0].in;
  int collective_at = -1, writers = 0, last_writer = -1;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    if (p.steps[s].kind == PlanStep::Kind::Collective) collective_at = static_cast<int>(s);
    if (p.steps[s].kind != PlanStep::Kind::Kernel) continue;
    for (const auto& arg : p.kernels[p.steps[s].index].args)
      if (arg.output && p.buffers[arg.buffer].alias == base) {
        ++writers;
        last_writer = static_cast<int>(s);
      }
  }
  EXPECT_EQ(writers, 2) << p.grouping;  // both gradients written in place, no copy
  EXPECT_EQ(collective_at, last_writer + 1) << p.grouping;
}

// The position of the kernel step that reads buffer `b` (-1: none).
int reader_of(const Plan& p, int b) {
  for (size_t s = 0; s < p.steps.size(); ++s) {
    if (p.steps[s].kind != PlanStep::Kind::Kernel) continue;
    for (const auto& arg : p.kernels[p.steps[s].index].args)
      if (!arg.output && arg.buffer == b) return static_cast<int>(s);
  }
  return -1;
}

// Consumers of collectives follow the collectives' order, after the work that waits on none: a
// DDP step's optimizer update of the gradient reduced first runs first, whatever order the updates
// were traced in (order_by_collectives).
TEST(CollectivePlan, ConsumersFollowTheirCollectivesOrder) {
  auto x = param({64, 33}), y = param({300}), z = param({50});
  auto b = collective(Op::AllReduce, y, 1, 2);
  auto a = collective(Op::AllReduce, x, 1, 2);
  auto other = make_node(Op::Mul, {make_node(Op::Cos, {z}), make_node(Op::Cos, {z})});
  // Traced b, b's consumer, a, a's consumer: hoisting moves a (its operand an input) to the front,
  // ahead of b, so a's consumer must now come before b's.
  Plan p = plan_of({make_node(Op::Neg, {b}), make_node(Op::Neg, {a}), other});
  ASSERT_EQ(p.collectives.size(), 2u) << p.grouping;
  ASSERT_EQ(p.steps.size(), 5u) << p.grouping;
  std::vector<int> collective_at, reader_at;
  int other_at = -1;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    if (p.steps[s].kind == PlanStep::Kind::Collective) {
      collective_at.push_back(static_cast<int>(s));
      reader_at.push_back(reader_of(p, p.collectives[p.steps[s].index].out));
      continue;
    }
    for (const auto& arg : p.kernels[p.steps[s].index].args)
      if (arg.output && arg.buffer == p.output_buffers[2]) other_at = static_cast<int>(s);
  }
  ASSERT_EQ(collective_at, (std::vector<int>{0, 1})) << p.grouping;         // both at once
  EXPECT_EQ(p.collectives[p.steps[0].index].count, 64 * 33) << p.grouping;  // a first
  EXPECT_LT(reader_at[0], reader_at[1]) << p.grouping;                      // so a's consumer first
  EXPECT_EQ(other_at, 2) << p.grouping;  // the cos kernel waits on no collective: before both
}

NodePtr grouped_all_reduce(NodePtr x, int64_t group) {
  Attrs a;
  a.ints = {1, 2, group};  // avg over 2 ranks, in call group `group`
  return make_node(Op::AllReduce, {std::move(x)}, a);
}

// A call group's all_reduces (a DDP bucket, ir/ops.def) move together to right after the latest
// of their operands, adjacent, whatever was traced between their operands: one engine call.
TEST(CollectivePlan, ACallGroupRunsTogetherAfterItsLastOperand) {
  auto x = param({64, 33}), y = param({300}), z = param({50});
  auto gx = make_node(Op::Exp, {x});
  auto gy = make_node(Op::Mul, {make_node(Op::Sin, {y}), make_node(Op::Sin, {y})});
  auto gz = make_node(Op::Cos, {z});
  auto ax = grouped_all_reduce(gx, 7), ay = grouped_all_reduce(gy, 7);
  auto az = collective(Op::AllReduce, gz, 1, 2);  // no group: right after its operand
  Plan p = plan_of(
      {gx, gz, gy, make_node(Op::Neg, {ax}), make_node(Op::Neg, {ay}), make_node(Op::Neg, {az})});
  ASSERT_EQ(p.collectives.size(), 3u) << p.grouping;
  std::vector<int> grouped_at;
  int alone_at = -1;
  for (size_t s = 0; s < p.steps.size(); ++s)
    if (p.steps[s].kind == PlanStep::Kind::Collective) {
      const CollectiveStep& c = p.collectives[p.steps[s].index];
      (c.group == 7 ? grouped_at.push_back(static_cast<int>(s)) : void(alone_at = s));
    }
  ASSERT_EQ(grouped_at.size(), 2u) << p.grouping;
  EXPECT_EQ(grouped_at[1], grouped_at[0] + 1) << p.grouping;  // adjacent
  // After every operand's kernel: exp, cos, sin*sin (3 kernels) come first, in some order.
  int kernels_before = 0;
  for (int s = 0; s < grouped_at[0]; ++s)
    kernels_before += p.steps[s].kind == PlanStep::Kind::Kernel;
  EXPECT_EQ(kernels_before, 3) << p.grouping;
  EXPECT_LT(alone_at, grouped_at[0]) << p.grouping;  // cos's all_reduce did not wait for them
  // The group survives the cache format; a negative group or a broadcast in one does not load.
  const Plan back = deserialize_plan(serialize_plan(p));
  EXPECT_EQ(back.collectives[p.steps[grouped_at[0]].index].group, 7);
  Plan bad = p;
  bad.collectives[0].group = -1;
  EXPECT_THROW(deserialize_plan(serialize_plan(bad)), Error);
  Attrs three;
  three.ints = {0, 2, 1};
  EXPECT_THROW(make_node(Op::Broadcast, {x}, three), Error);  // only all_reduce has a group
  three.ints = {1, 2, -3};
  EXPECT_THROW(make_node(Op::AllReduce, {x}, three), Error);
}

// A DDP bucket's all_reduces as a trace orders them: each right after its own gradient, the
// next gradient's work between them (the graph's outputs come one after another). Planning still
// puts the group together, after the last gradient, so it runs as one engine call.
TEST(CollectivePlan, ACallGroupTracedApartRunsTogether) {
  auto x = param({40, 9}), y = param({70}), z = param({25});
  auto ax = grouped_all_reduce(make_node(Op::Exp, {x}), 3);
  auto ay = grouped_all_reduce(make_node(Op::Mul, {make_node(Op::Sin, {y}), y}), 3);
  auto az = grouped_all_reduce(make_node(Op::Cos, {z}), 3);
  Plan p = plan_of({make_node(Op::Neg, {ax}), make_node(Op::Neg, {ay}), make_node(Op::Neg, {az})});
  ASSERT_EQ(p.collectives.size(), 3u) << p.grouping;
  std::vector<int> at;
  for (size_t s = 0; s < p.steps.size(); ++s)
    if (p.steps[s].kind == PlanStep::Kind::Collective) at.push_back(static_cast<int>(s));
  ASSERT_EQ(at.size(), 3u);
  EXPECT_EQ(at[1], at[0] + 1) << p.grouping;
  EXPECT_EQ(at[2], at[0] + 2) << p.grouping;
  // Every gradient's kernel before the group, every consumer (the negations) after it.
  for (size_t s = 0; s < p.steps.size(); ++s)
    if (p.steps[s].kind == PlanStep::Kind::Kernel) {
      const std::string& name = p.kernels[static_cast<size_t>(p.steps[s].index)].name;
      if (name.find("neg") != std::string::npos)
        EXPECT_GT(static_cast<int>(s), at[2]) << name << "\n" << p.grouping;
      else
        EXPECT_LT(static_cast<int>(s), at[0]) << name << "\n" << p.grouping;
    }
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
