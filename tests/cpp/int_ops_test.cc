// Integer and bool semantics of floor_divide, remainder, fmod, the bitwise ops and the shifts, as
// IR primitives: lazy:reference (the interpreter), lazy:cpu and eager cpu against values computed
// here with plain C++ integer arithmetic (128-bit, so nothing overflows) and against literal tables
// of what Python and PyTorch give; edge cases (negative operands and divisors, zero divisors,
// INT_MIN // -1, out-of-range shift counts) on int64, int32, int8, uint8 and bool. Then the dtype
// errors, autograd, constant folding, and the CUDA code generation of every new op compiled by
// NVRTC (no GPU needed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "graph_util.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "lowering/decompose.h"
#include "lowering/simplify.h"
#include "test_util.h"
#ifdef LT_HAVE_CUDA
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_expr.h"
#include "backends/cuda/nvrtc_compiler.h"
#endif

namespace lt {
namespace {

const char* const kDevices[] = {"lazy:reference", "lazy:cpu", "cpu"};
constexpr DType kIntDTypes[] = {DType::Int64, DType::Int32, DType::Int8, DType::UInt8};
constexpr DType kI64 = DType::Int64;
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
using I128 = __int128;

int bits_of(DType t) { return t == DType::Bool ? 1 : static_cast<int>(dtype_size(t)) * 8; }
bool is_signed_int(DType t) { return t == DType::Int64 || t == DType::Int32 || t == DType::Int8; }

// v as the dtype holds it: two's complement wrap-around to its width (bool: v != 0).
int64_t wrap(I128 v, DType t) {
  const auto u = static_cast<uint64_t>(static_cast<unsigned __int128>(v));
  switch (t) {
    case DType::Int64:
      return static_cast<int64_t>(u);
    case DType::Int32:
      return static_cast<int32_t>(static_cast<uint32_t>(u));
    case DType::Int8:
      return static_cast<int8_t>(static_cast<uint8_t>(u));
    case DType::UInt8:
      return static_cast<uint8_t>(u);
    case DType::Bool:
      return v != 0;
    default:
      ADD_FAILURE() << "not an integer dtype";
      return 0;
  }
}

// A tensor of dtype t holding v (each value wrapped to t's width first).
Tensor ints(const std::vector<int64_t>& v, DType t, Shape s, const Device& d) {
  const size_t w = dtype_size(t);
  std::vector<uint8_t> bytes(v.size() * w);
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t x = wrap(v[i], t);
    // Little-endian: the low w bytes of the int64 are the value in the narrower type.
    std::memcpy(&bytes[i * w], &x, w);
  }
  return from_host(bytes.data(), t, std::move(s), d);
}

int64_t min_of(DType t) { return is_signed_int(t) ? wrap(I128{1} << (bits_of(t) - 1), t) : 0; }
int64_t max_of(DType t) {
  return wrap((I128{1} << (bits_of(t) - (is_signed_int(t) ? 1 : 0))) - 1, t);
}

// The test's oracle, with the semantics written the long way in 128 bits.
// Python's %: ((a % b) + b) % b has the divisor's sign; // is then the exact (a - r) / b.
I128 py_mod(I128 a, I128 b) { return ((a % b) + b) % b; }
int64_t expect_floor_div(int64_t a, int64_t b, DType t) {
  if (b == 0) return 0;  // documented: integer division by zero gives 0
  return wrap((I128{a} - py_mod(a, b)) / b, t);
}
int64_t expect_remainder(int64_t a, int64_t b, DType t) {
  return b == 0 ? 0 : wrap(py_mod(a, b), t);
}
int64_t expect_fmod(int64_t a, int64_t b, DType t) { return b == 0 ? 0 : wrap(I128{a} % b, t); }
int64_t expect_shl(int64_t a, int64_t n, DType t) {
  if (n < 0 || n >= bits_of(t)) return 0;
  return wrap(static_cast<I128>(static_cast<unsigned __int128>(static_cast<uint64_t>(a)) << n), t);
}
int64_t expect_shr(int64_t a, int64_t n, DType t) {
  if (n < 0 || n >= bits_of(t)) return a < 0 ? -1 : 0;  // the sign fill (unsigned values are >= 0)
  return a >= 0 ? a / (int64_t{1} << n)
                : -((-(I128{a}) + (I128{1} << n) - 1) >> n);  // floor(a / 2^n)
}

using BinFn = std::function<Tensor(const Tensor&, const Tensor&)>;
using Expect = std::function<int64_t(int64_t, int64_t, DType)>;

struct IntBinary {
  const char* name;
  BinFn fn;
  Expect expect;
  bool on_bool;
};

const std::vector<IntBinary>& int_binaries() {
  static const std::vector<IntBinary> ops = {
      {"floor_divide", [](auto& a, auto& b) { return floor_divide(a, b); }, expect_floor_div,
       false},
      {"remainder", [](auto& a, auto& b) { return remainder(a, b); }, expect_remainder, false},
      {"fmod", [](auto& a, auto& b) { return fmod(a, b); }, expect_fmod, false},
      {"bitwise_and", [](auto& a, auto& b) { return bitwise_and(a, b); },
       [](int64_t a, int64_t b, DType t) { return wrap(a & b, t); }, true},
      {"bitwise_or", [](auto& a, auto& b) { return bitwise_or(a, b); },
       [](int64_t a, int64_t b, DType t) { return wrap(a | b, t); }, true},
      {"bitwise_xor", [](auto& a, auto& b) { return bitwise_xor(a, b); },
       [](int64_t a, int64_t b, DType t) { return wrap(a ^ b, t); }, true},
      {"bitwise_left_shift", [](auto& a, auto& b) { return bitwise_left_shift(a, b); }, expect_shl,
       false},
      {"bitwise_right_shift", [](auto& a, auto& b) { return bitwise_right_shift(a, b); },
       expect_shr, false},
  };
  return ops;
}

// Operand values for t: the edges (min, max, -1, 0, 1, ...) and, for shifts, every count that
// matters (negative, 0, bits - 1, bits, beyond), then random values from a fixed seed.
std::vector<int64_t> values_of(DType t, uint32_t seed, size_t random_count) {
  std::vector<int64_t> v;
  if (t == DType::Bool) return {0, 1};
  const int64_t lo = min_of(t), hi = max_of(t), bits = bits_of(t);
  for (int64_t x :
       {lo, lo + 1, int64_t{-7}, int64_t{-3}, int64_t{-2}, int64_t{-1}, int64_t{0}, int64_t{1},
        int64_t{2}, int64_t{3}, int64_t{7}, bits - 1, bits, bits + 1, int64_t{64}, hi - 1, hi})
    if (x >= lo && x <= hi) v.push_back(x);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> any(lo, hi), small(-100, 100);
  for (size_t i = 0; i < random_count; ++i)
    v.push_back(i % 2 ? any(rng) : std::clamp<int64_t>(small(rng), lo, hi));
  return v;
}

// Every pair (a, b) of values as two flat operands, run on every device and checked value by value.
void check_pairs(const IntBinary& op, DType t, const std::vector<int64_t>& va,
                 const std::vector<int64_t>& vb) {
  std::vector<int64_t> a, b;
  for (int64_t x : va)
    for (int64_t y : vb) a.push_back(x), b.push_back(y);
  const Shape s = {static_cast<int64_t>(a.size())};
  for (const char* dev : kDevices) {
    const Device d = Device::parse(dev);
    Tensor r = op.fn(ints(a, t, s, d), ints(b, t, s, d));
    ASSERT_EQ(r.dtype(), t) << op.name << " on " << dev;
    const auto got = r.to_vector<int64_t>();
    ASSERT_EQ(got.size(), a.size());
    int bad = 0;
    for (size_t i = 0; i < a.size() && bad < 5; ++i) {
      const int64_t want = op.expect(a[i], b[i], t);
      if (got[i] != want) {
        ++bad;
        ADD_FAILURE() << op.name << "(" << a[i] << ", " << b[i] << ") as " << dtype_name(t)
                      << " on " << dev << ": got " << got[i] << ", want " << want;
      }
    }
  }
}

TEST(IntOps, EveryOpEveryIntegerDtypeEdgesAndRandomValues) {
  for (DType t : kIntDTypes)
    for (const auto& op : int_binaries()) {
      SCOPED_TRACE(std::string(op.name) + " " + std::string(dtype_name(t)));
      check_pairs(op, t, values_of(t, 7, 12), values_of(t, 11, 12));
    }
}

TEST(IntOps, BitwiseOpsOnBoolAreLogical) {
  for (const auto& op : int_binaries()) {
    if (!op.on_bool) continue;
    SCOPED_TRACE(op.name);
    check_pairs(op, DType::Bool, {0, 1}, {0, 1});
  }
  for (const char* dev : kDevices) {
    Tensor r = bitwise_not(ints({0, 1, 1, 0}, DType::Bool, {4}, Device::parse(dev)));
    EXPECT_EQ(r.dtype(), DType::Bool);
    EXPECT_EQ(r.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1})) << dev;
  }
}

