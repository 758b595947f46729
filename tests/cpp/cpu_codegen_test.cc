// The CPU backend's code generator, JIT and thread pool, driven by hand-written loop IR. Every
// expectation is computed here with plain C++ loops (float16 through the compiler's _Float16,
// bfloat16 by a nearest-value search), never with backend code. Casts and 16-bit rounding:
// cpu_codegen_casts_test.cc; the sin/cos load bounds: cpu_codegen_trig_test.cc.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>

#include "backends/backend.h"
#include "backends/cpu/thread_pool.h"
#include "cpu_codegen_util.h"

namespace lt {
namespace {

using namespace cpu_codegen_test;  // NOLINT: the shared test helpers

// out = max((x * y + 1.5) - |x| / (y*y + 1), x) and exp(x) as float64, N odd (vector remainder).
// The pool's default width: LT_NUM_THREADS, else OMP_NUM_THREADS (torchrun's 1 per rank), else
// the cores; values that are not positive integers are skipped.
TEST(CpuThreads, DefaultWidthFollowsLtThenOmpThenTheCores) {
  const char* lt_saved = std::getenv("LT_NUM_THREADS");
  const char* omp_saved = std::getenv("OMP_NUM_THREADS");
  const std::string lt_old = lt_saved ? lt_saved : "", omp_old = omp_saved ? omp_saved : "";
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  ::unsetenv("LT_NUM_THREADS");
  ::unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(cpu::default_num_threads(), cores);
  ::setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(cpu::default_num_threads(), 3);
  ::setenv("LT_NUM_THREADS", "5", 1);
  EXPECT_EQ(cpu::default_num_threads(), 5);
  ::setenv("LT_NUM_THREADS", "zero", 1);
  EXPECT_EQ(cpu::default_num_threads(), 3);
  ::setenv("OMP_NUM_THREADS", "-2", 1);
  EXPECT_EQ(cpu::default_num_threads(), cores);
  if (lt_saved)
    ::setenv("LT_NUM_THREADS", lt_old.c_str(), 1);
  else
    ::unsetenv("LT_NUM_THREADS");
  if (omp_saved)
    ::setenv("OMP_NUM_THREADS", omp_old.c_str(), 1);
  else
    ::unsetenv("OMP_NUM_THREADS");
}

TEST(CpuCodegen, ElementwiseChain1D) {
  const int64_t N = 1003;
  PlanBuilder pb;
  int x = pb.add(K::Input, DType::Float32, N), y = pb.add(K::Input, DType::Float32, N);
  int o = pb.add(K::Output, DType::Float32, N), e = pb.add(K::Output, DType::Float64, N);
  Body b(StageKind::MapOuter);
  auto F = DType::Float32;
  int lx = b.load(F, 0, aff({1})), ly = b.load(F, 1, aff({1}));
  int t = b.op(Op::Add, F, b.op(Op::Mul, F, lx, ly), b.cnst(F, 1.5));
  int d = b.op(Op::Div, F, b.op(Op::Abs, F, lx),
               b.op(Op::Add, F, b.op(Op::Mul, F, ly, ly), b.cnst(F, 1)));
  b.store(2, aff({1}), b.op(Op::Maximum, F, b.op(Op::Sub, F, t, d), lx));
  b.store(3, aff({1}), b.op(Op::Cast, DType::Float64, b.op(Op::Exp, F, lx)));
  pb.kernel({N}, {}, {pb.arg(x), pb.arg(y), pb.arg(o, true), pb.arg(e, true)}, {b.st});
  auto xv = randn(N, 1), yv = randn(N, 2);
  auto out = run(pb.p, {{host(xv).get()}, {host(yv).get()}});
  auto ov = read<float>(out[o], N);
  auto ev = read<double>(out[e], N);
  EXPECT_EQ(out[x], nullptr);
  for (int64_t i = 0; i < N; ++i) {
    float tt = xv[i] * yv[i] + 1.5f, dd = std::fabs(xv[i]) / (yv[i] * yv[i] + 1.f);
    ASSERT_EQ(ov[i], std::max(tt - dd, xv[i])) << i;
    // Vectorized transcendentals come from glibc's libmvec: at most 4 ulp (glibc's documented
    // bound).
    ASSERT_LE(ulps(ev[i], std::exp(xv[i]), true), 4) << i;
  }
}

// out[r, c] = a[r, c] + b[c] * s[r]: zero strides broadcast b along rows and s along columns.
TEST(CpuCodegen, Broadcast2D) {
  const int64_t R = 37, C = 65;
  PlanBuilder pb;
  int a = pb.add(K::Input, DType::Float32, R * C), bb = pb.add(K::Input, DType::Float32, C);
  int s = pb.add(K::Input, DType::Float32, R), o = pb.add(K::Output, DType::Float32, R * C);
  Body b(StageKind::MapOuter);
  auto F = DType::Float32;
  int v = b.op(Op::Add, F, b.load(F, 0, aff({C, 1})),
               b.op(Op::Mul, F, b.load(F, 1, aff({0, 1})), b.load(F, 2, aff({1, 0}))));
  b.store(3, aff({C, 1}), v);
  pb.kernel({R, C}, {}, {pb.arg(a), pb.arg(bb), pb.arg(s), pb.arg(o, true)}, {b.st});
  auto av = randn(R * C, 3), bv = randn(C, 4), sv = randn(R, 5);
  auto out =
      read<float>(run(pb.p, {{host(av).get()}, {host(bv).get()}, {host(sv).get()}})[o], R * C);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c)
      ASSERT_EQ(out[r * C + c], av[r * C + c] + bv[c] * sv[r]) << r << "," << c;
}

// Rows of x[R, M]: sum, max (one row holds a NaN), prod of (1 + x/100), and an epilogue sum / M.
TEST(CpuCodegen, ReduceInnerWithEpilogue) {
  const int64_t R = 40, M = 257;
  PlanBuilder pb;
  auto F = DType::Float32;
  int x = pb.add(K::Input, F, R * M);
  int os = pb.add(K::Output, F, R), om = pb.add(K::Output, F, R), op = pb.add(K::Output, F, R);
  int oe = pb.add(K::Output, DType::Float64, R);
  Body s0(StageKind::Reduce), s1(StageKind::Reduce), s2(StageKind::Reduce), ep(StageKind::MapOuter);
  Stage st0 = s0.reduce(Op::ReduceSum, F, s0.load(F, 0, aff({M, 1})));
  Stage st1 = s1.reduce(Op::ReduceMax, F, s1.load(F, 0, aff({M, 1})));
  int l2 = s2.load(F, 0, aff({M, 1}));
  Stage st2 = s2.reduce(Op::ReduceProd, F,
                        s2.op(Op::Add, F, s2.cnst(F, 1), s2.op(Op::Div, F, l2, s2.cnst(F, 100))));
  int r0 = ep.result(F, 0);
  ep.store(1, aff({1, 0}), r0);
  ep.store(2, aff({1, 0}), ep.result(F, 1));
  ep.store(3, aff({1, 0}), ep.result(F, 2));
  ep.store(4, aff({1, 0}), ep.op(Op::Cast, DType::Float64, ep.op(Op::Div, F, r0, ep.cnst(F, M))));
  pb.kernel({R}, {M},
            {pb.arg(x), pb.arg(os, true), pb.arg(om, true), pb.arg(op, true), pb.arg(oe, true)},
            {st0, st1, st2, ep.st});
  auto xv = randn(R * M, 6, 3.f);
  xv[3 * M + 100] = NAN;
  auto out = run(pb.p, {{host(xv).get()}});
  auto sum = read<float>(out[os], R), mx = read<float>(out[om], R), pr = read<float>(out[op], R);
  auto ev = read<double>(out[oe], R);
  for (int64_t r = 0; r < R; ++r) {
    double es = 0, ep2 = 1;
    float em = -INFINITY;
    bool nan = false;
    for (int64_t c = 0; c < M; ++c) {
      float v = xv[r * M + c];
      es += v;
      ep2 *= 1.f + v / 100.f;
      nan |= std::isnan(v);
      em = std::max(em, v);
    }
    if (nan) {
      EXPECT_TRUE(std::isnan(sum[r]) && std::isnan(mx[r]) && std::isnan(pr[r])) << r;
      continue;
    }
    EXPECT_NEAR(sum[r], es, 1e-4 * (1 + std::fabs(es))) << r;
    EXPECT_EQ(mx[r], em) << r;
    EXPECT_NEAR(pr[r], ep2, 1e-5 * std::fabs(ep2)) << r;
    EXPECT_NEAR(ev[r], es / M, 1e-6) << r;
  }
}

// Integer reductions wrap (int32 sum), take signed max (int8) and unsigned min (uint8).
TEST(CpuCodegen, IntegerReductions) {
  const int64_t R = 9, M = 301;
  PlanBuilder pb;
  int a = pb.add(K::Input, DType::Int32, R * M), b8 = pb.add(K::Input, DType::Int8, R * M);
  int u8 = pb.add(K::Input, DType::UInt8, R * M);
  int o1 = pb.add(K::Output, DType::Int32, R), o2 = pb.add(K::Output, DType::Int8, R);
  int o3 = pb.add(K::Output, DType::UInt8, R);
  Body s0(StageKind::Reduce), s1(StageKind::Reduce), s2(StageKind::Reduce), ep(StageKind::MapOuter);
  Stage st0 = s0.reduce(Op::ReduceSum, DType::Int32, s0.load(DType::Int32, 0, aff({M, 1})));
  Stage st1 = s1.reduce(Op::ReduceMax, DType::Int8, s1.load(DType::Int8, 1, aff({M, 1})));
  Stage st2 = s2.reduce(Op::ReduceMin, DType::UInt8, s2.load(DType::UInt8, 2, aff({M, 1})));
  ep.store(3, aff({1, 0}), ep.result(DType::Int32, 0));
  ep.store(4, aff({1, 0}), ep.result(DType::Int8, 1));
  ep.store(5, aff({1, 0}), ep.result(DType::UInt8, 2));
  pb.kernel(
      {R}, {M},
      {pb.arg(a), pb.arg(b8), pb.arg(u8), pb.arg(o1, true), pb.arg(o2, true), pb.arg(o3, true)},
      {st0, st1, st2, ep.st});
  auto av = randint<int32_t>(R * M, 7, INT32_MIN / 2, INT32_MAX / 2);
  auto bv = randint<int8_t>(R * M, 8, -128, -1);   // all negative: a signed max, not unsigned
  auto uv = randint<uint8_t>(R * M, 9, 100, 255);  // > 127: an unsigned min, not signed
  auto out = run(pb.p, {{host(av).get()}, {host(bv).get()}, {host(uv).get()}});
  auto s = read<int32_t>(out[o1], R);
  auto m = read<int8_t>(out[o2], R);
  auto n = read<uint8_t>(out[o3], R);
  for (int64_t r = 0; r < R; ++r) {
    uint32_t es = 0;
    int8_t em = INT8_MIN;
    uint8_t en = 255;
    for (int64_t c = 0; c < M; ++c) {
      es += static_cast<uint32_t>(av[r * M + c]);
      em = std::max(em, bv[r * M + c]);
      en = std::min(en, uv[r * M + c]);
    }
    EXPECT_EQ(s[r], static_cast<int32_t>(es));
    EXPECT_EQ(m[r], em);
    EXPECT_EQ(n[r], en);
  }
}

// softmax over rows: Reduce max, Reduce sum(exp(x - r0)), MapInner store exp(x - r0) / r1.
TEST(CpuCodegen, SoftmaxKernel) {
  const int64_t R = 33, M = 1000;
  auto F = DType::Float32;
  PlanBuilder pb;
  int x = pb.add(K::Input, F, R * M), o = pb.add(K::Output, F, R * M);
  Body s0(StageKind::Reduce), s1(StageKind::Reduce), s2(StageKind::MapInner);
  Stage st0 = s0.reduce(Op::ReduceMax, F, s0.load(F, 0, aff({M, 1})));
  Stage st1 =
      s1.reduce(Op::ReduceSum, F,
                s1.op(Op::Exp, F, s1.op(Op::Sub, F, s1.load(F, 0, aff({M, 1})), s1.result(F, 0))));
  int e = s2.op(Op::Exp, F, s2.op(Op::Sub, F, s2.load(F, 0, aff({M, 1})), s2.result(F, 0)));
  s2.store(1, aff({M, 1}), s2.op(Op::Div, F, e, s2.result(F, 1)));
  pb.kernel({R}, {M}, {pb.arg(x), pb.arg(o, true)}, {st0, st1, s2.st});
  auto xv = randn(R * M, 10, 5.f);
  auto out = read<float>(run(pb.p, {{host(xv).get()}})[o], R * M);
  for (int64_t r = 0; r < R; ++r) {
    double mx = -kInf, sum = 0;
    for (int64_t c = 0; c < M; ++c) mx = std::max(mx, static_cast<double>(xv[r * M + c]));
    for (int64_t c = 0; c < M; ++c) sum += std::exp(xv[r * M + c] - mx);
    for (int64_t c = 0; c < M; ++c) {
      double want = std::exp(xv[r * M + c] - mx) / sum;
      ASSERT_NEAR(out[r * M + c], want, 1e-7 + 1e-5 * want) << r << "," << c;
    }
  }
}

// layer_norm's shape (sum, sum of squared deviations, normalize) on rows long enough to be
// pipelined (codegen.cc emit_pipelined_rows: row i + 1's sum runs inside row i's last loop), for
// row counts and thread counts that give chunks of one row, ragged chunks and one chunk.
TEST(CpuCodegen, PipelinedRowsMatchFloat64ForEveryChunking) {
  const int64_t M = 300;
  auto F = DType::Float32;
  auto& pool = cpu::ThreadPool::global();
  const int saved = pool.num_threads();
  for (int64_t R : {1, 2, 5, 67}) {
    PlanBuilder pb;
    int x = pb.add(K::Input, F, R * M), o = pb.add(K::Output, F, R * M);
    Body s0(StageKind::Reduce), s1(StageKind::Reduce), s2(StageKind::MapInner);
    Stage st0 = s0.reduce(Op::ReduceSum, F, s0.load(F, 0, aff({M, 1})));
    int d1 = s1.op(Op::Sub, F, s1.load(F, 0, aff({M, 1})),
                   s1.op(Op::Mul, F, s1.result(F, 0), s1.cnst(F, 1.0 / M)));
    Stage st1 = s1.reduce(Op::ReduceSum, F, s1.op(Op::Mul, F, d1, d1));
    int d2 = s2.op(Op::Sub, F, s2.load(F, 0, aff({M, 1})),
                   s2.op(Op::Mul, F, s2.result(F, 0), s2.cnst(F, 1.0 / M)));
    s2.store(1, aff({M, 1}), s2.op(Op::Div, F, d2, s2.op(Op::Sqrt, F, s2.result(F, 1))));
    pb.kernel({R}, {M}, {pb.arg(x), pb.arg(o, true)}, {st0, st1, s2.st});
    auto xv = randn(R * M, 40 + static_cast<uint32_t>(R), 3.f);
    for (int64_t i = 0; i < R * M; ++i) xv[i] += static_cast<float>(i / M);  // rows differ
    for (int threads : {1, 3}) {
      pool.set_num_threads(threads);
      auto out = read<float>(run(pb.p, {{host(xv).get()}})[o], R * M);
      for (int64_t r = 0; r < R; ++r) {
        double mean = 0, ss = 0;
        for (int64_t c = 0; c < M; ++c) mean += xv[r * M + c];
        mean /= M;
        for (int64_t c = 0; c < M; ++c) ss += (xv[r * M + c] - mean) * (xv[r * M + c] - mean);
        for (int64_t c = 0; c < M; ++c) {
          double want = (xv[r * M + c] - mean) / std::sqrt(ss);
          ASSERT_NEAR(out[r * M + c], want, 1e-5)
              << R << " rows, " << threads << " threads, at " << r << "," << c;
        }
      }
    }
  }
  pool.set_num_threads(saved);
}

// A transpose through a non-affine index: out[v] = in[(v % R) * C + v / R].
TEST(CpuCodegen, GeneralIndexFloorDivMod) {
  const int64_t R = 23, C = 41;
  using E = loop::IExpr::Kind;
  std::vector<loop::IExpr> ix = {{E::Var, 0},      {E::Const, R},     {E::Mod, 0, 0, 1},
                                 {E::Const, C},    {E::Mul, 0, 2, 3}, {E::FloorDiv, 0, 0, 1},
                                 {E::Add, 0, 4, 5}};
  PlanBuilder pb;
  int in = pb.add(K::Input, DType::Int64, R * C), o = pb.add(K::Output, DType::Int64, R * C);
  Body b(StageKind::MapOuter);
  b.store(1, aff({1}), b.load(DType::Int64, 0, general(6)));
  pb.kernel({R * C}, {}, {pb.arg(in), pb.arg(o, true)}, {b.st}, ix);
  auto v = randint<int64_t>(R * C, 11, INT64_MIN, INT64_MAX);
  auto out = read<int64_t>(run(pb.p, {{host(v).get()}})[o], R * C);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t r = 0; r < R; ++r) ASSERT_EQ(out[c * R + r], v[r * C + c]);
}

