// Loop IR -> CUDA C (see cuda_codegen.h for the grid mapping).
//
// Value semantics match PyTorch and the CPU backend: float16/bfloat16 live in memory as raw 16-bit
// words and in registers as float32, rounded back to their type after every op (as PyTorch's eager
// ops and the reference interpreter do); bool is one byte 0/1; integer add/sub/mul/neg wrap;
// maximum/minimum and max/min reductions propagate NaN; comparisons are false on NaN except ne;
// float -> integer truncates toward zero (NaN and out-of-range give 0, as the reference does);
// RandUniform is loop::rand_uniform bit for bit. No fast-math: results are compared with PyTorch.
//
// Index arithmetic is 32-bit unsigned when every buffer, the iteration space and every value that
// a division or modulo sees fit in 31 bits (checked here with interval arithmetic), else int64.
// Unsigned wrap-around is harmless for the sums and products of an index because the final
// offset is in range; only div/mod operands need their exact values.
// GCC 12 reports a false -Wrestrict in `"literal" + std::string&&` at -O2/-O3 (GCC bug 105329);
// this file is made of such concatenations.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "backends/cuda/cuda_codegen.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "backends/cuda/cuda_preamble.h"
#include "ir/error.h"
#include "ir/half.h"

namespace lt {
namespace {

using loop::IExpr;
using loop::IKind;
using loop::Index;
using loop::Instr;
using loop::Kernel;
using loop::Stage;
using loop::StageKind;


// ---- types ----

// The register type of a value.
const char* ctype(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "unsigned char";
    case DType::Int8: return "signed char";
    case DType::Int32: return "int";
    case DType::Int64: return "long long";
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32: return "float";
    case DType::Float64: return "double";
  }
  return "?";
}

// The memory type of an element.
const char* stype(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8: return "unsigned char";
    case DType::Int8: return "signed char";
    case DType::Int32: return "int";
    case DType::Int64: return "long long";
    case DType::Float16:
    case DType::BFloat16: return "unsigned short";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
  }
  return "?";
}

// The 4-element vector type of an element, or nullptr (8-byte elements stay scalar).
const char* vtype(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8: return "uchar4";
    case DType::Int8: return "char4";
    case DType::Int32: return "int4";
    case DType::Float16:
    case DType::BFloat16: return "ushort4";
    case DType::Float32: return "float4";
    default: return nullptr;
  }
}

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// Rounds a float32 expression to t's precision (a no-op for other types).
std::string round_to(DType t, const std::string& e) {
  if (t == DType::Float16) return "lt_rh(" + e + ")";
  if (t == DType::BFloat16) return "lt_rbf(" + e + ")";
  return e;
}

std::string from_storage(DType t, const std::string& e) {
  switch (t) {
    case DType::Bool: return "(" + e + " != 0)";
    case DType::Float16: return "lt_h2f(" + e + ")";
    case DType::BFloat16: return "lt_bf2f(" + e + ")";
    default: return e;
  }
}

