// Symbolic Gemm steps on the CPU backend (issue 30): one executable of a plan whose Gemm step has
// symbolic fields (M, K, leading dims, batch extents and strides) runs at many bindings through
// oneDNN primitives with runtime dims (backends/cpu/onednn_gemm.h, OnednnSymbolicGemm), made once
// per step and variant rather than per binding. Each result is checked against the same plan
// compiled statically at that size and against plain C++ loops written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/onednn_gemm.h"
#include "cpu_codegen_util.h"
#include "cpu_symbolic_util.h"
#include "ir/size_expr.h"
#include "symbolic_plans.h"

// A named namespace: the unity build puts this file in one translation unit with
// cpu_symbolic_test.cc, whose anonymous namespace has helpers of the same names.
namespace lt::cpu_symbolic_gemm_test {
namespace {

using namespace cpu_codegen_test;   // NOLINT: the shared test helpers
using namespace symbolic_plans;     // NOLINT: SymPlan, F, s0, s1
using namespace cpu_symbolic_util;  // NOLINT: check_bindings, Builder, Inputs, expect_close

// A plan whose one step is a Gemm writing the output: the step's fields at sizes z, its symbolic
// fields (ordinal in for_each_size_field's order, expression), and the operands' element counts.
struct GemmCase {
  Gemm g;
  std::vector<std::pair<int, SizeExpr>> sym;
  int64_t a_numel = 0, b_numel = 0;
  SizeExpr a_e, b_e, out_e;
};
using GemmCaseAt = std::function<GemmCase(std::span<const int64_t> z)>;
// Field ordinals of for_each_size_field (lowering/size_fields.h); batch ones follow from 9 on.
enum : int { kM = 0, kN, kK, kAOff, kARs, kACs, kBOff, kBRs, kBCs, kBatch0 };

Builder gemm_builder(const GemmCaseAt& at, int nsym) {
  return [at, nsym](std::span<const int64_t> z, bool sym) {
    GemmCase c = at(z);
    SymPlan pb(sym, nsym);
    Gemm g = c.g;
    g.name = "mm";
    g.a = pb.buf(K::Input, F, c.a_numel, c.a_e);
    g.b = pb.buf(K::Input, F, c.b_numel, c.b_e);
    g.out = pb.buf(K::Output, F, g.batch_count() * g.M * g.N, c.out_e);
    pb.p.gemms.push_back(g);
    if (sym) {
      StepSizeParams sp;
      for (const auto& [field, e] : c.sym) sp.push_back({field, pb.P(e)});
      std::sort(sp.begin(), sp.end());
      pb.p.sym.gemms.push_back(sp);
    }
    pb.p.steps = {{PlanStep::Kind::Gemm, 0}};
    return pb.finish();
  };
}

// Checks out = A x B (every `row_step`-th row of each product) against a double-precision loop
// over g's strides.
void check_gemm_ref(const Gemm& g, const std::vector<float>& a, const std::vector<float>& b,
                    const std::vector<float>& out, int64_t row_step = 1) {
  for (int64_t bi = 0; bi < g.batch_count(); ++bi) {
    int64_t ao = g.a_offset, bo = g.b_offset, rest = bi;
    for (size_t d = g.batch.size(); d-- > 0; rest /= g.batch[d]) {
      ao += rest % g.batch[d] * g.a_batch_stride[d];
      bo += rest % g.batch[d] * g.b_batch_stride[d];
    }
    for (int64_t i = 0; i < g.M; i += row_step)
      for (int64_t j = 0; j < g.N; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < g.K; ++q)
          acc += double{a[ao + i * g.a_rs + q * g.a_cs]} * b[bo + q * g.b_rs + j * g.b_cs];
        expect_close(out[(bi * g.M + i) * g.N + j], acc, 1e-4,
                     std::to_string(bi) + ":" + std::to_string(i) + "," + std::to_string(j));
      }
  }
}

void check_gemm_case(const GemmCaseAt& at, int nsym,
                     const std::vector<std::vector<int64_t>>& bindings, int64_t row_step = 1) {
  Inputs inputs = [at](std::span<const int64_t> z) {
    GemmCase c = at(z);
    return std::vector<std::vector<float>>{randn(c.a_numel, 21), randn(c.b_numel, 22)};
  };
  ASSERT_FALSE(gemm_builder(at, nsym)(bindings.front(), true).sym.gemms.empty());
  check_bindings(
      gemm_builder(at, nsym), inputs, {2}, bindings,
      [&](auto z, const auto& in, const auto& out) {
        check_gemm_ref(at(z).g, in[0], in[1], out[0], row_step);
      },
      // oneDNN may block K differently per shape (a sum that cancels to near 0 differs in most
      // of its bits): the reference decides.
      /*ulp=*/1 << 20, /*atol=*/1e-3);
}

// out [s0, 96] = A [s0, 64] @ B [64, 96]: symbolic M only (small_gemm at s0 = 2, one thread
// below 43 rows, the team above).
GemmCase gemm_m(std::span<const int64_t> z) {
  GemmCase c;
  const int64_t m = z[0];
  c.g.M = m, c.g.N = 96, c.g.K = 64;
  c.g.a_rs = 64, c.g.a_cs = 1, c.g.b_rs = 96, c.g.b_cs = 1;
  c.sym = {{kM, s0}};
  c.a_numel = m * 64, c.b_numel = 64 * 96;
  c.a_e = s0 * 64, c.b_e = 64 * 96, c.out_e = s0 * 96;
  return c;
}

const std::vector<std::vector<int64_t>> kGemmBindings1 = {{17},  {2},   {3},    {37},
                                                          {128}, {513}, {4099}, {37}};

TEST(CpuSymbolicGemm, SymbolicM) {
  if (cpu_backend().lower_options().gemm_dtypes.empty()) GTEST_SKIP() << "no library GEMM";
  check_gemm_case(gemm_m, 1, kGemmBindings1);
}

// out [s0, 48] = A [s0, s1] @ W^T, W [48, s1] stored as is (b_rs 1, b_cs s1): x @ w.t() with
// symbolic M, K and both leading dims.
GemmCase gemm_mk_bt(std::span<const int64_t> z) {
  GemmCase c;
  const int64_t m = z[0], k = z[1];
  c.g.M = m, c.g.N = 48, c.g.K = k;
  c.g.a_rs = k, c.g.a_cs = 1, c.g.b_rs = 1, c.g.b_cs = k;
  c.sym = {{kM, s0}, {kK, s1}, {kARs, s1}, {kBCs, s1}};
  c.a_numel = m * k, c.b_numel = 48 * k;
  c.a_e = s0 * s1, c.b_e = s1 * 48, c.out_e = s0 * 48;
  return c;
}

TEST(CpuSymbolicGemm, SymbolicMKTransposedB) {
  if (cpu_backend().lower_options().gemm_dtypes.empty()) GTEST_SKIP() << "no library GEMM";
  const std::vector<std::vector<int64_t>> bindings = {
      {17, 64}, {2, 3}, {3, 37}, {37, 2}, {128, 128}, {513, 17}, {4099, 3}, {2, 4099}, {300, 256}};
  check_gemm_case(gemm_mk_bt, 2, bindings);
}

// out [s0, 40] = X^T @ Y with X [40, s0] (A transposed: a_cs s0) and Y [40, 40]: a transposed
// operand whose leading dim is symbolic; then dW [64, 48] = X2^T [64, s0] @ dY [s0, 48]: only the
// contraction K is symbolic (the output's size is static).
TEST(CpuSymbolicGemm, TransposedASymbolicLeadingDim) {
  if (cpu_backend().lower_options().gemm_dtypes.empty()) GTEST_SKIP() << "no library GEMM";
  GemmCaseAt lead = [](std::span<const int64_t> z) {
    GemmCase c;
    const int64_t m = z[0];
    c.g.M = m, c.g.N = 40, c.g.K = 40;
    c.g.a_rs = 1, c.g.a_cs = m, c.g.b_rs = 40, c.g.b_cs = 1;
    c.sym = {{kM, s0}, {kACs, s0}};
    c.a_numel = 40 * m, c.b_numel = 40 * 40;
    c.a_e = s0 * 40, c.b_e = 1600, c.out_e = s0 * 40;
    return c;
  };
  check_gemm_case(lead, 1, kGemmBindings1);
  GemmCaseAt contraction = [](std::span<const int64_t> z) {
    GemmCase c;
    const int64_t k = z[0];
    c.g.M = 64, c.g.N = 48, c.g.K = k;
    c.g.a_rs = 1, c.g.a_cs = 64, c.g.b_rs = 48, c.g.b_cs = 1;
    c.sym = {{kK, s0}};
    c.a_numel = k * 64, c.b_numel = k * 48;
    c.a_e = s0 * 64, c.b_e = s0 * 48, c.out_e = 64 * 48;
    return c;
  };
  check_gemm_case(contraction, 1, kGemmBindings1);
}

// scores [s0, 3, s1, s1] = Q [s0, 3, s1, 16] @ K^T: B transposed, the batch extent s0 and every
// batch stride symbolic.
GemmCase gemm_scores(std::span<const int64_t> z) {
  GemmCase c;
  const int64_t b = z[0], t = z[1];
  c.g.M = t, c.g.N = t, c.g.K = 16;
  c.g.a_rs = 16, c.g.a_cs = 1, c.g.b_rs = 1, c.g.b_cs = 16;
  c.g.batch = {b, 3};
  c.g.a_batch_stride = {3 * t * 16, t * 16};
  c.g.b_batch_stride = c.g.a_batch_stride;
  c.sym = {{kM, s1},
           {kN, s1},
           {kBatch0, s0},
           {kBatch0 + 2, s1 * 48},
           {kBatch0 + 3, s1 * 16},
           {kBatch0 + 4, s1 * 48},
           {kBatch0 + 5, s1 * 16}};
  c.a_numel = c.b_numel = b * 3 * t * 16;
  c.a_e = c.b_e = s0 * s1 * 48;
  c.out_e = s0 * s1 * s1 * 3;
  return c;
}

// Attention's products with symbolic batch and sequence length: scores [s0, 3, s1, s1] =
// Q [s0, 3, s1, 16] @ K^T (B transposed, batch extent s0 and batch strides symbolic), then
// probs [3, s1, s1] @ V [3, s1, 16] (M and K symbolic, batch strides s1*s1 and 16*s1).
TEST(CpuSymbolicGemm, SymbolicBatchDims) {
  if (cpu_backend().lower_options().gemm_dtypes.empty()) GTEST_SKIP() << "no library GEMM";
  check_gemm_case(gemm_scores, 2, {{2, 17}, {1, 2}, {3, 37}, {2, 128}, {1, 513}, {2, 3}, {5, 64}});
  GemmCaseAt pv = [](std::span<const int64_t> z) {
    GemmCase c;
    const int64_t t = z[0];
    c.g.M = t, c.g.N = 16, c.g.K = t;
    c.g.a_rs = t, c.g.a_cs = 1, c.g.b_rs = 16, c.g.b_cs = 1;
    c.g.batch = {3};
    c.g.a_batch_stride = {t * t};
    c.g.b_batch_stride = {t * 16};
    c.sym = {{kM, s0}, {kK, s0}, {kARs, s0}, {kBatch0 + 1, s0 * s0}, {kBatch0 + 2, s0 * 16}};
    c.a_numel = 3 * t * t, c.b_numel = 3 * t * 16;
    c.a_e = s0 * s0 * 3, c.b_e = s0 * 48, c.out_e = s0 * 48;
    return c;
  };
  check_gemm_case(pv, 1, {{17}, {2}, {3}, {37}, {128}, {513}, {18}});
  // A [s0, 2, s1, 24] @ W [2, 24, 32], W broadcast over the symbolic batch dim (stride 0).
  GemmCaseAt broadcast = [](std::span<const int64_t> z) {
    GemmCase c;
    const int64_t b = z[0], t = z[1];
    c.g.M = t, c.g.N = 32, c.g.K = 24;
    c.g.a_rs = 24, c.g.a_cs = 1, c.g.b_rs = 32, c.g.b_cs = 1;
    c.g.batch = {b, 2};
    c.g.a_batch_stride = {2 * t * 24, t * 24};
    c.g.b_batch_stride = {0, 24 * 32};
    c.sym = {{kM, s1}, {kBatch0, s0}, {kBatch0 + 2, s1 * 48}, {kBatch0 + 3, s1 * 24}};
    c.a_numel = b * 2 * t * 24, c.b_numel = 2 * 24 * 32;
    c.a_e = s0 * s1 * 48, c.b_e = 2 * 24 * 32, c.out_e = s0 * s1 * 64;
    return c;
  };
  check_gemm_case(broadcast, 2, {{2, 17}, {1, 2}, {3, 37}, {2, 128}, {1, 513}, {4, 3}});
  // Both operands broadcast batch dim 0 (expanded tensors: oneDNN's packed fallback).
  GemmCaseAt both = [](std::span<const int64_t> z) {
    GemmCase c;
    const int64_t m = z[0];
    c.g.M = m, c.g.N = 32, c.g.K = 24;
    c.g.a_rs = 24, c.g.a_cs = 1, c.g.b_rs = 32, c.g.b_cs = 1;
    c.g.batch = {3};
    c.g.a_batch_stride = {0};
    c.g.b_batch_stride = {0};
    c.sym = {{kM, s0}};
    c.a_numel = m * 24, c.b_numel = 24 * 32;
    c.a_e = s0 * 24, c.b_e = 24 * 32, c.out_e = s0 * 96;
    return c;
  };
  check_gemm_case(both, 1, {{17}, {2}, {3}, {37}, {128}, {513}});
}

// M where B goes through its transposed copy first (64 <= M < 512 with K * N >= 2^20) and where
// it does not, in one executable.
TEST(CpuSymbolicGemm, TransposeBFirstPerBinding) {
  if (cpu_backend().lower_options().gemm_dtypes.empty()) GTEST_SKIP() << "no library GEMM";
  GemmCaseAt at = [](std::span<const int64_t> z) {
    GemmCase c;
    const int64_t m = z[0];
    c.g.M = m, c.g.N = 1024, c.g.K = 1024;
    c.g.a_rs = 1024, c.g.a_cs = 1, c.g.b_rs = 1024, c.g.b_cs = 1;
    c.sym = {{kM, s0}};
    c.a_numel = m * 1024, c.b_numel = 1024 * 1024;
    c.a_e = s0 * 1024, c.b_e = 1024 * 1024, c.out_e = s0 * 1024;
    return c;
  };
  check_gemm_case(at, 1, {{64}, {3}, {520}, {100}, {40}}, /*row_step=*/7);
}

// A symbolic step makes its primitives once (one per variant: one thread or the team), not per
// binding: after one binding of each variant, more bindings add none to the process's primitive
// cache, while a static compile at a new size does add one.
TEST(CpuSymbolicGemm, PrimitivesDoNotGrowWithBindings) {
  if (cpu_backend().lower_options().gemm_dtypes.empty()) GTEST_SKIP() << "no library GEMM";
  auto expect_stable = [](const GemmCaseAt& at, int nsym,
                          const std::vector<std::vector<int64_t>>& warm,
                          const std::vector<std::vector<int64_t>>& more) {
    auto exe = cpu_backend().compile(gemm_builder(at, nsym)(warm.front(), true));
    auto run_at = [&](const std::vector<int64_t>& z) {
      SCOPED_TRACE(::testing::PrintToString(z));
      const GemmCase c = at(z);
      auto av = randn(c.a_numel, 41), bv = randn(c.b_numel, 42);
      auto a = host(av), b = host(bv);
      auto out = exe->run_symbolic({{a.get()}, {b.get()}}, nullptr, z);
      const int64_t n = c.g.batch_count() * c.g.M * c.g.N;
      check_gemm_ref(c.g, av, bv, read<float>(out[2], static_cast<size_t>(n)), 5);
    };
    for (const auto& z : warm) run_at(z);
    const size_t made = cpu::onednn_gemm_primitives();
    for (const auto& z : more) run_at(z);
    EXPECT_EQ(cpu::onednn_gemm_primitives(), made);
  };
  GemmCaseAt m80 = [](std::span<const int64_t> z) {
    GemmCase c = gemm_m(z);
    c.g.N = 80, c.g.b_rs = 80;  // sizes no other test of this process uses
    c.b_numel = 64 * 80, c.b_e = 64 * 80, c.out_e = s0 * 80;
    return c;
  };
  std::vector<std::vector<int64_t>> more;
  for (int64_t m = 18; m < 300; m += 7) more.push_back({m});
  expect_stable(m80, 1, {{17}, {300}}, more);  // one thread, the team
  const size_t made = cpu::onednn_gemm_primitives();
  cpu_backend().compile(gemm_builder(m80, 1)(std::vector<int64_t>{301}, false));
  EXPECT_EQ(cpu::onednn_gemm_primitives(), made + 1);
  more.clear();
  for (int64_t t = 40; t < 200; t += 13) more.push_back({1 + t % 3, t});
  expect_stable(gemm_scores, 2, {{1, 24}, {2, 128}}, more);  // one thread, the team
  more.clear();
  for (int64_t m = 20; m < 300; m += 23) more.push_back({m, 7 + m % 61});
  expect_stable(gemm_mk_bt, 2, {{17, 64}, {300, 64}}, more);
}

}  // namespace
}  // namespace lt::cpu_symbolic_gemm_test
