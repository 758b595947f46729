#include "backends/cpu/llvm_ops.h"

#include <llvm/IR/Module.h>

#include <cmath>
#include <cstring>
#include <string>

#include "backends/cpu/erf_table.h"
#include "backends/cpu/llvm_dtype.h"
#include "ir/error.h"

namespace lt::cpu {
namespace {

using llvm::IRBuilder;
using llvm::Value;
using llvm::Intrinsic::ID;

[[noreturn]] void unsupported(Op op, DType t) {
  fail(ErrorKind::NotImplemented, "not implemented: ", op_name(op), " for ", dtype_name(t),
       " on cpu");
}

// A libm function (tanhf, erf, ...) that LLVM has no intrinsic for; resolved from the process
// when the JIT links the kernel. It reads no memory we care about, so LICM may hoist it.
Value* call_libm(IRBuilder<>& b, llvm::Module& m, const char* f32_name, const char* f64_name,
                 Value* x) {
  llvm::Type* T = x->getType();
  auto callee = m.getOrInsertFunction(T->isDoubleTy() ? f64_name : f32_name,
                                      llvm::FunctionType::get(T, {T}, false));
  if (auto* fn = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    fn->setDoesNotThrow();
    fn->setDoesNotAccessMemory();
    fn->setWillReturn();
  }
  return b.CreateCall(callee, {x});
}

// erf of float32 as inline FMA code with no division or call, so a fused gelu loop vectorizes into
// straight-line vector arithmetic (erf is most of a gelu(layer_norm) kernel's work). Hosts with
// AVX2 and FMA use the cheaper table erf instead (erf_table.h); this one serves the others.
// Cephes/SLEEF shape with coefficients fitted for this code (Lawson-weighted least squares in
// float64 on Chebyshev nodes, then checked in float32): for |x| <= 0.921875, erf(x) = x + x P(x^2);
// above, erf(|x|) = 1 - 2^Q(|x|) with Q fitting log2(erfc) on [0.921875, 4] (past 4, erf rounds to
// +-1). Both halves are computed and selected, so there is no branch; it measures within 1.25 ulp
// of float64 erf over all floats (tests/python/test_cpu_erf.py).
Value* erf_f32(IRBuilder<>& b, Value* x) {
  llvm::Type* f = x->getType();
  llvm::Type* i32 = b.getInt32Ty();
  auto c = [&](double v) { return llvm::ConstantFP::get(f, v); };
  auto horner = [&](std::initializer_list<double> k, Value* v) {
    auto it = k.begin();
    Value* r = c(*it++);
    for (; it != k.end(); ++it) r = b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {r, v, c(*it)});
    return r;
  };
  // Small |x|: x + x P(x^2) keeps -0, tiny and subnormal x exact to the last bit, and NaN as NaN.
  Value* p = horner(
      {-0.000599095656, 0.00499320449, -0.0267666373, 0.112818167, -0.376124948, 0.128379151},
      b.CreateFMul(x, x));
  Value* small = b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {p, x, x});
  // Large |x|, clamped to 4 (a compare, so +-inf lands there too) where 2^Q is below half an ulp
  // of 1 and the result rounds to exactly 1.
  Value* t = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* tc = b.CreateSelect(b.CreateFCmpOGT(t, c(4.0)), c(4.0), t);
  Value* q = horner({0.00028236612, -0.00438737776, 0.0320544802, -0.149916306, -0.919288516,
                     -1.62687492, -0.000286446593},
                    tc);
  // 2^q with q in [-26, -1.7]: round to n by adding 1.5 * 2^23 (n lands in the sum's low mantissa
  // bits; no float-to-int conversion, which is poison on NaN), 2^(q - n) by a polynomial on
  // [-1/2, 1/2], and 2^n built in the exponent field (always a normal float here).
  const double magic = 12582912.0;
  Value* sum = b.CreateFAdd(q, c(magic));
  Value* n = b.CreateFSub(sum, c(magic));
  Value* e = horner(
      {0.000153458095, 0.00133999309, 0.00961848907, 0.0555032864, 0.240226462, 0.693147182, 1.0},
      b.CreateFSub(q, n));
  Value* pow2n =
      b.CreateShl(b.CreateSub(b.CreateBitCast(sum, i32), b.getInt32(0x4B400000 - 127)), 23);
  Value* large = b.CreateFSub(c(1.0), b.CreateFMul(e, b.CreateBitCast(pow2n, f)));
  large = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, large, x);
  return b.CreateSelect(b.CreateFCmpOGT(t, c(0.921875)), large, small);
}

