// The reference interpreter and ir/half.h, on hand-built prim graphs. Expectations are computed
// here with plain loops and <cmath>, never with the interpreter's own helpers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "backends/reference/reference_backend.h"
#include "ir/error.h"
#include "ir/half.h"
#include "lowering/loop_ir.h"

namespace lt {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInfinity = std::numeric_limits<double>::infinity();

// Builds a prim graph by hand.
struct Builder {
  PrimGraph g;
  int add(Op op, DType t, Shape s, std::vector<int> in = {}, Attrs a = {}, int input = -1) {
    g.nodes.push_back(PNode{op, t, std::move(s), std::move(a), std::move(in), input});
    return static_cast<int>(g.nodes.size()) - 1;
  }
  int param(DType t, Shape s, int input) { return add(Op::Param, t, std::move(s), {}, {}, input); }
  int scalar(DType t, int input) { return add(Op::Scalar, t, {}, {}, {}, input); }
  int op(Op op, DType t, Shape s, std::vector<int> in, Attrs a = {}) {
    return add(op, t, std::move(s), std::move(in), a);
  }
};

template <class T>
BufferPtr buf(const std::vector<T>& v) {
  auto b = std::make_shared<HostBuffer>(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b->data(), v.data(), v.size() * sizeof(T));
  return b;
}

template <class T>
std::vector<T> read(const BufferPtr& b) {
  std::vector<T> v(b->bytes() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b->data(), b->bytes());
  return v;
}

// Runs `outputs` of the graph through the backend's Executable; one Output buffer per output.
std::vector<BufferPtr> run(Builder& b, std::vector<int> outputs,
                           const std::vector<RunInput>& inputs) {
  Plan plan;
  plan.prims = b.g;
  plan.prims.outputs = outputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const PNode& n = b.g.nodes.at(outputs[i]);
    plan.buffers.push_back({BufferSpec::Kind::Output, n.dtype, numel(n.shape)});
    plan.output_buffers.push_back(static_cast<int>(i));
  }
  RunStats stats;
  auto exe = make_reference_backend()->compile(plan);
  EXPECT_EQ(exe->num_kernels(), 0);
  auto out = exe->run(inputs, &stats);
  EXPECT_EQ(stats.kernel_launches, 0);
  return out;
}

