// The CPU code generator's casts among all dtypes and float16/bfloat16 rounding, against oracles
// computed here (cpu_codegen_util.h), never with backend code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "cpu_codegen_util.h"

namespace lt {
namespace {

using namespace cpu_codegen_test;  // NOLINT: the shared test helpers

// --- casts -----------------------------------------------------------------------------------
struct Val {  // a value of some dtype: integral ones in i, floating ones in d
  bool fp;
  int64_t i;
  double d;
};
Val decode(const uint8_t* p, DType t) {
  switch (t) {
    case DType::Bool:
      return {false, *p != 0, 0};
    case DType::UInt8:
      return {false, *p, 0};
    case DType::Int8:
      return {false, static_cast<int8_t>(*p), 0};
    case DType::Int32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return {false, v, 0};
    }
    case DType::Int64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return {false, v, 0};
    }
    case DType::Float16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return {true, 0, f16_value(v)};
    }
    case DType::BFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return {true, 0, bf16_value(v)};
    }
    case DType::Float32: {
      float v;
      std::memcpy(&v, p, 4);
      return {true, 0, v};
    }
    case DType::Float64: {
      double v;
      std::memcpy(&v, p, 8);
      return {true, 0, v};
    }
  }
  return {};
}
// torch semantics: float -> int truncates (NaN / beyond int64 -> 0) then wraps; x -> bool is x !=
// 0.
void encode(uint8_t* p, DType t, Val v) {
  int64_t i = v.i;
  if (v.fp) i = (std::isnan(v.d) || std::fabs(v.d) > 9.2e18) ? 0 : static_cast<int64_t>(v.d);
  float f = v.fp ? static_cast<float>(v.d) : static_cast<float>(v.i);
  switch (t) {
    case DType::Bool:
      *p = v.fp ? v.d != 0 : v.i != 0;
      break;
    case DType::UInt8:
      *p = static_cast<uint8_t>(i);
      break;
    case DType::Int8:
      *p = static_cast<uint8_t>(static_cast<int8_t>(i));
      break;
    case DType::Int32: {
      int32_t x = static_cast<int32_t>(i);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::Int64:
      std::memcpy(p, &i, 8);
      break;
    case DType::Float16: {
      uint16_t x = f16_bits(f);
      std::memcpy(p, &x, 2);
      break;
    }
    case DType::BFloat16: {
      uint16_t x = bf16_bits(f);
      std::memcpy(p, &x, 2);
      break;
    }
    case DType::Float32:
      std::memcpy(p, &f, 4);
      break;
    case DType::Float64: {
      double x = v.fp ? v.d : static_cast<double>(v.i);
      std::memcpy(p, &x, 8);
      break;
    }
  }
}

TEST(CpuCodegen, CastsAmongAllDTypes) {
  std::vector<double> specials = {
      0.0,          -0.0,          1.0,    -1.0,  0.5,   -1.5,   2.5,        127.9,
      128.0,        -129.5,        255.5,  256.0, 300.7, -300.7, 65504.0,    65519.0,
      65520.0,      1e-5,          6e-8,   3e-8,  1e-40, 3.4e38, 1e20,       -1e20,
      2147483648.5, -2147483649.0, 9.3e18, kInf,  -kInf, kNaN,   1.00390625, 1.005859375};
  std::mt19937 g(12);
  std::normal_distribution<double> nd(0, 1000);
  std::uniform_int_distribution<int64_t> id(INT64_MIN, INT64_MAX);
  for (DType from : kAllDTypes) {
    const size_t fs = dtype_size(from);
    std::vector<uint8_t> src;
    auto add = [&](Val v) {
      src.resize(src.size() + fs);
      encode(&src[src.size() - fs], from, v);
    };
    for (double d : specials) add({true, 0, d});
    for (int i = 0; i < 200; ++i) add({true, 0, nd(g)});
    for (int i = 0; i < 100; ++i) add({false, id(g) >> (i % 60), 0});
    const int64_t n = static_cast<int64_t>(src.size() / fs);
    auto in = std::make_shared<HostBuffer>(src.size());
    std::memcpy(in->data(), src.data(), src.size());
    for (DType to : kAllDTypes) {
      PlanBuilder pb;
      int x = pb.add(K::Input, from, n), o = pb.add(K::Output, to, n);
      Body b(StageKind::MapOuter);
      b.store(1, aff({1}), b.op(Op::Cast, to, b.load(from, 0, aff({1}))));
      pb.kernel({n}, {}, {pb.arg(x), pb.arg(o, true)}, {b.st});
      auto out = run(pb.p, {{in.get()}})[o];
      const auto* got = static_cast<const uint8_t*>(out->data());
      for (int64_t i = 0; i < n; ++i) {
        Val sv = decode(&src[i * fs], from);
        uint8_t want[8];
        encode(want, to, sv);
        Val w = decode(want, to), h = decode(got + i * dtype_size(to), to);
        bool same = w.fp ? ((std::isnan(w.d) && std::isnan(h.d)) ||
                            std::memcmp(want, got + i * dtype_size(to), dtype_size(to)) == 0)
                         : w.i == h.i;
        ASSERT_TRUE(same) << dtype_name(from) << " -> " << dtype_name(to) << " of "
                          << (sv.fp ? sv.d : sv.i) << ": got " << (h.fp ? h.d : h.i) << ", want "
                          << (w.fp ? w.d : w.i);
      }
    }
  }
}

// Every float16 / bfloat16 encoding widens exactly and narrows back to itself; random float32
// bit patterns (all magnitudes, subnormals included) narrow to nearest-even.
TEST(CpuCodegen, Float16BFloat16RoundTrips) {
  for (DType h : {DType::Float16, DType::BFloat16}) {
    std::vector<uint16_t> all(65536);
    for (int i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<uint32_t> f32 = randint<uint32_t>(200000, 13, 0, UINT32_MAX);
    PlanBuilder pb;
    int a = pb.add(K::Input, h, 65536), w = pb.add(K::Output, DType::Float32, 65536);
    int back = pb.add(K::Output, h, 65536);
    int f = pb.add(K::Input, DType::Float32, 200000), n = pb.add(K::Output, h, 200000);
    Body b1(StageKind::MapOuter), b2(StageKind::MapOuter);
    int wide = b1.op(Op::Cast, DType::Float32, b1.load(h, 0, aff({1})));
    b1.store(1, aff({1}), wide);
    b1.store(2, aff({1}), b1.op(Op::Cast, h, wide));
    b2.store(1, aff({1}), b2.op(Op::Cast, h, b2.load(DType::Float32, 0, aff({1}))));
    pb.kernel({65536}, {}, {pb.arg(a), pb.arg(w, true), pb.arg(back, true)}, {b1.st});
    pb.kernel({200000}, {}, {pb.arg(f), pb.arg(n, true)}, {b2.st});
    auto out = run(pb.p, {{host(all).get()}, {host(f32).get()}});
    auto wv = read<float>(out[w], 65536);
    auto bv = read<uint16_t>(out[back], 65536), nv = read<uint16_t>(out[n], 200000);
    for (int i = 0; i < 65536; ++i) {
      float want = h == DType::Float16 ? f16_value(all[i]) : bf16_value(all[i]);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(wv[i])) << i;
        continue;
      }
      ASSERT_EQ(std::memcmp(&wv[i], &want, 4), 0) << dtype_name(h) << " " << i;
      ASSERT_EQ(bv[i], all[i]) << dtype_name(h) << " " << i;
    }
    for (int i = 0; i < 200000; ++i) {
      float x;
      std::memcpy(&x, &f32[i], 4);
      uint16_t want = h == DType::Float16 ? f16_bits(x) : bf16_bits(x);
      if (std::isnan(x))
        ASSERT_TRUE((nv[i] & 0x7fff) > (h == DType::Float16 ? 0x7c00 : 0x7f80)) << i;
      else
        ASSERT_EQ(nv[i], want) << dtype_name(h) << " of " << x;
    }
  }
}