TEST(IntOps, BitwiseNotOfEveryIntegerDtype) {
  for (DType t : kIntDTypes) {
    const auto v = values_of(t, 3, 20);
    std::vector<int64_t> want;
    for (int64_t x : v) want.push_back(wrap(~x, t));  // uint8: ~200 = 55
    for (const char* dev : kDevices) {
      Tensor r = bitwise_not(ints(v, t, {static_cast<int64_t>(v.size())}, Device::parse(dev)));
      EXPECT_EQ(r.dtype(), t);
      EXPECT_EQ(r.to_vector<int64_t>(), want) << dtype_name(t) << " on " << dev;
    }
  }
}

// What Python (and PyTorch, where it does not raise) gives, written out.
TEST(IntOps, PythonsTableOfSigns) {
  struct Row {
    int64_t a, b, floordiv, mod, fmod;
  };
  const Row rows[] = {
      {7, 2, 3, 1, 1},
      {-7, 2, -4, 1, -1},
      {7, -2, -4, -1, 1},
      {-7, -2, 3, -1, -1},
      {6, 3, 2, 0, 0},
      {-6, 3, -2, 0, 0},
      {0, -5, 0, 0, 0},
      {1, 0, 0, 0, 0},
      {-1, 0, 0, 0, 0},
      {0, 0, 0, 0, 0},
      {kI64Min, -1, kI64Min, 0, 0},
      {kI64Min, 1, kI64Min, 0, 0},
      {kI64Max, -1, -kI64Max, 0, 0},
      {kI64Min, 2, kI64Min / 2, 0, 0},
      {kI64Min, 3, -3074457345618258603, 1, -2},
      {kI64Max, kI64Min, -1, -1, kI64Max},
      {kI64Min, kI64Max, -2, kI64Max - 1, -1},
  };
  std::vector<int64_t> a, b;
  for (const Row& r : rows) a.push_back(r.a), b.push_back(r.b);
  const Shape s = {static_cast<int64_t>(a.size())};
  for (const char* dev : kDevices) {
    const Device d = Device::parse(dev);
    Tensor ta = ints(a, DType::Int64, s, d), tb = ints(b, DType::Int64, s, d);
    const auto q = floor_divide(ta, tb).to_vector<int64_t>();
    const auto m = remainder(ta, tb).to_vector<int64_t>();
    const auto f = fmod(ta, tb).to_vector<int64_t>();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(q[i], rows[i].floordiv) << a[i] << " // " << b[i] << " on " << dev;
      EXPECT_EQ(m[i], rows[i].mod) << a[i] << " % " << b[i] << " on " << dev;
      EXPECT_EQ(f[i], rows[i].fmod) << "fmod(" << a[i] << ", " << b[i] << ") on " << dev;
    }
  }
}