std::string to_storage(DType t, const std::string& e) {
  switch (t) {
    case DType::Bool: return "(unsigned char)" + e;
    case DType::Float16: return "lt_f2h(" + e + ")";
    case DType::BFloat16: return "lt_f2bf(" + e + ")";
    default: return e;
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
    case DType::Bool: return v != 0 ? "true" : "false";
    case DType::UInt8:
    case DType::Int8:
    case DType::Int32:
    case DType::Int64: {
      double tv = std::trunc(v);
      int64_t i = (std::isfinite(tv) && tv >= -9.2e18 && tv <= 9.2e18) ? static_cast<int64_t>(tv) : 0;
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
    // float16 / bfloat16: via float32, as the host does (so float64 rounds twice, like the reference).
    std::string f = (from == DType::Float32 || is_half(from)) ? x : "(float)" + x;
    return round_to(to, f);
  }
  if (ff) return std::string("(") + ctype(to) + ")lt_f2i(" + x + ")";
  return std::string("(") + ctype(to) + ")" + x;  // integer/bool -> integer: wraps
}

bool wraps_in_int(DType t) { return t == DType::Int32 || t == DType::Int64; }

// The C expression of an elementwise primitive. `t` is the result dtype, `ot` the operands' dtype.
std::string op_expr(Op op, DType t, DType ot, const std::string& a, const std::string& b, const std::string& c,
                    const std::string& kernel) {
  const bool f64 = ot == DType::Float64;
  auto math1 = [&](const char* fn) {
    std::string e = std::string(fn) + (f64 ? "" : "f") + "(" + a + ")";
    return round_to(t, e);
  };
  auto arith = [&](const char* sym, const char* fn) {
    if (wraps_in_int(ot)) return std::string(fn) + "(" + a + ", " + b + ")";
    if (is_floating(ot)) return round_to(t, a + " " + sym + " " + b);
    return std::string("(") + ctype(t) + ")(" + a + " " + sym + " " + b + ")";  // 8-bit: int promotion
  };
  // The same ops the CPU backend rejects (llvm_ops.cc), with the same kind of message.
  auto unsupported = [&]() {
    fail(ErrorKind::NotImplemented, "not implemented: ", op_name(op), " for ", dtype_name(ot), " on cuda (kernel ",
         kernel, ")");
  };
  auto need_float = [&]() {
    if (!is_floating(ot)) unsupported();
  };
  if (ot == DType::Bool && (op == Op::Neg || op == Op::Abs || op == Op::Sub)) unsupported();
  switch (op) {
    case Op::Neg:
      if (wraps_in_int(ot)) return "lt_sub(" + std::string(ot == DType::Int64 ? "0LL" : "0") + ", " + a + ")";
      if (is_floating(ot)) return "-" + a;
      return std::string("(") + ctype(t) + ")(-" + a + ")";
    case Op::Exp: need_float(); return math1("exp");
    case Op::Log: need_float(); return math1("log");
    case Op::Sqrt: need_float(); return math1("sqrt");
    // float32 sin/cos inline, with an out-of-line CUDA call for huge arguments (kPreambleTrig).
    case Op::Sin: need_float(); return f64 ? math1("sin") : round_to(t, "lt_sinf(" + a + ")");
    case Op::Cos: need_float(); return f64 ? math1("cos") : round_to(t, "lt_cosf(" + a + ")");
    case Op::Tanh: need_float(); return math1("tanh");
    case Op::Erf: need_float(); return math1("erf");
    case Op::Floor: need_float(); return std::string(f64 ? "floor" : "floorf") + "(" + a + ")";
    case Op::Abs:
      if (is_floating(ot)) return std::string(f64 ? "fabs" : "fabsf") + "(" + a + ")";
      if (ot == DType::UInt8 || ot == DType::Bool) return a;
      if (wraps_in_int(ot))
        return "(" + a + " < 0 ? lt_sub(" + (ot == DType::Int64 ? "0LL" : "0") + ", " + a + ") : " + a + ")";
      return std::string("(") + ctype(t) + ")(" + a + " < 0 ? -" + a + " : " + a + ")";
    case Op::Recip: need_float(); return round_to(t, std::string(f64 ? "1.0" : "1.0f") + " / " + a);
    case Op::Not: return ot == DType::Bool ? "!" + a : "(" + a + " == 0)";
    case Op::Add: return arith("+", "lt_add");
    case Op::Sub: return arith("-", "lt_sub");
    case Op::Mul: return arith("*", "lt_mul");
    case Op::Div: need_float(); return round_to(t, a + " / " + b);
    case Op::Pow: need_float(); return round_to(t, std::string(f64 ? "pow" : "powf") + "(" + a + ", " + b + ")");
    case Op::Maximum: return "lt_max(" + a + ", " + b + ")";
    case Op::Minimum: return "lt_min(" + a + ", " + b + ")";
    case Op::Eq: return "(" + a + " == " + b + ")";
    case Op::Ne: return "(" + a + " != " + b + ")";
    case Op::Lt: return "(" + a + " < " + b + ")";
    case Op::Le: return "(" + a + " <= " + b + ")";
    case Op::Gt: return "(" + a + " > " + b + ")";
    case Op::Ge: return "(" + a + " >= " + b + ")";
    case Op::And: return "(" + a + " && " + b + ")";
    case Op::Or: return "(" + a + " || " + b + ")";
    case Op::Where: return "(" + a + " ? " + b + " : " + c + ")";
    case Op::Cast: return cast_expr(ot, t, a);
    default: break;
  }
  unsupported();
  return "";
}

const char* reduce_functor(Op op) {
  switch (op) {
    case Op::ReduceSum: return "LtSum()";
    case Op::ReduceProd: return "LtProd()";
    case Op::ReduceMax: return "LtMax()";
    case Op::ReduceMin: return "LtMin()";
    default: return nullptr;
  }
}

// The identity of a reduction in register type t.
std::string reduce_identity(Op op, DType t) {
  const bool fl = is_floating(t);
  switch (op) {
    case Op::ReduceSum: return literal(t, 0);
    case Op::ReduceProd: return literal(t, 1);
    case Op::ReduceMax:
      if (fl) return t == DType::Float64 ? "(-LT_INF_D)" : "(-LT_INF_F)";
      switch (t) {
        case DType::Bool: return "false";
        case DType::UInt8: return "(unsigned char)0";
        case DType::Int8: return "(signed char)-128";
        case DType::Int32: return "(int)(-2147483647 - 1)";
        default: return int_literal(INT64_MIN);
      }
    case Op::ReduceMin:
      if (fl) return t == DType::Float64 ? "LT_INF_D" : "LT_INF_F";
      switch (t) {
        case DType::Bool: return "true";
        case DType::UInt8: return "(unsigned char)255";
        case DType::Int8: return "(signed char)127";
        case DType::Int32: return "(int)2147483647";
        default: return int_literal(INT64_MAX);
      }
    default: break;
  }
  return "0";
}

std::string reduce_combine(Op op, DType t, const std::string& acc, const std::string& v) {
  switch (op) {
    case Op::ReduceSum:
      return is_floating(t) ? acc + " + " + v : "lt_add(" + acc + ", " + v + ")";
    case Op::ReduceProd:
      return is_floating(t) ? acc + " * " + v : "lt_mul(" + acc + ", " + v + ")";
    case Op::ReduceMax: return "lt_max(" + acc + ", " + v + ")";
    case Op::ReduceMin: return "lt_min(" + acc + ", " + v + ")";
    default: break;
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
      fail(ErrorKind::Runtime, "internal: cuda codegen: an index of kernel ", k.name, " has ", ix.strides.size(),
           " strides for ", nvars, " loop variables");
    ix.strides.resize(nvars, 0);
  };
  for (auto& st : k.stages) {
    for (auto& in : st.body)
      if (in.kind == IKind::Load || in.kind == IKind::RandUniform) pad(in.index);
    for (auto& store : st.stores) pad(store.index);
  }
  return k;
}

// ---- one kernel ----

struct Interval {
  double lo = 0, hi = 0;
};

class KernelGen {
 public:
  KernelGen(const Kernel& k, std::string name, const CudaCodegenOptions& opt, std::ostringstream& os)
      : k_(k), name_(std::move(name)), opt_(opt), os_(os) {}
  CudaKernelLaunch generate();
  // What the kernel needs from the preamble.
  bool uses_half() const { return uses_half_; }
  bool uses_rand() const { return uses_rand_; }
  bool uses_atomic() const { return k_.accumulates(); }

 private:
  // Emission.
  void line(const std::string& s) { os_ << std::string(static_cast<size_t>(ind_) * 2, ' ') << s << "\n"; }
  void open(const std::string& s) { line(s.empty() ? "{" : s + " {"), ++ind_; }
  void close(const std::string& tail = "") { --ind_, line("}" + tail); }

  // Index arithmetic.
  std::string ilit(int64_t v) const;
  std::string index_expr(const Index& ix) const;
  std::string iexpr(int id) const;
  Interval range(int id) const;
  bool fits_32bit() const;
  void collect_vars(const Index& ix, std::set<int>& used) const;
  void collect_iexpr_vars(int id, std::set<int>& used) const;
  void decompose(const std::string& flat, int first, int count);

  // Bodies. A hook may take over a Load (returning the storage expression) or a Store.
  struct Hooks {
    std::function<std::string(int stage, int instr)> load;        // storage expression
    std::function<bool(int stage, const loop::Store& st, const std::string& value)> store;
  };
  void emit_body(int s, const Hooks& h);
  void emit_stores(int s, const Hooks& h);
  std::string instr_expr(int s, int i, const Hooks& h);
  void check_kernel() const;

  // Kernels.
  void emit_signature(int threads);
  void gen_elementwise(CudaKernelLaunch& launch);
  void gen_rows(CudaKernelLaunch& launch);
  void choose_row_mode(CudaKernelLaunch& launch) const;
  bool flat_access(const Index& ix) const;
  bool row_flat_access(const Index& ix) const;
  std::string all_aligned(const std::set<int>& args) const;

  const Kernel& k_;
  std::string name_;
  const CudaCodegenOptions& opt_;
  std::ostringstream& os_;
  int ind_ = 0;
  bool i32_ = true;
  std::string itype_;
  std::vector<int64_t> ext_;  // loop extents: outer then inner
  int nouter_ = 0, ninner_ = 0;
  int64_t outer_n_ = 1, inner_n_ = 1;
  std::set<int> used_vars_;
  bool uses_half_ = false, uses_rand_ = false;
};

std::string KernelGen::ilit(int64_t v) const {
  if (i32_) {
    if (v < 0) return "(0u - " + std::to_string(-v) + "u)";
    return std::to_string(v) + "u";
  }
  return int_literal(v);
}

std::string KernelGen::iexpr(int id) const {
  const IExpr& e = k_.iexprs.at(static_cast<size_t>(id));
  switch (e.kind) {
    case IExpr::Kind::Const: return ilit(e.value);
    case IExpr::Kind::Var: return "i" + std::to_string(e.value);
    case IExpr::Kind::Value: return std::string(i32_ ? "(unsigned)" : "") + "v" + std::to_string(e.value);
    case IExpr::Kind::Add: return "(" + iexpr(e.a) + " + " + iexpr(e.b) + ")";
    case IExpr::Kind::Mul: return "(" + iexpr(e.a) + " * " + iexpr(e.b) + ")";
    case IExpr::Kind::FloorDiv: return "(" + iexpr(e.a) + " / " + iexpr(e.b) + ")";
    case IExpr::Kind::Mod: return "(" + iexpr(e.a) + " % " + iexpr(e.b) + ")";
  }
  return "0";
}

std::string KernelGen::index_expr(const Index& ix) const {
  if (!ix.affine()) return iexpr(ix.general);
  std::string s;
  for (size_t v = 0; v < ix.strides.size(); ++v) {
    int64_t st = ix.strides[v];
    if (!st || ext_.at(v) <= 1) continue;
    std::string term = "i" + std::to_string(v);
    if (st != 1) term += " * " + ilit(st);
    s += (s.empty() ? "" : " + ") + term;
  }
  if (ix.offset || s.empty()) s += (s.empty() ? "" : " + ") + ilit(ix.offset);
  return s;
}

Interval KernelGen::range(int id) const {
  const IExpr& e = k_.iexprs.at(static_cast<size_t>(id));
  switch (e.kind) {
    case IExpr::Kind::Const: return {double(e.value), double(e.value)};
    case IExpr::Kind::Value: return {0, double(e.hi)};
    case IExpr::Kind::Var: {
      int64_t ext = ext_.at(static_cast<size_t>(e.value));
      return {0, double(std::max<int64_t>(ext - 1, 0))};
    }
    case IExpr::Kind::Add: {
      Interval a = range(e.a), b = range(e.b);
      return {a.lo + b.lo, a.hi + b.hi};
    }
    case IExpr::Kind::Mul: {
      Interval a = range(e.a), b = range(e.b);
      double p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
      return {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
    }
    case IExpr::Kind::FloorDiv: {
      Interval a = range(e.a), b = range(e.b);
      if (b.lo <= 0) return {-1e300, 1e300};
      return {std::floor(a.lo / (a.lo < 0 ? b.lo : b.hi)), std::floor(a.hi / (a.hi < 0 ? b.hi : b.lo))};
    }
    case IExpr::Kind::Mod: {
      Interval b = range(e.b);
      return {0, std::max(0.0, b.hi - 1)};
    }
  }
  return {};
}

bool KernelGen::fits_32bit() const {
  constexpr double kLimit = 2147483647.0;  // 2^31 - 1
  if (double(outer_n_) * double(inner_n_) >= kLimit) return false;
  for (const auto& a : k_.args)
    if (double(a.numel) >= kLimit) return false;
  for (const auto& e : k_.iexprs) {
    if (e.kind != IExpr::Kind::FloorDiv && e.kind != IExpr::Kind::Mod) continue;
    Interval a = range(e.a), b = range(e.b);
    if (a.lo < 0 || a.hi >= kLimit || b.lo < 1 || b.hi >= kLimit) return false;
  }
  // Every index's largest value too: a RandUniform counter is bounded by no buffer.
  auto fits = [&](const Index& ix) {
    if (!ix.affine()) return range(ix.general).hi < kLimit;
    double hi = double(ix.offset);
    for (size_t v = 0; v < ix.strides.size() && v < ext_.size(); ++v)
      hi += double(std::max<int64_t>(ix.strides[v], 0)) * double(std::max<int64_t>(ext_[v] - 1, 0));
    return ix.offset >= 0 && hi < kLimit;
  };
  for (const auto& st : k_.stages) {
    for (const auto& in : st.body)
      if ((in.kind == IKind::Load || in.kind == IKind::RandUniform) && !fits(in.index)) return false;
    for (const auto& store : st.stores)
      if (!fits(store.index)) return false;
  }
  return true;
}

void KernelGen::collect_iexpr_vars(int id, std::set<int>& used) const {
  const IExpr& e = k_.iexprs.at(static_cast<size_t>(id));
  if (e.kind == IExpr::Kind::Var) used.insert(static_cast<int>(e.value));
  if (e.a >= 0 && e.kind != IExpr::Kind::Const && e.kind != IExpr::Kind::Var) collect_iexpr_vars(e.a, used);
  if (e.b >= 0 && e.kind != IExpr::Kind::Const && e.kind != IExpr::Kind::Var) collect_iexpr_vars(e.b, used);
}

void KernelGen::collect_vars(const Index& ix, std::set<int>& used) const {
  if (!ix.affine()) return collect_iexpr_vars(ix.general, used);
  for (size_t v = 0; v < ix.strides.size(); ++v)
    if (ix.strides[v] && ext_.at(v) > 1) used.insert(static_cast<int>(v));
}

// Declares loop variables first..first+count-1 (those used) from a flat row-major index.
void KernelGen::decompose(const std::string& flat, int first, int count) {
  int64_t below = 1;  // product of the extents after the current dim
  std::vector<std::string> lines;
  for (int d = first + count - 1; d >= first; --d) {
    int64_t ext = ext_[static_cast<size_t>(d)];
    if (used_vars_.count(d)) {
      std::string e = flat;
      if (below != 1) e = "(" + e + " / " + ilit(below) + ")";
      if (d != first) e += " % " + ilit(ext);
      if (ext <= 1) e = ilit(0);
      lines.push_back("const " + itype_ + " i" + std::to_string(d) + " = " + e + ";");
    }
    below *= std::max<int64_t>(ext, 1);
  }
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) line(*it);
}

void KernelGen::check_kernel() const {
  for (size_t s = 0; s < k_.stages.size(); ++s) {
    const Stage& st = k_.stages[s];
    for (size_t i = 0; i < st.body.size(); ++i) {
      const Instr& in = st.body[i];
      for (int o : {in.a, in.b, in.c})
        if (o >= static_cast<int>(i))
          fail(ErrorKind::Runtime, "internal: cuda codegen: instruction ", i, " of stage ", s, " of kernel ", k_.name,
               " uses a later value");
      if ((in.kind == IKind::Load || in.kind == IKind::LoadScalar) &&
          (in.arg < 0 || in.arg >= static_cast<int>(k_.args.size())))
        fail(ErrorKind::Runtime, "internal: cuda codegen: bad argument ", in.arg, " in kernel ", k_.name);
      if (in.kind == IKind::ReduceResult &&
          (in.arg < 0 || in.arg >= static_cast<int>(s) || k_.stages[in.arg].kind != StageKind::Reduce))
        fail(ErrorKind::Runtime, "internal: cuda codegen: stage ", s, " of kernel ", k_.name,
             " reads the result of stage ", in.arg, ", which is not an earlier reduction");
    }
    if (st.kind == StageKind::Reduce) {
      if (!reduce_functor(st.reduce_op))
        fail(ErrorKind::NotImplemented, "not implemented: reduction ", op_name(st.reduce_op), " on cuda (kernel ", k_.name, ")");
      if (st.reduce_value < 0 || st.reduce_value >= static_cast<int>(st.body.size()))
        fail(ErrorKind::Runtime, "internal: cuda codegen: reduction of stage ", s, " of kernel ", k_.name,
             " has no value");
    }
    for (const auto& store : st.stores)
      if (store.arg < 0 || store.arg >= static_cast<int>(k_.args.size()) || k_.args[store.arg].scalar ||
          store.value < 0 || store.value >= static_cast<int>(st.body.size()))
        fail(ErrorKind::Runtime, "internal: cuda codegen: bad store in kernel ", k_.name);
  }
}

std::string KernelGen::instr_expr(int s, int i, const Hooks& h) {
  const Stage& st = k_.stages[static_cast<size_t>(s)];
  const Instr& in = st.body[static_cast<size_t>(i)];
  auto val = [&](int id) { return "v" + std::to_string(id); };
  auto dt = [&](int id) { return st.body.at(static_cast<size_t>(id)).dtype; };
  switch (in.kind) {
    case IKind::Load:
    case IKind::LoadScalar: {
      const loop::Arg& arg = k_.args[static_cast<size_t>(in.arg)];
      const std::string p = "a" + std::to_string(in.arg);
      if (arg.scalar) {
        // Scalars arrive by value as double (floating) or long long (integral and bool).
        DType passed = is_floating(arg.dtype) ? DType::Float64 : DType::Int64;
        return cast_expr(arg.dtype, in.dtype, cast_expr(passed, arg.dtype, p));
      }
      std::string e = h.load ? h.load(s, i) : "";
      if (e.empty()) e = in.kind == IKind::LoadScalar ? p + "[0]" : p + "[" + index_expr(in.index) + "]";
      return cast_expr(arg.dtype, in.dtype, from_storage(arg.dtype, e));
    }
    case IKind::Const: return literal(in.dtype, in.value);
    case IKind::Op: {
      if (in.a < 0) fail(ErrorKind::Runtime, "internal: cuda codegen: ", op_name(in.op), " without operands");
      auto need = [&](int id) {
        if (id < 0) fail(ErrorKind::Runtime, "internal: cuda codegen: ", op_name(in.op), " is missing an operand in ", k_.name);
        return id;
      };
      // Operands are converted exactly as the CPU backend converts them (llvm_ops.cc): b to a's
      // dtype first, then both to the result dtype for arithmetic; predicates work on bool.
      auto as = [&](int id, DType to) { return cast_expr(dt(id), to, val(id)); };
      auto b_as_a = [&]() { return cast_expr(dt(need(in.b)), dt(in.a), val(in.b)); };
      const DType t = in.dtype;
      switch (op_info(in.op).cls) {
        case OpClass::Unary:
          return op_expr(in.op, t, t, as(in.a, t), "", "", k_.name);
        case OpClass::Binary:
          return op_expr(in.op, t, t, as(in.a, t), cast_expr(dt(in.a), t, b_as_a()), "", k_.name);
        case OpClass::Compare:
          return cast_expr(DType::Bool, t, op_expr(in.op, DType::Bool, dt(in.a), val(in.a), b_as_a(), "", k_.name));
        case OpClass::Logical:
          return cast_expr(DType::Bool, t,
                           op_expr(in.op, DType::Bool, DType::Bool, as(in.a, DType::Bool), as(need(in.b), DType::Bool), "",
                                   k_.name));
        case OpClass::Predicate1:
          return cast_expr(DType::Bool, t, op_expr(in.op, DType::Bool, DType::Bool, as(in.a, DType::Bool), "", "", k_.name));
        case OpClass::Where: {
          const DType bt = dt(need(in.b));
          std::string other = cast_expr(bt, t, cast_expr(dt(need(in.c)), bt, val(in.c)));
          return op_expr(in.op, t, t, as(in.a, DType::Bool), as(in.b, t), other, k_.name);
        }
        case OpClass::Cast:
          return cast_expr(dt(in.a), t, val(in.a));
        default:
          break;
      }
      fail(ErrorKind::NotImplemented, "not implemented: ", op_name(in.op), " inside a kernel on cuda (kernel ", k_.name, ")");
    }
    case IKind::RandUniform: {
      if (!is_floating(in.dtype))
        fail(ErrorKind::NotImplemented, "not implemented: rand of ", dtype_name(in.dtype), " on cuda (kernel ", k_.name, ")");
      std::string seed = cast_expr(dt(in.a), DType::Int64, val(in.a));
      std::string off = cast_expr(dt(in.b), DType::Int64, val(in.b));
      std::string args = seed + ", " + off + ", (long long)(" + index_expr(in.index) + "), " + int_literal(in.stream);
      if (in.dtype == DType::Float64) return "lt_rand_f64(" + args + ")";
      return round_to(in.dtype, "lt_rand_f32(" + args + ")");
    }
    case IKind::ReduceResult: {
      const Stage& rs = k_.stages[static_cast<size_t>(in.arg)];
      return cast_expr(rs.acc_dtype, in.dtype, "r" + std::to_string(in.arg));
    }
  }
  return "0";
}

void KernelGen::emit_body(int s, const Hooks& h) {
  const Stage& st = k_.stages[static_cast<size_t>(s)];
  for (size_t i = 0; i < st.body.size(); ++i) {
    const Instr& in = st.body[i];
    line("const " + std::string(ctype(in.dtype)) + " v" + std::to_string(i) + " = " +
         instr_expr(s, static_cast<int>(i), h) + ";");
  }
}

void KernelGen::emit_stores(int s, const Hooks& h) {
  const Stage& st = k_.stages[static_cast<size_t>(s)];
  for (const auto& store : st.stores) {
    const loop::Arg& arg = k_.args[static_cast<size_t>(store.arg)];
    std::string v = cast_expr(st.body[static_cast<size_t>(store.value)].dtype, arg.dtype, "v" + std::to_string(store.value));
    const std::string at = "a" + std::to_string(store.arg) + "[" + index_expr(store.index) + "]";
    if (store.accumulate) {
      const char* fn = arg.dtype == DType::Float16    ? "lt_atomic_add_f16"
                       : arg.dtype == DType::BFloat16 ? "lt_atomic_add_bf16"
                                                      : "lt_atomic_add";
      if (arg.dtype == DType::Bool)
        fail(ErrorKind::NotImplemented, "not implemented: accumulating into bool on cuda (kernel ", k_.name, ")");
      std::string val = is_half(arg.dtype) ? v : "(" + std::string(stype(arg.dtype)) + ")" + v;
      line(std::string(fn) + "(&" + at + ", " + val + ");");
      continue;
    }
    if (h.store && h.store(s, store, v)) continue;
    line(at + " = " + to_storage(arg.dtype, v) + ";");
  }
}

void KernelGen::emit_signature(int threads) {
  std::ostringstream sig;
  sig << "extern \"C\" __global__ void __launch_bounds__(" << threads << ") " << name_ << "(";
  std::set<int> stored;
  for (const auto& st : k_.stages)
    for (const auto& store : st.stores) stored.insert(store.arg);
  // __restrict__ (and const, which lets loads take the read-only path) only where no other
  // argument names the same buffer: an in-place update may pass one buffer twice, and the args of
  // an in-place pair (a donated input and its output, Kernel::inplace) may be one buffer at run
  // time. Such a pair is read and written at the same index by the same thread, so it needs no
  // more than dropping the promise.
  std::map<int, int> uses_of_buffer;
  for (const auto& a : k_.args) ++uses_of_buffer[a.buffer];
  std::set<int> paired;
  for (auto [in, out] : k_.inplace) paired.insert({in, out});
  for (size_t j = 0; j < k_.args.size(); ++j) {
    const loop::Arg& a = k_.args[j];
    if (j) sig << ", ";
    if (a.scalar)
      sig << (is_floating(a.dtype) ? "double" : "long long") << " a" << j;
    else
      sig << (a.output || stored.count(static_cast<int>(j)) ? "" : "const ") << stype(a.dtype)
          << (uses_of_buffer[a.buffer] == 1 && !paired.count(static_cast<int>(j))
                  ? "* __restrict__ a"
                  : "* a")
          << j;
  }
  sig << ")";
  open(sig.str());
}

// An access of the elementwise space at exactly offset + flat outer index (row-major), offset a
// multiple of 4: the 4 points of a vector lane are 4 consecutive, aligned elements.
bool KernelGen::flat_access(const Index& ix) const {
  if (!ix.affine() || ix.offset % 4 != 0 || ix.offset < 0) return false;
  int64_t want = 1;
  for (int d = static_cast<int>(ext_.size()) - 1; d >= 0; --d) {
    int64_t st = d < static_cast<int>(ix.strides.size()) ? ix.strides[static_cast<size_t>(d)] : 0;
    if (d >= nouter_) {
      if (st && ext_[static_cast<size_t>(d)] > 1) return false;
      continue;
    }
    if (ext_[static_cast<size_t>(d)] > 1 && st != want) return false;
    want *= ext_[static_cast<size_t>(d)];
  }
  return true;
}

// An access of a row kernel at (any outer part with strides and offset multiples of 4) + the flat
// row-major index of the inner space: 4 consecutive points of a row are 4 consecutive elements,
// aligned as the buffer is (a vector access in gen_rows).
bool KernelGen::row_flat_access(const Index& ix) const {
  if (!ix.affine() || ix.offset % 4 != 0 || ix.offset < 0) return false;
  int64_t want = 1;
  for (int d = static_cast<int>(ext_.size()) - 1; d >= 0; --d) {
    const int64_t st = d < static_cast<int>(ix.strides.size()) ? ix.strides[static_cast<size_t>(d)] : 0;
    const int64_t e = ext_[static_cast<size_t>(d)];
    if (d < nouter_) {
      if (e > 1 && st % 4 != 0) return false;
      continue;
    }
    if (e > 1 && st != want) return false;
    want *= e;
  }
  return true;
}

// The C condition that every pointer of `args` is aligned for 4-element vector accesses (16 bytes
// for 4-byte elements, 8 for 2-byte ones, 4 for bytes).
std::string KernelGen::all_aligned(const std::set<int>& args) const {
  std::string bits;
  for (int a : args) {
    const int bytes = 4 * static_cast<int>(dtype_size(k_.args[a].dtype));
    bits += std::string(bits.empty() ? "" : " | ") + "(reinterpret_cast<unsigned long long>(a" + std::to_string(a) +
            ") & " + std::to_string(bytes - 1) + "ull)";
  }
  return "(" + bits + ") == 0ull";
}

}  // namespace