// Runtime scalars: float32 from RunInput::scalar, int64 from scalar_i (beyond 2^53), float16.
// One executable, two sets of values: the scalars are not baked in.
TEST(CpuCodegen, ScalarArgs) {
  const int64_t N = 100;
  PlanBuilder pb;
  int x = pb.add(K::Input, DType::Float32, N), s = pb.add(K::Scalar, DType::Float32, 1);
  int y = pb.add(K::Input, DType::Int64, N), k = pb.add(K::Scalar, DType::Int64, 1);
  int h = pb.add(K::Scalar, DType::Float16, 1);
  int o1 = pb.add(K::Output, DType::Float32, N), o2 = pb.add(K::Output, DType::Int64, N);
  int o3 = pb.add(K::Output, DType::Float16, N);
  Body b(StageKind::MapOuter);
  b.store(5, aff({1}),
          b.op(Op::Mul, DType::Float32, b.load(DType::Float32, 0, aff({1})),
               b.scalar(DType::Float32, 1)));
  b.store(
      6, aff({1}),
      b.op(Op::Add, DType::Int64, b.load(DType::Int64, 2, aff({1})), b.scalar(DType::Int64, 3)));
  b.store(7, aff({1}),
          b.op(Op::Cast, DType::Float16,
               b.op(Op::Mul, DType::Float32, b.load(DType::Float32, 0, aff({1})),
                    b.op(Op::Cast, DType::Float32, b.scalar(DType::Float16, 4)))));
  pb.kernel({N}, {},
            {pb.arg(x), pb.arg(s), pb.arg(y), pb.arg(k), pb.arg(h), pb.arg(o1, true),
             pb.arg(o2, true), pb.arg(o3, true)},
            {b.st});
  auto exe = cpu_backend().compile(completed(pb.p));
  auto xv = randn(N, 17);
  auto yv = randint<int64_t>(N, 18, -1000000, 1000000);
  auto xb = host(xv), yb = host(yv);
  for (auto [sv, kv, hv] :
       {std::tuple{2.5, (int64_t{1} << 60) + 3, 0.1}, std::tuple{-0.375, int64_t{-7}, 3.0}}) {
    std::vector<RunInput> in(5);
    in[0].buffer = xb.get();
    in[1].scalar = sv;
    in[2].buffer = yb.get();
    in[3].scalar_i = kv;
    in[4].scalar = hv;
    auto out = exe->run(in, nullptr);
    auto r1 = read<float>(out[o1], N);
    auto r2 = read<int64_t>(out[o2], N);
    auto r3 = read<uint16_t>(out[o3], N);
    for (int64_t i = 0; i < N; ++i) {
      ASSERT_EQ(r1[i], xv[i] * static_cast<float>(sv));
      ASSERT_EQ(r2[i], yv[i] + kv);
      ASSERT_EQ(r3[i], f16_bits(xv[i] * f16_value(f16_bits(static_cast<float>(hv)))));
    }
  }
}