std::vector<float> randf(size_t n, uint32_t seed, float lo = -3.f, float hi = 3.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

RunInput in(const BufferPtr& b) { return RunInput{b.get()}; }

TEST(ReferenceTest, BroadcastAdd) {
  Builder b;
  int x = b.param(DType::Float32, {3, 1}, 0), y = b.param(DType::Float32, {4}, 1);
  int z = b.op(Op::Add, DType::Float32, {3, 4}, {x, y});
  auto xv = randf(3, 1), yv = randf(4, 2);
  auto bx = buf(xv), by = buf(yv);
  auto got = read<float>(run(b, {z}, {in(bx), in(by)})[0]);
  ASSERT_EQ(got.size(), 12u);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(got[i * 4 + j], xv[i] + yv[j]) << i << "," << j;
}

TEST(ReferenceTest, UnaryOpsMatchCmath) {
  struct Case {
    Op op;
    double (*f)(double);
    bool positive;
  };
  const Case cases[] = {{Op::Neg, [](double x) { return -x; }, false},
                        {Op::Exp, [](double x) { return std::exp(x); }, false},
                        {Op::Log, [](double x) { return std::log(x); }, true},
                        {Op::Sqrt, [](double x) { return std::sqrt(x); }, true},
                        {Op::Sin, [](double x) { return std::sin(x); }, false},
                        {Op::Cos, [](double x) { return std::cos(x); }, false},
                        {Op::Tanh, [](double x) { return std::tanh(x); }, false},
                        {Op::Erf, [](double x) { return std::erf(x); }, false},
                        {Op::Abs, [](double x) { return std::fabs(x); }, false},
                        {Op::Floor, [](double x) { return std::floor(x); }, false},
                        {Op::Recip, [](double x) { return 1.0 / x; }, false}};
  for (const Case& c : cases) {
    auto xf = randf(64, 7 + static_cast<uint32_t>(c.op), c.positive ? 0.01f : -4.f, 4.f);
    std::vector<double> xd(xf.begin(), xf.end());
    for (auto& v : xd) v *= 1.0 + 1e-9;  // not representable in float32
    Builder b;
    int p32 = b.param(DType::Float32, {8, 8}, 0), p64 = b.param(DType::Float64, {64}, 1);
    int y32 = b.op(c.op, DType::Float32, {8, 8}, {p32}),
        y64 = b.op(c.op, DType::Float64, {64}, {p64});
    auto bx = buf(xf), bd = buf(xd);
    auto out = run(b, {y32, y64}, {in(bx), in(bd)});
    auto g32 = read<float>(out[0]);
    auto g64 = read<double>(out[1]);
    for (size_t i = 0; i < 64; ++i) {
      EXPECT_EQ(g32[i], static_cast<float>(c.f(xf[i]))) << op_name(c.op) << " float32 at " << i;
      EXPECT_EQ(g64[i], c.f(xd[i])) << op_name(c.op) << " float64 at " << i;
    }
  }
}

TEST(ReferenceTest, IntegerNegAbsWrap) {
  Builder b;
  int x = b.param(DType::Int32, {4}, 0);
  int n = b.op(Op::Neg, DType::Int32, {4}, {x}), a = b.op(Op::Abs, DType::Int32, {4}, {x});
  const int32_t lo = std::numeric_limits<int32_t>::min();
  auto bx = buf(std::vector<int32_t>{5, -7, 0, lo});
  auto out = run(b, {n, a}, {in(bx)});
  EXPECT_EQ(read<int32_t>(out[0]), (std::vector<int32_t>{-5, 7, 0, lo}));
  EXPECT_EQ(read<int32_t>(out[1]), (std::vector<int32_t>{5, 7, 0, lo}));
}

TEST(ReferenceTest, ComparisonsAndMaxMinWithNaN) {
  std::vector<double> a = {1, kNaN, 2, kNaN, -kInfinity, 3}, c = {1, 1, kNaN, kNaN, -kInfinity, -2};
  const Op ops[] = {Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge};
  bool (*ref[])(double, double) = {
      [](double x, double y) { return x == y; }, [](double x, double y) { return x != y; },
      [](double x, double y) { return x < y; },  [](double x, double y) { return x <= y; },
      [](double x, double y) { return x > y; },  [](double x, double y) { return x >= y; }};
  Builder b;
  int x = b.param(DType::Float64, {6}, 0), y = b.param(DType::Float64, {6}, 1);
  std::vector<int> outs;
  for (Op op : ops) outs.push_back(b.op(op, DType::Bool, {6}, {x, y}));
  outs.push_back(b.op(Op::Maximum, DType::Float64, {6}, {x, y}));
  outs.push_back(b.op(Op::Minimum, DType::Float64, {6}, {x, y}));
  outs.push_back(b.op(Op::Not, DType::Bool, {6}, {x}));
  auto bx = buf(a), by = buf(c);
  auto out = run(b, outs, {in(bx), in(by)});
  for (size_t k = 0; k < 6; ++k) {
    auto got = read<uint8_t>(out[k]);
    for (size_t i = 0; i < 6; ++i)
      EXPECT_EQ(got[i], ref[k](a[i], c[i]) ? 1 : 0) << op_name(ops[k]) << " at " << i;
  }
  auto mx = read<double>(out[6]), mn = read<double>(out[7]);
  auto nt = read<uint8_t>(out[8]);
  for (size_t i = 0; i < 6; ++i) {
    bool nan = std::isnan(a[i]) || std::isnan(c[i]);
    if (nan) {
      EXPECT_TRUE(std::isnan(mx[i]) && std::isnan(mn[i])) << i;
    } else {
      EXPECT_EQ(mx[i], a[i] > c[i] ? a[i] : c[i]);
      EXPECT_EQ(mn[i], a[i] < c[i] ? a[i] : c[i]);
    }
    EXPECT_EQ(nt[i], a[i] == 0 ? 1 : 0);  // logical_not(NaN) is false
  }
}

TEST(ReferenceTest, HalfKnownValues) {
  EXPECT_EQ(float_to_half(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(float_to_half(65504.f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.f), 0x7c00);  // the tie rounds to even: infinity
  EXPECT_EQ(float_to_half(1e-5f), 0x00a8);    // subnormal: 167.77 * 2^-24 -> 168
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(float_to_half(1e-8f), 0x0000);                  // below half the smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -26)), 0x0001);  // 0.75 of the smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // exact tie -> even (zero)
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(-kInfinity), 0xfc00);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(float_to_bfloat16(1.0f / 3.0f), 0x3eab);
  EXPECT_EQ(float_to_bfloat16(65504.f), 0x4780);
  EXPECT_EQ(float_to_bfloat16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bfloat16(1e-8f), 0x322c);
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
  uint32_t snan = 0x7f800001;  // NaN with payload only in the dropped bits must stay NaN
  float fs;
  std::memcpy(&fs, &snan, 4);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(fs))));
  EXPECT_EQ(bfloat16_to_float(0x3f80), 1.0f);
}

