// The scalar meaning of every elementwise primitive, written once: one element of an op's result
// from its operands' elements. Constant folding (lowering/simplify.cc) and the reference
// interpreter (backends/reference/reference_ops.cc) both read this table, so a folded constant is
// the value the oracle computes, and a new op's meaning is one entry here rather than one per
// reader. The code generators are held to it by the tests, which compare every backend with the
// interpreter. (tinygrad keeps one such table of each op's scalar meaning for its folding, its
// emulator and its validation.)
//
// Floating forms compute in double on operands exact in the node's dtype; the caller rounds the
// result to the dtype (round_to_dtype, ir/half.h). Integer forms compute in int64 with two's
// complement wrap-around; the caller wraps the result to the dtype's width (narrower dtypes'
// values are exact in int64, so wrapping once at the end gives the narrow arithmetic's result).
// Semantics follow PyTorch.
#pragma once
#include <cmath>
#include <cstdint>

#include "ir/ops.h"

namespace lt {

// Integer arithmetic wraps instead of overflowing (signed overflow is undefined in C++): computed
// in uint64.
inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// The forms, named (a form is a template argument of the interpreter's loops, which a lambda's
// function pointer cannot be). Inline where short, so the interpreter's per-element call inlines;
// scalar_ops.cc has the longer ones and says why each is written as it is.
namespace scalar {
inline double neg(double x) { return -x; }
inline int64_t neg_int(int64_t x) { return wrap_sub(0, x); }
inline double exp(double x) { return std::exp(x); }
inline double log(double x) { return std::log(x); }
inline double sqrt(double x) { return std::sqrt(x); }
inline double sin(double x) { return std::sin(x); }
inline double cos(double x) { return std::cos(x); }
inline double tanh(double x) { return std::tanh(x); }
inline double erf(double x) { return std::erf(x); }
inline double log1p(double x) { return std::log1p(x); }
inline double expm1(double x) { return std::expm1(x); }
inline double abs(double x) { return std::fabs(x); }
inline int64_t abs_int(int64_t x) { return x < 0 ? wrap_sub(0, x) : x; }
inline double floor(double x) { return std::floor(x); }
inline double recip(double x) { return 1.0 / x; }
// ~x, wrapped to the width afterwards (uint8 ~200 = 55); on bool, logical not.
inline int64_t bit_not(int64_t x) { return ~x; }
inline int64_t bool_not(int64_t x) { return x == 0; }
// logical_not of any dtype: x == 0 (NaN is not zero, so logical_not(NaN) is false).
template <class T>
bool logical_not(T x) {
  return x == 0;
}

inline double add(double x, double y) { return x + y; }
inline double sub(double x, double y) { return x - y; }
inline double mul(double x, double y) { return x * y; }
inline double div(double x, double y) { return x / y; }
inline double pow(double x, double y) { return std::pow(x, y); }
inline double fmod(double x, double y) { return std::fmod(x, y); }
int64_t int_pow(int64_t base, int64_t exp);
int64_t int_floor_div(int64_t a, int64_t b);
int64_t int_remainder(int64_t a, int64_t b);
int64_t int_fmod(int64_t a, int64_t b);
double float_floor_div(double a, double b);
double float_remainder(double a, double b);
// torch.maximum/minimum: a NaN operand gives NaN (x != x only holds for NaN; integers never).
template <class T>
T maximum(T x, T y) {
  return (x != x || x > y) ? x : y;
}
template <class T>
T minimum(T x, T y) {
  return (x != x || x < y) ? x : y;
}
inline int64_t bit_and(int64_t x, int64_t y) { return x & y; }
inline int64_t bit_or(int64_t x, int64_t y) { return x | y; }
inline int64_t bit_xor(int64_t x, int64_t y) { return x ^ y; }
int64_t int_shl(int64_t a, int64_t n);
int64_t int_shr(int64_t a, int64_t n);

// Comparisons: IEEE semantics, so a NaN operand makes all but ne false.
template <class T>
bool equal(T x, T y) {
  return x == y;
}
template <class T>
bool not_equal(T x, T y) {
  return x != y;
}
template <class T>
bool less(T x, T y) {
  return x < y;
}
template <class T>
bool less_equal(T x, T y) {
  return x <= y;
}
template <class T>
bool greater(T x, T y) {
  return x > y;
}
template <class T>
bool greater_equal(T x, T y) {
  return x >= y;
}
template <class T>
bool logical_and(T x, T y) {
  return x != 0 && y != 0;
}
template <class T>
bool logical_or(T x, T y) {
  return x != 0 || y != 0;
}
}  // namespace scalar

// One scalar form: a function, or none. Whether it is there is a flag, not a null test of the
// pointer: under UBSan GCC does not take a function's address to be non-null in a constant
// expression (-fsanitize=null implies -fno-delete-null-pointer-checks), and the interpreter picks
// its loops at compile time (backends/reference/kernels.h).
template <class F>
struct Form {
  F fn = nullptr;
  bool set = false;
  constexpr Form() = default;
  constexpr Form(F f) : fn(f), set(true) {}  // implicit: a table entry names the function
  constexpr explicit operator bool() const { return set; }
};

// One op's scalar forms. A missing form means ir/infer.cc rejects such operands for the op (erf of
// an integer, bitwise_and of floats), so no reader ever needs it.
struct ScalarRule {
  // Unary: on a floating operand; on an integer operand; on a bool operand where that differs
  // from the integer form (bool is stored 0/1, so ~ would not be bitwise_not's logical not).
  Form<double (*)(double)> f1;
  Form<int64_t (*)(int64_t)> i1;
  Form<int64_t (*)(int64_t)> b1;
  // Binary, both operands floating or both integer; the result has the operands' dtype.
  Form<double (*)(double, double)> f2;
  Form<int64_t (*)(int64_t, int64_t)> i2;
  // Predicates: a bool result whatever the operands' dtype.
  Form<bool (*)(double)> pf1;
  Form<bool (*)(int64_t)> pi1;
  Form<bool (*)(double, double)> pf2;
  Form<bool (*)(int64_t, int64_t)> pi2;