// RandUniform equals loop::rand_uniform bit for bit (float32, float64 and float16 results).
TEST(CpuCodegen, RandUniformMatchesSpec) {
  const int64_t R = 13, C = 257;
  PlanBuilder pb;
  int seed = pb.add(K::Scalar, DType::Int64, 1), off = pb.add(K::Scalar, DType::Int64, 1);
  int o32 = pb.add(K::Output, DType::Float32, R * C),
      o64 = pb.add(K::Output, DType::Float64, R * C);
  int o16 = pb.add(K::Output, DType::Float16, R * C);
  Body b(StageKind::MapOuter);
  int sd = b.scalar(DType::Int64, 0), of = b.scalar(DType::Int64, 1);
  b.store(2, aff({C, 1}), b.rand(DType::Float32, sd, of, aff({C, 1}, 5), 1));
  b.store(3, aff({C, 1}), b.rand(DType::Float64, sd, of, aff({C, 1}, 5), 0));
  b.store(4, aff({C, 1}), b.rand(DType::Float16, sd, of, aff({C, 1}), 3));
  pb.kernel({R, C}, {},
            {pb.arg(seed), pb.arg(off), pb.arg(o32, true), pb.arg(o64, true), pb.arg(o16, true)},
            {b.st});
  for (int64_t sv : {int64_t{0x123456789abcdef}, int64_t{-42}}) {
    std::vector<RunInput> in(2);
    in[0].scalar_i = sv;
    in[1].scalar_i = 1000;
    auto out = run(pb.p, in);
    auto r32 = read<float>(out[o32], R * C);
    auto r64 = read<double>(out[o64], R * C);
    auto r16 = read<uint16_t>(out[o16], R * C);
    for (int64_t i = 0; i < R * C; ++i) {
      float w32 = static_cast<float>(loop::rand_uniform(sv, 1000, i + 5, 1, DType::Float32));
      double w64 = loop::rand_uniform(sv, 1000, i + 5, 0, DType::Float64);
      float w16 = static_cast<float>(loop::rand_uniform(sv, 1000, i, 3, DType::Float16));
      ASSERT_EQ(std::memcmp(&r32[i], &w32, 4), 0) << i;
      ASSERT_EQ(std::memcmp(&r64[i], &w64, 8), 0) << i;
      ASSERT_EQ(r16[i], f16_bits(w16)) << i;
    }
  }
}

