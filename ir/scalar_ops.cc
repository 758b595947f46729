// The scalar forms of ir/scalar_ops.h that take more than an expression: PyTorch's integer pow,
// its division family (ir/ops.def: nothing traps) and its shifts.
#include "ir/scalar_ops.h"

namespace lt::scalar {

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
// int64 (narrower dtypes hold their values exactly; the caller wraps the result to the width,
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

}  // namespace lt::scalar