TEST(IntOps, Int32MinByMinusOneWrapsAndShiftsAtTheWidth) {
  for (const char* dev : kDevices) {
    const Device d = Device::parse(dev);
    Tensor a = ints({INT32_MIN, INT32_MIN, -1, 5}, DType::Int32, {4}, d);
    Tensor b = ints({-1, 0, 31, 32}, DType::Int32, {4}, d);
    EXPECT_EQ(floor_divide(a, b).to_vector<int64_t>(), (std::vector<int64_t>{INT32_MIN, 0, -1, 0}))
        << dev;
    EXPECT_EQ(remainder(a, b).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 30, 5})) << dev;
    EXPECT_EQ(bitwise_left_shift(a, b).to_vector<int64_t>(),
              (std::vector<int64_t>{0, INT32_MIN, INT32_MIN, 0}))
        << dev;
    EXPECT_EQ(bitwise_right_shift(a, b).to_vector<int64_t>(),
              (std::vector<int64_t>{-1, INT32_MIN, -1, 0}))
        << dev;
  }
}

TEST(IntOps, ScalarsOnEitherSideAndBroadcasting) {
  const std::vector<int64_t> va = {-9, -4, 0, 5, 13, 22};
  const std::vector<int64_t> vb = {3, -2, 0, 7};
  for (const char* dev : kDevices) {
    const Device d = Device::parse(dev);
    Tensor a = ints(va, DType::Int64, {6}, d);
    auto check = [&](const Tensor& r, const std::function<int64_t(int64_t)>& want,
                     const char* what) {
      EXPECT_EQ(r.dtype(), DType::Int64) << what;
      const auto got = r.to_vector<int64_t>();
      for (size_t i = 0; i < va.size(); ++i)
        EXPECT_EQ(got[i], want(va[i])) << what << " at " << va[i] << " on " << dev;
    };
    const Scalar m4(int64_t{-4}), n7(int64_t{7});
    check(
        floor_divide(a, m4), [](int64_t x) { return expect_floor_div(x, -4, kI64); }, "a // -4");
    check(
        rfloor_divide(a, n7), [](int64_t x) { return expect_floor_div(7, x, kI64); }, "7 // a");
    check(
        remainder(a, m4), [](int64_t x) { return expect_remainder(x, -4, kI64); }, "a % -4");
    check(
        rremainder(a, n7), [](int64_t x) { return expect_remainder(7, x, kI64); }, "7 % a");
    check(
        fmod(a, m4), [](int64_t x) { return expect_fmod(x, -4, kI64); }, "fmod(a, -4)");
    check(
        bitwise_and(a, Scalar(int64_t{6})), [](int64_t x) { return x & 6; }, "a & 6");
    check(
        bitwise_xor(a, Scalar(true)), [](int64_t x) { return x ^ 1; }, "a ^ True");
    Tensor counts = ints({-1, 0, 1, 3, 63, 64}, kI64, {6}, d);
    EXPECT_EQ(rbitwise_left_shift(counts, Scalar(int64_t{3})).to_vector<int64_t>(),
              (std::vector<int64_t>{0, 3, 6, 24, kI64Min, 0}))
        << "3 << n on " << dev;
    EXPECT_EQ(rbitwise_right_shift(counts, Scalar(int64_t{-100})).to_vector<int64_t>(),
              (std::vector<int64_t>{-1, -100, -50, -13, -1, -1}))
        << "-100 >> n on " << dev;
    // Broadcasting: [6, 1] op [4].
    Tensor a2 = a.reshape({6, 1}), b = ints(vb, DType::Int64, {4}, d);
    for (const auto& op : int_binaries()) {
      Tensor r = op.fn(a2, b);
      ASSERT_EQ(r.shape(), (Shape{6, 4})) << op.name;
      const auto got = r.to_vector<int64_t>();
      for (size_t i = 0; i < va.size(); ++i)
        for (size_t j = 0; j < vb.size(); ++j)
          EXPECT_EQ(got[i * vb.size() + j], op.expect(va[i], vb[j], DType::Int64))
              << op.name << "(" << va[i] << ", " << vb[j] << ") on " << dev;
    }
  }
}