int64_t cuda_point_cost(const loop::Kernel& k) {
  int64_t cost = 0;
  for (const auto& st : k.stages)
    for (const auto& in : st.body) {
      if (in.kind != IKind::Op) {
        ++cost;
        continue;
      }
      switch (in.op) {
        case Op::Sin: case Op::Cos: cost += 40; break;
        case Op::Exp: case Op::Log: case Op::Tanh: case Op::Erf: case Op::Pow: cost += 20; break;
        default: ++cost;
      }
    }
  return cost;
}

namespace {

void KernelGen::gen_elementwise(CudaKernelLaunch& launch) {
  const int threads = 256;
  launch.mode = CudaKernelMode::Elementwise;
  launch.threads = threads;
  const int64_t n = outer_n_;

  // Accesses that become vector loads/stores. Not for a heavy body (the 20-sin chain): it is
  // bound by arithmetic, not memory, so 16-byte accesses gain nothing there, while the vector
  // path's four unrolled copies of the body (plus the scalar tail's) take NVRTC ~3x longer.
  std::map<std::pair<int, int>, std::string> vec_load;  // (stage, instr) -> vector variable
  std::map<int, std::string> vec_store;                 // arg -> vector variable
  std::set<int> aligned_args;
  if (n >= 4 && cuda_point_cost(k_) <= kVectorPointCostLimit) {
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      const Stage& st = k_.stages[s];
      std::string pre = k_.stages.size() == 1 ? "" : "s" + std::to_string(s) + "_";
      for (size_t i = 0; i < st.body.size(); ++i) {
        const Instr& in = st.body[i];
        if (in.kind != IKind::Load || k_.args[in.arg].scalar || !vtype(k_.args[in.arg].dtype) ||
            !flat_access(in.index))
          continue;
        vec_load[{int(s), int(i)}] = pre + "x" + std::to_string(i);
        aligned_args.insert(in.arg);
      }
    }
    // A stored argument becomes a vector store when it is stored exactly once, flat.
    std::map<int, int> stores_of;
    std::map<int, const loop::Store*> the_store;
    for (const auto& st : k_.stages)
      for (const auto& store : st.stores) ++stores_of[store.arg], the_store[store.arg] = &store;
    for (const auto& [arg, count] : stores_of)
      if (count == 1 && vtype(k_.args[arg].dtype) && flat_access(the_store[arg]->index) &&
          !the_store[arg]->accumulate) {
        vec_store[arg] = "y" + std::to_string(arg);
        aligned_args.insert(arg);
      }
  }
  launch.vectorized = !vec_load.empty() || !vec_store.empty();
  int64_t work = launch.vectorized ? n / 4 : n;
  launch.max_blocks = (std::max<int64_t>(work, n > 0 ? 1 : 0) + threads - 1) / threads;