// Every 16-bit pattern survives a round trip; random floats go to the nearest value, ties to even.
TEST(ReferenceTest, HalfRoundTripAndNearest) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = half_to_float(static_cast<uint16_t>(h)),
          g = bfloat16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f))
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
    else
      EXPECT_EQ(float_to_half(f), h);
    if (std::isnan(g))
      EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(g))));
    else
      EXPECT_EQ(float_to_bfloat16(g), h);
  }
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> m(1.f, 2.f);
  std::uniform_int_distribution<int> e(-30, 17);
  auto check = [](float f, uint16_t h, float (*back)(uint16_t)) {
    double v = back(h), err = std::fabs(v - f);
    if (std::isinf(v)) return;
    for (int d : {-1, 1}) {  // neighbours on the same side of zero
      float nb = back(static_cast<uint16_t>(h + d));
      if (std::isnan(nb) || (h & 0x7fff) == 0) continue;
      double nerr = std::fabs(static_cast<double>(nb) - f);
      ASSERT_LE(err, nerr) << f;
      if (err == nerr) {
        ASSERT_EQ(h & 1, 0) << "tie not to even at " << f;
      }
    }
  };
  for (int k = 0; k < 100000; ++k) {
    float f = std::ldexp(m(rng), e(rng)) * (k % 2 ? -1.f : 1.f);
    if (std::fabs(f) < 65504.f) check(f, float_to_half(f), half_to_float);
    check(f, float_to_bfloat16(f), bfloat16_to_float);
  }
}