  constexpr bool unary() const { return f1.set || i1.set || pf1.set || pi1.set; }
  constexpr bool binary() const { return f2.set || i2.set || pf2.set || pi2.set; }
  constexpr bool empty() const { return !unary() && !binary(); }
};

// The table, keyed by op; empty for ops that are not elementwise or whose meaning needs more than
// the operands' values (where, cast, rand: the interpreter has its own rules for them).
constexpr ScalarRule scalar_rule(Op op) {
  using namespace scalar;
  switch (op) {
    // Unary (floats only unless an integer form is given).
    case Op::Neg:
      return {.f1 = neg, .i1 = neg_int};
    case Op::Exp:
      return {.f1 = scalar::exp};
    case Op::Log:
      return {.f1 = scalar::log};
    case Op::Sqrt:
      return {.f1 = scalar::sqrt};
    case Op::Sin:
      return {.f1 = scalar::sin};
    case Op::Cos:
      return {.f1 = scalar::cos};
    case Op::Tanh:
      return {.f1 = scalar::tanh};
    case Op::Erf:
      return {.f1 = scalar::erf};
    case Op::Log1p:
      return {.f1 = scalar::log1p};
    case Op::Expm1:
      return {.f1 = scalar::expm1};
    case Op::Abs:
      return {.f1 = scalar::abs, .i1 = abs_int};
    case Op::Floor:
      return {.f1 = scalar::floor};
    case Op::Recip:
      return {.f1 = recip};
    case Op::BitNot:
      return {.i1 = bit_not, .b1 = bool_not};
    case Op::Not:
      return {.pf1 = logical_not<double>, .pi1 = logical_not<int64_t>};
    // Binary arithmetic.
    case Op::Add:
      return {.f2 = add, .i2 = wrap_add};
    case Op::Sub:
      return {.f2 = sub, .i2 = wrap_sub};
    case Op::Mul:
      return {.f2 = mul, .i2 = wrap_mul};
    case Op::Div:
      return {.f2 = scalar::div};
    case Op::Pow:
      return {.f2 = scalar::pow, .i2 = int_pow};
    case Op::Maximum:
      return {.f2 = maximum<double>, .i2 = maximum<int64_t>};
    case Op::Minimum:
      return {.f2 = minimum<double>, .i2 = minimum<int64_t>};
    case Op::FloorDiv:
      return {.f2 = float_floor_div, .i2 = int_floor_div};
    case Op::Remainder:
      return {.f2 = float_remainder, .i2 = int_remainder};
    case Op::Fmod:
      return {.f2 = scalar::fmod, .i2 = int_fmod};
    // Bitwise ops and shifts: integers (and bool, stored 0/1, for and/or/xor) only.
    case Op::BitAnd:
      return {.i2 = bit_and};
    case Op::BitOr:
      return {.i2 = bit_or};
    case Op::BitXor:
      return {.i2 = bit_xor};
    case Op::Shl:
      return {.i2 = int_shl};
    case Op::Shr:
      return {.i2 = int_shr};
    // Comparisons and logical ops.
    case Op::Eq:
      return {.pf2 = equal<double>, .pi2 = equal<int64_t>};
    case Op::Ne:
      return {.pf2 = not_equal<double>, .pi2 = not_equal<int64_t>};
    case Op::Lt:
      return {.pf2 = less<double>, .pi2 = less<int64_t>};
    case Op::Le:
      return {.pf2 = less_equal<double>, .pi2 = less_equal<int64_t>};
    case Op::Gt:
      return {.pf2 = greater<double>, .pi2 = greater<int64_t>};
    case Op::Ge:
      return {.pf2 = greater_equal<double>, .pi2 = greater_equal<int64_t>};
    case Op::And:
      return {.pf2 = logical_and<double>, .pi2 = logical_and<int64_t>};
    case Op::Or:
      return {.pf2 = logical_or<double>, .pi2 = logical_or<int64_t>};
    default:
      return {};
  }
}

}  // namespace lt
