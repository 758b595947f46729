// Where collectives start (lowering/collective_placement.h), on plans built by hand with the
// default (H200) rates: a 26 MB all_reduce over two ranks ~140 us; a bf16 GEMM of 8192 x 768 x
// 3072 ~64 us; a "light" kernel moving 660 MB ~200 us (a flash-attention backward's length).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "graph_util.h"
#include "ir/graph.h"
#include "lowering/collective_overlap.h"
#include "lowering/collective_placement.h"
#include "lowering/lower.h"
#include "lowering/plan.h"

// A namespace of its own: the unity build puts this file beside collective_overlap_test.cc.
namespace lt::collective_placement_test {
namespace {

constexpr int64_t kBucket = 6'500'000;  // float32 elements: 26 MB

// Buffers: 0 = the bucket, 1 = its reduced value; every other step gets buffers of its own.
// Each step is named by a letter in order(): C collective, G GEMM, L light kernel, U a kernel
// that uses the reduced value, W one that writes the bucket.
struct Builder {
  Plan p;
  std::string names;  // per step, in the order added
  Builder() {
    p.buffers = {{BufferSpec::Kind::Temp, DType::Float32, kBucket},
                 {BufferSpec::Kind::Output, DType::Float32, kBucket}};
  }
  int buffer(DType t, int64_t n) {
    p.buffers.push_back({BufferSpec::Kind::Temp, t, n});
    return static_cast<int>(p.buffers.size() - 1);
  }
  void add(PlanStep::Kind kind, int index, char name) {
    p.steps.push_back({kind, index});
    names += name;
  }
  Builder& C() {
    CollectiveStep c;
    c.op = Op::AllReduce, c.world = 2, c.count = kBucket, c.in = 0, c.out = 1;
    p.collectives.push_back(c);
    add(PlanStep::Kind::Collective, static_cast<int>(p.collectives.size() - 1), 'C');
    return *this;
  }
  Builder& G() {
    Gemm g;
    g.dtype = DType::BFloat16, g.M = 8192, g.N = 768, g.K = 3072;
    g.a = buffer(DType::BFloat16, g.M * g.K), g.b = buffer(DType::BFloat16, g.K * g.N);
    g.out = buffer(DType::BFloat16, g.M * g.N);
    g.a_rs = g.K, g.a_cs = 1, g.b_rs = g.N, g.b_cs = 1;
    p.gemms.push_back(g);
    add(PlanStep::Kind::Gemm, static_cast<int>(p.gemms.size() - 1), 'G');
    return *this;
  }
  Builder& kernel(char name, int read, int write, int64_t n) {
    loop::Kernel k;
    k.args = {{read, DType::Float32, n}, {write, DType::Float32, n}};
    k.args[1].output = true;
    p.kernels.push_back(k);
    add(PlanStep::Kind::Kernel, static_cast<int>(p.kernels.size() - 1), name);
    return *this;
  }
  static constexpr int64_t kLight = 82'500'000;  // 2 x 330 MB: ~200 us
  Builder& L() {
    return kernel('L', buffer(DType::Float32, kLight), buffer(DType::Float32, kLight), kLight);
  }
  Builder& U() { return kernel('U', 1, buffer(DType::Float32, kBucket), kBucket); }
  Builder& W() { return kernel('W', buffer(DType::Float32, kBucket), 0, kBucket); }
  // The steps' names in the order the pass leaves them.
  std::string order() {
    place_collectives_beside_light_work(p, OverlapRates{});
    std::string s;
    for (const PlanStep& st : p.steps) {
      size_t i = 0;  // find the step among those added (kind and index identify it)
      for (; i < added.size(); ++i)
        if (added[i].kind == st.kind && added[i].index == st.index) break;
      s += names.at(i);
    }
    return s;
  }
  // The collectives' indices in the order the plan now runs them.
  std::vector<int> collectives_in_order() const {
    std::vector<int> seen;
    for (const PlanStep& s : p.steps)
      if (s.kind == PlanStep::Kind::Collective) seen.push_back(s.index);
    return seen;
  }
  std::vector<PlanStep> added;
  Builder& done() {
    added = p.steps;
    return *this;
  }
};

TEST(CollectivePlacement, ACollectiveWaitsForLightWorkPastTheGemms) {
  Builder b;
  b.C().G().G().G().L().done();
  EXPECT_EQ(b.order(), "GGGCL");
}

TEST(CollectivePlacement, NeverPastAStepThatReadsItsResultOrWritesItsOperand) {
  Builder b;
  b.C().G().U().L().done();  // U reads the reduced value: C stays before it
  EXPECT_EQ(b.order(), "GCUL");
  Builder w;
  w.C().G().W().L().done();  // W overwrites the bucket C reads
  EXPECT_EQ(w.order(), "GCWL");
}

TEST(CollectivePlacement, AdjacentCollectivesMoveTogetherAndKeepTheirOrder) {
  Builder b;
  b.C().C().G().L().L().done();
  const std::string o = b.order();
  EXPECT_EQ(o, "GCCLL");
  EXPECT_EQ(b.collectives_in_order(), (std::vector<int>{0, 1}));
}

TEST(CollectivePlacement, NothingLighterWithinReachLeavesItWhereItWasReady) {
  Builder far;
  far.C();
  for (int i = 0; i < 30; ++i) far.G();  // ~1.9 ms of GEMMs: past kMaxDelayUs
  far.L().done();
  EXPECT_EQ(far.order().substr(0, 2), "CG");
  Builder none;
  none.C().L().L().done();  // no GEMM anywhere: nothing to gain, it stays
  EXPECT_EQ(none.order(), "CLL");
}

// The first collective may wait past the point where the second is ready: the second follows it
// (one order on every rank), and both run beside the light kernel.
TEST(CollectivePlacement, ACollectiveMayWaitPastTheNextOnesReadinessAndBothKeepTheirOrder) {
  Builder b;
  b.C().G().C().G().L().done();
  EXPECT_EQ(b.order(), "GGCCL");
  EXPECT_EQ(b.collectives_in_order(), (std::vector<int>{0, 1}));
}

TEST(CollectivePlacement, EveryStepIsKept) {
  Builder b;
  b.G().C().G().L().U().G().C().L().G().done();
  const std::string o = b.order();
  std::string sorted_o = o, sorted_n = b.names;
  std::sort(sorted_o.begin(), sorted_o.end());
  std::sort(sorted_n.begin(), sorted_n.end());
  EXPECT_EQ(sorted_o, sorted_n) << o;
}

// Through lowering: a bucket-sized all_reduce traced before two bf16 GEMMs and a long elementwise
// pass. With the option off it runs as soon as its operand is ready, before the GEMMs; on, beside
// the elementwise pass, and the plan is otherwise the same steps, each after what it reads.
TEST(CollectivePlacement, ALoweredPlanStartsItsCollectiveBesideTheLightWork) {
  using testing::param;
  auto grad = make_node(Op::Exp, {param({kBucket})});
  Attrs avg;
  avg.ints = {1, 2};
  auto reduced = make_node(Op::AllReduce, {grad}, avg);
  auto a = param({8192, 3072}, DType::BFloat16), w = param({3072, 768}, DType::BFloat16);
  auto y =
      make_node(Op::Matmul, {make_node(Op::Matmul, {a, w}), param({768, 768}, DType::BFloat16)});
  auto light = make_node(Op::Sin, {param({Builder::kLight})});
  NodeList roots{make_node(Op::Neg, {reduced}), y, light};
  LowerOptions opts;
  opts.gemm_dtypes = {DType::BFloat16};
  auto collective_at = [](const Plan& p) {
    for (size_t i = 0; i < p.steps.size(); ++i)
      if (p.steps[i].kind == PlanStep::Kind::Collective) return static_cast<int>(i);
    return -1;
  };
  auto first_of = [](const Plan& p, PlanStep::Kind k) {
    for (size_t i = 0; i < p.steps.size(); ++i)
      if (p.steps[i].kind == k) return static_cast<int>(i);
    return -1;
  };
  const Plan ready = testing::plan_of(roots, opts);
  ASSERT_EQ(ready.gemms.size(), 2u) << ready.grouping;
  EXPECT_LT(collective_at(ready), first_of(ready, PlanStep::Kind::Gemm)) << ready.grouping;
  opts.collectives_beside_light_work = true;
  const Plan light_plan = testing::plan_of(roots, opts);
  ASSERT_EQ(light_plan.steps.size(), ready.steps.size());
  const int c = collective_at(light_plan);
  EXPECT_GT(c, first_of(light_plan, PlanStep::Kind::Gemm) + 1) << light_plan.grouping;  // past both
  // Every step after what it reads: each buffer's first writer comes before its readers.
  std::vector<int> reads, writes, written_at(light_plan.buffers.size(), -1);
  for (size_t i = 0; i < light_plan.steps.size(); ++i) {
    step_buffers(light_plan, light_plan.steps[i], reads, writes);
    for (int b : writes)
      if (b >= 0 && written_at[b] < 0) written_at[b] = static_cast<int>(i);
  }
  for (size_t i = 0; i < light_plan.steps.size(); ++i) {
    step_buffers(light_plan, light_plan.steps[i], reads, writes);
    for (int b : reads) {
      if (b >= 0 && written_at[b] >= 0) {
        EXPECT_LT(written_at[b], static_cast<int>(i)) << b;
      }
    }
  }
}

}  // namespace
}  // namespace lt::collective_placement_test