TEST(ReferenceTest, LoadStoreEveryDtype) {
  const DType all[] = {DType::Bool,    DType::UInt8,    DType::Int8,    DType::Int32,  DType::Int64,
                       DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
  for (DType t : all) {
    alignas(8) unsigned char mem[8] = {};
    store_from_double(mem, t, -2.75);
    double want = t == DType::Bool ? 1 : t == DType::UInt8 ? 254 : is_floating(t) ? -2.75 : -2;
    EXPECT_EQ(load_as_double(mem, t), want) << dtype_name(t);
    store_from_int(mem, t, 100);
    EXPECT_EQ(load_as_int(mem, t), t == DType::Bool ? 1 : 100) << dtype_name(t);
  }
  alignas(8) unsigned char mem[8] = {};
  store_from_double(mem, DType::Int32, kNaN);
  EXPECT_EQ(load_as_int(mem, DType::Int32), 0);
  store_from_double(mem, DType::Bool, 0.5);
  EXPECT_EQ(load_as_int(mem, DType::Bool), 1);
  store_from_int(mem, DType::Int8, 200);
  EXPECT_EQ(load_as_int(mem, DType::Int8), -56);
}

TEST(ReferenceTest, Casts) {
  std::vector<float> x = {1.f / 3, 65504.f, 1e-5f, 1e-8f, std::nanf(""),
                          -0.0f,   -2.7f,   2.7f,  0.5f,  70000.f};
  Builder b;
  int p = b.param(DType::Float32, {10}, 0);
  Attrs a16, abf, ai, ab, a64;
  a16.dtype = DType::Float16, abf.dtype = DType::BFloat16, ai.dtype = DType::Int32,
  ab.dtype = DType::Bool;
  a64.dtype = DType::Float64;
  int h = b.op(Op::Cast, DType::Float16, {10}, {p}, a16),
      bf = b.op(Op::Cast, DType::BFloat16, {10}, {p}, abf);
  int hb = b.op(Op::Cast, DType::Float32, {10}, {h}, {}),
      i = b.op(Op::Cast, DType::Int32, {10}, {p}, ai);
  int bo = b.op(Op::Cast, DType::Bool, {10}, {p}, ab),
      bf64 = b.op(Op::Cast, DType::Float64, {10}, {bf}, a64);
  auto bx = buf(x);
  auto out = run(b, {h, bf, hb, i, bo, bf64}, {in(bx)});
  auto hv = read<uint16_t>(out[0]), bv = read<uint16_t>(out[1]);
  EXPECT_EQ(hv[0], 0x3555);
  EXPECT_EQ(hv[1], 0x7bff);
  EXPECT_EQ(hv[2], 0x00a8);
  EXPECT_EQ(hv[3], 0x0000);
  EXPECT_EQ(hv[4] & 0x7c00, 0x7c00);
  EXPECT_NE(hv[4] & 0x03ff, 0);
  EXPECT_EQ(hv[5], 0x8000);
  EXPECT_EQ(hv[9], 0x7c00);  // overflow -> inf
  EXPECT_EQ(bv[0], 0x3eab);
  EXPECT_EQ(bv[1], 0x4780);
  EXPECT_EQ(bv[5], 0x8000);
  auto back = read<float>(out[2]);
  EXPECT_EQ(back[0], 0.333251953125f);
  EXPECT_EQ(back[2], 168 * std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isnan(back[4]));
  EXPECT_TRUE(std::signbit(back[5]));
  EXPECT_EQ(read<int32_t>(out[3]), (std::vector<int32_t>{0, 65504, 0, 0, 0, 0, -2, 2, 0, 70000}));
  EXPECT_EQ(read<uint8_t>(out[4]), (std::vector<uint8_t>{1, 1, 1, 1, 1, 0, 1, 1, 1, 1}));
  EXPECT_EQ(read<double>(out[5])[1], 65536.0);
  // Integer -> narrower integer wraps; integer -> float is exact here.
  Builder c;
  int q = c.param(DType::Int64, {4}, 0);
  Attrs a8, af;
  a8.dtype = DType::Int8;
  af.dtype = DType::Float32;
  int q8 = c.op(Op::Cast, DType::Int8, {4}, {q}, a8),
      qf = c.op(Op::Cast, DType::Float32, {4}, {q}, af);
  auto bq = buf(std::vector<int64_t>{300, -129, 127, -5});
  auto o2 = run(c, {q8, qf}, {in(bq)});
  EXPECT_EQ(read<int8_t>(o2[0]), (std::vector<int8_t>{44, 127, 127, -5}));
  EXPECT_EQ(read<float>(o2[1]), (std::vector<float>{300, -129, 127, -5}));
}

// Independent reduction over [2,3,4]: walks every element and its output coordinate explicitly.
TEST(ReferenceTest, Reductions) {
  const Shape s = {2, 3, 4};
  auto xv = randf(24, 5, 0.5f, 1.5f);
  xv[13] = xv[13] * 3;
  const std::vector<std::vector<int64_t>> axes_sets = {{},     {0},       {1},     {-1},
                                                       {0, 2}, {2, 0, 1}, {-3, -2}};
  for (const auto& axes : axes_sets) {
    for (bool keep : {false, true}) {
      bool red[3] = {false, false, false};
      for (auto ax : axes) red[ax < 0 ? ax + 3 : ax] = true;
      Shape os;
      for (int d = 0; d < 3; ++d)
        if (!red[d])
          os.push_back(s[d]);
        else if (keep)
          os.push_back(1);
      int64_t on = numel(os);
      std::vector<double> sum(on, 0), prod(on, 1), mx(on, -kInfinity), mn(on, kInfinity);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j)
          for (int k = 0; k < 4; ++k) {
            int64_t o = 0;
            int idx[3] = {i, j, k};
            for (int d = 0; d < 3; ++d)
              if (!red[d]) o = o * s[d] + idx[d];
            double v = xv[(i * 3 + j) * 4 + k];
            sum[o] += v, prod[o] *= v, mx[o] = std::max(mx[o], v), mn[o] = std::min(mn[o], v);
          }
      Builder b;
      int p = b.param(DType::Float32, s, 0);
      Attrs a;
      a.ints = to_ints(axes), a.keepdim = keep;
      int rs = b.op(Op::ReduceSum, DType::Float32, os, {p}, a),
          rp = b.op(Op::ReduceProd, DType::Float32, os, {p}, a);
      int rx = b.op(Op::ReduceMax, DType::Float32, os, {p}, a),
          rn = b.op(Op::ReduceMin, DType::Float32, os, {p}, a);
      auto bx = buf(xv);
      auto out = run(b, {rs, rp, rx, rn}, {in(bx)});
      const std::vector<double>* want[] = {&sum, &prod, &mx, &mn};
      for (int r = 0; r < 4; ++r) {
        auto got = read<float>(out[r]);
        ASSERT_EQ(static_cast<int64_t>(got.size()), on);
        for (int64_t o = 0; o < on; ++o)
          EXPECT_NEAR(got[o], (*want[r])[o], 1e-6 * std::fabs((*want[r])[o]))
              << "reduction " << r << " axes " << shape_str(axes) << " keep " << keep;
      }
    }
  }
}

