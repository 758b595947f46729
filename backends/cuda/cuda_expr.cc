// CUDA C text of values and ops for the code generator (cuda_codegen.cc, kernel_gen.h).
//
// Value semantics match PyTorch and the CPU backend: float16/bfloat16 live in memory as raw 16-bit
// words and in registers as float32, rounded back to their type after every op (as PyTorch's eager
// ops and the reference interpreter do); bool is one byte 0/1; integer add/sub/mul/neg wrap;
// maximum/minimum and max/min reductions propagate NaN; comparisons are false on NaN except ne;
// float -> integer truncates toward zero (NaN and out-of-range give 0, as the reference does);
// RandUniform is loop::rand_uniform bit for bit. No fast-math: results are compared with PyTorch.
// GCC 12 reports a false -Wrestrict in `"literal" + std::string&&` at -O2/-O3 (GCC bug 105329);
// this file is made of such concatenations.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "backends/cuda/cuda_expr.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "ir/error.h"
#include "ir/half.h"

namespace lt::cudagen {

using loop::IKind;
using loop::Index;

// ---- types ----

// The register type of a value.
const char* ctype(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::UInt8:
      return "unsigned char";
    case DType::Int8:
      return "signed char";
    case DType::Int32:
      return "int";
    case DType::Int64:
      return "long long";
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
  }
  return "?";
}

// The memory type of an element.
const char* stype(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
      return "unsigned char";
    case DType::Int8:
      return "signed char";
    case DType::Int32:
      return "int";
    case DType::Int64:
      return "long long";
    case DType::Float16:
    case DType::BFloat16:
      return "unsigned short";
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
  }
  return "?";
}

// The 4-element vector type of an element, or nullptr (8-byte elements stay scalar).
const char* vtype(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
      return "uchar4";
    case DType::Int8:
      return "char4";
    case DType::Int32:
      return "int4";
    case DType::Float16:
    case DType::BFloat16:
      return "ushort4";
    case DType::Float32:
      return "float4";
    default:
      return nullptr;
  }
}

// Rounds a float32 expression to t's precision (a no-op for other types).
std::string round_to(DType t, const std::string& e) {
  if (t == DType::Float16) return "lt_rh(" + e + ")";
  if (t == DType::BFloat16) return "lt_rbf(" + e + ")";
  return e;
}