// Unary ops against the C library on float32 and float64 (<= 1 ulp), neg/abs on integers.
TEST(CpuCodegen, UnaryOps) {
  const Op ops[] = {Op::Neg,  Op::Exp, Op::Log, Op::Sqrt,  Op::Sin,  Op::Cos,
                    Op::Tanh, Op::Erf, Op::Abs, Op::Floor, Op::Recip};
  const int64_t N = 515;
  auto xv = randn(N, 19, 4.f);
  xv[0] = NAN, xv[1] = INFINITY, xv[2] = -0.f, xv[3] = -2.5f;
  std::vector<double> xd(xv.begin(), xv.end());
  for (DType t : {DType::Float32, DType::Float64}) {
    for (Op op : ops) {
      PlanBuilder pb;
      int x = pb.add(K::Input, t, N), o = pb.add(K::Output, t, N);
      Body b(StageKind::MapOuter);
      b.store(1, aff({1}), b.op(op, t, b.load(t, 0, aff({1}))));
      pb.kernel({N}, {}, {pb.arg(x), pb.arg(o, true)}, {b.st});
      const bool f = t == DType::Float32;
      auto out = run(pb.p, {{f ? host(xv).get() : host(xd).get()}})[o];
      for (int64_t i = 0; i < N; ++i) {
        double got = f ? read<float>(out, N)[i] : read<double>(out, N)[i];
        auto ref = [&](auto v) -> double {
          using T = decltype(v);
          switch (op) {
            case Op::Neg:
              return -v;
            case Op::Exp:
              return std::exp(v);
            case Op::Log:
              return std::log(v);
            case Op::Sqrt:
              return std::sqrt(v);
            case Op::Sin:
              return std::sin(v);
            case Op::Cos:
              return std::cos(v);
            case Op::Tanh:
              return std::tanh(v);
            case Op::Erf:
              return std::erf(v);
            case Op::Abs:
              return std::fabs(v);
            case Op::Floor:
              return std::floor(v);
            default:
              return T(1) / v;
          }
        };
        double want = f ? ref(xv[i]) : ref(xd[i]);
        // Transcendentals may run through libmvec (at most 4 ulp); the rest are exactly rounded.
        const bool vec_math = op == Op::Exp || op == Op::Log || op == Op::Sin || op == Op::Cos ||
                              op == Op::Tanh || op == Op::Erf;
        ASSERT_LE(ulps(got, want, f), vec_math ? 4 : 1)
            << op_name(op) << " " << dtype_name(t) << " of " << xd[i] << ": " << got << " vs "
            << want;
      }
    }
  }
  PlanBuilder pb;  // integers: neg and abs wrap at the minimum
  int x = pb.add(K::Input, DType::Int8, 4), o1 = pb.add(K::Output, DType::Int8, 4),
      o2 = pb.add(K::Output, DType::Int8, 4);
  Body b(StageKind::MapOuter);
  int l = b.load(DType::Int8, 0, aff({1}));
  b.store(1, aff({1}), b.op(Op::Neg, DType::Int8, l));
  b.store(2, aff({1}), b.op(Op::Abs, DType::Int8, l));
  pb.kernel({4}, {}, {pb.arg(x), pb.arg(o1, true), pb.arg(o2, true)}, {b.st});
  auto out = run(pb.p, {{host(std::vector<int8_t>{-128, -5, 0, 127}).get()}});
  EXPECT_EQ(read<int8_t>(out[o1], 4), (std::vector<int8_t>{-128, 5, 0, -127}));
  EXPECT_EQ(read<int8_t>(out[o2], 4), (std::vector<int8_t>{-128, 5, 0, 127}));
}