// exp of float32 as inline FMA code (24 vector instructions per 8 floats) instead of a libmvec
// call per vector: softmax computes exp twice per element (the row sum, then the output), and a
// call clobbers every vector register of the fused loop around it. Cody-Waite: n = rint(x log2 e)
// by adding 1.5 * 2^23 (no float-to-int conversion, which is poison on NaN), r = x - n ln2 in two
// parts (ln2_hi has 9 significant bits, so n ln2_hi is exact for |n| < 2^15), exp(r) on
// [-ln2/2, ln2/2] as 1 + r + r^2 P(r) (Cephes' degree-5 P), then times 2^n. 2^n is applied as two
// factors 2^(n>>1) and 2^(n - (n>>1)), both normal floats for n in [-150, 128], so overflow to inf
// and gradual underflow to subnormals and 0 come out of the last multiply, rounded once. x is
// clamped to [-104, 89] by compares (NaN passes through them), where exp is already 0 / inf.
// Measured within 1.01 ulp of float64 exp (tests/python/test_cpu_exp.py).
Value* exp_f32(IRBuilder<>& b, Value* x) {
  llvm::Type* f = x->getType();
  llvm::Type* i32 = x->getType()->getWithNewType(b.getInt32Ty());
  auto c = [&](double v) { return llvm::ConstantFP::get(f, v); };
  auto fma = [&](Value* p, Value* q, Value* r) {
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {p, q, r});
  };
  Value* xc = b.CreateSelect(b.CreateFCmpOGT(x, c(89.0)), c(89.0), x);
  xc = b.CreateSelect(b.CreateFCmpOLT(xc, c(-104.0)), c(-104.0), xc);
  const double magic = 12582912.0;
  Value* t = fma(xc, c(M_LOG2E), c(magic));
  Value* n = b.CreateFSub(t, c(magic));
  Value* r = fma(n, c(-0.693359375), xc);
  r = fma(n, c(2.12194440e-4), r);
  Value* p = c(1.9875691500e-4);
  for (double k :
       {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
    p = fma(p, r, c(k));
  Value* y = b.CreateFAdd(fma(p, b.CreateFMul(r, r), r), c(1.0));
  // n as an integer: the sum's bits minus those of 1.5 * 2^23.
  Value* ni = b.CreateSub(b.CreateBitCast(t, i32), llvm::ConstantInt::get(i32, 0x4B400000));
  Value* half = b.CreateAShr(ni, 1);
  auto pow2 = [&](Value* e) {
    return b.CreateBitCast(b.CreateShl(b.CreateAdd(e, llvm::ConstantInt::get(i32, 127)), 23), f);
  };
  return b.CreateFMul(b.CreateFMul(y, pow2(half)), pow2(b.CreateSub(ni, half)));
}

// tanh of float32 as inline code on exp_f32, so a fused LSTM or GRU cell (two tanh per element)
// vectorizes instead of calling libm's tanhf per element. Cephes' tanhf scheme: for |x| < 0.625,
// x + x^3 P(x^2) (its degree-4 P), which keeps tiny x exact; above, 1 - 2 / (exp(2|x|) + 1)
// with x's sign (exp_f32 clamps large arguments, so this reaches +-1, and NaN stays NaN). Measured
// within 2 ulp of float64 tanh over the float range (tests/python/test_cpu_tanh.py).
Value* tanh_f32(IRBuilder<>& b, Value* x) {
  llvm::Type* f = x->getType();
  auto c = [&](double v) { return llvm::ConstantFP::get(f, v); };
  auto fma = [&](Value* p, Value* q, Value* r) {
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {p, q, r});
  };
  Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* z = b.CreateFMul(x, x);
  Value* p = c(-5.70498872745e-3);
  for (double k : {2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1})
    p = fma(p, z, c(k));
  Value* small = fma(b.CreateFMul(p, z), x, x);
  Value* e = exp_f32(b, b.CreateFAdd(ax, ax));
  Value* large = b.CreateFSub(c(1.0), b.CreateFDiv(c(2.0), b.CreateFAdd(e, c(1.0))));
  // An unordered compare sends NaN to the large branch, which keeps it NaN. x's sign on both
  // branches: tanh is odd, and -0 + (-0)(+0)P would round to +0.
  Value* y = b.CreateSelect(b.CreateFCmpOLT(ax, c(0.625)), small, large);
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, y, x);
}