  os_ << "// " << k_.name << ": elementwise over outer " << shape_str(k_.outer)
      << ", one thread per point, grid-stride" << (launch.vectorized ? "; 4 points per thread with vector accesses" : "")
      << "\n";
  emit_signature(threads);
  const std::string T = itype_;
  line("const " + T + " n = " + ilit(n) + ";");
  line("const " + T + " stride = (" + T + ")gridDim.x * " + ilit(threads) + ";");
  line("const " + T + " tid = (" + T + ")blockIdx.x * " + ilit(threads) + " + threadIdx.x;");
  Hooks scalar_hooks;
  std::string scalar_start = "tid";
  if (launch.vectorized) {
    // Vector path when every vector-accessed pointer is aligned (always true for buffers of the
    // caching allocator; checked so that any buffer stays correct). The tail and unaligned
    // buffers take the scalar loop below.
    line(T + " start = tid;");
    open("if (" + all_aligned(aligned_args) + ")");
    line("const " + T + " nv = n / 4u;");
    open("for (" + T + " q = tid; q < nv; q += stride)");
    for (const auto& [key, var] : vec_load) {
      const Instr& in = k_.stages[key.first].body[key.second];
      const loop::Arg& arg = k_.args[in.arg];
      line("const " + std::string(vtype(arg.dtype)) + " " + var + " = reinterpret_cast<const " + vtype(arg.dtype) +
           "*>(a" + std::to_string(in.arg) + (in.index.offset ? " + " + ilit(in.index.offset) : "") + ")[q];");
    }
    std::map<int, int64_t> store_offset;
    for (const auto& [arg, var] : vec_store) line(std::string(vtype(k_.args[arg].dtype)) + " " + var + ";");
    static const char* lanes[4] = {"x", "y", "z", "w"};
    for (int lane = 0; lane < 4; ++lane) {
      open("");
      line("const " + T + " flat = q * 4u + " + ilit(lane) + ";");
      decompose("flat", 0, nouter_);
      Hooks h;
      h.load = [&, lane](int s, int i) -> std::string {
        auto it = vec_load.find({s, i});
        return it == vec_load.end() ? "" : it->second + "." + lanes[lane];
      };
      h.store = [&, lane](int, const loop::Store& st, const std::string& v) {
        auto it = vec_store.find(st.arg);
        if (it == vec_store.end() || !flat_access(st.index)) return false;
        store_offset[st.arg] = st.index.offset;
        line(it->second + "." + lanes[lane] + " = " + to_storage(k_.args[st.arg].dtype, v) + ";");
        return true;
      };
      for (size_t s = 0; s < k_.stages.size(); ++s) {
        emit_body(static_cast<int>(s), h);
        emit_stores(static_cast<int>(s), h);
      }
      close();
    }
    for (const auto& [arg, var] : vec_store) {
      int64_t off = store_offset.count(arg) ? store_offset[arg] : 0;
      line("reinterpret_cast<" + std::string(vtype(k_.args[arg].dtype)) + "*>(a" + std::to_string(arg) +
           (off ? " + " + ilit(off) : "") + ")[q] = " + var + ";");
    }
    close();
    line("start = nv * 4u + tid;");
    close();
    scalar_start = "start";
  }
  open("for (" + T + " flat = " + scalar_start + "; flat < n; flat += stride)");
  decompose("flat", 0, nouter_);
  for (size_t s = 0; s < k_.stages.size(); ++s) {
    emit_body(static_cast<int>(s), scalar_hooks);
    emit_stores(static_cast<int>(s), scalar_hooks);
  }
  close();
  close();
}

