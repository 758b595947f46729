#include "backends/cpu/llvm_dtype.h"

#include <cmath>
#include <limits>

#include "ir/error.h"
#include "ir/half.h"

namespace lt::cpu {
namespace {

using llvm::IRBuilder;
using llvm::Value;

// float -> float16 bits, round to nearest even (F. Giesen's float_to_half_fast3_rtne, with
// selects instead of branches). NaN -> quiet NaN 0x7e00 | sign, overflow -> inf.
Value* float_to_half_bits(IRBuilder<>& b, Value* f) {
  Value* u = b.CreateBitCast(f, b.getInt32Ty());
  Value* sign = b.CreateAnd(u, b.getInt32(0x80000000u));
  Value* a = b.CreateXor(u, sign);
  Value* infnan = b.CreateSelect(b.CreateICmpUGT(a, b.getInt32(0x7f800000u)), b.getInt32(0x7e00u),
                                 b.getInt32(0x7c00u));
  // Subnormal results: adding 0.5f aligns the 10 mantissa bits at the bottom with an RNE add.
  Value* sum =
      b.CreateFAdd(b.CreateBitCast(a, b.getFloatTy()), llvm::ConstantFP::get(b.getFloatTy(), 0.5));
  Value* sub = b.CreateSub(b.CreateBitCast(sum, b.getInt32Ty()), b.getInt32(0x3f000000u));
  // Normal results: rebias the exponent (-112 << 23) and round half to even on bit 13.
  Value* odd = b.CreateAnd(b.CreateLShr(a, 13), b.getInt32(1));
  Value* nrm = b.CreateAdd(a, b.getInt32(0xc8000fffu));
  nrm = b.CreateLShr(b.CreateAdd(nrm, odd), 13);
  Value* r = b.CreateSelect(b.CreateICmpULT(a, b.getInt32(113u << 23)), sub, nrm);
  r = b.CreateSelect(b.CreateICmpUGE(a, b.getInt32(143u << 23)), infnan, r);
  r = b.CreateOr(r, b.CreateLShr(sign, 16));
  return b.CreateTrunc(r, b.getInt16Ty());
}

// float16 bits -> float (exact).
Value* half_bits_to_float(IRBuilder<>& b, Value* h) {
  llvm::Type* fty = b.getFloatTy();
  Value* x = b.CreateZExt(h, b.getInt32Ty());
  Value* o = b.CreateShl(b.CreateAnd(x, b.getInt32(0x7fff)), 13);
  Value* e = b.CreateAnd(o, b.getInt32(0x0f800000));
  Value* norm = b.CreateAdd(o, b.getInt32(0x38000000));    // (127 - 15) << 23
  Value* infnan = b.CreateAdd(o, b.getInt32(0x70000000));  // + (128 - 16) << 23 more
  // Subnormals: build 2^-14 * (1 + m) and subtract 2^-14, which is exact.
  Value* den = b.CreateBitCast(b.CreateAdd(o, b.getInt32(0x38800000)), fty);
  den = b.CreateBitCast(b.CreateFSub(den, llvm::ConstantFP::get(fty, 6.103515625e-05)),
                        b.getInt32Ty());
  Value* r = b.CreateSelect(b.CreateICmpEQ(e, b.getInt32(0)), den, norm);
  r = b.CreateSelect(b.CreateICmpEQ(e, b.getInt32(0x0f800000)), infnan, r);
  r = b.CreateOr(r, b.CreateShl(b.CreateAnd(x, b.getInt32(0x8000)), 16));
  return b.CreateBitCast(r, fty);
}

// float -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN.
Value* float_to_bf16_bits(IRBuilder<>& b, Value* f) {
  Value* u = b.CreateBitCast(f, b.getInt32Ty());
  Value* lsb = b.CreateAnd(b.CreateLShr(u, 16), b.getInt32(1));
  Value* rounded = b.CreateLShr(b.CreateAdd(u, b.CreateAdd(lsb, b.getInt32(0x7fff))), 16);
  Value* qnan = b.CreateOr(b.CreateLShr(u, 16), b.getInt32(0x40));
  Value* isnan = b.CreateFCmpUNO(f, f);
  return b.CreateTrunc(b.CreateSelect(isnan, qnan, rounded), b.getInt16Ty());
}

Value* bf16_bits_to_float(IRBuilder<>& b, Value* h) {
  return b.CreateBitCast(b.CreateShl(b.CreateZExt(h, b.getInt32Ty()), 16), b.getFloatTy());
}

bool is_float_kind(DType t) { return is_floating(t); }

}  // namespace

llvm::Type* storage_type(llvm::LLVMContext& ctx, DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8:
      return llvm::Type::getInt8Ty(ctx);
    case DType::Int32:
      return llvm::Type::getInt32Ty(ctx);
    case DType::Int64:
      return llvm::Type::getInt64Ty(ctx);
    case DType::Float16:
    case DType::BFloat16:
      return llvm::Type::getInt16Ty(ctx);
    case DType::Float32:
      return llvm::Type::getFloatTy(ctx);
    case DType::Float64:
      return llvm::Type::getDoubleTy(ctx);
  }
  fail(ErrorKind::NotImplemented, "not implemented: dtype ", static_cast<int>(t), " on cpu");
}