TEST(ReferenceTest, ReduceMaxPropagatesNaNAndIntSumWraps) {
  Builder b;
  int x = b.param(DType::Float32, {2, 3}, 0), y = b.param(DType::Int32, {3}, 1);
  Attrs a1, a0;
  a1.ints = {1}, a0.ints = {0};
  int mx = b.op(Op::ReduceMax, DType::Float32, {2}, {x}, a1),
      mn = b.op(Op::ReduceMin, DType::Float32, {2}, {x}, a1);
  int s = b.op(Op::ReduceSum, DType::Int32, {}, {y}, a0);
  auto bx = buf(std::vector<float>{1, std::nanf(""), 3, -1, -5, 2});
  auto by = buf(std::vector<int32_t>{std::numeric_limits<int32_t>::max(), 2, 3});
  auto out = run(b, {mx, mn, s}, {in(bx), in(by)});
  auto m = read<float>(out[0]), n = read<float>(out[1]);
  EXPECT_TRUE(std::isnan(m[0]) && std::isnan(n[0]));
  EXPECT_EQ(m[1], 2.f);
  EXPECT_EQ(n[1], -5.f);
  EXPECT_EQ(read<int32_t>(out[2])[0], std::numeric_limits<int32_t>::min() + 4);
}

TEST(ReferenceTest, MovementChain) {
  // x[2,3] -> permute(1,0) [3,2] -> reshape [6] -> reshape [1,6] -> expand [4,6]; y[3,1] -> expand
  // [2,3,5].
  Builder b;
  int x = b.param(DType::Float32, {2, 3}, 0), y = b.param(DType::Float32, {3, 1}, 1);
  Attrs ap, r1, r2, e1, e2;
  ap.ints = {1, 0}, r1.ints = {6}, r2.ints = {1, 6}, e1.ints = {4, 6}, e2.ints = {2, 3, 5};
  int p = b.op(Op::Permute, DType::Float32, {3, 2}, {x}, ap);
  int q = b.op(Op::Reshape, DType::Float32, {6}, {p}, r1),
      r = b.op(Op::Reshape, DType::Float32, {1, 6}, {q}, r2);
  int e = b.op(Op::Expand, DType::Float32, {4, 6}, {r}, e1),
      f = b.op(Op::Expand, DType::Float32, {2, 3, 5}, {y}, e2);
  auto xv = randf(6, 3), yv = randf(3, 4);
  auto bx = buf(xv), by = buf(yv);
  auto out = run(b, {p, e, f}, {in(bx), in(by)});
  auto pv = read<float>(out[0]), ev = read<float>(out[1]), fv = read<float>(out[2]);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) EXPECT_EQ(pv[i * 2 + j], xv[j * 3 + i]);
  for (int row = 0; row < 4; ++row)
    for (int k = 0; k < 6; ++k) EXPECT_EQ(ev[row * 6 + k], xv[(k % 2) * 3 + k / 2]);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 5; ++k) EXPECT_EQ(fv[(i * 3 + j) * 5 + k], yv[j]);
  // A 3-d permutation.
  Builder c;
  int z = c.param(DType::Int32, {2, 3, 4}, 0);
  Attrs a3;
  a3.ints = {2, 0, 1};
  int zp = c.op(Op::Permute, DType::Int32, {4, 2, 3}, {z}, a3);
  std::vector<int32_t> zv(24);
  for (int i = 0; i < 24; ++i) zv[i] = i * 7 - 50;
  auto bz = buf(zv);
  auto got = read<int32_t>(run(c, {zp}, {in(bz)})[0]);
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_EQ(got[(k * 2 + i) * 3 + j], zv[(i * 3 + j) * 4 + k]);
}