void KernelGen::choose_row_mode(CudaKernelLaunch& launch) const {
  // The last loop variables that actually vary, to judge which way the loads are contiguous.
  int last_inner = -1, last_outer = -1;
  for (int v = 0; v < nouter_ + ninner_; ++v)
    if (ext_[static_cast<size_t>(v)] > 1) (v < nouter_ ? last_outer : last_inner) = v;
  bool inner_contig = false, outer_contig = false;
  for (const auto& st : k_.stages) {
    if (st.kind == StageKind::MapOuter) continue;
    for (const auto& in : st.body) {
      if (in.kind != IKind::Load || !in.index.affine()) continue;
      auto stride = [&](int v) { return v < 0 ? 0 : in.index.strides.at(static_cast<size_t>(v)); };
      if (stride(last_inner) == 1) inner_contig = true;
      else if (stride(last_outer) == 1) outer_contig = true;
    }
  }
  launch.threads = 256;
  if (inner_n_ <= 16) {
    // Tiny rows: a thread loops over its row.
    launch.mode = CudaKernelMode::Thread;
    launch.max_blocks = (outer_n_ + 255) / 256;
  } else if (!inner_contig && outer_contig && outer_n_ >= 1024) {
    // A reduction down columns: lanes take 32 adjacent outer points (coalesced loads), the 8 warps
    // of a block split the inner space and combine through shared memory.
    launch.mode = CudaKernelMode::Tile;
    launch.max_blocks = (outer_n_ + 31) / 32;
  } else if (inner_n_ <= 256 || (inner_n_ <= 1024 && outer_n_ >= 4096)) {
    launch.mode = CudaKernelMode::Warp;
    launch.max_blocks = (outer_n_ + 7) / 8;
  } else {
    launch.mode = CudaKernelMode::Block;
    launch.threads = (inner_n_ >= 16384 && outer_n_ < 256) ? 1024 : inner_n_ >= 8192 ? 512 : 256;
    if (opt_.block_threads > 0) launch.threads = std::clamp(opt_.block_threads / 32 * 32, 32, 1024);
    launch.max_blocks = outer_n_;
  }
}