bool half_opmath() {
  static const bool on = [] {
    const char* e = std::getenv("LT_CUDA_HALF_OPMATH");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

namespace {

// An elementwise op's float16/bfloat16 result: kept in float32 inside the kernel (rounded where it
// is stored or cast), as torch.compile's generated kernels compute, at a fraction of the
// instructions (the GPT-2 bf16 step's GELU kernels: 27.6 vs 30.9 ms a step on the H200);
// LT_CUDA_HALF_OPMATH=0 rounds it to its type after every op, as PyTorch's eager mode.
std::string round_op(DType t, const std::string& e) { return half_opmath() ? e : round_to(t, e); }

}  // namespace

std::string from_storage(DType t, const std::string& e) {
  switch (t) {
    case DType::Bool:
      return "(" + e + " != 0)";
    case DType::Float16:
      return "lt_h2f(" + e + ")";
    case DType::BFloat16:
      return "lt_bf2f(" + e + ")";
    default:
      return e;
  }
}

std::string to_storage(DType t, const std::string& e) {
  switch (t) {
    case DType::Bool:
      return "(unsigned char)" + e;
    case DType::Float16:
      return "lt_f2h(" + e + ")";
    case DType::BFloat16:
      return "lt_f2bf(" + e + ")";
    default:
      return e;
  }
}

std::string fmt_float(double v, bool single) {
  char buf[64];
  std::snprintf(buf, sizeof buf, single ? "%.9g" : "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return single ? s + "f" : s;
}

std::string int_literal(int64_t v) {
  if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
  return std::to_string(v) + "LL";
}

// A constant of dtype t as a C expression of its register type.
std::string literal(DType t, double v) {
  switch (t) {
    case DType::Bool:
      return v != 0 ? "true" : "false";
    case DType::UInt8:
    case DType::Int8:
    case DType::Int32:
    case DType::Int64: {
      double tv = std::trunc(v);
      int64_t i =
          (std::isfinite(tv) && tv >= -9.2e18 && tv <= 9.2e18) ? static_cast<int64_t>(tv) : 0;
      if (t == DType::Int64) return int_literal(i);
      if (t == DType::Int32) return "(int)" + std::to_string(static_cast<int32_t>(i));
      if (t == DType::Int8) return "(signed char)" + std::to_string(static_cast<int8_t>(i));
      return "(unsigned char)" + std::to_string(static_cast<uint8_t>(i));
    }
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32: {
      float f = static_cast<float>(v);
      if (t == DType::Float16) f = half_to_float(float_to_half(f));
      if (t == DType::BFloat16) f = bfloat16_to_float(float_to_bfloat16(f));
      if (std::isnan(f)) return "LT_NAN_F";
      if (std::isinf(f)) return f > 0 ? "LT_INF_F" : "(-LT_INF_F)";
      return fmt_float(f, true);
    }
    case DType::Float64:
      if (std::isnan(v)) return "LT_NAN_D";
      if (std::isinf(v)) return v > 0 ? "LT_INF_D" : "(-LT_INF_D)";
      return fmt_float(v, false);
  }
  return "0";
}

// Converts a register value of type `from` to type `to` (the Cast primitive).
std::string cast_expr(DType from, DType to, const std::string& x) {
  if (from == to) return x;
  if (to == DType::Bool) return "(" + x + " != 0)";
  const bool ff = is_floating(from), tf = is_floating(to);
  if (tf) {
    if (to == DType::Float64) return "(double)" + x;
    if (to == DType::Float32) return from == DType::Float64 || !ff ? "(float)" + x : x;
    // float16 / bfloat16: via float32, as the host does (so float64 rounds twice, like the
    // reference).
    std::string f = (from == DType::Float32 || is_half(from)) ? x : "(float)" + x;
    return round_to(to, f);
  }
  if (ff) return std::string("(") + ctype(to) + ")lt_f2i(" + x + ")";
  return std::string("(") + ctype(to) + ")" + x;  // integer/bool -> integer: wraps
}

namespace {

bool wraps_in_int(DType t) { return t == DType::Int32 || t == DType::Int64; }

}  // namespace

// The C expression of an elementwise primitive. `t` is the result dtype, `ot` the operands' dtype.
std::string op_expr(Op op, DType t, DType ot, const std::string& a, const std::string& b,
                    const std::string& c, const std::string& kernel) {
  const bool f64 = ot == DType::Float64;
  auto math1 = [&](const char* fn) {
    std::string e = std::string(fn) + (f64 ? "" : "f") + "(" + a + ")";
    return round_op(t, e);
  };
  auto arith = [&](const char* sym, const char* fn) {
    if (wraps_in_int(ot)) return std::string(fn) + "(" + a + ", " + b + ")";
    if (is_floating(ot)) return round_op(t, a + " " + sym + " " + b);
    return std::string("(") + ctype(t) + ")(" + a + " " + sym + " " + b +
           ")";  // 8-bit: int promotion
  };
  // The same ops the CPU backend rejects (llvm_ops.cc), with the same kind of message.
  auto unsupported = [&]() {
    fail(ErrorKind::NotImplemented, "not implemented: ", op_name(op), " for ", dtype_name(ot),
         " on cuda (kernel ", kernel, ")");
  };
  auto need_float = [&]() {
    if (!is_floating(ot)) unsupported();
  };
  if (ot == DType::Bool && (op == Op::Neg || op == Op::Abs || op == Op::Sub)) unsupported();
  switch (op) {
    case Op::Neg:
      if (wraps_in_int(ot))
        return "lt_sub(" + std::string(ot == DType::Int64 ? "0LL" : "0") + ", " + a + ")";
      if (is_floating(ot)) return "-" + a;
      return std::string("(") + ctype(t) + ")(-" + a + ")";
    case Op::Exp:
      need_float();
      return math1("exp");
    case Op::Log:
      need_float();
      return math1("log");
    case Op::Sqrt:
      need_float();
      return math1("sqrt");
    // float32 sin/cos inline, with an out-of-line CUDA call for huge arguments (kPreambleTrig).
    case Op::Sin:
      need_float();
      return f64 ? math1("sin") : round_op(t, "lt_sinf(" + a + ")");
    case Op::Cos:
      need_float();
      return f64 ? math1("cos") : round_op(t, "lt_cosf(" + a + ")");
    case Op::Tanh:
      need_float();
      return math1("tanh");
    case Op::Erf:
      need_float();
      return math1("erf");
    case Op::Log1p:
      need_float();
      return math1("log1p");
    case Op::Expm1:
      need_float();
      return math1("expm1");
    case Op::Floor:
      need_float();
      return std::string(f64 ? "floor" : "floorf") + "(" + a + ")";
    case Op::Abs:
      if (is_floating(ot)) return std::string(f64 ? "fabs" : "fabsf") + "(" + a + ")";
      if (ot == DType::UInt8 || ot == DType::Bool) return a;
      if (wraps_in_int(ot))
        return "(" + a + " < 0 ? lt_sub(" + (ot == DType::Int64 ? "0LL" : "0") + ", " + a +
               ") : " + a + ")";
      return std::string("(") + ctype(t) + ")(" + a + " < 0 ? -" + a + " : " + a + ")";
    case Op::Recip:
      need_float();
      return round_op(t, std::string(f64 ? "1.0" : "1.0f") + " / " + a);
    case Op::Not:
      return ot == DType::Bool ? "!" + a : "(" + a + " == 0)";
    case Op::Add:
      return arith("+", "lt_add");
    case Op::Sub:
      return arith("-", "lt_sub");
    case Op::Mul:
      return arith("*", "lt_mul");
    case Op::Div:
      need_float();
      return round_op(t, a + " / " + b);
    case Op::Pow:
      if (ot == DType::Bool) unsupported();
      if (!is_floating(ot)) return std::string("lt_ipow<") + ctype(ot) + ">(" + a + ", " + b + ")";
      return round_op(t, std::string(f64 ? "pow" : "powf") + "(" + a + ", " + b + ")");
    // Division family and shifts: helpers in kPreambleIntOps (float forms for floating types,
    // half types computed in float and rounded after, as every op).
    case Op::FloorDiv:
    case Op::Remainder:
    case Op::Fmod: {
      if (ot == DType::Bool) unsupported();
      std::string fn = op == Op::FloorDiv    ? "lt_floordiv"
                       : op == Op::Remainder ? "lt_remainder"
                                             : "lt_fmod";
      // Integers name the template's type (an 8-bit operand may be an int expression after C's
      // promotions); floats pick the float or double overload.
      if (!is_floating(ot)) return fn + "<" + ctype(ot) + ">(" + a + ", " + b + ")";
      return round_op(t, fn + "(" + a + ", " + b + ")");
    }
    case Op::Shl:
    case Op::Shr:
      if (is_floating(ot) || ot == DType::Bool) unsupported();
      return std::string(op == Op::Shl ? "lt_shl<" : "lt_shr<") + ctype(ot) + ">(" + a + ", " + b +
             ")";
    case Op::BitAnd:
    case Op::BitOr:
    case Op::BitXor: {
      if (is_floating(ot)) unsupported();
      const char* sym = op == Op::BitAnd ? " & " : op == Op::BitOr ? " | " : " ^ ";
      return std::string("(") + ctype(t) + ")(" + a + sym + b + ")";  // bool: logical, as 0/1
    }
    case Op::BitNot:
      if (is_floating(ot)) unsupported();
      if (ot == DType::Bool) return "!" + a;
      return std::string("(") + ctype(t) + ")(~" + a + ")";
    case Op::Maximum:
      return "lt_max(" + a + ", " + b + ")";
    case Op::Minimum:
      return "lt_min(" + a + ", " + b + ")";
    case Op::Eq:
      return "(" + a + " == " + b + ")";
    case Op::Ne:
      return "(" + a + " != " + b + ")";
    case Op::Lt:
      return "(" + a + " < " + b + ")";
    case Op::Le:
      return "(" + a + " <= " + b + ")";
    case Op::Gt:
      return "(" + a + " > " + b + ")";
    case Op::Ge:
      return "(" + a + " >= " + b + ")";
    case Op::And:
      return "(" + a + " && " + b + ")";
    case Op::Or:
      return "(" + a + " || " + b + ")";
    case Op::Where:
      return "(" + a + " ? " + b + " : " + c + ")";
    case Op::Cast:
      return cast_expr(ot, t, a);
    default:
      break;
  }
  unsupported();
  return "";
}

const char* reduce_functor(Op op) {
  switch (op) {
    case Op::ReduceSum:
      return "LtSum()";
    case Op::ReduceProd:
      return "LtProd()";
    case Op::ReduceMax:
      return "LtMax()";
    case Op::ReduceMin:
      return "LtMin()";
    default:
      return nullptr;
  }
}

// The identity of a reduction in register type t.
std::string reduce_identity(Op op, DType t) {
  const bool fl = is_floating(t);
  switch (op) {
    case Op::ReduceSum:
      return literal(t, 0);
    case Op::ReduceProd:
      return literal(t, 1);
    case Op::ReduceMax:
      if (fl) return t == DType::Float64 ? "(-LT_INF_D)" : "(-LT_INF_F)";
      switch (t) {
        case DType::Bool:
          return "false";
        case DType::UInt8:
          return "(unsigned char)0";
        case DType::Int8:
          return "(signed char)-128";
        case DType::Int32:
          return "(int)(-2147483647 - 1)";
        default:
          return int_literal(INT64_MIN);
      }
    case Op::ReduceMin:
      if (fl) return t == DType::Float64 ? "LT_INF_D" : "LT_INF_F";
      switch (t) {
        case DType::Bool:
          return "true";
        case DType::UInt8:
          return "(unsigned char)255";
        case DType::Int8:
          return "(signed char)127";
        case DType::Int32:
          return "(int)2147483647";
        default:
          return int_literal(INT64_MAX);
      }
    default:
      break;
  }
  return "0";
}

std::string reduce_combine(Op op, DType t, const std::string& acc, const std::string& v) {
  switch (op) {
    case Op::ReduceSum:
      return is_floating(t) ? acc + " + " + v : "lt_add(" + acc + ", " + v + ")";
    case Op::ReduceProd:
      return is_floating(t) ? acc + " * " + v : "lt_mul(" + acc + ", " + v + ")";
    case Op::ReduceMax:
      return "lt_max(" + acc + ", " + v + ")";
    case Op::ReduceMin:
      return "lt_min(" + acc + ", " + v + ")";
    default:
      break;
  }
  return acc;
}

std::string sanitize(const std::string& s) {
  std::string r;
  for (char ch : s) r += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0]))) r = "k_" + r;
  return r;
}

// The kernel with every affine index given one stride per loop variable (lowering may leave
// trailing zero strides out), so the generator can index strides by variable number.
loop::Kernel with_full_strides(const loop::Kernel& src) {
  loop::Kernel k = src;
  const size_t nvars = k.outer.size() + k.inner.size();
  auto pad = [&](Index& ix) {
    if (!ix.affine()) return;
    if (ix.strides.size() > nvars)
      fail(ErrorKind::Runtime, "internal: cuda codegen: an index of kernel ", k.name, " has ",
           ix.strides.size(), " strides for ", nvars, " loop variables");
    ix.strides.resize(nvars, 0);
    if (!ix.stride_params.empty()) {
      if (ix.stride_params.size() > nvars)
        fail(ErrorKind::Runtime, "internal: cuda codegen: an index of kernel ", k.name, " has ",
             ix.stride_params.size(), " stride parameters for ", nvars, " loop variables");
      ix.stride_params.resize(nvars, -1);
    }
  };
  for (auto& st : k.stages) {
    for (auto& in : st.body)
      if (loop::has_index(in)) pad(in.index);
    for (auto& store : st.stores) pad(store.index);
  }
  return k;
}

}  // namespace lt::cudagen
