// Symbolic sizes on the CPU backend (issue 30): plans whose loop IR fields name size parameters
// (lowering/loop_ir.h, Plan::sym), built here by hand, compiled once and run for many bindings of
// their size symbols. Each result is checked against the same plan built and compiled statically
// at that size and against plain C++ loops written here (never backend code).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/kernel_prep.h"
#include "cpu_codegen_util.h"
#include "cpu_symbolic_util.h"
#include "ir/size_expr.h"
#include "symbolic_plans.h"

namespace lt {
namespace {

using namespace cpu_codegen_test;   // NOLINT: the shared test helpers
using namespace symbolic_plans;     // NOLINT: the plans
using namespace cpu_symbolic_util;  // NOLINT: check_bindings, Builder, Inputs, expect_close

const std::vector<std::vector<int64_t>> kBindings1 = {{5}, {2}, {3}, {37}, {128}, {4099}};

// out = x * y + x over a contiguous [s0, 7]: merged into one loop of 7*s0.
TEST(CpuSymbolic, ElementwiseContiguous) {
  Builder build = elementwise_plan;
  Inputs inputs = [](std::span<const int64_t> z) {
    return std::vector<std::vector<float>>{randn(z[0] * 7, 1), randn(z[0] * 7, 2)};
  };
  check_bindings(build, inputs, {2}, kBindings1, [](auto z, const auto& in, const auto& out) {
    for (int64_t i = 0; i < z[0] * 7; ++i)
      ASSERT_EQ(out[0][i], in[0][i] * in[1][i] + in[0][i]) << i;
  });
}

// out = x + b over [s0, s1, 3] with b [3] broadcast: the first two dims merge into one of
// s0*s1, a product no plan parameter holds (the CPU backend adds it), the last stays apart.
TEST(CpuSymbolic, MergedExtentNotAParameter) {
  Builder build = merged_extent_plan;
  Inputs inputs = [](std::span<const int64_t> z) {
    return std::vector<std::vector<float>>{randn(z[0] * z[1] * 3, 15), randn(3, 16)};
  };
  const std::vector<std::vector<int64_t>> bindings = {{4, 5}, {2, 2}, {3, 37}, {37, 3}, {128, 129}};
  check_bindings(build, inputs, {2}, bindings, [](auto z, const auto& in, const auto& out) {
    for (int64_t i = 0; i < z[0] * z[1] * 3; ++i)
      ASSERT_EQ(out[0][i], in[0][i] - in[1][i % 3]) << i;
  });
}

// merge_dims on symbolic kernels: dims merge where the strides agree as polynomials, the merged
// extent names an equal parameter or one appended to the list; dims that do not walk
// contiguously at every binding stay apart.
TEST(CpuSymbolic, MergeDimsSymbolic) {
  auto kernel = [](std::vector<int64_t> strides, std::vector<int> stride_ps) {
    loop::Kernel k;
    k.name = "m";
    k.outer = {4, 5, 3};
    k.outer_params = {0, 1, -1};
    k.args = {{0, F, 60}, {1, F, 60, false, true}};
    Body b(StageKind::MapOuter);
    Index ix = aff(strides);
    ix.stride_params = stride_ps;
    b.store(1, ix, b.load(F, 0, ix));
    k.stages = {b.st};
    return k;
  };
  // Contiguous [s0, s1, 3] (row stride 3*s1 = parameter 2): one dim of 3*s0*s1 (parameter 3).
  std::vector<SizeExpr> params = {s0, s1, s1 * 3, s0 * s1 * 3};
  loop::Kernel m = cpu::merge_dims(kernel({15, 3, 1}, {2, -1, -1}), &params);
  ASSERT_EQ(m.outer.size(), 1u);
  EXPECT_EQ(m.outer[0], 60);
  EXPECT_EQ(m.outer_params, std::vector<int>{3});
  EXPECT_EQ(params.size(), 5u);  // s0*s1 on the way, appended
  EXPECT_TRUE(params[4] == s0 * s1);
  // A row stride that is not 3*s1 at every binding (s1 + 10, equal at the hint s1 = 5): the
  // first dim stays apart, the last two merge into 3*s1.
  params = {s0, s1, s1 + 10};
  m = cpu::merge_dims(kernel({15, 3, 1}, {2, -1, -1}), &params);
  ASSERT_EQ(m.outer.size(), 2u);
  EXPECT_EQ(m.outer_params, (std::vector<int>{0, 3}));
  ASSERT_EQ(params.size(), 4u);
  EXPECT_TRUE(params[3] == s1 * 3);
  // A static row stride of 15 (3 * the hint): not contiguous at other bindings, no merge there.
  params = {s0, s1};
  m = cpu::merge_dims(kernel({15, 3, 1}, {-1, -1, -1}), &params);
  EXPECT_EQ(m.outer.size(), 2u);
  // Without the parameter list nothing symbolic merges (not even [s1, 3]).
  m = cpu::merge_dims(kernel({15, 3, 1}, {2, -1, -1}));
  EXPECT_EQ(m.outer.size(), 3u);
}

// An input donated to its output (updated in place): the donated buffer must hold the output at
// the binding run, not at the plan's.
TEST(CpuSymbolic, DonationPerBinding) {
  SymPlan pb(true, 1);
  int x = pb.buf(K::Input, F, 8, s0), o = pb.buf(K::Output, F, 8, s0);
  Body b(StageKind::MapOuter);
  b.store(1, aff({1}), b.op(Op::Add, F, b.load(F, 0, aff({1})), b.cnst(F, 1)));
  pb.kernel({8}, {}, {pb.sarg(x), pb.sarg(o, true)}, {b.st});
  pb.dims({pb.P(s0)}, {});
  pb.p.kernels.back().inplace = {{0, 1}};
  pb.p.donations = {{o, x}};
  auto exe = cpu_backend().compile(pb.finish());
  auto xv = randn(37, 17);
  auto xb = host(xv);
  RunInput in{xb.get()};
  in.donated_output = o;
  auto out = exe->run_symbolic({in}, nullptr, std::vector<int64_t>{37});
  EXPECT_EQ(out[o], nullptr);  // written into the input
  auto got = read<float>(xb, 37);
  for (int i = 0; i < 37; ++i) EXPECT_EQ(got[i], xv[i] + 1) << i;
  EXPECT_THROW(exe->run_symbolic({in}, nullptr, std::vector<int64_t>{38}), Error);
}

// out[r, c] = a[r, c] + b[c] for a [s0, 5] (a static last dim: rows split at run time) and for a
// [5, s0] (a symbolic last dim and row stride).
TEST(CpuSymbolic, BroadcastAdd) {
  for (bool last_symbolic : {false, true}) {
    SCOPED_TRACE(last_symbolic ? "[5, s0] + [s0]" : "[s0, 5] + [5]");
    Builder build = [last_symbolic](std::span<const int64_t> z, bool sym) {
      return broadcast_plan(z, sym, last_symbolic);
    };
    Inputs inputs = [last_symbolic](std::span<const int64_t> z) {
      return std::vector<std::vector<float>>{randn(z[0] * 5, 3),
                                             randn(last_symbolic ? z[0] : 5, 4)};
    };
    check_bindings(build, inputs, {2}, kBindings1,
                   [last_symbolic](auto z, const auto& in, const auto& out) {
                     const int64_t R = last_symbolic ? 5 : z[0], C = last_symbolic ? z[0] : 5;
                     for (int64_t r = 0; r < R; ++r)
                       for (int64_t c = 0; c < C; ++c)
                         ASSERT_EQ(out[0][r * C + c], in[0][r * C + c] + in[1][c]) << r << "," << c;
                   });
  }
}

// out [3, s0] = x.T for x [s0, 3]: the output's row stride is symbolic, the read strided.
TEST(CpuSymbolic, TransposeRead) {
  Builder build = transpose_plan;
  Inputs inputs = [](std::span<const int64_t> z) {
    return std::vector<std::vector<float>>{randn(z[0] * 3, 5)};
  };
  check_bindings(build, inputs, {1}, kBindings1, [](auto z, const auto& in, const auto& out) {
    const int64_t n = z[0];
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(out[0][i * n + j], -in[0][j * 3 + i]) << i << j;
  });
}

// Rows of x [5, s0]: sum and max over the symbolic inner dim, and sum and max over its first
// s0 - 2 columns (none at s0 = 2: the identities), each stored by an epilogue.
TEST(CpuSymbolic, RowReductions) {
  Builder build = row_reductions_plan;
  Inputs inputs = [](std::span<const int64_t> z) {
    return std::vector<std::vector<float>>{randn(z[0] * 5, 6, 2.f)};
  };
  check_bindings(
      build, inputs, {1, 2, 3, 4}, kBindings1,
      [](auto z, const auto& in, const auto& out) {
        const int64_t n = z[0];
        for (int part = 0; part < 2; ++part) {
          const int64_t m = part ? n - 2 : n;
          for (int64_t r = 0; r < 5; ++r) {
            double sum = 0;
            float mx = -INFINITY;
            for (int64_t c = 0; c < m; ++c)
              sum += in[0][r * n + c], mx = std::max(mx, in[0][r * n + c]);
            expect_close(out[2 * part][r], sum, 1e-5, "sum row " + std::to_string(r));
            ASSERT_EQ(out[2 * part + 1][r], mx) << "max row " << r;
          }
        }
      },
      /*ulp=*/64);  // a runtime row length may sum in another order than the static one
}

// The softmax for many row lengths (the exp is kept in a scratch row up to 16,384 columns;
// 20,000 takes the path that recomputes it).
TEST(CpuSymbolic, SoftmaxRows) {
  constexpr int64_t R = kSoftmaxRows;
  Inputs inputs = [](std::span<const int64_t> z) {
    return std::vector<std::vector<float>>{randn(z[0] * R, 7, 3.f)};
  };
  auto bindings = kBindings1;
  bindings.push_back({20000});
  check_bindings([](std::span<const int64_t> z, bool sym) { return softmax_plan(z, sym); }, inputs,
                 {1}, bindings,
                 [](auto z, const auto& in, const auto& out) {
                   const int64_t n = z[0];
                   for (int64_t r = 0; r < R; ++r) {
                     const float* row = &in[0][r * n];
                     double m = *std::max_element(row, row + n), sum = 0;
                     for (int64_t c = 0; c < n; ++c)
                       sum += std::exp(static_cast<double>(row[c]) - m);
                     for (int64_t c = 0; c < n; ++c)
                       expect_close(out[0][r * n + c], std::exp(row[c] - m) / sum, 1e-5,
                                    std::to_string(r) + "," + std::to_string(c));
                   }
                 },
                 /*ulp=*/64);
}

// The softmax compiled at a hint whose output is large enough for a streaming body (4 MiB,
// streaming_stores.h), run at smaller and larger sizes.
TEST(CpuSymbolic, SoftmaxRowsStreamingHint) {
  Plan sp = softmax_plan(std::vector<int64_t>{180000}, true);
  auto exe = cpu_backend().compile(sp);
  ASSERT_NE(exe->kernel_sources().at(0).find("stream"), std::string::npos);  // the premise
  for (int64_t n : {37, 4099, 180001}) {
    SCOPED_TRACE(n);
    auto xv = randn(static_cast<size_t>(n * kSoftmaxRows), 18, 3.f);
    auto xb = host(xv);
    auto a = read<float>(exe->run_symbolic({{xb.get()}}, nullptr, std::vector<int64_t>{n})[1],
                         static_cast<size_t>(n * kSoftmaxRows));
    auto b = read<float>(cpu_backend()
                             .compile(softmax_plan(std::vector<int64_t>{n}, false))
                             ->run({{xb.get()}}, nullptr)[1],
                         static_cast<size_t>(n * kSoftmaxRows));
    for (size_t i = 0; i < a.size(); ++i) ASSERT_LE(ulps(a[i], b[i], true), 64) << i;
  }
}

// A float32 sin gets a fast body (inline sin, rerun with libm when an argument is out of its
// range, codegen.cc); both bodies read the sizes: out = sin(x) * s0 + x over [s0, 3].
TEST(CpuSymbolic, FastTrigBody) {
  Builder build = sin_scaled_plan;
  Inputs inputs = [](std::span<const int64_t> z) {
    auto v = randn(z[0] * 3, 19, 10.f);
    if (z[0] == 37) v[5] = 3e5f;  // beyond the inline sin's range: the libm rerun
    return std::vector<std::vector<float>>{v};
  };
  check_bindings(build, inputs, {1}, kBindings1, [](auto z, const auto& in, const auto& out) {
    for (int64_t i = 0; i < z[0] * 3; ++i)
      expect_close(out[0][i], std::sin(double{in[0][i]}) * z[0] + in[0][i], 1e-5 * z[0],
                   std::to_string(i));
  });
}

// mean over rows of x [s0, s1] as sum * (1/s1) (a reciprocal size constant), plus s0 as a
// constant (the size itself); float32 and float64 outputs.
TEST(CpuSymbolic, MeanReciprocalConst) {
  Builder build = mean_plan;
  Inputs inputs = [](std::span<const int64_t> z) {
    return std::vector<std::vector<float>>{randn(z[0] * z[1], 8)};
  };
  const std::vector<std::vector<int64_t>> bindings = {{4, 5},  {2, 2},     {3, 37},
                                                      {37, 3}, {128, 128}, {2, 4099}};
  auto exe = cpu_backend().compile(build(bindings.front(), true));
  for (const auto& bind : bindings) {
    // The float64 output: exactly the float32 mean plus s0 plus 1/s1 (in float64), whatever
    // order the row was summed in.
    auto in = inputs(bind);
    auto xb = host(in[0]);
    auto a = exe->run_symbolic({{xb.get()}}, nullptr, bind);
    auto mean = read<float>(a[1], bind[0]);
    auto da = read<double>(a[2], bind[0]);
    for (int64_t i = 0; i < bind[0]; ++i) {
      const double want = (double{mean[i]} + static_cast<double>(bind[0])) + 1.0 / bind[1];
      ASSERT_EQ(da[i], want) << i;
      // The float32 mean multiplied by the float32 rounding of 1/s1.
      double sum = 0;
      for (int64_t j = 0; j < bind[1]; ++j) sum += in[0][i * bind[1] + j];
      expect_close(mean[i], sum / bind[1], 1e-5, std::to_string(i));
    }
  }
  check_bindings(
      build, inputs, {1}, bindings,
      [](auto z, const auto& in, const auto& out) {
        for (int64_t i = 0; i < z[0]; ++i) {
          double sum = 0;
          for (int64_t j = 0; j < z[1]; ++j) sum += in[0][i * z[1] + j];
          expect_close(out[0][i], sum / z[1], 1e-5, std::to_string(i));
        }
      },
      /*ulp=*/64);
}

// A reshape read: out [3*s0] is the flat view of a [3, s0] transpose of x [s0, 3], so
// out[k] = x[(k mod s0) * 3 + k floordiv s0]: a general index whose divisor is the size s0.
TEST(CpuSymbolic, FloorDivModSymbolicDivisor) {
  Builder build = floordiv_mod_plan;
  Inputs inputs = [](std::span<const int64_t> z) {
    return std::vector<std::vector<float>>{randn(z[0] * 3, 9)};
  };
  check_bindings(build, inputs, {1}, kBindings1, [](auto z, const auto& in, const auto& out) {
    const int64_t n = z[0];
    for (int64_t k = 0; k < 3 * n; ++k)
      ASSERT_EQ(out[0][k], in[0][(k % n) * 3 + k / n] + 0.5f) << k;
  });
}

// Affine indices with symbolic offsets into x [2*s0]: out[i] = x[s0 + i] * 2 (its second half)
// and out2[i] = x[(s0 - 2) + i] + x[i] (an offset that is 0 at s0 = 2).
TEST(CpuSymbolic, SymbolicOffset) {
  Builder build = offset_plan;
  Inputs inputs = [](std::span<const int64_t> z) {
    return std::vector<std::vector<float>>{randn(z[0] * 2, 10)};
  };
  check_bindings(build, inputs, {1, 2}, kBindings1, [](auto z, const auto& in, const auto& out) {
    const int64_t n = z[0];
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[0][i], in[0][n + i] * 2) << i;
      ASSERT_EQ(out[1][i], in[0][n - 2 + i] + in[0][i]) << i;
    }
  });
}