// PyTorch's promotion: int op int stays int (the wider one), a float operand makes it float; an
// int64 number keeps an int32 tensor's dtype (a wrapped number), a float number makes it float32.
TEST(IntOps, DtypePromotion) {
  Tensor i32 = ints({7, -7}, DType::Int32, {2}, kCPU);
  Tensor u8 = ints({7, 200}, DType::UInt8, {2}, kCPU);
  Tensor i8 = ints({7, -7}, DType::Int8, {2}, kCPU);
  Tensor i64 = ints({2, 3}, DType::Int64, {2}, kCPU);
  float f[] = {2.5f, -2.5f};
  Tensor f32 = from_host(f, DType::Float32, {2}, kCPU);
  EXPECT_EQ(floor_divide(i32, i64).dtype(), DType::Int64);
  EXPECT_EQ(floor_divide(i32, Scalar(int64_t{2})).dtype(), DType::Int32);
  EXPECT_EQ(remainder(u8, i8).dtype(), DType::Int32);  // torch's int16, which lazytensor lacks
  EXPECT_EQ(floor_divide(i32, f32).dtype(), DType::Float32);
  EXPECT_EQ(remainder(i32, Scalar(2.5)).dtype(), DType::Float32);
  EXPECT_EQ(bitwise_and(i8, Scalar(true)).dtype(), DType::Int8);
  EXPECT_EQ(bitwise_left_shift(i8, i64).dtype(), DType::Int64);
  EXPECT_EQ(floor_divide(i32, f32).to_vector<double>(), (std::vector<double>{2, 2}));
  EXPECT_EQ(remainder(i32, f32).to_vector<double>(), (std::vector<double>{2, -2}));
}