TEST(ReferenceTest, WhereScalarConstantAndLogic) {
  Builder b;
  int cnd = b.param(DType::Bool, {3, 1}, 0), x = b.param(DType::Float32, {4}, 1),
      s = b.scalar(DType::Float32, 2);
  int k = b.add(Op::Constant, DType::Float32, {3, 4}, {}, [] {
    Attrs a;
    a.value = -1.25;
    return a;
  }());
  int w = b.op(Op::Where, DType::Float32, {3, 4}, {cnd, x, s});
  int w2 = b.op(Op::Where, DType::Float32, {3, 4}, {cnd, k, x});
  int o = b.op(Op::Or, DType::Bool, {3, 1}, {cnd, b.op(Op::Not, DType::Bool, {3, 1}, {cnd})});
  int n = b.op(Op::And, DType::Bool, {3, 1}, {cnd, b.op(Op::Not, DType::Bool, {3, 1}, {cnd})});
  int is = b.scalar(DType::Int64, 3);
  int ip = b.op(Op::Mul, DType::Int64, {}, {is, is});
  auto xv = randf(4, 9);
  std::vector<uint8_t> cv = {1, 0, 1};
  auto bc = buf(cv), bx = buf(xv);
  std::vector<RunInput> inputs = {in(bc), in(bx), RunInput{nullptr, 0.1, 0},
                                  RunInput{nullptr, 0, int64_t{1} << 40}};
  auto out = run(b, {w, w2, o, n, ip}, inputs);
  auto wv = read<float>(out[0]), w2v = read<float>(out[1]);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(wv[i * 4 + j], cv[i] ? xv[j] : 0.1f);
      EXPECT_EQ(w2v[i * 4 + j], cv[i] ? -1.25f : xv[j]);
    }
  EXPECT_EQ(read<uint8_t>(out[2]), (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(read<uint8_t>(out[3]), (std::vector<uint8_t>{0, 0, 0}));
  EXPECT_EQ(read<int64_t>(out[4])[0], 0);  // 2^80 wraps to 0 in int64
}

TEST(ReferenceTest, IntegerWrapAround) {
  Builder b;
  int x = b.param(DType::Int32, {3}, 0), y = b.param(DType::Int32, {3}, 1);
  int u = b.param(DType::UInt8, {2}, 2), v = b.param(DType::UInt8, {2}, 3);
  int add = b.op(Op::Add, DType::Int32, {3}, {x, y}),
      mul = b.op(Op::Mul, DType::Int32, {3}, {x, y});
  int sub = b.op(Op::Sub, DType::UInt8, {2}, {u, v});
  const int32_t hi = std::numeric_limits<int32_t>::max();
  auto bx = buf(std::vector<int32_t>{hi, -5, 65536}), by = buf(std::vector<int32_t>{1, 3, 65536});
  auto bu = buf(std::vector<uint8_t>{0, 200}), bv = buf(std::vector<uint8_t>{1, 100});
  auto out = run(b, {add, mul, sub}, {in(bx), in(by), in(bu), in(bv)});
  EXPECT_EQ(read<int32_t>(out[0]),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -2, 131072}));
  EXPECT_EQ(read<int32_t>(out[1]), (std::vector<int32_t>{hi, -15, 0}));
  EXPECT_EQ(read<uint8_t>(out[2]), (std::vector<uint8_t>{255, 100}));
}