// Binary/compare/logical/where semantics: NaN in comparisons and maximum/minimum, integer
// wrap-around, signed vs unsigned max/min.
TEST(CpuCodegen, BinaryCompareLogicalWhere) {
  std::vector<float> a = {1, NAN, 2, -0.f, 3, NAN, -INFINITY, 5};
  std::vector<float> c = {1, 1, NAN, 0.f, 4, NAN, 7, -5};
  const int64_t N = static_cast<int64_t>(a.size());
  const Op cmps[] = {Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge};
  PlanBuilder pb;
  auto F = DType::Float32, B = DType::Bool;
  int xa = pb.add(K::Input, F, N), xc = pb.add(K::Input, F, N);
  std::vector<loop::Arg> args = {pb.arg(xa), pb.arg(xc)};
  Body b(StageKind::MapOuter);
  int la = b.load(F, 0, aff({1})), lc = b.load(F, 1, aff({1}));
  std::vector<int> outs;
  auto out = [&](DType t, int v) {
    outs.push_back(pb.add(K::Output, t, N));
    args.push_back(pb.arg(outs.back(), true));
    b.store(static_cast<int>(args.size()) - 1, aff({1}), v);
  };
  for (Op op : cmps) out(B, b.op(op, B, la, lc));
  out(F, b.op(Op::Maximum, F, la, lc));
  out(F, b.op(Op::Minimum, F, la, lc));
  int lt = b.op(Op::Lt, B, la, lc), ne = b.op(Op::Ne, B, la, lc);
  out(B, b.op(Op::And, B, lt, ne));
  out(B, b.op(Op::Or, B, lt, b.op(Op::Not, B, ne)));
  out(F, b.op(Op::Where, F, lt, la, lc));
  pb.kernel({N}, {}, args, {b.st});
  auto r = run(pb.p, {{host(a).get()}, {host(c).get()}});
  for (int64_t i = 0; i < N; ++i) {
    const float x = a[i], y = c[i];
    bool want[] = {x == y, x != y, x<y, x <= y, x> y, x >= y};
    for (int k = 0; k < 6; ++k)
      EXPECT_EQ(read<uint8_t>(r[outs[k]], N)[i], want[k] ? 1 : 0) << op_name(cmps[k]) << i;
    bool nan = std::isnan(x) || std::isnan(y);
    float mx = read<float>(r[outs[6]], N)[i], mn = read<float>(r[outs[7]], N)[i];
    if (nan)
      EXPECT_TRUE(std::isnan(mx) && std::isnan(mn)) << i;
    else
      EXPECT_TRUE(mx == std::max(x, y) && mn == std::min(x, y)) << i;
    EXPECT_EQ(read<uint8_t>(r[outs[8]], N)[i], (x < y) && (x != y));
    EXPECT_EQ(read<uint8_t>(r[outs[9]], N)[i], (x < y) || !(x != y));
    float w = read<float>(r[outs[10]], N)[i], ww = x < y ? x : y;
    EXPECT_TRUE(w == ww || (std::isnan(w) && std::isnan(ww))) << i;
  }
  // Integers: int8 add/mul wrap; uint8 max is unsigned, int32 min is signed.
  PlanBuilder ib;
  int i8 = ib.add(K::Input, DType::Int8, 4), u8 = ib.add(K::Input, DType::UInt8, 4),
      i32 = ib.add(K::Input, DType::Int32, 4);
  int s = ib.add(K::Output, DType::Int8, 4), m = ib.add(K::Output, DType::Int8, 4),
      um = ib.add(K::Output, DType::UInt8, 4);
  int sm = ib.add(K::Output, DType::Int32, 4);
  Body ibd(StageKind::MapOuter);
  int l8 = ibd.load(DType::Int8, 0, aff({1})), lu = ibd.load(DType::UInt8, 1, aff({1}));
  int l32 = ibd.load(DType::Int32, 2, aff({1}));
  ibd.store(3, aff({1}), ibd.op(Op::Add, DType::Int8, l8, l8));
  ibd.store(4, aff({1}), ibd.op(Op::Mul, DType::Int8, l8, ibd.cnst(DType::Int8, 3)));
  ibd.store(5, aff({1}), ibd.op(Op::Maximum, DType::UInt8, lu, ibd.cnst(DType::UInt8, 100)));
  ibd.store(6, aff({1}), ibd.op(Op::Minimum, DType::Int32, l32, ibd.cnst(DType::Int32, 0)));
  ib.kernel({4}, {},
            {ib.arg(i8), ib.arg(u8), ib.arg(i32), ib.arg(s, true), ib.arg(m, true),
             ib.arg(um, true), ib.arg(sm, true)},
            {ibd.st});
  auto ir = run(ib.p, {{host(std::vector<int8_t>{100, -100, 7, -128}).get()},
                       {host(std::vector<uint8_t>{200, 5, 100, 255}).get()},
                       {host(std::vector<int32_t>{-5, 5, INT32_MIN, INT32_MAX}).get()}});
  EXPECT_EQ(read<int8_t>(ir[s], 4), (std::vector<int8_t>{-56, 56, 14, 0}));
  EXPECT_EQ(read<int8_t>(ir[m], 4), (std::vector<int8_t>{44, -44, 21, -128}));
  EXPECT_EQ(read<uint8_t>(ir[um], 4), (std::vector<uint8_t>{200, 100, 100, 255}));
  EXPECT_EQ(read<int32_t>(ir[sm], 4), (std::vector<int32_t>{-5, 0, INT32_MIN, 0}));
}

