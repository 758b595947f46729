// Memory planning: temporaries with disjoint lifetimes share slots, never two that are live at
// once; an MLP step's temporaries need about half the memory; and the gradients are unchanged
// (checked against the reference interpreter, which does not use the plan's buffers).
#include <gtest/gtest.h>

#include <cstdio>

#include "graph_util.h"
#include "ir/graph.h"
#include "lowering/complete_plan.h"
#include "lowering/lower.h"
#include "lowering/memory_plan.h"
#include "lowering/plan_serialize.h"
#include "nn/nn.h"
#include "test_util.h"

namespace lt {
namespace {

// The lowered plan of an MLP training step's gradients (forward + backward: many temporaries).
Plan training_step_plan() {
  manual_seed(4);
  const Device dev = Device::parse("lazy:cpu");
  nn::Sequential model;
  model.add(std::make_shared<nn::Linear>(16, 64, true, dev))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::Linear>(64, 64, true, dev))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::Linear>(64, 4, true, dev));
  mark_step();
  Tensor x = testing::random_tensor({32, 16}, 7, dev);
  std::vector<int64_t> yv(32);
  for (size_t i = 0; i < yv.size(); ++i) yv[i] = static_cast<int64_t>(i % 4);
  Tensor y = from_host(yv.data(), DType::Int64, {32}, dev);
  nn::cross_entropy(model(x), y).backward();
  NodeList keep;
  std::vector<const Node*> roots;
  for (auto& p : model.parameters()) {
    keep.push_back(p.grad().node());
    roots.push_back(keep.back().get());
  }
  Plan plan = lower(collect_graph(roots));
  mark_step();
  return plan;
}

TEST(MemoryPlan, DisjointLifetimesShareAndLiveOnesNever) {
  Plan p = training_step_plan();
  MemoryPlan mp = plan_memory(p);
  int temps = 0;
  for (const auto& b : p.buffers) temps += b.kind == BufferSpec::Kind::Temp;
  ASSERT_GE(temps, 4) << p.grouping;
  EXPECT_LT(mp.slot_bytes.size(), static_cast<size_t>(temps));
  EXPECT_LT(mp.temp_bytes_planned, mp.temp_bytes_unshared);
  std::printf("memory plan of an MLP step: %d temporaries in %zu slots, %zu -> %zu bytes\n", temps,
              mp.slot_bytes.size(), mp.temp_bytes_unshared, mp.temp_bytes_planned);
  // Two temporaries of one slot are never touched by overlapping step ranges.
  auto steps = p.ordered_steps();
  std::vector<int> first(p.buffers.size(), 1 << 30), last(p.buffers.size(), -1);
  auto touch = [&](int b, int s) {
    first[b] = std::min(first[b], s);
    last[b] = std::max(last[b], s);
  };
  for (int s = 0; s < static_cast<int>(steps.size()); ++s) {
    if (steps[s].kind == PlanStep::Kind::Gemm) {
      const Gemm& g = p.gemms[steps[s].index];
      for (int b : {g.a, g.b, g.out}) touch(b, s);
    } else {
      for (const auto& a : p.kernels[steps[s].index].args) touch(a.buffer, s);
    }
  }
  for (size_t a = 0; a < p.buffers.size(); ++a)
    for (size_t b = a + 1; b < p.buffers.size(); ++b) {
      if (mp.slot_of[a] >= 0 && mp.slot_of[a] == mp.slot_of[b]) {
        EXPECT_TRUE(last[a] < first[b] || last[b] < first[a])
            << "buffers " << a << " and " << b << " overlap";
      }
    }
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    if (mp.slot_of[b] < 0) continue;
    EXPECT_GE(mp.slot_bytes[mp.slot_of[b]],
              static_cast<size_t>(p.buffers[b].numel) * dtype_size(p.buffers[b].dtype));
  }
}