void KernelGen::gen_rows(CudaKernelLaunch& launch) {
  choose_row_mode(launch);
  const int threads = launch.threads;
  const std::string T = itype_;
  const CudaKernelMode mode = launch.mode;

  // 16-byte row accesses (Block/Warp): when a row's points come in fours and a load or store walks
  // the row contiguously, a thread takes 4 consecutive points at a time ("chunks"): one vector
  // load/store per such access, then the body once per point. Register caching: when each thread
  // holds at most max_cached chunks, the chunk loops are unrolled and a vector load that several
  // stages repeat (softmax and layer_norm read x in every stage) is loaded once and kept.
  const bool row_modes = mode == CudaKernelMode::Block || mode == CudaKernelMode::Warp;
  std::map<std::pair<int, int>, std::string> vload;   // (stage, instr) -> vector variable
  std::map<const loop::Store*, std::string> vstore;  // store -> vector variable
  std::set<int> vector_args;                         // the args those access
  if (opt_.row_vectors && row_modes && inner_n_ % 4 == 0) {
    for (size_t s = 0; s < k_.stages.size(); ++s) {
      const Stage& st = k_.stages[s];
      if (st.kind == StageKind::MapOuter) continue;
      for (size_t i = 0; i < st.body.size(); ++i) {
        const Instr& in = st.body[i];
        if (in.kind != IKind::Load || k_.args[in.arg].scalar || !vtype(k_.args[in.arg].dtype) ||
            !row_flat_access(in.index))
          continue;
        vload[{int(s), int(i)}] = "x" + std::to_string(s) + "_" + std::to_string(i);
        vector_args.insert(in.arg);
      }
      for (const auto& store : st.stores) {
        if (store.accumulate || !vtype(k_.args[store.arg].dtype) || !row_flat_access(store.index)) continue;
        vstore[&store] = "y" + std::to_string(s) + "_" + std::to_string(vstore.size());
        vector_args.insert(store.arg);
      }
    }
  }
  const bool vec = !vload.empty() || !vstore.empty();
  const int64_t max_cached = opt_.max_cached_per_thread;
  const int64_t step = mode == CudaKernelMode::Block ? threads : mode == CudaKernelMode::Warp ? 32 : 1;
  const int64_t chunks = vec ? inner_n_ / 4 : inner_n_;  // a thread's units of the row
  const int64_t per_thread = (chunks + step - 1) / step;
  std::map<std::string, int> cache_of;          // load key -> cache array number
  std::map<std::pair<int, int>, int> cached;    // (stage, instr) -> cache array number
  std::map<std::pair<int, int>, bool> fills;    // (stage, instr) -> this load fills the cache
  if (vec && per_thread >= 1 && per_thread <= max_cached) {
    // The vector loads (affine, so never data-dependent) by what they read; within a stage only
    // the first load of a key counts. vload iterates in (stage, instr) order.
    std::map<std::string, std::vector<std::pair<int, int>>> uses;
    for (const auto& [at, var] : vload) {
      const Instr& in = k_.stages[static_cast<size_t>(at.first)].body[static_cast<size_t>(at.second)];
      auto& list = uses[std::to_string(in.arg) + ":" + index_expr(in.index)];
      if (list.empty() || list.back().first != at.first) list.push_back(at);
    }
    for (const auto& [key, list] : uses) {
      if (list.size() < 2) continue;
      int id = static_cast<int>(cache_of.size());
      cache_of[key] = id;
      for (size_t u = 0; u < list.size(); ++u) cached[list[u]] = id, fills[list[u]] = u == 0;
    }
  }
  const bool unrolled = !cache_of.empty();

  const char* how = mode == CudaKernelMode::Block  ? "one block per outer point"
                    : mode == CudaKernelMode::Warp ? "one warp per outer point (8 per block)"
                    : mode == CudaKernelMode::Tile ? "32 outer points per block, 8 warps split the inner space"
                                                   : "one thread per outer point";
  os_ << "// " << k_.name << ": outer " << shape_str(k_.outer) << " x inner " << shape_str(k_.inner) << ", " << how
      << ", " << k_.stages.size() << " stage(s)" << (vec ? ", 4 points per thread with vector accesses" : "")
      << (unrolled ? ", row cached in registers" : "") << "\n";
  emit_signature(threads);
  if (vec) {
    // Vector accesses need the buffers 16-byte (8 for 16-bit types) aligned: always so for the
    // caching allocator's buffers; imported memory may not be, and then every vector access goes
    // element by element (lt_ld4/lt_st4; one uniform branch).
    line("const bool al = " + all_aligned(vector_args) + ";");
  }
  std::string red_start, red_step;
  switch (mode) {
    case CudaKernelMode::Block:
      open("for (" + T + " row = (" + T + ")blockIdx.x; row < " + ilit(outer_n_) + "; row += (" + T + ")gridDim.x)");
      red_start = "(" + T + ")threadIdx.x";
      red_step = ilit(threads);
      break;
    case CudaKernelMode::Warp:
      line("const " + T + " lane = threadIdx.x & 31u;");
      open("for (" + T + " row = (" + T + ")blockIdx.x * " + ilit(threads / 32) + " + (threadIdx.x >> 5); row < " +
           ilit(outer_n_) + "; row += (" + T + ")gridDim.x * " + ilit(threads / 32) + ")");
      red_start = "lane";
      red_step = ilit(32);
      break;
    case CudaKernelMode::Tile:
      line("const " + T + " warp = threadIdx.x >> 5;");
      open("for (" + T + " tile = (" + T + ")blockIdx.x; tile < " + ilit((outer_n_ + 31) / 32) + "; tile += (" + T +
           ")gridDim.x)");
      line("const " + T + " row = tile * 32u + (threadIdx.x & 31u);");
      line("const bool active = row < " + ilit(outer_n_) + ";");
      red_start = "warp";
      red_step = ilit(threads / 32);
      break;
    default:
      open("for (" + T + " row = (" + T + ")blockIdx.x * " + ilit(threads) + " + threadIdx.x; row < " +
           ilit(outer_n_) + "; row += (" + T + ")gridDim.x * " + ilit(threads) + ")");
      red_start = ilit(0);
      red_step = ilit(1);
      break;
  }
  decompose("row", 0, nouter_);
  for (const auto& [key, id] : cache_of) {
    // The compute type of the cached argument.
    int arg = std::stoi(key.substr(0, key.find(':')));
    line(std::string(vec ? vtype(k_.args[arg].dtype) : ctype(k_.args[arg].dtype)) + " c" + std::to_string(id) + "[" +
         std::to_string(per_thread) +
         "];  // a" + key.substr(0, key.find(':')) + "[" + key.substr(key.find(':') + 1) + "]");
  }

  // Opens the loop over this thread's points of the inner space.
  // With vectors the loop runs over chunks c (points 4c .. 4c+3), and the body is emitted per point.
  const std::string unit = vec ? "c" : "red";
  auto open_inner = [&]() {
    if (unrolled) {
      line("#pragma unroll");
      open("for (int k = 0; k < " + std::to_string(per_thread) + "; ++k)");
      line("const " + T + " " + unit + " = " + red_start + " + (" + T + ")k * " + red_step + ";");
      open("if (" + unit + " < " + ilit(chunks) + ")");
    } else {
      std::string cond = unit + " < " + ilit(chunks);
      if (mode == CudaKernelMode::Tile) cond = "active && " + cond;
      open("for (" + T + " " + unit + " = " + red_start + "; " + cond + "; " + unit + " += " + red_step + ")");
    }
    if (!vec) decompose("red", nouter_, ninner_);
  };
  auto close_inner = [&]() {
    close();
    if (unrolled) close();
  };
  // Vector path: the stage's vector loads (at the chunk's first point), then `per_point` for each of
  // the 4 points with hooks that read the vectors' lanes and fill the store vectors, then the stores.
  static const char* lanes[4] = {"x", "y", "z", "w"};
  auto at_chunk_start = [&](const std::function<void()>& body) {
    open("");
    line("const " + T + " red = " + unit + " * 4u;");
    decompose("red", nouter_, ninner_);
    body();
    close();
  };
  auto vector_stage = [&](int si, const std::function<void(const Hooks&)>& per_point) {
    const Stage& st = k_.stages[static_cast<size_t>(si)];
    for (const auto& [key, var] : vload) {
      if (key.first != si) continue;
      const Instr& in = st.body[static_cast<size_t>(key.second)];
      const std::string V = vtype(k_.args[in.arg].dtype);
      auto it = cached.find(key);
      if (it != cached.end() && !fills.at(key)) {
        line("const " + V + " " + var + " = c" + std::to_string(it->second) + "[k];");
        continue;
      }
      line(V + " " + var + ";");
      at_chunk_start([&] {
        line(var + " = lt_ld4<" + V + ">(&a" + std::to_string(in.arg) + "[" + index_expr(in.index) + "], al);");
      });
      if (it != cached.end()) line("c" + std::to_string(it->second) + "[k] = " + var + ";");
    }
    auto in_stage = [&](const loop::Store* store) {
      return !st.stores.empty() && &st.stores.front() <= store && store <= &st.stores.back();
    };
    for (const auto& [store, var] : vstore)
      if (in_stage(store))
        line(std::string(vtype(k_.args[store->arg].dtype)) + " " + var + ";");
    for (int lane = 0; lane < 4; ++lane) {
      open("");
      line("const " + T + " red = " + unit + " * 4u + " + std::to_string(lane) + "u;");
      decompose("red", nouter_, ninner_);
      Hooks h;
      h.load = [&, si, lane](int s2, int i) -> std::string {
        auto it = vload.find({s2, i});
        return it == vload.end() || s2 != si ? "" : it->second + "." + lanes[lane];
      };
      h.store = [&, lane](int, const loop::Store& store, const std::string& v) {
        auto it = vstore.find(&store);
        if (it == vstore.end()) return false;
        line(it->second + "." + lanes[lane] + " = " + to_storage(k_.args[store.arg].dtype, v) + ";");
        return true;
      };
      per_point(h);
      close();
    }
    for (const auto& [store, var] : vstore) {
      if (!in_stage(store)) continue;
      at_chunk_start([&, store = store, var = var] {
        line("lt_st4(&a" + std::to_string(store->arg) + "[" + index_expr(store->index) + "], " + var + ", al);");
      });
    }
  };

  for (size_t s = 0; s < k_.stages.size(); ++s) {
    const Stage& st = k_.stages[s];
    const int si = static_cast<int>(s);
    const Hooks hooks;  // the per-point path reads and writes memory directly
    if (st.kind == StageKind::Reduce) {
      const std::string acc = "acc" + std::to_string(s), r = "r" + std::to_string(s);
      const char* at = ctype(st.acc_dtype);
      line("// stage " + std::to_string(s) + ": " + std::string(op_name(st.reduce_op)) + " over the inner space");
      line(std::string(at) + " " + acc + " = " + reduce_identity(st.reduce_op, st.acc_dtype) + ";");
      open_inner();
      std::string v = cast_expr(st.body[static_cast<size_t>(st.reduce_value)].dtype, st.acc_dtype,
                                "v" + std::to_string(st.reduce_value));
      auto point = [&](const Hooks& h) {
        emit_body(si, h);
        line(acc + " = " + reduce_combine(st.reduce_op, st.acc_dtype, acc, v) + ";");
      };
      if (vec) vector_stage(si, point);
      else point(hooks);
      close_inner();
      std::string fin = acc;
      const std::string f = reduce_functor(st.reduce_op);
      if (mode == CudaKernelMode::Block) fin = "lt_block_reduce(" + acc + ", " + f + ")";
      else if (mode == CudaKernelMode::Warp) fin = "lt_warp_reduce(" + acc + ", " + f + ")";
      else if (mode == CudaKernelMode::Tile) fin = "lt_tile_reduce(" + acc + ", " + f + ")";
      line("const " + std::string(at) + " " + r + " = " + fin + ";");
    } else if (st.kind == StageKind::MapInner) {
      line("// stage " + std::to_string(s) + ": map over the inner space");
      open_inner();
      auto point = [&](const Hooks& h) {
        emit_body(si, h);
        emit_stores(si, h);
      };
      if (vec) vector_stage(si, point);
      else point(hooks);
      close_inner();
    } else {
      line("// stage " + std::to_string(s) + ": once per outer point");
      if (mode == CudaKernelMode::Block) open("if (threadIdx.x == 0)");
      else if (mode == CudaKernelMode::Warp) open("if (lane == 0u)");
      else if (mode == CudaKernelMode::Tile) open("if (active && warp == 0u)");
      else open("");
      emit_body(si, hooks);
      emit_stores(si, hooks);
      close();
    }
  }
  close();
  close();
}