// Two kernels through a Temp buffer; edge shapes: a 0-d full reduction, an empty inner extent
// (sum 0, prod 1), an empty output.
TEST(CpuCodegen, TempsAndEdgeShapes) {
  const int64_t N = 1000;
  auto F = DType::Float32;
  PlanBuilder pb;
  int x = pb.add(K::Input, F, N), t = pb.add(K::Temp, F, N), o = pb.add(K::Output, F, 1);
  int e = pb.add(K::Input, F, 0), es = pb.add(K::Output, F, 5), ep = pb.add(K::Output, F, 5);
  int z = pb.add(K::Output, F, 0);
  Body k1(StageKind::MapOuter);
  k1.store(1, aff({1}), k1.op(Op::Mul, F, k1.load(F, 0, aff({1})), k1.cnst(F, 2)));
  pb.kernel({N}, {}, {pb.arg(x), pb.arg(t, true)}, {k1.st});
  Body r(StageKind::Reduce), st(StageKind::MapOuter);
  Stage rs = r.reduce(Op::ReduceSum, F, r.load(F, 0, aff({1})));
  st.store(1, aff({}), st.result(F, 0));
  pb.kernel({}, {N}, {pb.arg(t), pb.arg(o, true)}, {rs, st.st});
  Body s0(StageKind::Reduce), s1(StageKind::Reduce), s2(StageKind::MapOuter);
  Stage a0 = s0.reduce(Op::ReduceSum, F, s0.load(F, 0, aff({0, 1})));
  Stage a1 = s1.reduce(Op::ReduceProd, F, s1.load(F, 0, aff({0, 1})));
  s2.store(1, aff({1, 0}), s2.result(F, 0));
  s2.store(2, aff({1, 0}), s2.result(F, 1));
  pb.kernel({5}, {0}, {pb.arg(e), pb.arg(es, true), pb.arg(ep, true)}, {a0, a1, s2.st});
  Body zz(StageKind::MapOuter);
  zz.store(0, aff({1}), zz.cnst(F, 1));
  pb.kernel({0}, {}, {pb.arg(z, true)}, {zz.st});
  auto xv = randn(N, 20);
  auto out = run(pb.p, {{host(xv).get()}, {host(std::vector<float>{}).get()}});
  EXPECT_EQ(out[t], nullptr);
  double want = 0;
  for (float v : xv) want += 2.0 * v;
  EXPECT_NEAR(read<float>(out[o], 1)[0], want, 1e-3);
  EXPECT_EQ(read<float>(out[es], 5), std::vector<float>(5, 0.f));
  EXPECT_EQ(read<float>(out[ep], 5), std::vector<float>(5, 1.f));
  EXPECT_EQ(out[z]->bytes(), 0u);
}

