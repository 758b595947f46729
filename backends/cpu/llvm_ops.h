// Elementwise primitives, reductions' combine step and the counter-based RNG as LLVM IR on
// compute values (see llvm_dtype.h). Exact IEEE everywhere: no fast-math flags, except `reassoc`
// on float sum/prod accumulation, which lets the vectorizer reorder a reduction.
#pragma once
#include <llvm/IR/IRBuilder.h>

#include "ir/dtype.h"
#include "ir/ops.h"

namespace lt::cpu {

// result = op(a[, b[, c]]). `operand` is the dtype of a (of b for Where); `result` the instr's
// dtype. Float16/BFloat16 results are not rounded here (the caller rounds). Throws
// lt::Error(NotImplemented) for ops or dtypes the CPU backend does not support.
// `trig_range_flag` (an i32 slot, or null): when given, float32 sin/cos are inline code accurate
// for |x| < kInlineTrigLimit that fold |x| into the slot (emit_trig_track) unless
// `trig_track_args` is false (the caller then tracks the loads the arguments come from, see
// trig_bounds.h); where emit_trig_out_of_range says so, the caller must recompute with a null
// flag, which calls libm/libmvec.
llvm::Value* emit_elementwise(llvm::IRBuilder<>& b, llvm::Module& m, Op op, DType result,
                              DType operand, llvm::Value* a, llvm::Value* bv, llvm::Value* c,
                              llvm::Value* trig_range_flag = nullptr, bool trig_track_args = true);

// The inline float32 sin/cos take |x| below this; larger, inf and NaN go to libm.
constexpr float kInlineTrigLimit = 39000.0f;

// Folds |x| (float32) into a trig_range_flag slot: the slot keeps the largest seen.
void emit_trig_track(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* range_flag);

// Whether a trig_range_flag slot (starting at 0) saw a value of `limit` or more, or a NaN.
llvm::Value* emit_trig_out_of_range(llvm::IRBuilder<>& b, llvm::Value* max_abs_bits,
                                    float limit = kInlineTrigLimit);

// Whether emit_elementwise(op) on values of compute dtype t uses the inline sin/cos above.
bool has_fast_trig(Op op, DType t);

// acc <- combine(acc, v) for ReduceSum/Max/Min/Prod over values of dtype t.
llvm::Value* emit_reduce_combine(llvm::IRBuilder<>& b, Op reduce_op, DType t, llvm::Value* acc,
                                 llvm::Value* v);

// loop::rand_uniform(seed, offset, counter, stream, t) as a float (float64 for Float64).
llvm::Value* emit_rand_uniform(llvm::IRBuilder<>& b, llvm::Value* seed, llvm::Value* offset,
                               llvm::Value* counter, int64_t stream, DType t);

}  // namespace lt::cpu