// sin or cos of float32 as inline FMA code, so a fused chain vectorizes into straight-line vector
// arithmetic instead of a libmvec call per op (a call clobbers every vector register, and the 20
// calls of `x = x + sin(x)` x20 bound that chain). SLEEF's 3.5-ulp scheme: reduce by pi with a
// Cody-Waite split, then an odd degree-9 polynomial on [-pi/2, pi/2]. With FMA, 3 parts suffice
// for |x| < 39000: the first product step is exact (x - q pi_1 has at most 24 significant bits)
// and pi_1 + pi_2 + pi_3 is pi to 2^-70. Each part is pi's remainder rounded toward zero, so all
// are positive and x = -0 (q = +0) stays -0 through the fmas (-0 + +0 would be +0). Measured
// within 1.82 ulp of float64 sin/cos over every float below 39000 (tests/python/test_cpu_trig.py).
// Larger |x| would need Payne-Hanek: instead the kernel's wrapper sees it in *range_flag and
// reruns its range on the libm path (codegen.cc).
//
// Each step is kept short (18 vector instructions): rint(x/pi) by one FMA, and the last polynomial
// step multiplies by d^3 computed beside u rather than by u * d after it. The `x = x + sin(x)` x20
// loop (8 interleaved vectors, codegen.cc) is still bound by instruction decode and spills (a
// 25 KB body, 4,200 instructions for 160 sin; llvm-mca puts the FMA units at ~40% busy).
Value* sin_cos_f32(IRBuilder<>& b, Value* x, bool cos, Value* range_flag, bool track) {
  llvm::Type* f = x->getType();
  llvm::Type* i32 = b.getInt32Ty();
  auto c = [&](double v) { return llvm::ConstantFP::get(f, v); };
  auto fma = [&](Value* p, Value* q, Value* r) {
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {p, q, r});
  };
  if (track) emit_trig_track(b, x, range_flag);
  // Round to an integer by adding 1.5 * 2^23: exact below 2^22, and the integer's low bit lands
  // in the sum's lowest mantissa bit (no float-to-int conversion, which is poison on NaN).
  // cos(x) = sin(x - q pi/2) with q = 2 rint(x/pi - 1/2) + 1.
  const double magic = 12582912.0;
  Value* t = cos ? b.CreateFAdd(fma(x, c(1.0 / M_PI), c(-0.5)), c(magic))
                 : fma(x, c(1.0 / M_PI), c(magic));
  Value* n = b.CreateFSub(t, c(magic));
  Value* q = cos ? fma(n, c(2.0), c(1.0)) : n;
  const double split[3] = {3.141592502593994, 1.5099578831723193e-07, 1.078060505991553e-14};
  Value* d = x;
  for (double part : split) d = fma(q, c(cos ? -0.5 * part : -part), d);
  Value* s = b.CreateFMul(d, d);
  Value* d3 = b.CreateFMul(s, d);
  Value* u = c(2.6083159809786593541503e-06);
  for (double k :
       {-0.0001981069071916863322258, 0.00833307858556509017944336, -0.166666597127914428710938})
    u = fma(u, s, c(k));
  // sin(d) has the sign of d on [-pi/2, pi/2]; d + d^3 u loses it only at d = -0 (-0 + +0 = +0),
  // which OR-ing d's sign bit back keeps (sin(-0) = -0).
  Value* r = b.CreateBitCast(fma(d3, u, d), i32);
  Value* sign = b.getInt32(0x80000000u);
  r = b.CreateOr(r, b.CreateAnd(b.CreateBitCast(d, i32), sign));
  // sin(d + n pi) = (-1)^n sin(d); for cos the sign flips when n is even.
  Value* flip = b.CreateShl(b.CreateBitCast(t, i32), 31);
  if (cos) flip = b.CreateXor(flip, sign);
  return b.CreateBitCast(b.CreateXor(r, flip), f);
}

