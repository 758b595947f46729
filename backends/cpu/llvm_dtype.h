// How each DType lives in LLVM IR. In memory: bool is one byte 0/1, float16/bfloat16 are 16-bit
// integers (their encodings). In registers ("compute" values): bool is i1, integers are iN,
// float16/bfloat16/float32 are float, float64 is double. A float16/bfloat16 compute value always
// holds a number representable in that type: every operation producing one rounds (to nearest
// even) to it, as PyTorch does after each op. The 16-bit conversions use integer bit operations
// only (no libcalls, no target-specific half support), so they vectorize and match ir/half.h.
#pragma once
#include <llvm/IR/IRBuilder.h>

#include "ir/dtype.h"

namespace lt::cpu {

llvm::Type* storage_type(llvm::LLVMContext& ctx, DType t);
llvm::Type* compute_type(llvm::LLVMContext& ctx, DType t);
inline bool is_16bit_float(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
// uint8 and bool compare, extend and take max/min as unsigned; the other integers as signed.
inline bool is_unsigned(DType t) { return t == DType::UInt8 || t == DType::Bool; }

// Memory value (of storage_type) -> compute value, and back.
llvm::Value* from_storage(llvm::IRBuilder<>& b, llvm::Value* raw, DType t);
llvm::Value* to_storage(llvm::IRBuilder<>& b, llvm::Value* v, DType t);

// Rounds a float compute value to float16/bfloat16 precision (identity for other dtypes).
llvm::Value* round_to(llvm::IRBuilder<>& b, llvm::Value* v, DType t);

// torch-style conversion: float -> integer truncates toward zero (NaN and values beyond int64
// give 0, then narrower integers wrap), anything -> bool is (x != 0), bool -> number is 0/1.
llvm::Value* convert(llvm::IRBuilder<>& b, llvm::Value* v, DType from, DType to);
llvm::Value* to_bool(llvm::IRBuilder<>& b, llvm::Value* v, DType from);

// A constant of dtype t (compute type) from a double, rounded/converted like a cast.
llvm::Constant* make_constant(llvm::LLVMContext& ctx, DType t, double value);
// The identity of a reduction (sum 0, prod 1, max -inf / type min, min +inf / type max).
llvm::Constant* reduce_identity(llvm::LLVMContext& ctx, DType t, bool is_max, bool is_min,
                                bool is_prod);

}  // namespace lt::cpu