// y [s0, 16] = relu(A [s0, s1] @ B [s1, 16] + bias[16]): a GEMM step with symbolic M, K and row
// stride of A, then a symbolic elementwise kernel over its output.
TEST(CpuSymbolic, GemmSymbolicMK) {
  if (cpu_backend().lower_options().gemm_dtypes.empty()) GTEST_SKIP() << "no library GEMM";
  constexpr int64_t N = 16;
  Builder build = gemm_plan;
  Inputs inputs = [](std::span<const int64_t> z) {
    return std::vector<std::vector<float>>{randn(z[0] * z[1], 11), randn(z[1] * N, 12),
                                           randn(N, 13)};
  };
  const std::vector<std::vector<int64_t>> bindings = {{8, 8},     {2, 2},    {3, 37},  {37, 3},
                                                      {128, 128}, {4099, 5}, {2, 4099}};
  check_bindings(
      build, inputs, {4}, bindings,
      [](auto z, const auto& in, const auto& out) {
        const int64_t m = z[0], k = z[1];
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double acc = 0;
            for (int64_t q = 0; q < k; ++q) acc += double{in[0][i * k + q]} * in[1][q * N + j];
            expect_close(out[0][i * N + j], std::max(0.0, acc + in[2][j]), 1e-4,
                         std::to_string(i) + "," + std::to_string(j));
          }
      },
      /*ulp=*/1 << 20);  // oneDNN may block K differently per shape; the reference decides
}