Value* unary(IRBuilder<>& b, llvm::Module& m, Op op, DType t, Value* a, Value* range_flag,
             bool track) {
  const bool fp = is_floating(t);
  if (op == Op::Neg) {
    if (t == DType::Bool) unsupported(op, t);
    return fp ? b.CreateFNeg(a) : b.CreateSub(llvm::ConstantInt::get(a->getType(), 0), a);
  }
  if (op == Op::Abs) {
    if (!fp) {
      if (t == DType::Bool) unsupported(op, t);
      if (is_unsigned(t)) return a;
      return b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, a,
                                     b.getFalse());  // INT_MIN stays INT_MIN
    }
    return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a);
  }
  if (op == Op::BitNot) {  // ~x; on bool (i1), logical not
    if (fp) unsupported(op, t);
    return b.CreateNot(a);
  }
  if (!fp) unsupported(op, t);
  ID id = llvm::Intrinsic::not_intrinsic;
  switch (op) {
    case Op::Exp:
      if (a->getType()->getScalarType()->isFloatTy()) return exp_f32(b, a);
      id = llvm::Intrinsic::exp;
      break;
    case Op::Log:
      id = llvm::Intrinsic::log;
      break;
    case Op::Sqrt:
      id = llvm::Intrinsic::sqrt;
      break;
    case Op::Sin:
    case Op::Cos:
      if (range_flag && a->getType()->isFloatTy())
        return sin_cos_f32(b, a, op == Op::Cos, range_flag, track);
      id = op == Op::Sin ? llvm::Intrinsic::sin : llvm::Intrinsic::cos;
      break;
    case Op::Floor:
      id = llvm::Intrinsic::floor;
      break;
    case Op::Tanh:
      if (a->getType()->getScalarType()->isFloatTy()) return tanh_f32(b, a);
      return call_libm(b, m, "tanhf", "tanh", a);
    case Op::Erf:
      if (a->getType()->isFloatTy())
        return erf_table_available() ? emit_erf_table_call(b, m, a) : erf_f32(b, a);
      return call_libm(b, m, "erff", "erf", a);
    case Op::Log1p:
      return call_libm(b, m, "log1pf", "log1p", a);
    case Op::Expm1:
      return call_libm(b, m, "expm1f", "expm1", a);
    case Op::Recip:
      return b.CreateFDiv(llvm::ConstantFP::get(a->getType(), 1.0), a);
    default:
      unsupported(op, t);
  }
  return b.CreateUnaryIntrinsic(id, a);
}