CudaKernelLaunch KernelGen::generate() {
  check_kernel();
  nouter_ = static_cast<int>(k_.outer.size());
  ninner_ = static_cast<int>(k_.inner.size());
  ext_ = k_.outer;
  ext_.insert(ext_.end(), k_.inner.begin(), k_.inner.end());
  outer_n_ = numel(k_.outer);
  inner_n_ = numel(k_.inner);
  for (const auto& a : k_.args) uses_half_ |= is_half(a.dtype);
  for (const auto& st : k_.stages) {
    uses_half_ |= is_half(st.acc_dtype) && st.kind == StageKind::Reduce;
    for (const auto& in : st.body) {
      uses_half_ |= is_half(in.dtype);
      uses_rand_ |= in.kind == IKind::RandUniform;
      if (in.kind == IKind::Load || in.kind == IKind::RandUniform) {
        if (in.index.affine() && in.index.strides.size() != ext_.size())
          fail(ErrorKind::Runtime, "internal: cuda codegen: index of kernel ", k_.name, " has ",
               in.index.strides.size(), " strides for ", ext_.size(), " loop variables");
        collect_vars(in.index, used_vars_);
      }
    }
    for (const auto& store : st.stores) {
      if (store.index.affine() && store.index.strides.size() != ext_.size())
        fail(ErrorKind::Runtime, "internal: cuda codegen: store index of kernel ", k_.name, " has ",
             store.index.strides.size(), " strides for ", ext_.size(), " loop variables");
      collect_vars(store.index, used_vars_);
    }
  }
  i32_ = fits_32bit();
  itype_ = i32_ ? "unsigned" : "long long";
  CudaKernelLaunch launch{name_, CudaKernelMode::Elementwise, 256, 0};
  bool rows = std::any_of(k_.stages.begin(), k_.stages.end(),
                          [](const Stage& s) { return s.kind != StageKind::MapOuter; });
  if (rows) {
    gen_rows(launch);
  } else {
    for (const auto& st : k_.stages)
      for (const auto& in : st.body)
        if (in.kind == IKind::ReduceResult)
          fail(ErrorKind::Runtime, "internal: cuda codegen: kernel ", k_.name, " reads a reduction it does not have");
    gen_elementwise(launch);
  }
  if (outer_n_ == 0) launch.max_blocks = 0;
  return launch;
}

}  // namespace