TEST(CpuCodegen, UnsupportedThrowsNotImplemented) {
  PlanBuilder pb;
  int x = pb.add(K::Input, DType::Int32, 4), o = pb.add(K::Output, DType::Int32, 4);
  Body b(StageKind::MapOuter);
  int l = b.load(DType::Int32, 0, aff({1}));
  b.store(1, aff({1}), b.op(Op::Div, DType::Int32, l, l));
  pb.kernel({4}, {}, {pb.arg(x), pb.arg(o, true)}, {b.st});
  try {
    cpu_backend().compile(completed(pb.p));
    FAIL() << "expected lt::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotImplemented);
    EXPECT_NE(std::string(e.what()).find("on cpu"), std::string::npos) << e.what();
  }
  pb.p.kernels[0].stages[0].body[1].op = Op::Reshape;
  EXPECT_THROW(cpu_backend().compile(completed(pb.p)), Error);
}

// A plan big enough for the thread pool, with rows split across chunks (outer [7, 3, 1001],
// permuted input) and a reduction; threaded results equal single-threaded ones bit for bit,
// also when several threads run the executable at once.
TEST(CpuCodegen, ThreadedEqualsSingleThreaded) {
  const int64_t A = 7, B = 3, C = 1001, R = 4096, M = 64;
  auto F = DType::Float32;
  PlanBuilder pb;
  int x = pb.add(K::Input, F, A * B * C), o = pb.add(K::Output, F, A * B * C);
  int y = pb.add(K::Input, F, R * M), s = pb.add(K::Output, F, R);
  Body b(StageKind::MapOuter);  // out[a, b, c] = sin(x[c, a, b]) * 3
  b.store(1, aff({B * C, C, 1}),
          b.op(Op::Mul, F, b.op(Op::Sin, F, b.load(F, 0, aff({B, 1, A * B}))), b.cnst(F, 3)));
  pb.kernel({A, B, C}, {}, {pb.arg(x), pb.arg(o, true)}, {b.st});
  Body r(StageKind::Reduce), e(StageKind::MapOuter);
  Stage rs = r.reduce(Op::ReduceSum, F, r.op(Op::Exp, F, r.load(F, 0, aff({M, 1}))));
  e.store(1, aff({1, 0}), e.op(Op::Log, F, e.result(F, 0)));
  pb.kernel({R}, {M}, {pb.arg(y), pb.arg(s, true)}, {rs, e.st});
  auto exe = cpu_backend().compile(completed(pb.p));
  auto xv = randn(A * B * C, 21), yv = randn(R * M, 22);
  auto xb = host(xv), yb = host(yv);
  auto& pool = cpu::ThreadPool::global();
  const int saved = pool.num_threads();
  pool.set_num_threads(1);
  auto one = exe->run({{xb.get()}, {yb.get()}}, nullptr);
  pool.set_num_threads(4);
  EXPECT_EQ(pool.num_threads(), 4);
  auto four = exe->run({{xb.get()}, {yb.get()}}, nullptr);
  for (int id : {o, s}) {
    ASSERT_EQ(one[id]->bytes(), four[id]->bytes());
    EXPECT_EQ(std::memcmp(one[id]->data(), four[id]->data(), one[id]->bytes()), 0) << id;
  }
  auto ov = read<float>(one[o], A * B * C);
  for (int64_t a = 0; a < A; ++a)
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t c = 0; c < C; ++c)
        ASSERT_LE(ulps(ov[(a * B + bb) * C + c], std::sin(xv[(c * A + a) * B + bb]) * 3.f, true), 4)
            << a << bb << c;
  std::vector<std::thread> ts;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        auto r2 = exe->run({{xb.get()}, {yb.get()}}, nullptr);
        ok[t] += std::memcmp(r2[s]->data(), one[s]->data(), R * 4) == 0 &&
                 std::memcmp(r2[o]->data(), one[o]->data(), A * B * C * 4) == 0;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok, std::vector<int>(4, 10));
  pool.set_num_threads(saved);
}

TEST(CpuCodegen, ThreadPoolCoversRangeAndNests) {
  cpu::ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(100003);
  pool.parallel_for(3, 100003, 1000, 16, [&](int64_t lo, int64_t hi) {
    EXPECT_TRUE(lo == 3 || (lo - 3) % 16 == 0);
    // Re-entrant use runs inline instead of deadlocking.
    pool.parallel_for(lo, hi, 1, 1, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) hits[i]++;
    });
  });
  for (int64_t i = 0; i < 100003; ++i) ASSERT_EQ(hits[i].load(), i >= 3 ? 1 : 0) << i;
  EXPECT_THROW(pool.parallel_for(0, 100000, 10, 1,
                                 [](int64_t lo, int64_t) {
                                   if (lo > 50000) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
}

// Workers poll for the next job for a while before they block, and the caller polls for them to
// finish (thread_pool.cc): jobs handed off back to back (workers still polling), after a pause
// past the poll window (workers blocked on the condition variable), with more workers than
// cores, and a pool destroyed while its workers poll, each cover their range exactly once. Run
// under ThreadSanitizer by make test-tsan.
TEST(CpuCodegen, ThreadPoolHandsOffJobsWhetherWorkersPollOrBlock) {
  std::mt19937 rng(5);
  for (int threads : {2, 3, 5}) {
    cpu::ThreadPool pool(threads);
    std::vector<int> hits(5000);
    for (int job = 0; job < 300; ++job) {
      if (job % 50 == 49) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const int64_t begin = static_cast<int64_t>(rng() % 100);
      const int64_t end = begin + static_cast<int64_t>(rng() % 4900);
      std::fill(hits.begin(), hits.end(), 0);
      pool.parallel_for(begin, end, 1 + static_cast<int64_t>(rng() % 64), 1 + rng() % 8,
                        [&](int64_t lo, int64_t hi) {
                          for (int64_t i = lo; i < hi; ++i) hits[static_cast<size_t>(i)]++;
                        });
      for (int64_t i = 0; i < 5000; ++i)
        ASSERT_EQ(hits[static_cast<size_t>(i)], i >= begin && i < end ? 1 : 0)
            << "job " << job << " of [" << begin << ", " << end << ") at " << i << ", " << threads
            << " threads";
    }
  }
  for (int i = 0; i < 20; ++i) {  // destroyed right after a job, while its workers poll
    cpu::ThreadPool pool(3);
    std::atomic<int64_t> sum{0};
    pool.parallel_for(0, 1000, 1, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) sum += k;
    });
    EXPECT_EQ(sum.load(), 999 * 1000 / 2);
  }
}