// Integer x^y as PyTorch computes it: square-and-multiply with wrap-around, unrolled over every
// bit of y with selects (no branch, so it vectorizes like the other elementwise ops); for a
// negative y (signed types) 1 for x = 1, +-1 for x = -1 and 0 otherwise.
Value* int_pow(IRBuilder<>& b, bool is_signed, Value* x, Value* y) {
  llvm::Type* T = x->getType();
  auto k = [&](int64_t v) { return llvm::ConstantInt::get(T, static_cast<uint64_t>(v), true); };
  Value* r = k(1);
  Value* base = x;
  Value* e = y;
  const unsigned bits = T->getScalarSizeInBits();
  for (unsigned i = 0; i < bits; ++i) {
    r = b.CreateSelect(b.CreateTrunc(e, T->getWithNewBitWidth(1)), b.CreateMul(r, base), r);
    if (i + 1 == bits) break;
    base = b.CreateMul(base, base);
    e = b.CreateLShr(e, k(1));
  }
  if (!is_signed) return r;
  Value* odd = b.CreateTrunc(y, T->getWithNewBitWidth(1));
  Value* neg = b.CreateSelect(
      b.CreateICmpEQ(x, k(1)), k(1),
      b.CreateSelect(b.CreateICmpEQ(x, k(-1)), b.CreateSelect(odd, k(-1), k(1)), k(0)));
  return b.CreateSelect(b.CreateICmpSLT(y, k(0)), neg, r);
}

// Integer floor_divide / remainder / fmod without a trap: the divisor is made safe first (0 and,
// for signed types, -1 become 1: x / 0 traps, and so does INT_MIN / -1) and the answer for those
// divisors selected after: 0 for a zero divisor (ir/ops.def), and for -1 the quotient -x
// (wrapping; the remainder x % 1 is already 0). Selects, not branches, so the loop still
// vectorizes (the division itself is scalarized on x86).
Value* int_division(IRBuilder<>& b, Op op, bool is_signed, Value* x, Value* y) {
  llvm::Type* T = x->getType();
  Value* zero = llvm::ConstantInt::get(T, 0);
  Value* one = llvm::ConstantInt::get(T, 1);
  Value* by_zero = b.CreateICmpEQ(y, zero);
  Value* by_minus_one =
      is_signed ? b.CreateICmpEQ(y, llvm::ConstantInt::getSigned(T, -1)) : b.getFalse();
  Value* safe = b.CreateSelect(b.CreateOr(by_zero, by_minus_one), one, y);
  Value* r = is_signed ? b.CreateSRem(x, safe) : b.CreateURem(x, safe);
  Value* out;
  if (op == Op::Fmod) {
    out = r;
  } else {
    // Truncation rounds toward 0; when the remainder and the divisor differ in sign, floor is one
    // lower and the remainder one divisor higher (never for unsigned types).
    Value* adjust =
        is_signed ? b.CreateAnd(b.CreateICmpNE(r, zero), b.CreateICmpSLT(b.CreateXor(r, y), zero))
                  : b.getFalse();
    if (op == Op::Remainder) {
      out = b.CreateSelect(adjust, b.CreateAdd(r, y), r);
    } else {
      Value* q = is_signed ? b.CreateSDiv(x, safe) : b.CreateUDiv(x, safe);
      out = b.CreateSelect(adjust, b.CreateSub(q, one), q);
      out = b.CreateSelect(by_minus_one, b.CreateSub(zero, x), out);
    }
  }
  return b.CreateSelect(by_zero, zero, out);
}