// Backends read the memory plan and the kernel grouping from the Plan (they never compute them), so
// lower() and a plan read back from the disk cache must both carry them.
TEST(MemoryPlan, LoweredAndCachedPlansCarryTheirMemoryPlanAndKernelGrouping) {
  const Plan p = training_step_plan();
  const MemoryPlan mp = plan_memory(p);
  EXPECT_EQ(p.memory.slot_of, mp.slot_of);
  EXPECT_EQ(p.memory.slot_bytes, mp.slot_bytes);
  EXPECT_EQ(p.distinct.code_of, distinct_kernels(p.kernels).code_of);
  const Plan back = deserialize_plan(serialize_plan(p));
  EXPECT_EQ(back.memory.slot_of, mp.slot_of);
  EXPECT_EQ(back.memory.slot_bytes, mp.slot_bytes);
  EXPECT_EQ(back.memory.temp_bytes_planned, mp.temp_bytes_planned);
  EXPECT_EQ(back.distinct.first, p.distinct.first);
  EXPECT_EQ(back.distinct.code_of, p.distinct.code_of);
  EXPECT_TRUE(back.is_completed());
}

TEST(MemoryPlan, SharedSlotsGiveTheSameGradientsAsTheReference) {
  auto grads = [](const char* dev) {
    manual_seed(4);
    const Device d = Device::parse(dev);
    nn::Sequential model;
    model.add(std::make_shared<nn::Linear>(16, 64, true, d))
        .add(std::make_shared<nn::Tanh>())
        .add(std::make_shared<nn::Linear>(64, 4, true, d));
    Tensor x = testing::random_tensor({32, 16}, 7, d);
    std::vector<int64_t> yv(32);
    for (size_t i = 0; i < yv.size(); ++i) yv[i] = static_cast<int64_t>(i % 4);
    nn::cross_entropy(model(x), from_host(yv.data(), DType::Int64, {32}, d)).backward();
    std::vector<double> all;
    for (auto& p : model.parameters())
      for (double v : p.grad().to_vector<double>()) all.push_back(v);
    return all;
  };
  testing::expect_close(grads("lazy:cpu"), grads("lazy:reference"), 1e-4, 1e-5, "MLP gradients");
}

// A collective runs beside the steps after it until the first step that reads its result waits for
// it, so no temporary of those steps may take its operand's slot: that would be a write the
// collective may still be reading, and the executables (which join collectives by address) would
// hold that step, and all behind it, until the collective ends. Here an all_reduce's consumer runs
// after unrelated reductions (order_by_collectives), whose temporary would otherwise fit the free
// slot of the all_reduce's operand.
TEST(MemoryPlan, ACollectivesOperandKeepsItsSlotUntilItsResultIsRead) {
  auto op = [](Op o, NodeList in, std::vector<int64_t> ints = {}) {
    Attrs a;
    a.ints = to_ints(ints);
    return make_node(o, std::move(in), a);
  };
  auto x = testing::param({64, 33}), z = testing::param({40, 50});
  auto reduced = op(Op::AllReduce, {op(Op::Exp, {x})}, {0, 2});
  auto rows = op(Op::ReduceSum, {op(Op::Sin, {z})}, {1});
  auto other = op(Op::ReduceSum, {op(Op::Mul, {rows, rows})}, {0});
  Plan p = testing::plan_of({op(Op::Neg, {reduced}), other});
  ASSERT_EQ(p.collectives.size(), 1u) << p.grouping;
  const CollectiveStep& c = p.collectives[0];
  ASSERT_EQ(p.buffers[c.in].kind, BufferSpec::Kind::Temp) << p.grouping;
  const std::vector<PlanStep> steps = p.ordered_steps();
  int at = -1, join = -1;
  std::vector<std::vector<int>> touched(steps.size());
  std::vector<int> reads, writes;
  for (int s = 0; s < static_cast<int>(steps.size()); ++s) {
    step_buffers(p, steps[s], reads, writes);
    touched[s] = reads;
    touched[s].insert(touched[s].end(), writes.begin(), writes.end());
    if (steps[s].kind == PlanStep::Kind::Collective) at = s;
    for (int b : touched[s])
      if (at >= 0 && s > at && join < 0 && b == c.out) join = s;
  }
  ASSERT_GE(at, 0);
  ASSERT_GT(join, at + 1) << "the reductions should run between the all_reduce and its reader\n"
                          << p.grouping;
  int between = 0;  // temporaries touched while the all_reduce may run
  for (int s = at + 1; s < join; ++s)
    for (int b : touched[s]) {
      if (b < 0 || p.buffers[b].kind != BufferSpec::Kind::Temp || b == c.in) continue;
      ++between;
      EXPECT_NE(p.memory.slot_of[b], p.memory.slot_of[c.in])
          << "buffer " << b << ", touched at step " << s << ", takes the slot of the all_reduce's "
          << "operand " << c.in << " before step " << join << " reads its result\n"
          << p.grouping;
    }
  EXPECT_GT(between, 0) << p.grouping;
}