// With cpu_share_openmp_threads() the pool's chunks run on the process's OpenMP team (the one
// oneDNN's GEMMs use; thread_pool.h): each covers its range once, inside a parallel region of
// the pool's size, nesting runs inline and a chunk's exception reaches the caller. Not under
// ThreadSanitizer (its filter is CpuCodegen.Thread*): libgomp's barriers are not instrumented.
TEST(CpuCodegen, OpenMpTeamRunsThePoolsChunksWhenShared) {
  using OmpInt = int (*)();
  auto omp_num_threads = reinterpret_cast<OmpInt>(dlsym(RTLD_DEFAULT, "omp_get_num_threads"));
  if (!omp_num_threads || !dlsym(RTLD_DEFAULT, "GOMP_parallel"))
    GTEST_SKIP() << "no OpenMP runtime in this process (a build without oneDNN)";
  struct Restore {
    ~Restore() { set_cpu_share_openmp_threads(false); }
  } restore;
  set_cpu_share_openmp_threads(true);
  cpu::ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(100003);
  std::atomic<int> team_size{0};
  pool.parallel_for(3, 100003, 1000, 16, [&](int64_t lo, int64_t hi) {
    team_size = omp_num_threads();
    pool.parallel_for(lo, hi, 1, 1, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) hits[i]++;
    });
  });
  EXPECT_EQ(team_size.load(), 2);
  for (int64_t i = 0; i < 100003; ++i) ASSERT_EQ(hits[i].load(), i >= 3 ? 1 : 0) << i;
  EXPECT_THROW(pool.parallel_for(0, 100000, 10, 1,
                                 [](int64_t lo, int64_t) {
                                   if (lo > 50000) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  set_cpu_share_openmp_threads(false);
  pool.parallel_for(0, 100000, 10, 1, [&](int64_t, int64_t) { team_size = omp_num_threads(); });
  EXPECT_EQ(team_size.load(), 1);  // the pool's own workers again, outside any OpenMP region
}

// The optimized IR of a contiguous float32 elementwise kernel is vectorized.
TEST(CpuCodegen, ElementwiseKernelIsVectorized) {
  const int64_t R = 64, C = 128;
  auto F = DType::Float32;
  PlanBuilder pb;
  int a = pb.add(K::Input, F, R * C), b = pb.add(K::Input, F, R * C),
      o = pb.add(K::Output, F, R * C);
  Body bd(StageKind::MapOuter);
  bd.store(2, aff({C, 1}),
           bd.op(Op::Add, F, bd.op(Op::Mul, F, bd.load(F, 0, aff({C, 1})), bd.cnst(F, 2)),
                 bd.load(F, 1, aff({C, 1}))));
  pb.kernel({R, C}, {}, {pb.arg(a), pb.arg(b), pb.arg(o, true)}, {bd.st});
  auto t0 = std::chrono::steady_clock::now();
  auto exe = cpu_backend().compile(completed(pb.p));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ info ] compile of a fused elementwise kernel: %.1f ms (%s)\n", secs * 1e3,
              cpu::jit_target_description().c_str());
  ASSERT_EQ(exe->num_kernels(), 1);
  auto src = exe->kernel_sources();
  ASSERT_EQ(src.size(), 1u);
  EXPECT_TRUE(src[0].find("<4 x float>") != std::string::npos ||
              src[0].find("<8 x float>") != std::string::npos ||
              src[0].find("<16 x float>") != std::string::npos)
      << src[0];
}

// Compiling and dropping many plans unloads their code: the live JITDylib count returns.
TEST(CpuCodegen, DroppedExecutablesFreeTheirCode) {
  auto F = DType::Float32;
  PlanBuilder pb;
  int x = pb.add(K::Input, F, 8), o = pb.add(K::Output, F, 8);
  Body b(StageKind::MapOuter);
  b.store(1, aff({1}), b.op(Op::Add, F, b.load(F, 0, aff({1})), b.cnst(F, 1)));
  pb.kernel({8}, {}, {pb.arg(x), pb.arg(o, true)}, {b.st});
  auto xb = host(std::vector<float>(8, 2.f));
  cpu_backend().compile(completed(pb.p));  // JIT set up before the baseline
  const auto before = cpu::jit_stats();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) {
    auto exe = cpu_backend().compile(completed(pb.p));
    auto out = exe->run({{xb.get()}}, nullptr);
    ASSERT_EQ(read<float>(out[o], 8)[7], 3.f);
    ASSERT_EQ(cpu::jit_stats().live_dylibs, before.live_dylibs + 1);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ info ] warm compile of a one-op kernel: %.1f ms\n", secs * 1e3 / 200);
  const auto after = cpu::jit_stats();
  EXPECT_EQ(after.live_dylibs, before.live_dylibs);
  EXPECT_EQ(after.created_dylibs, before.created_dylibs + 200);
}

}  // namespace
}  // namespace lt
