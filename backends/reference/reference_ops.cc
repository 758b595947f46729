// The reference interpreter's rule table: one line per primitive op, keyed by Op. Floating ops
// compute in double (the interpreter rounds to the node's dtype afterwards); integer ops compute
// in int64 with wrap-around. Semantics follow PyTorch.
#include <array>
#include <cmath>
#include <utility>

#include "backends/reference/kernels.h"
#include "backends/reference/reference_ops.h"

namespace lt {
namespace ref {
namespace {

constexpr size_t kNumOps = 0
#define LT_OP(N, name, arity, cls, prim, cost) +1
#include "ir/ops.def"
#undef LT_OP
    ;

// Integer pow as PyTorch computes it: square-and-multiply with wrap-around; a negative exponent
// gives 1 for base 1, +-1 for base -1 and 0 otherwise (integer division of 1 by the power).
int64_t int_pow(int64_t base, int64_t exp) {
  if (exp < 0) return base == 1 ? 1 : base == -1 ? (exp % 2 ? -1 : 1) : 0;
  int64_t r = 1;
  for (; exp; exp >>= 1, base = wrap_mul(base, base))
    if (exp & 1) r = wrap_mul(r, base);
  return r;
}

// Integer division as Python's // and % (PyTorch's floor_divide and remainder) and C's fmod, on
// int64 (narrower dtypes hold their values exactly; the interpreter wraps the result to the width,
// so int32's INT_MIN // -1 wraps as int32 arithmetic would). A zero divisor gives 0 and -1 is
// taken apart, so neither traps (ir/ops.def).
int64_t int_floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap_sub(0, a);  // INT64_MIN / -1 overflows
  const int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}
int64_t int_remainder(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  const int64_t r = a % b;
  return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}
int64_t int_fmod(int64_t a, int64_t b) { return b == 0 || b == -1 ? 0 : a % b; }

// PyTorch's div_floor_floating: floor of the exact quotient, derived from fmod (floor(a / b) can be
// one too high where a / b rounds up to an integer, e.g. 1 // 0.1 = 9); IEEE for b = 0.
double float_floor_div(double a, double b) {
  if (b == 0) return a / b;
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return std::copysign(0.0, a / b);
  double fl = std::floor(div);
  if (div - fl > 0.5) fl += 1;
  return fl;
}
// PyTorch's remainder of floats: fmod moved into the divisor's sign.
double float_remainder(double a, double b) {
  const double mod = std::fmod(a, b);
  return (mod != 0 && (b < 0) != (mod < 0)) ? mod + b : mod;
}

// Shifts on int64 values of any integer dtype: a count outside [0, 64) gives 0 (<<) or the sign
// fill (>>); counts from the dtype's width up to 63 shift every bit out of the narrower value, so
// once wrapped to the width that is PyTorch's rule too.
int64_t int_shl(int64_t a, int64_t n) {
  return n < 0 || n >= 64 ? 0 : static_cast<int64_t>(static_cast<uint64_t>(a) << n);
}
int64_t int_shr(int64_t a, int64_t n) { return a >> (n < 0 || n >= 64 ? 63 : n); }

// bitwise_not: ~x, wrapped to the width afterwards (uint8 ~200 = 55); on bool, logical not.
void eval_bitwise_not(Ctx& c) {
  const Value& a = *c.in[0];
  if (a.floating()) wrong_dtype(c, a);
  const bool logical = c.out.dtype == DType::Bool;
  c.out.i.resize(a.i.size());
  for (size_t k = 0; k < a.i.size(); ++k) c.out.i[k] = logical ? a.i[k] == 0 : ~a.i[k];
}

// torch.maximum/minimum: a NaN operand gives NaN (x != x only holds for NaN; integers never).
constexpr auto kMax = [](auto x, auto y) { return (x != x || x > y) ? x : y; };
constexpr auto kMin = [](auto x, auto y) { return (x != x || x < y) ? x : y; };

const std::pair<Op, EvalFn> kRules[] = {
    // Leaves and random numbers.
    {Op::Param, eval_param},
    {Op::Scalar, eval_scalar},
    {Op::Constant, eval_constant},
    {Op::Rand, eval_rand},
    // Unary (float only unless an integer form is given).
    {Op::Neg, unary<[](double x) { return -x; }, [](int64_t x) { return wrap_sub(0, x); }>},
    {Op::Exp, unary<[](double x) { return std::exp(x); }>},
    {Op::Log, unary<[](double x) { return std::log(x); }>},
    {Op::Sqrt, unary<[](double x) { return std::sqrt(x); }>},
    {Op::Sin, unary<[](double x) { return std::sin(x); }>},
    {Op::Cos, unary<[](double x) { return std::cos(x); }>},
    {Op::Tanh, unary<[](double x) { return std::tanh(x); }>},
    {Op::Erf, unary<[](double x) { return std::erf(x); }>},
    {Op::Abs, unary<[](double x) { return std::fabs(x); }, [](int64_t x) { return x < 0 ? wrap_sub(0, x) : x; }>},
    {Op::Floor, unary<[](double x) { return std::floor(x); }>},
    {Op::Recip, unary<[](double x) { return 1.0 / x; }>},
    {Op::Not, eval_not},
    {Op::BitNot, eval_bitwise_not},
    // Binary, broadcasting.
    {Op::Add, arith2<[](double x, double y) { return x + y; }, wrap_add>},
    {Op::Sub, arith2<[](double x, double y) { return x - y; }, wrap_sub>},
    {Op::Mul, arith2<[](double x, double y) { return x * y; }, wrap_mul>},
    {Op::Div, arith_float<[](double x, double y) { return x / y; }>},
    {Op::Pow, arith2<[](double x, double y) { return std::pow(x, y); }, int_pow>},
    {Op::Maximum, arith<kMax>},
    {Op::Minimum, arith<kMin>},
    {Op::FloorDiv, arith2<float_floor_div, int_floor_div>},
    {Op::Remainder, arith2<float_remainder, int_remainder>},
    {Op::Fmod, arith2<[](double x, double y) { return std::fmod(x, y); }, int_fmod>},
    {Op::BitAnd, arith_int<[](int64_t x, int64_t y) { return x & y; }>},
    {Op::BitOr, arith_int<[](int64_t x, int64_t y) { return x | y; }>},
    {Op::BitXor, arith_int<[](int64_t x, int64_t y) { return x ^ y; }>},
    {Op::Shl, arith_int<int_shl>},
    {Op::Shr, arith_int<int_shr>},
    // Comparisons: IEEE semantics, so a NaN operand makes all but ne false.
    {Op::Eq, predicate<[](auto x, auto y) { return x == y; }>},
    {Op::Ne, predicate<[](auto x, auto y) { return x != y; }>},
    {Op::Lt, predicate<[](auto x, auto y) { return x < y; }>},
    {Op::Le, predicate<[](auto x, auto y) { return x <= y; }>},
    {Op::Gt, predicate<[](auto x, auto y) { return (x > y); }>},
    {Op::Ge, predicate<[](auto x, auto y) { return (x >= y); }>},
    {Op::And, predicate<[](auto x, auto y) { return x != 0 && y != 0; }>},
    {Op::Or, predicate<[](auto x, auto y) { return x != 0 || y != 0; }>},
    {Op::Where, eval_where},
    {Op::Cast, eval_cast},
    // Reductions.
    {Op::ReduceSum, eval_reduce_sum},
    {Op::ReduceMax, eval_reduce_max},
    {Op::ReduceMin, eval_reduce_min},
    {Op::ReduceProd, eval_reduce_prod},
    // Movement.
    {Op::Reshape, eval_reshape},
    {Op::Permute, eval_permute},
    {Op::Expand, eval_expand},
    {Op::Slice, eval_slice},
    // Data-dependent indexing.
    {Op::Gather, eval_gather},
    {Op::ScatterAdd, eval_scatter_add},
    {Op::Conv2d, eval_conv2d},
    {Op::Conv2dGradInput, eval_conv2d_grad_input},
    {Op::Conv2dGradWeight, eval_conv2d_grad_weight},
    {Op::Attention, eval_attention},
    {Op::AttentionLse, eval_attention},
    {Op::AttentionGradQ, eval_attention_grad},
    {Op::AttentionGradK, eval_attention_grad},
    {Op::AttentionGradV, eval_attention_grad},
};

const std::array<EvalFn, kNumOps>& table() {
  static const std::array<EvalFn, kNumOps> t = [] {
    std::array<EvalFn, kNumOps> r{};
    for (const auto& [op, fn] : kRules) r[static_cast<size_t>(op)] = fn;
    return r;
  }();
  return t;
}

}  // namespace

EvalFn reference_rule(Op op) {
  auto k = static_cast<size_t>(op);
  return k < kNumOps ? table()[k] : nullptr;
}

}  // namespace ref

bool reference_supports(Op op) { return ref::reference_rule(op) != nullptr; }

}  // namespace lt