// Floats: remainder and floor_divide as PyTorch computes them from fmod (frem). floor_divide is
// div_floor_floating: the floor of the exact quotient (floor(x / y) can be one too high where
// x / y rounds up to an integer), 0 with the quotient's sign, and IEEE x / y for y = 0.
Value* float_division(IRBuilder<>& b, Op op, Value* x, Value* y) {
  llvm::Type* T = x->getType();
  auto c = [&](double v) { return llvm::ConstantFP::get(T, v); };
  Value* mod = b.CreateFRem(x, y);
  if (op == Op::Fmod) return mod;
  Value* adjust = b.CreateAnd(b.CreateFCmpUNE(mod, c(0)),
                              b.CreateXor(b.CreateFCmpOLT(y, c(0)), b.CreateFCmpOLT(mod, c(0))));
  if (op == Op::Remainder) return b.CreateSelect(adjust, b.CreateFAdd(mod, y), mod);
  Value* quot = b.CreateFDiv(x, y);
  Value* div = b.CreateFDiv(b.CreateFSub(x, mod), y);
  div = b.CreateSelect(adjust, b.CreateFSub(div, c(1)), div);
  Value* fl = b.CreateUnaryIntrinsic(llvm::Intrinsic::floor, div);
  fl = b.CreateSelect(b.CreateFCmpOGT(b.CreateFSub(div, fl), c(0.5)), b.CreateFAdd(fl, c(1)), fl);
  Value* signed_zero = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, c(0), quot);
  Value* out = b.CreateSelect(b.CreateFCmpOEQ(div, c(0)), signed_zero, fl);
  return b.CreateSelect(b.CreateFCmpOEQ(y, c(0)), quot, out);
}

// Shifts as PyTorch's: a count outside [0, bits) (a negative one compares as huge unsigned) gives
// 0 for << and the sign fill for >> (0 for unsigned types). The count is clamped before the shift,
// whose result LLVM leaves undefined (poison) for counts >= bits.
Value* shift(IRBuilder<>& b, Op op, bool is_signed, Value* x, Value* n) {
  llvm::Type* T = x->getType();
  const uint64_t bits = T->getScalarSizeInBits();
  Value* oob = b.CreateICmpUGE(n, llvm::ConstantInt::get(T, bits));
  Value* zero = llvm::ConstantInt::get(T, 0);
  if (op == Op::Shl) return b.CreateSelect(oob, zero, b.CreateShl(x, b.CreateSelect(oob, zero, n)));
  if (!is_signed) return b.CreateSelect(oob, zero, b.CreateLShr(x, b.CreateSelect(oob, zero, n)));
  return b.CreateAShr(x, b.CreateSelect(oob, llvm::ConstantInt::get(T, bits - 1), n));
}

Value* binary(IRBuilder<>& b, Op op, DType t, Value* x, Value* y) {
  const bool fp = is_floating(t);
  const bool u = is_unsigned(t);
  switch (op) {
    case Op::FloorDiv:
    case Op::Remainder:
    case Op::Fmod:
      if (t == DType::Bool) unsupported(op, t);
      return fp ? float_division(b, op, x, y) : int_division(b, op, !u, x, y);
    case Op::BitAnd:  // on bool (i1) these are the logical ops
      if (fp) unsupported(op, t);
      return b.CreateAnd(x, y);
    case Op::BitOr:
      if (fp) unsupported(op, t);
      return b.CreateOr(x, y);
    case Op::BitXor:
      if (fp) unsupported(op, t);
      return b.CreateXor(x, y);
    case Op::Shl:
    case Op::Shr:
      if (fp || t == DType::Bool) unsupported(op, t);
      return shift(b, op, !u, x, y);
    case Op::Add:
      if (t == DType::Bool) return b.CreateOr(x, y);
      return fp ? b.CreateFAdd(x, y) : b.CreateAdd(x, y);  // integers wrap
    case Op::Sub:
      if (t == DType::Bool) unsupported(op, t);
      return fp ? b.CreateFSub(x, y) : b.CreateSub(x, y);
    case Op::Mul:
      if (t == DType::Bool) return b.CreateAnd(x, y);
      return fp ? b.CreateFMul(x, y) : b.CreateMul(x, y);
    case Op::Div:
      if (!fp) unsupported(op, t);
      return b.CreateFDiv(x, y);
    case Op::Pow:
      if (t == DType::Bool) unsupported(op, t);
      if (!fp) return int_pow(b, !u, x, y);
      return b.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, y);
    case Op::Maximum:  // NaN-propagating like torch.maximum
      if (fp) return b.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, x, y);
      return b.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, x, y);
    case Op::Minimum:
      if (fp) return b.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, x, y);
      return b.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, x, y);
    default:
      unsupported(op, t);
  }
}