// float16 arithmetic rounds after every op, as torch does: (a + b) * c in float16.
TEST(CpuCodegen, Float16RoundsPerOp) {
  const int64_t N = 4099;
  auto H = DType::Float16;
  PlanBuilder pb;
  int a = pb.add(K::Input, H, N), b = pb.add(K::Input, H, N), c = pb.add(K::Input, H, N);
  int o = pb.add(K::Output, H, N);
  Body bd(StageKind::MapOuter);
  bd.store(3, aff({1}),
           bd.op(Op::Mul, H, bd.op(Op::Add, H, bd.load(H, 0, aff({1})), bd.load(H, 1, aff({1}))),
                 bd.load(H, 2, aff({1}))));
  pb.kernel({N}, {}, {pb.arg(a), pb.arg(b), pb.arg(c), pb.arg(o, true)}, {bd.st});
  auto enc = [](const std::vector<float>& v) {
    std::vector<uint16_t> r;
    for (float x : v) r.push_back(f16_bits(x));
    return r;
  };
  auto av = enc(randn(N, 14, 100)), bv = enc(randn(N, 15, 100)), cv = enc(randn(N, 16, 3));
  auto out =
      read<uint16_t>(run(pb.p, {{host(av).get()}, {host(bv).get()}, {host(cv).get()}})[o], N);
  for (int64_t i = 0; i < N; ++i) {
    float sum = f16_value(f16_bits(f16_value(av[i]) + f16_value(bv[i])));
    ASSERT_EQ(out[i], f16_bits(sum * f16_value(cv[i]))) << i;
  }
}

}  // namespace
}  // namespace lt