void expect_int_op_error(const std::function<void()>& f, ErrorKind kind,
                         std::initializer_list<const char*> words) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << *words.begin();
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    for (const char* w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
  }
}

TEST(IntOps, DtypeErrorsNameTheOpAndDtypes) {
  float f[] = {1.5f, 2.5f};
  Tensor x = from_host(f, DType::Float32, {2}, kCPU);
  Tensor i = ints({1, 2}, DType::Int64, {2}, kCPU);
  Tensor b = ints({1, 0}, DType::Bool, {2}, kCPU);
  expect_int_op_error([&] { bitwise_and(x, i); }, ErrorKind::NotImplemented,
                      {"bitwise_and", "float32"});
  expect_int_op_error([&] { bitwise_or(i, Scalar(1.0)); }, ErrorKind::NotImplemented,
                      {"bitwise_or", "float32"});
  expect_int_op_error([&] { bitwise_left_shift(x, Scalar(int64_t{1})); }, ErrorKind::NotImplemented,
                      {"bitwise_left_shift"});
  expect_int_op_error([&] { bitwise_not(x); }, ErrorKind::NotImplemented,
                      {"bitwise_not", "float32"});
  expect_int_op_error([&] { floor_divide(b, b); }, ErrorKind::NotImplemented,
                      {"floor_divide", "bool"});
  expect_int_op_error([&] { remainder(b, Scalar(true)); }, ErrorKind::NotImplemented,
                      {"remainder", "bool"});
  expect_int_op_error([&] { bitwise_right_shift(b, b); }, ErrorKind::NotImplemented,
                      {"bitwise_right_shift", "bool"});
  // The IR's own rule (traces read from a file reach it without the runtime's checks).
  auto p = [](DType t) { return testing::param({3}, t); };
  expect_int_op_error(
      [&] {
        make_node(Op::BitXor, {p(DType::Float64), p(DType::Float64)});
      },
      ErrorKind::Type, {"bitwise_xor", "float64"});
  expect_int_op_error(
      [&] {
        make_node(Op::Shl, {p(DType::Bool), p(DType::Bool)});
      },
      ErrorKind::Type, {"bitwise_left_shift", "bool"});
  expect_int_op_error([&] { make_node(Op::BitNot, {p(DType::Float16)}); }, ErrorKind::Type,
                      {"bitwise_not", "float16"});
  expect_int_op_error(
      [&] {
        make_node(Op::FloorDiv, {p(DType::Bool), p(DType::Bool)});
      },
      ErrorKind::Type, {"floor_divide", "bool"});
}