Value* compare(IRBuilder<>& b, Op op, DType t, Value* x, Value* y) {
  using P = llvm::CmpInst::Predicate;
  P p;
  if (is_floating(t)) {
    // Ordered predicates are false on NaN; `ne` is unordered, so true on NaN.
    switch (op) {
      case Op::Eq:
        p = P::FCMP_OEQ;
        break;
      case Op::Ne:
        p = P::FCMP_UNE;
        break;
      case Op::Lt:
        p = P::FCMP_OLT;
        break;
      case Op::Le:
        p = P::FCMP_OLE;
        break;
      case Op::Gt:
        p = P::FCMP_OGT;
        break;
      case Op::Ge:
        p = P::FCMP_OGE;
        break;
      default:
        unsupported(op, t);
    }
    return b.CreateFCmp(p, x, y);
  }
  const bool u = is_unsigned(t);
  switch (op) {
    case Op::Eq:
      p = P::ICMP_EQ;
      break;
    case Op::Ne:
      p = P::ICMP_NE;
      break;
    case Op::Lt:
      p = u ? P::ICMP_ULT : P::ICMP_SLT;
      break;
    case Op::Le:
      p = u ? P::ICMP_ULE : P::ICMP_SLE;
      break;
    case Op::Gt:
      p = u ? P::ICMP_UGT : P::ICMP_SGT;
      break;
    case Op::Ge:
      p = u ? P::ICMP_UGE : P::ICMP_SGE;
      break;
    default:
      unsupported(op, t);
  }
  return b.CreateICmp(p, x, y);
}

}  // namespace

Value* emit_elementwise(IRBuilder<>& b, llvm::Module& m, Op op, DType result, DType operand,
                        Value* a, Value* bv, Value* c, Value* trig_range_flag,
                        bool trig_track_args) {
  auto need = [&](Value* v) {
    if (!v) fail(ErrorKind::Runtime, "internal: ", op_name(op), " is missing an operand");
    return v;
  };
  switch (op_info(op).cls) {
    case OpClass::Unary:
      return unary(b, m, op, result, convert(b, need(a), operand, result), trig_range_flag,
                   trig_track_args);
    case OpClass::Predicate1:
      return b.CreateNot(to_bool(b, need(a), operand));
    case OpClass::Binary:
      return binary(b, op, result, convert(b, need(a), operand, result),
                    convert(b, need(bv), operand, result));
    case OpClass::Compare:
      return compare(b, op, operand, need(a), need(bv));
    case OpClass::Logical: {
      Value* x = to_bool(b, need(a), operand);
      Value* y = to_bool(b, need(bv), operand);
      if (op == Op::And) return b.CreateAnd(x, y);
      if (op == Op::Or) return b.CreateOr(x, y);
      unsupported(op, operand);
    }
    case OpClass::Where:
      // `operand` is b's dtype here; the condition is bool (or tested against zero).
      return b.CreateSelect(need(a), convert(b, need(bv), operand, result),
                            convert(b, need(c), operand, result));
    case OpClass::Cast:
      return convert(b, need(a), operand, result);
    default:
      break;
  }
  fail(ErrorKind::NotImplemented, "not implemented: ", op_name(op), " inside a cpu kernel");
}