const char* cuda_kernel_mode_name(CudaKernelMode m) {
  switch (m) {
    case CudaKernelMode::Elementwise: return "elementwise";
    case CudaKernelMode::Thread: return "thread-per-row";
    case CudaKernelMode::Warp: return "warp-per-row";
    case CudaKernelMode::Block: return "block-per-row";
    case CudaKernelMode::Tile: return "tile-of-columns";
  }
  return "?";
}

CudaCodegenOptions CudaCodegenOptions::from_env() {
  CudaCodegenOptions o;
  auto read = [](const char* name, int lo, int hi, int fallback) {
    const char* e = std::getenv(name);
    if (!e || !*e) return fallback;
    char* end = nullptr;
    long v = std::strtol(e, &end, 10);
    if (*end || v < lo || v > hi)
      fail(ErrorKind::Value, name, "=", e, ": expected an integer in [", lo, ", ", hi, "]");
    return static_cast<int>(v);
  };
  o.max_cached_per_thread = read("LT_CUDA_ROW_CACHE", 0, 64, o.max_cached_per_thread);
  o.block_threads = read("LT_CUDA_BLOCK_THREADS", 0, 1024, o.block_threads);
  o.row_vectors = read("LT_CUDA_ROW_VEC", 0, 1, o.row_vectors ? 1 : 0) != 0;
  return o;
}

std::string CudaCodegenOptions::tag() const {
  const CudaCodegenOptions d;
  std::string t;
  if (max_cached_per_thread != d.max_cached_per_thread) t += " rowcache" + std::to_string(max_cached_per_thread);
  if (block_threads != d.block_threads) t += " block" + std::to_string(block_threads);
  if (row_vectors != d.row_vectors) t += row_vectors ? " rowvec" : " norowvec";
  return t;
}

CudaModuleSource generate_cuda(const std::vector<loop::Kernel>& kernels, const CudaCodegenOptions& options) {
  CudaModuleSource out;
  std::ostringstream os;
  bool half = false, rand = false, reduce = false, atomic = false, atomic_half = false;
  std::set<std::string> names;
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::string name = sanitize(kernels[i].name.empty() ? "kernel" + std::to_string(i) : kernels[i].name);
    if (!names.insert(name).second) {
      name += "_" + std::to_string(i);
      names.insert(name);
    }
    os << "\n";
    const loop::Kernel k = with_full_strides(kernels[i]);
    KernelGen gen(k, name, options, os);
    out.kernels.push_back(gen.generate());
    half |= gen.uses_half();
    rand |= gen.uses_rand();
    atomic |= gen.uses_atomic();
    for (const auto& st : k.stages)
      for (const auto& store : st.stores) atomic_half |= store.accumulate && is_half(k.args[store.arg].dtype);
    reduce |= out.kernels.back().mode == CudaKernelMode::Warp || out.kernels.back().mode == CudaKernelMode::Block ||
              out.kernels.back().mode == CudaKernelMode::Tile;
  }
  std::string pre = cuda_preamble::kPreambleHead;
  if (half) pre += cuda_preamble::kPreambleHalf;
  pre += cuda_preamble::kPreambleBase;
  if (reduce) pre += cuda_preamble::kPreambleReduce;
  if (rand) pre += cuda_preamble::kPreambleRand;
  if (atomic) pre += cuda_preamble::kPreambleAtomic;
  if (atomic_half) pre += cuda_preamble::kPreambleAtomicHalf;
  const std::string body = os.str();
  if (body.find("lt_sinf(") != std::string::npos || body.find("lt_cosf(") != std::string::npos)
    pre += cuda_preamble::kPreambleTrig;
  if (body.find("lt_ld4<") != std::string::npos) pre += cuda_preamble::kPreambleVector;
  out.source = pre + body;
  return out;
}

std::string cuda_source(const std::vector<loop::Kernel>& kernels) { return generate_cuda(kernels).source; }

}  // namespace lt