TEST(ReferenceTest, RandMatchesGeneratorAndIsUniform) {
  for (DType t : {DType::Float32, DType::Float64}) {
    Builder b;
    int seed = b.scalar(DType::Int64, 0), off = b.scalar(DType::Int64, 1);
    Attrs a;
    a.ints = {400, 250}, a.dtype = t, a.stream = 1;
    int r = b.op(Op::Rand, t, {400, 250}, {seed, off}, a);
    auto out = run(b, {r}, {RunInput{nullptr, 0, 1234}, RunInput{nullptr, 0, 10}});
    std::vector<double> v;
    if (t == DType::Float32)
      for (float f : read<float>(out[0])) v.push_back(f);
    else
      v = read<double>(out[0]);
    ASSERT_EQ(v.size(), 100000u);
    double sum = 0, sq = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i < 1000 || i % 997 == 0) {
        ASSERT_EQ(v[i], loop::rand_uniform(1234, 10, static_cast<int64_t>(i), 1, t)) << i;
      }
      ASSERT_TRUE(v[i] >= 0 && v[i] < 1) << v[i];
      sum += v[i], sq += v[i] * v[i];
    }
    double mean = sum / 1e5, var = sq / 1e5 - mean * mean;
    EXPECT_NEAR(mean, 0.5, 0.005);
    EXPECT_NEAR(var, 1.0 / 12, 0.003);
  }
}

TEST(ReferenceTest, EmptyShapes) {
  Builder b;
  int x = b.param(DType::Float32, {0, 3}, 0), y = b.param(DType::Float32, {3}, 1);
  Attrs a0;
  a0.ints = {0};
  int s = b.op(Op::Add, DType::Float32, {0, 3}, {x, y});
  int r = b.op(Op::ReduceSum, DType::Float32, {3}, {s}, a0),
      p = b.op(Op::ReduceProd, DType::Float32, {3}, {s}, a0);
  auto bx = std::make_shared<HostBuffer>(0);
  auto by = buf(randf(3, 1));
  auto out = run(b, {s, r, p}, {in(bx), in(by)});
  EXPECT_EQ(out[0]->bytes(), 0u);
  EXPECT_EQ(read<float>(out[1]), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(read<float>(out[2]), (std::vector<float>{1, 1, 1}));
}

TEST(ReferenceTest, OutputsNeverAliasInputsAndInterpretAll) {
  Builder b;
  int x = b.param(DType::Float32, {4}, 0);
  int e = b.op(Op::Exp, DType::Float32, {4}, {x});
  int n = b.op(Op::Neg, DType::Float32, {4}, {e});
  auto xv = randf(4, 21);
  auto bx = buf(xv);
  auto out = run(b, {x, n, x}, {in(bx)});
  EXPECT_NE(out[0]->data(), bx->data());
  EXPECT_NE(out[2]->data(), bx->data());
  EXPECT_NE(out[0]->data(), out[2]->data());
  EXPECT_EQ(read<float>(out[0]), xv);
  auto all = interpret_all(b.g, {in(bx)});
  ASSERT_EQ(all.size(), 3u);
  auto ev = read<float>(all[1]), nv = read<float>(all[2]);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(ev[i], static_cast<float>(std::exp(static_cast<double>(xv[i]))));
    EXPECT_EQ(nv[i], -ev[i]);
  }
}