// One executable, many bindings in any order: the elementwise kernel and a softmax row kernel in
// one plan, run for sizes that grow, shrink and repeat.
TEST(CpuSymbolic, CompileOnceRunMany) {
  auto build = two_kernels_plan;
  auto exe = cpu_backend().compile(build(9, true));
  RunStats stats;
  for (int64_t n : {128, 2, 4099, 2, 37, 128, 3, 4099}) {
    SCOPED_TRACE(n);
    auto xv = randn(4 * n, static_cast<uint32_t>(n));
    auto xb = host(xv);
    auto out =
        read<float>(exe->run_symbolic({{xb.get()}}, &stats, std::vector<int64_t>{n})[1], 4 * n);
    for (int64_t r = 0; r < 4; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < n; ++c) sum += 3.0 * xv[r * n + c];
      for (int64_t c = 0; c < n; ++c)
        expect_close(out[r * n + c], 3.0 * xv[r * n + c] - sum, 1e-4,
                     std::to_string(r) + "," + std::to_string(c));
    }
  }
  EXPECT_EQ(stats.kernel_launches, 16);
}

// A wrong number of symbols, run() without symbols, a too small input for the binding and a
// binding that makes a size negative are lt::Errors; a static plan's run_symbolic takes no symbols.
TEST(CpuSymbolic, BadBindingsAreErrors) {
  auto build = tail_plan;
  auto exe = cpu_backend().compile(build(10, true));
  auto small = host(randn(10, 14));
  const std::vector<RunInput> in = {{small.get()}};
  EXPECT_THROW(exe->run(in, nullptr), Error);
  EXPECT_THROW(exe->run_symbolic(in, nullptr, {}), Error);
  EXPECT_THROW(exe->run_symbolic(in, nullptr, std::vector<int64_t>{10, 3}), Error);
  try {
    exe->run_symbolic(in, nullptr, std::vector<int64_t>{37});
    ADD_FAILURE() << "expected an error for a 10-element input at s0 = 37";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bytes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(exe->run_symbolic(in, nullptr, std::vector<int64_t>{1}), Error);  // s0 - 2 < 0
  auto out = exe->run_symbolic(in, nullptr, std::vector<int64_t>{10});
  auto xv = read<float>(small, 10), ov = read<float>(out[1], 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(ov[i], -xv[i + 2]);
  // The symbolic executable is not stored in the disk cache.
  std::string bytes;
  EXPECT_FALSE(cpu_backend().serialize(*exe, &bytes));
  // A static plan: run_symbolic without symbols is run(); with symbols an error.
  auto st = cpu_backend().compile(build(10, false));
  auto so = st->run_symbolic(in, nullptr, {});
  EXPECT_EQ(read<float>(so[1], 8), ov);
  EXPECT_THROW(st->run_symbolic(in, nullptr, std::vector<int64_t>{10}), Error);
  EXPECT_TRUE(cpu_backend().symbolic_sizes());
}

}  // namespace
}  // namespace lt