// Floats: floor_divide is the floor of the exact quotient (1 // 0.1 is 9, though 1 / 0.1 rounds to
// 10), remainder takes the divisor's sign, fmod the dividend's; IEEE for zero and infinite
// divisors.
TEST(IntOps, FloatDivisionFamily) {
  const double inf = INFINITY;
  struct Row {
    double a, b, floordiv, mod, fmod;
  };
  const Row rows[] = {
      {7.5, 2, 3, 1.5, 1.5},     {-7.5, 2, -4, 0.5, -1.5}, {7.5, -2, -4, -0.5, 1.5},
      {-7.5, -2, 3, -1.5, -1.5}, {1, 0.1, 9, 0, 0},  // the 0s: see below
      {5, 0, inf, NAN, NAN},     {-5, 0, -inf, NAN, NAN},  {0, 0, NAN, NAN, NAN},
      {5, inf, 0, 5, 5},         {-5, inf, -1, inf, -5},   {5, -inf, -1, -inf, 5},
      {inf, 2, NAN, NAN, NAN},   {NAN, 2, NAN, NAN, NAN},  {-0.0, 3, -0.0, -0.0, -0.0},
  };
  for (DType t : {DType::Float64, DType::Float32}) {
    std::vector<double> av, bv;
    for (const Row& r : rows) av.push_back(r.a), bv.push_back(r.b);
    std::vector<float> af(av.begin(), av.end()), bf(bv.begin(), bv.end());
    for (const char* dev : kDevices) {
      const Device d = Device::parse(dev);
      const Shape s = {static_cast<int64_t>(av.size())};
      Tensor a =
          t == DType::Float64 ? from_host(av.data(), t, s, d) : from_host(af.data(), t, s, d);
      Tensor b =
          t == DType::Float64 ? from_host(bv.data(), t, s, d) : from_host(bf.data(), t, s, d);
      const auto q = floor_divide(a, b).to_vector<double>();
      const auto m = remainder(a, b).to_vector<double>();
      const auto f = fmod(a, b).to_vector<double>();
      for (size_t i = 0; i < av.size(); ++i) {
        const std::string at = std::to_string(av[i]) + ", " + std::to_string(bv[i]) + " as " +
                               std::string(dtype_name(t)) + " on " + dev;
        auto same = [&](double got, double want, const char* what) {
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got)) << what << "(" << at << "): " << got;
          } else if (i == 4 && std::string(what) != "floor_divide") {
            // fmod(1, 0.1) is 0.1 minus a rounding step in the dtype: compare to the dtype's fmod.
            const double want_t = t == DType::Float64 ? std::fmod(1.0, 0.1) : std::fmod(1.0f, 0.1f);
            EXPECT_EQ(got, want_t) << what << "(" << at << ")";
          } else {
            EXPECT_EQ(got, want) << what << "(" << at << ")";
            EXPECT_EQ(std::signbit(got), std::signbit(want))
                << what << "(" << at << "): the sign of " << got;
          }
        };
        same(q[i], rows[i].floordiv, "floor_divide");
        same(m[i], rows[i].mod, "remainder");
        same(f[i], rows[i].fmod, "fmod");
      }
    }
  }
}