// Each malformed graph must raise lt::Error (never crash), with a message naming the problem.
TEST(ReferenceTest, MalformedGraphsThrow) {
  auto expect_error = [](Builder& b, std::vector<int> outs, std::vector<RunInput> inputs,
                         const std::string& what) {
    try {
      run(b, outs, inputs);
      ADD_FAILURE() << "no error for: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  auto bx = buf(randf(4, 1));
  {  // operand index not smaller than the node's
    Builder b;
    b.param(DType::Float32, {4}, 0);
    b.op(Op::Neg, DType::Float32, {4}, {1});
    expect_error(b, {1}, {in(bx)}, "operand index 1");
  }
  {  // input_index out of range
    Builder b;
    b.param(DType::Float32, {4}, 3);
    expect_error(b, {0}, {in(bx)}, "input_index 3");
  }
  {  // missing buffer, and a buffer too small for the shape
    Builder b;
    b.param(DType::Float32, {4}, 0);
    expect_error(b, {0}, {RunInput{}}, "no buffer");
    Builder c;
    c.param(DType::Float32, {5}, 0);
    expect_error(c, {0}, {in(bx)}, "too small");
  }
  {  // shapes the shape rule rejects, and a recorded shape that disagrees with it
    Builder b;
    int x = b.param(DType::Float32, {4}, 0), y = b.param(DType::Float32, {3}, 0);
    b.op(Op::Add, DType::Float32, {4}, {x, y});
    expect_error(b, {2}, {in(bx)}, "not broadcastable");
    Builder c;
    int z = c.param(DType::Float32, {4}, 0);
    c.op(Op::Exp, DType::Float32, {2, 2}, {z});
    expect_error(c, {1}, {in(bx)}, "shape rule gives");
  }
  {  // wrong arity, composite op, unknown op code, bad output index
    Builder b;
    int x = b.param(DType::Float32, {4}, 0);
    b.op(Op::Add, DType::Float32, {4}, {x});
    expect_error(b, {1}, {in(bx)}, "expected 2 operands");
    Builder c;
    int y = c.param(DType::Float32, {4}, 0);
    c.op(Op::Softmax, DType::Float32, {4}, {y}, [] {
      Attrs a;
      a.ints = {0};
      return a;
    }());
    try {
      run(c, {1}, {in(bx)});
      ADD_FAILURE() << "softmax ran";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::NotImplemented);
      EXPECT_NE(std::string(e.what()).find("not implemented: softmax on reference"),
                std::string::npos)
          << e.what();
    }
    Builder d;
    d.add(static_cast<Op>(200), DType::Float32, {4});
    expect_error(d, {0}, {in(bx)}, "unknown op code");
    Builder e;
    e.param(DType::Float32, {4}, 0);
    e.g.outputs = {5};
    EXPECT_THROW(interpret_all(e.g, {in(bx)}), Error);
  }
  {  // negative dimension on a leaf
    Builder b;
    b.add(Op::Constant, DType::Float32, {-2});
    expect_error(b, {0}, {}, "negative dimension");
  }
}

}  // namespace
}  // namespace lt