// The executables join a collective at the first step that touches its operand's or result's
// address (backends/cuda/cuda_executable.cc, with_collectives). Buffers of one slot share an
// address, so a step whose temporary shares a slot with an in-flight collective's buffers would
// wait for it without reading it: a false join, which holds that step and every step after it. A
// DDP-like plan (gradients all_reduced one by one, optimizer updates scaled by bias corrections
// computed from a step counter after the backward pass, as AdamW's are) must have none.
TEST(MemoryPlan, ADataParallelStepHasNoFalseJoins) {
  auto op = [](Op o, NodeList in, std::vector<int64_t> ints = {}) {
    Attrs a;
    a.ints = to_ints(ints);
    return make_node(o, std::move(in), a);
  };
  auto step = testing::param({}), beta = testing::param({}), lr = testing::param({});
  NodeList roots;
  for (int i = 0; i < 4; ++i) {
    auto p = testing::param({16 + 8 * i, 24});
    auto grad = op(Op::Exp, {op(Op::Sin, {p})});
    auto reduced = op(Op::AllReduce, {grad}, {1, 2});
    // A bias correction of its own per parameter (AdamW's), from scalars alone: work that waits on
    // no collective, which order_by_collectives runs before every update.
    auto correction = op(Op::Sqrt, {op(Op::Sub, {op(Op::Exp, {step}), op(Op::Pow, {beta, step})})});
    auto scaled = op(Op::ReduceSum, {op(Op::Mul, {reduced, reduced})}, {1});
    roots.push_back(op(Op::Sub, {op(Op::Mul, {lr, correction}), op(Op::ReduceSum, {scaled}, {0})}));
  }
  Plan p = testing::plan_of(roots);
  ASSERT_EQ(p.collectives.size(), 4u) << p.grouping;
  // The address a buffer has in a run: its slot's for a temporary, its own otherwise.
  auto address = [&](int b) {
    const int slot =
        b >= 0 && b < static_cast<int>(p.memory.slot_of.size()) ? p.memory.slot_of[b] : -1;
    return slot >= 0 ? -1 - slot : b;
  };
  std::vector<const CollectiveStep*> in_flight;
  std::vector<int> reads, writes;
  const std::vector<PlanStep> steps = p.ordered_steps();
  for (size_t s = 0; s < steps.size(); ++s) {
    if (steps[s].kind == PlanStep::Kind::Collective) {
      in_flight.push_back(&p.collectives[steps[s].index]);
      continue;
    }
    step_buffers(p, steps[s], reads, writes);
    std::vector<int> touched = reads;
    touched.insert(touched.end(), writes.begin(), writes.end());
    for (size_t i = 0; i < in_flight.size();) {
      const CollectiveStep& c = *in_flight[i];
      bool by_address = false, by_buffer = false;
      for (int b : touched) {
        if (b < 0) continue;
        by_buffer |= b == c.in || b == c.out;
        by_address |= address(b) == address(c.in) || address(b) == address(c.out);
      }
      EXPECT_EQ(by_address, by_buffer)
          << "step " << s << " would wait for " << c.name << " without reading it\n"
          << p.grouping;
      if (by_address)
        in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(i));
      else
        ++i;
    }
  }
}

}  // namespace
}  // namespace lt
