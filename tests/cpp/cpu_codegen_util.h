// Shared by the CPU code generator's tests (cpu_codegen_test.cc, cpu_codegen_casts_test.cc,
// cpu_codegen_trig_test.cc): loop IR builders, a plan runner on the CPU backend, random inputs,
// ulp distance and independent float16/bfloat16 oracles (the compiler's _Float16; bfloat16 by a
// nearest-value search), never backend code.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_jit.h"
#include "ir/error.h"
#include "loop_builder.h"
#include "lowering/complete_plan.h"

namespace lt::cpu_codegen_test {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr DType kAllDTypes[] = {DType::Bool,     DType::UInt8,   DType::Int8,
                                       DType::Int32,    DType::Int64,   DType::Float16,
                                       DType::BFloat16, DType::Float32, DType::Float64};

inline Backend& cpu_backend() {
  static std::unique_ptr<Backend> b = make_cpu_backend();
  return *b;
}

template <typename T>
inline BufferPtr host(const std::vector<T>& v) {
  auto b = std::make_shared<HostBuffer>(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b->data(), v.data(), v.size() * sizeof(T));
  return b;
}
template <typename T>
inline std::vector<T> read(const BufferPtr& b, size_t n) {
  std::vector<T> v(n);
  if (n) std::memcpy(v.data(), b->data(), n * sizeof(T));
  return v;
}
inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
template <typename T>
inline std::vector<T> randint(size_t n, uint32_t seed, int64_t lo, int64_t hi) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(g));
  return v;
}

// |a - b| in units in the last place (NaN == NaN).
inline int64_t ulps(double a, double b, bool single) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  if (a == b) return 0;
  if (single) {
    int32_t x, y;
    float fa = static_cast<float>(a), fb = static_cast<float>(b);
    std::memcpy(&x, &fa, 4);
    std::memcpy(&y, &fb, 4);
    if ((x < 0) != (y < 0)) return INT64_MAX;
    return std::llabs(static_cast<int64_t>(x) - y);
  }
  int64_t x, y;
  std::memcpy(&x, &a, 8);
  std::memcpy(&y, &b, 8);
  if ((x < 0) != (y < 0)) return INT64_MAX;
  return x > y ? x - y : y - x;
}

// --- independent 16-bit oracles -------------------------------------------------------------
inline uint16_t f16_bits(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
inline float f16_value(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}
inline float bf16_value(uint16_t u) {
  uint32_t w = static_cast<uint32_t>(u) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
// Nearest bfloat16 by comparing the two neighbours in double precision; ties to the even one.
inline uint16_t bf16_bits(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((w >> 16) | 0x40);
  uint16_t lo = static_cast<uint16_t>(w >> 16);
  if ((w & 0xffff) == 0) return lo;
  uint16_t hi = static_cast<uint16_t>(lo + 1);
  if (std::isinf(bf16_value(hi))) {  // rounding past the largest finite value
    double top = bf16_value(lo), next = std::ldexp(1.0, 128) * (top < 0 ? -1 : 1);
    return std::fabs(f - top) < std::fabs(next - f) ? lo : hi;
  }
  double dl = std::fabs(static_cast<double>(f) - bf16_value(lo));
  double dh = std::fabs(static_cast<double>(bf16_value(hi)) - f);
  if (dl != dh) return dl < dh ? lo : hi;
  return (lo & 1) ? hi : lo;
}

inline std::vector<BufferPtr> run(const Plan& p, const std::vector<RunInput>& in,
                                  int expect_kernels = -1) {
  auto exe = cpu_backend().compile(completed(p));
  RunStats stats;
  auto out = exe->run(in, &stats);
  EXPECT_EQ(out.size(), p.buffers.size());
  EXPECT_EQ(stats.kernel_launches,
            expect_kernels < 0 ? static_cast<int>(p.kernels.size()) : expect_kernels);
  return out;
}

}  // namespace lt::cpu_codegen_test