void emit_trig_track(IRBuilder<>& b, Value* x, Value* range_flag) {
  // The slot keeps the largest |x| seen, as its bit pattern (non-negative floats order like their
  // bits): an unsigned-max reduction, one instruction per vector, which the loop vectorizer
  // handles however many values a body folds in (a chain of selects it would not).
  Value* abs_bits =
      b.CreateBitCast(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x), b.getInt32Ty());
  Value* seen = b.CreateLoad(b.getInt32Ty(), range_flag);
  b.CreateStore(b.CreateBinaryIntrinsic(llvm::Intrinsic::umax, seen, abs_bits), range_flag);
}

Value* emit_trig_out_of_range(IRBuilder<>& b, Value* max_abs_bits, float limit) {
  // NaN's bits are above every float's: a NaN reruns too (libm returns NaN as well).
  uint32_t bits;
  std::memcpy(&bits, &limit, sizeof bits);
  return b.CreateICmpUGE(max_abs_bits, b.getInt32(bits));
}

bool has_fast_trig(Op op, DType t) {
  // Float16 and BFloat16 compute in float32 (llvm_dtype.h).
  return (op == Op::Sin || op == Op::Cos) && is_floating(t) && t != DType::Float64;
}

Value* emit_reduce_combine(IRBuilder<>& b, Op reduce_op, DType t, Value* acc, Value* v) {
  const bool fp = is_floating(t);
  const bool u = is_unsigned(t);
  switch (reduce_op) {
    case Op::ReduceSum:
    case Op::ReduceProd: {
      const bool sum = reduce_op == Op::ReduceSum;
      if (t == DType::Bool) return sum ? b.CreateOr(acc, v) : b.CreateAnd(acc, v);
      if (!fp) return sum ? b.CreateAdd(acc, v) : b.CreateMul(acc, v);
      // Reassociation lets the loop vectorizer keep several partial sums.
      llvm::IRBuilder<>::FastMathFlagGuard guard(b);
      llvm::FastMathFlags fmf;
      fmf.setAllowReassoc();
      b.setFastMathFlags(fmf);
      return sum ? b.CreateFAdd(acc, v) : b.CreateFMul(acc, v);
    }
    case Op::ReduceMax:
      if (fp) return b.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, acc, v);
      return b.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, acc, v);
    case Op::ReduceMin:
      if (fp) return b.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, acc, v);
      return b.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, acc, v);
    default:
      break;
  }
  fail(ErrorKind::NotImplemented, "not implemented: reduction ", op_name(reduce_op), " on cpu");
}

Value* emit_rand_uniform(IRBuilder<>& b, Value* seed, Value* offset, Value* counter, int64_t stream,
                         DType t) {
  // Plain (wrapping) 64-bit arithmetic, exactly loop::splitmix64 over the mixed key.
  Value* key = b.CreateAdd(b.CreateAdd(offset, b.CreateShl(counter, 1)),
                           b.getInt64(static_cast<uint64_t>(stream)));
  Value* z = b.CreateAdd(b.CreateMul(seed, b.getInt64(0xd1342543de82ef95ull)), key);
  z = b.CreateAdd(z, b.getInt64(0x9e3779b97f4a7c15ull));
  z = b.CreateMul(b.CreateXor(z, b.CreateLShr(z, 30)), b.getInt64(0xbf58476d1ce4e5b9ull));
  z = b.CreateMul(b.CreateXor(z, b.CreateLShr(z, 27)), b.getInt64(0x94d049bb133111ebull));
  z = b.CreateXor(z, b.CreateLShr(z, 31));
  if (t == DType::Float64) {
    Value* d = b.CreateUIToFP(b.CreateLShr(z, 11), b.getDoubleTy());
    return b.CreateFMul(d, llvm::ConstantFP::get(b.getDoubleTy(), 0x1.0p-53));
  }
  // 24 bits scaled by 2^-24 are exact in float32.
  Value* f = b.CreateUIToFP(b.CreateLShr(z, 40), b.getFloatTy());
  return b.CreateFMul(f, llvm::ConstantFP::get(b.getFloatTy(), 0x1.0p-24));
}

}  // namespace lt::cpu