llvm::Type* compute_type(llvm::LLVMContext& ctx, DType t) {
  switch (t) {
    case DType::Bool:
      return llvm::Type::getInt1Ty(ctx);
    case DType::Float16:
    case DType::BFloat16:
      return llvm::Type::getFloatTy(ctx);
    default:
      return storage_type(ctx, t);
  }
}

Value* from_storage(IRBuilder<>& b, Value* raw, DType t) {
  switch (t) {
    case DType::Bool:
      return b.CreateICmpNE(raw, b.getInt8(0));
    case DType::Float16:
      return half_bits_to_float(b, raw);
    case DType::BFloat16:
      return bf16_bits_to_float(b, raw);
    default:
      return raw;
  }
}

Value* to_storage(IRBuilder<>& b, Value* v, DType t) {
  switch (t) {
    case DType::Bool:
      return b.CreateZExt(v, b.getInt8Ty());
    case DType::Float16:
      return float_to_half_bits(b, v);
    case DType::BFloat16:
      return float_to_bf16_bits(b, v);
    default:
      return v;
  }
}

Value* round_to(IRBuilder<>& b, Value* v, DType t) {
  if (t == DType::Float16) return half_bits_to_float(b, float_to_half_bits(b, v));
  if (t == DType::BFloat16) return bf16_bits_to_float(b, float_to_bf16_bits(b, v));
  return v;
}

Value* to_bool(IRBuilder<>& b, Value* v, DType from) {
  if (from == DType::Bool) return v;
  if (is_float_kind(from)) return b.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
  return b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
}

Value* convert(IRBuilder<>& b, Value* v, DType from, DType to) {
  if (from == to) return v;
  llvm::LLVMContext& ctx = b.getContext();
  llvm::Type* T = compute_type(ctx, to);
  if (to == DType::Bool) return to_bool(b, v, from);
  if (!is_float_kind(from)) {
    if (!is_float_kind(to)) return b.CreateIntCast(v, T, /*isSigned=*/!is_unsigned(from));
    Value* f = is_unsigned(from) ? b.CreateUIToFP(v, T) : b.CreateSIToFP(v, T);
    return round_to(b, f, to);  // int -> float rounds once, then to 16 bits (as torch does)
  }
  if (!is_float_kind(to)) {
    // Truncate toward zero through int64; NaN and |x| beyond int64 give 0 rather than poison.
    Value* mag = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v);
    Value* ok = b.CreateFCmpOLE(mag, llvm::ConstantFP::get(v->getType(), 9.2e18));
    Value* i = b.CreateFPToSI(v, b.getInt64Ty());
    i = b.CreateSelect(ok, i, b.getInt64(0));
    return b.CreateTrunc(i, T);
  }
  // float <-> float. float64 -> float16 goes through float32, as torch does.
  if (v->getType() != T) v = T->isDoubleTy() ? b.CreateFPExt(v, T) : b.CreateFPTrunc(v, T);
  return round_to(b, v, to);
}

llvm::Constant* make_constant(llvm::LLVMContext& ctx, DType t, double value) {
  llvm::Type* T = compute_type(ctx, t);
  switch (t) {
    case DType::Bool:
      return llvm::ConstantInt::get(T, value != 0 ? 1 : 0);
    case DType::Float16:
      return llvm::ConstantFP::get(T, half_to_float(float_to_half(static_cast<float>(value))));
    case DType::BFloat16:
      return llvm::ConstantFP::get(T,
                                   bfloat16_to_float(float_to_bfloat16(static_cast<float>(value))));
    case DType::Float32:
      return llvm::ConstantFP::get(T, static_cast<double>(static_cast<float>(value)));
    case DType::Float64:
      return llvm::ConstantFP::get(T, value);
    default: {
      double tv = std::trunc(value);
      int64_t i =
          (std::isfinite(tv) && tv >= -9.2e18 && tv <= 9.2e18) ? static_cast<int64_t>(tv) : 0;
      return llvm::ConstantInt::get(T, static_cast<uint64_t>(i), /*IsSigned=*/true);
    }
  }
}

llvm::Constant* reduce_identity(llvm::LLVMContext& ctx, DType t, bool is_max, bool is_min,
                                bool is_prod) {
  llvm::Type* T = compute_type(ctx, t);
  if (is_floating(t)) {
    if (is_max) return llvm::ConstantFP::getInfinity(T, /*Negative=*/true);
    if (is_min) return llvm::ConstantFP::getInfinity(T, /*Negative=*/false);
    return llvm::ConstantFP::get(T, is_prod ? 1.0 : 0.0);
  }
  unsigned bits = T->getIntegerBitWidth();
  if (is_max)
    return llvm::ConstantInt::get(ctx, is_unsigned(t) ? llvm::APInt::getMinValue(bits)
                                                      : llvm::APInt::getSignedMinValue(bits));
  if (is_min)
    return llvm::ConstantInt::get(ctx, is_unsigned(t) ? llvm::APInt::getMaxValue(bits)
                                                      : llvm::APInt::getSignedMaxValue(bits));
  return llvm::ConstantInt::get(T, is_prod ? 1 : 0);
}

}  // namespace lt::cpu