TEST(IntOps, FloatRandomValuesAgreeWithTheInterpreter) {
  const Shape sa = {40, 1}, sb = {25};
  auto va = testing::random_floats(numel(sa), 5, -100.f, 100.f);
  auto vb = testing::random_floats(numel(sb), 6, -10.f, 10.f);
  for (Op o : {Op::FloorDiv, Op::Remainder, Op::Fmod}) {
    auto run = [&](const char* dev) {
      const Device d = Device::parse(dev);
      Tensor a = from_host(va.data(), DType::Float32, sa, d),
             b = from_host(vb.data(), DType::Float32, sb, d);
      Tensor r = o == Op::FloorDiv    ? floor_divide(a, b)
                 : o == Op::Remainder ? remainder(a, b)
                                      : fmod(a, b);
      return r.to_vector<double>();
    };
    const auto want = run("lazy:reference");
    // And against the definition: floor(a / b) within the quotient's rounding, a - b * q for %.
    for (size_t i = 0; i < 40; ++i)
      for (size_t j = 0; j < 25; ++j) {
        const double a = va[i], b = vb[j], got = want[i * 25 + j];
        if (o == Op::FloorDiv) {
          EXPECT_NEAR(got, std::floor(a / b), 1.0) << a << " // " << b;
        }
        if (o == Op::Remainder) {
          EXPECT_NEAR(got, a - b * std::floor(a / b), 1e-4 * std::fabs(b) + 1e-5)
              << a << " % " << b;
          EXPECT_TRUE(got == 0 || std::signbit(got) == std::signbit(b)) << a << " % " << b;
        }
        if (o == Op::Fmod) {
          EXPECT_NEAR(got, std::fmod(a, b), 1e-5) << "fmod " << a << ", " << b;
        }
      }
    for (const char* dev : {"lazy:cpu", "cpu"})
      testing::expect_close(run(dev), want, 1e-6, 1e-6, std::string(op_name(o)) + " on " + dev);
  }
}

// remainder's gradient is (1, -floor(a / b)) and fmod's (1, -trunc(a / b)), as torch's;
// floor_divide is a step function (zero almost everywhere).
TEST(IntOps, GradientsOfTheFloatForms) {
  const std::vector<float> va = {5.5f, -3.2f, 7.0f, -7.5f}, vb = {2.0f, 1.5f, -2.5f, -2.0f};
  for (const char* dev : {"cpu", "lazy:cpu"}) {
    const Device d = Device::parse(dev);
    for (Op o : {Op::FloorDiv, Op::Remainder, Op::Fmod}) {
      Tensor a = from_host(va.data(), DType::Float32, {4}, d).requires_grad_();
      Tensor b = from_host(vb.data(), DType::Float32, {4}, d).requires_grad_();
      Tensor y = o == Op::FloorDiv    ? floor_divide(a, b)
                 : o == Op::Remainder ? remainder(a, b)
                                      : fmod(a, b);
      y.sum().backward();
      const auto ga = a.grad().to_vector<double>(), gb = b.grad().to_vector<double>();
      for (size_t i = 0; i < 4; ++i) {
        const double q = static_cast<double>(va[i]) / vb[i];
        const double want_b = o == Op::FloorDiv    ? 0
                              : o == Op::Remainder ? -std::floor(q)
                                                   : -std::trunc(q);
        EXPECT_EQ(ga[i], o == Op::FloorDiv ? 0 : 1) << op_name(o) << " on " << dev;
        EXPECT_EQ(gb[i], want_b) << op_name(o) << " on " << dev << " at " << va[i] << ", " << vb[i];
      }
    }
  }
}

