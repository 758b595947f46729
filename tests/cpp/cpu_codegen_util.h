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
#include "lowering/complete_plan.h"

namespace lt::cpu_codegen_test {

using loop::IKind;
using loop::Index;
using loop::Instr;
using loop::Stage;
using loop::StageKind;
using K = BufferSpec::Kind;
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr DType kAllDTypes[] = {DType::Bool,     DType::UInt8,   DType::Int8,
                                       DType::Int32,    DType::Int64,   DType::Float16,
                                       DType::BFloat16, DType::Float32, DType::Float64};

inline Backend& cpu_backend() {
  static std::unique_ptr<Backend> b = make_cpu_backend();
  return *b;
}

inline Index aff(std::vector<int64_t> strides, int64_t offset = 0) {
  Index ix;
  ix.offset = offset;
  ix.strides = std::move(strides);
  return ix;
}
inline Index general(int root) {
  Index ix;
  ix.general = root;
  return ix;
}

// Builds one stage body; each helper returns the new instruction's id.
struct Body {
  Stage st;
  explicit Body(StageKind k) { st.kind = k; }
  int push(Instr in) {
    st.body.push_back(std::move(in));
    return static_cast<int>(st.body.size()) - 1;
  }
  int load(DType t, int arg, Index ix) {
    Instr in{IKind::Load, Op::Add, t};
    in.arg = arg;
    in.index = std::move(ix);
    return push(in);
  }
  int scalar(DType t, int arg) {
    Instr in{IKind::LoadScalar, Op::Add, t};
    in.arg = arg;
    return push(in);
  }
  int cnst(DType t, double v) {
    Instr in{IKind::Const, Op::Add, t};
    in.value = v;
    return push(in);
  }
  int op(Op o, DType t, int a, int b = -1, int c = -1) { return push({IKind::Op, o, t, a, b, c}); }
  int result(DType t, int stage) {
    Instr in{IKind::ReduceResult, Op::Add, t};
    in.arg = stage;
    return push(in);
  }
  int rand(DType t, int seed, int offset, Index ix, int64_t stream) {
    Instr in{IKind::RandUniform, Op::Rand, t, seed, offset};
    in.index = std::move(ix);
    in.stream = stream;
    return push(in);
  }
  void store(int arg, Index ix, int v) { st.stores.push_back({arg, std::move(ix), v}); }
  Stage reduce(Op op, DType acc, int v) {
    st.reduce_op = op;
    st.acc_dtype = acc;
    st.reduce_value = v;
    return st;
  }
};

// A plan with buffers; kernel args name them by buffer id.
struct PlanBuilder {
  Plan p;
  int inputs = 0;
  int add(K kind, DType t, int64_t n) {
    BufferSpec b{kind, t, n};
    if (kind == K::Input || kind == K::Scalar) b.input = inputs++;
    p.buffers.push_back(b);
    return static_cast<int>(p.buffers.size()) - 1;
  }
  loop::Arg arg(int buffer, bool output = false) const {
    const BufferSpec& b = p.buffers[buffer];
    return {buffer, b.dtype, b.numel, b.kind == K::Scalar, output};
  }
  void kernel(Shape outer, Shape inner, std::vector<loop::Arg> args, std::vector<Stage> stages,
              std::vector<loop::IExpr> iexprs = {}) {
    loop::Kernel k;
    k.name = "k" + std::to_string(p.kernels.size());
    k.outer = std::move(outer);
    k.inner = std::move(inner);
    k.args = std::move(args);
    k.stages = std::move(stages);
    k.iexprs = std::move(iexprs);
    p.kernels.push_back(std::move(k));
  }
};

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
