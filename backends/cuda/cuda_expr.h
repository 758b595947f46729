// CUDA C text of values, literals, elementwise ops and reductions: the expression helpers of the
// CUDA code generator (cuda_codegen.cc, kernel_gen.h). Value semantics: see cuda_expr.cc.
#pragma once
#include <cstdint>
#include <string>

#include "lowering/loop_ir.h"

namespace lt::cudagen {

// Dtype names: the register type of a value, the memory type of an element, and the 4-element
// vector type of an element (nullptr for 8-byte elements, which stay scalar).
const char* ctype(DType t);
const char* stype(DType t);
const char* vtype(DType t);

// Rounds a float32 expression to t's precision (a no-op for other types).
std::string round_to(DType t, const std::string& e);
// float16/bfloat16 op results stay float32 inside a kernel (op_expr) unless LT_CUDA_HALF_OPMATH=0.
bool half_opmath();
// A memory element of type t as a register value, and back.
std::string from_storage(DType t, const std::string& e);
std::string to_storage(DType t, const std::string& e);

// Literals.
std::string fmt_float(double v, bool single);
std::string int_literal(int64_t v);
// A constant of dtype t as a C expression of its register type.
std::string literal(DType t, double v);

// Converts a register value of type `from` to type `to` (the Cast primitive).
std::string cast_expr(DType from, DType to, const std::string& x);
// The C expression of an elementwise primitive. `t` is the result dtype, `ot` the operands' dtype;
// throws lt::Error (NotImplemented) naming `kernel` for ops the backend does not support.
std::string op_expr(Op op, DType t, DType ot, const std::string& a, const std::string& b,
                    const std::string& c, const std::string& kernel);

// Reductions: the preamble functor (nullptr when unsupported), the identity in register type t,
// and one combining step.
const char* reduce_functor(Op op);
std::string reduce_identity(Op op, DType t);
std::string reduce_combine(Op op, DType t, const std::string& acc, const std::string& v);

// A C identifier made of s.
std::string sanitize(const std::string& s);
// The kernel with every affine index given one stride (and, where it has any, one stride
// parameter) per loop variable.
loop::Kernel with_full_strides(const loop::Kernel& src);

}  // namespace lt::cudagen