TEST(IntOps, ConstantsFoldToPythonsValues) {
  auto fold = [](Op o, double a, double b) {
    NodePtr n = make_node(o, {make_constant(DType::Float64, a), make_constant(DType::Float64, b)});
    PrimGraph g = simplify(decompose(collect_graph({n.get()})));
    const PNode& out = g.nodes[g.outputs[0]];
    EXPECT_EQ(out.op, Op::Constant) << op_name(o);
    return out.attrs.value;
  };
  EXPECT_EQ(fold(Op::FloorDiv, -7, 2), -4);
  EXPECT_EQ(fold(Op::FloorDiv, 1, 0.1), 9);
  EXPECT_EQ(fold(Op::Remainder, -7, 2), 1);
  EXPECT_EQ(fold(Op::Remainder, 7, -2), -1);
  EXPECT_EQ(fold(Op::Fmod, -7, 2), -1);
}

#ifdef LT_HAVE_CUDA
// Every new op for every dtype the IR accepts it on, fused into kernels of one translation unit
// and compiled by NVRTC for sm_90: the integer helpers (kPreambleIntOps) must compile for each
// register type, the float overloads for float and double (half types compute in float).
TEST(IntOpsCuda, EveryNewOpOfEveryDtypeCompiles) {
  const DType all[] = {DType::Bool,    DType::UInt8,    DType::Int8,    DType::Int32,  DType::Int64,
                       DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
  NodeList roots;
  for (Op o : {Op::FloorDiv, Op::Remainder, Op::Fmod, Op::BitAnd, Op::BitOr, Op::BitXor, Op::Shl,
               Op::Shr, Op::BitNot})
    for (DType t : all) {
      try {
        if (o == Op::BitNot)
          roots.push_back(make_node(o, {testing::param({37, 5}, t)}));
        else
          roots.push_back(make_node(o, {testing::param({37, 5}, t), testing::param({5}, t)}));
      } catch (const Error&) {  // a dtype the op does not take
      }
    }
  // floor_divide/remainder/fmod: 8 dtypes each; bitwise and/or/xor/not: 5; shifts: 4.
  ASSERT_EQ(roots.size(), 3u * 8 + 4u * 5 + 2u * 4);
  // And a chain with a scalar operand and a cast, as the runtime traces `(x // 3) % y << 1`.
  NodePtr x = testing::param({1000}, DType::Int32);
  NodePtr y =
      make_node(Op::Remainder, {make_node(Op::FloorDiv, {x, make_int_scalar(DType::Int32, 3)}),
                                testing::param({1000}, DType::Int32)});
  roots.push_back(make_node(Op::Shl, {y, make_constant(DType::Int32, 1)}));
  const Plan p = testing::plan_of(roots);
  const CudaModuleSource m = generate_cuda(p.kernels);
  // A float16 floor division is computed in float, then rounded to float16: after the op
  // (LT_CUDA_HALF_OPMATH=0) or where it is stored (the default).
  const char* half_rounded = cudagen::half_opmath() ? "lt_f2h(" : "lt_rh(lt_floordiv(";
  for (const char* fn : {"lt_floordiv<long long>(", "lt_remainder<unsigned char>(",
                         "lt_fmod<signed char>(", "lt_floordiv(", "lt_shl<int>(",
                         "lt_shr<long long>(", half_rounded, "T lt_floordiv(T a, T b)"})
    EXPECT_NE(m.source.find(fn), std::string::npos) << fn;
  std::vector<char> cubin;
  try {
    cubin = nvrtc_compile_cubin(m.source, "sm_90");
  } catch (const Error& e) {
    ADD_FAILURE() << e.what() << "\n---- source ----\n" << m.source;
  }
  ASSERT_GT(cubin.size(), 64u);
  EXPECT_EQ(std::string(cubin.data() + 1, 3), "ELF");
}

TEST(IntOpsCuda, ModulesWithoutTheOpsLeaveTheirHelpersOut) {
  const Plan p =
      testing::plan_of({make_node(Op::Add, {testing::param({64}), testing::param({64})})});
  EXPECT_EQ(generate_cuda(p.kernels).source.find("lt_floordiv"), std::string::npos);
}
#endif

}  // namespace
}  // namespace lt
