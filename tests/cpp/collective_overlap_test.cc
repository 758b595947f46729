// Which GEMMs plan for the SMs a running collective leaves (lowering/collective_overlap.h), on
// plans built by hand with the default (H200) rates: a 26 MB all_reduce over two ranks runs
// ~140 us; a bf16 GEMM of 8192 x 768 x 3072 ~64 us; the LM head's weight gradient (50304 x 768 x
// 8192) ~1 ms.
#include <gtest/gtest.h>

#include "lowering/collective_overlap.h"
#include "lowering/plan.h"

namespace lt {
namespace {

constexpr int64_t kBucket = 6'500'000;  // float32 elements: 26 MB

// Buffers: 0 = the bucket, 1 = its reduced value, 2.. = each GEMM's a, b and out.
struct Builder {
  Plan p;
  Builder() {
    p.buffers = {{BufferSpec::Kind::Temp, DType::Float32, kBucket},
                 {BufferSpec::Kind::Output, DType::Float32, kBucket}};
  }
  void collective(int world = 2) {
    CollectiveStep c;
    c.op = Op::AllReduce, c.world = world, c.count = kBucket, c.in = 0, c.out = 1;
    p.collectives.push_back(c);
    p.steps.push_back({PlanStep::Kind::Collective, static_cast<int>(p.collectives.size() - 1)});
  }
  void gemm(int64_t M, int64_t N, int64_t K) {
    const int base = static_cast<int>(p.buffers.size());
    for (int64_t n : {M * K, K * N, M * N})
      p.buffers.push_back({BufferSpec::Kind::Temp, DType::BFloat16, n});
    Gemm g;
    g.dtype = DType::BFloat16, g.a = base, g.b = base + 1, g.out = base + 2;
    g.M = M, g.N = N, g.K = K;
    g.a_rs = K, g.a_cs = 1, g.b_rs = N, g.b_cs = 1;
    p.gemms.push_back(g);
    p.steps.push_back({PlanStep::Kind::Gemm, static_cast<int>(p.gemms.size() - 1)});
  }
  std::vector<bool> narrowed(int carved = 24) const {
    OverlapRates r;
    r.carved_sms = carved;
    return gemms_beside_collectives(p, p.steps, r);
  }
};

TEST(CollectiveOverlap, TheGemmsStartingInsideTheWindowAreNarrowed) {
  Builder b;
  b.gemm(8192, 768, 3072);  // before the collective: nothing runs beside it
  b.collective();
  b.gemm(8192, 768, 3072);  // issued with it: narrowed, so the collective starts at once
  b.gemm(8192, 768, 3072);  // starts ~80 us in, ~60 us before its end
  b.gemm(8192, 768, 3072);  // starts after it
  const std::vector<bool> n = b.narrowed();
  ASSERT_EQ(n.size(), 5u);
  EXPECT_EQ(n, (std::vector<bool>{false, false, true, true, false}));
  OverlapRates r;
  EXPECT_NEAR(estimated_step_us(b.p, b.p.steps[1], r), 10 + 26e6 / 2e5, 1);
  EXPECT_NEAR(estimated_step_us(b.p, b.p.steps[0], r), 2.0 * 8192 * 768 * 3072 / 6e8, 1);
}

// The LM head's weight gradient would lose more on the narrowed grid over its ~1 ms than it
// waits for the collective's SMs: it keeps them all, and what follows it starts after the window.
TEST(CollectiveOverlap, ALongGemmKeepsEverySm) {
  Builder b;
  b.collective();
  b.gemm(50304, 768, 8192);
  b.gemm(8192, 768, 3072);
  EXPECT_EQ(b.narrowed(), (std::vector<bool>{false, false, false}));
}

// Collectives run one after another on their stream: the second's window starts when the first
// ends, so a GEMM that starts while the second one runs is narrowed too.
TEST(CollectiveOverlap, QueuedCollectivesExtendTheWindow) {
  Builder b;
  b.collective();
  b.collective();
  for (int i = 0; i < 5; ++i) b.gemm(8192, 768, 3072);
  const std::vector<bool> n = b.narrowed();
  // ~280 us of collectives: the GEMMs starting at ~0, 80, 160 and 240 us, not the fifth (~320).
  EXPECT_EQ(n, (std::vector<bool>{false, false, true, true, true, true, false}));
}

TEST(CollectiveOverlap, OffWithoutCarvedSmsOrWithNoneLeft) {
  Builder b;
  b.collective();
  b.gemm(8192, 768, 3072);
  EXPECT_EQ(b.narrowed(0), (std::vector<bool>{false, false}));
  EXPECT_EQ(b.narrowed(132), (std::vector<bool>{false, false}));
  EXPECT_EQ(b.narrowed(24), (std::vector<bool>{false, true}));
}

// An empty collective is skipped at run time: no window.
TEST(CollectiveOverlap, AnEmptyCollectiveHoldsNothing) {
  Builder b;
  b.collective();
  b.p.collectives[0].count = 0;
  b.gemm(8192, 768, 3072);
  EXPECT_EQ(b.narrowed(), (std::vector<bool>{false, false}));
}

// A collective over one rank is a copy in memory: nothing narrowed beside it.
TEST(CollectiveOverlap, OneRankHoldsNothing) {
  Builder b;
  b.collective(1);
  b.gemm(8192, 768, 3072);
  EXPECT_EQ(b.narrowed(), (std::vector<bool>{false, false}));
  b.p.collectives[0].world = 2;
  EXPECT_EQ(b.narrowed(), (std::vector<bool>{false, true}));
}

}  // namespace
}  // namespace lt
