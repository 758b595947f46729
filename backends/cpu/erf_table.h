// float32 erf for x86 hosts with AVX2 and FMA, as a call the loop vectorizer widens into AVX2 code
// (or AVX-512 code on hosts that have it) with table lookups (vector_variant.h). Cheaper than the
// two-branch polynomial erf in llvm_ops.cc: one polynomial whose coefficients are picked per lane
// by a permute.
#pragma once
#include <llvm/IR/IRBuilder.h>

namespace lt::cpu {

// Whether the host can run the table erf (AVX2 and FMA).
bool erf_table_available();

// erf(x) for a float32 `x`: a call of the module's scalar table erf, which the loop vectorizer
// turns into its 8-lane AVX2 form or, on AVX-512 hosts, its 16-lane form. Within 1.5 ulp of float64
// erf over all floats (tests/python/test_cpu_erf.py). Only when erf_table_available().
llvm::Value* emit_erf_table_call(llvm::IRBuilder<>& b, llvm::Module& m, llvm::Value* x);

}  // namespace lt::cpu
