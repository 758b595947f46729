// KernelGen's shared members (kernel_gen.h): index arithmetic, bodies, stores, the signature.
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
#include "backends/cuda/kernel_gen.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "backends/cuda/cuda_expr.h"
#include "ir/error.h"

namespace lt::cudagen {

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
    case IExpr::Kind::Const:
      return e.param >= 0 ? pname(e.param) : ilit(e.value);
    case IExpr::Kind::Var:
      return "i" + std::to_string(e.value);
    case IExpr::Kind::Value:
      return std::string(i32_ ? "(unsigned)" : "") + "v" + std::to_string(e.value);
    case IExpr::Kind::Add:
      return "(" + iexpr(e.a) + " + " + iexpr(e.b) + ")";
    case IExpr::Kind::Mul:
      return "(" + iexpr(e.a) + " * " + iexpr(e.b) + ")";
    case IExpr::Kind::FloorDiv:
      return "(" + iexpr(e.a) + " / " + iexpr(e.b) + ")";
    case IExpr::Kind::Mod:
      return "(" + iexpr(e.a) + " % " + iexpr(e.b) + ")";
  }
  return "0";
}

std::string KernelGen::index_expr(const Index& ix) const {
  if (!ix.affine()) return iexpr(ix.general);
  std::string s;
  for (size_t v = 0; v < ix.strides.size(); ++v) {
    int64_t st = ix.strides[v];
    const int sp = stride_param(ix, v);
    if ((sp < 0 && !st) || unit_ext(v)) continue;
    std::string term = "i" + std::to_string(v);
    if (sp >= 0)
      term += " * " + pname(sp);
    else if (st != 1)
      term += " * " + ilit(st);
    s += (s.empty() ? "" : " + ") + term;
  }
  if (ix.offset_param >= 0)
    s += (s.empty() ? "" : " + ") + pname(ix.offset_param);
  else if (ix.offset || s.empty())
    s += (s.empty() ? "" : " + ") + ilit(ix.offset);
  return s;
}

std::string KernelGen::ext_str(size_t v) const {
  const int p = ext_param(v);
  return p >= 0 ? pname(p) : ilit(ext_.at(v));
}

// The static extents' product as one literal, times each symbolic extent.
std::string KernelGen::extent_product(int first, int count) const {
  int64_t coef = 1;
  std::string syms;
  for (int v = first; v < first + count; ++v) {
    const int p = ext_param(static_cast<size_t>(v));
    if (p >= 0)
      syms += " * " + pname(p);
    else
      coef *= ext_[static_cast<size_t>(v)];
  }
  if (syms.empty()) return ilit(coef);
  return "(" + ilit(coef) + syms + ")";
}

bool KernelGen::outer_static() const {
  for (int v = 0; v < nouter_; ++v)
    if (ext_param(static_cast<size_t>(v)) >= 0) return false;
  return true;
}

bool KernelGen::inner_static() const {
  for (int v = nouter_; v < nouter_ + ninner_; ++v)
    if (ext_param(static_cast<size_t>(v)) >= 0) return false;
  return true;
}

// A shape for the kernel's header comment: symbolic extents by their parameter, so a symbolic
// kernel's text holds no size of the binding it was generated at.
std::string KernelGen::shape_comment(int first, int count) const {
  std::string s = "[";
  for (int v = first; v < first + count; ++v) {
    if (v > first) s += ", ";
    const int p = ext_param(static_cast<size_t>(v));
    s += p >= 0 ? pname(p) : std::to_string(ext_[static_cast<size_t>(v)]);
  }
  return s + "]";
}

Interval KernelGen::range(int id) const {
  const IExpr& e = k_.iexprs.at(static_cast<size_t>(id));
  switch (e.kind) {
    case IExpr::Kind::Const:
      return {double(e.value), double(e.value)};
    case IExpr::Kind::Value:
      return {0, double(e.hi)};
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
      return {std::floor(a.lo / (a.lo < 0 ? b.lo : b.hi)),
              std::floor(a.hi / (a.hi < 0 ? b.hi : b.lo))};
    }
    case IExpr::Kind::Mod: {
      Interval b = range(e.b);
      return {0, std::max(0.0, b.hi - 1)};
    }
  }
  return {};
}

bool KernelGen::fits_32bit() const {
  // Symbolic sizes have no bound at compile time: 64-bit indices.
  if (sym_) return false;
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
      if (loop::has_index(in) && !fits(in.index)) return false;
    for (const auto& store : st.stores)
      if (!fits(store.index)) return false;
  }
  return true;
}

void KernelGen::collect_iexpr_vars(int id, std::set<int>& used) const {
  const IExpr& e = k_.iexprs.at(static_cast<size_t>(id));
  if (e.kind == IExpr::Kind::Var) used.insert(static_cast<int>(e.value));
  if (e.a >= 0 && e.kind != IExpr::Kind::Const && e.kind != IExpr::Kind::Var)
    collect_iexpr_vars(e.a, used);
  if (e.b >= 0 && e.kind != IExpr::Kind::Const && e.kind != IExpr::Kind::Var)
    collect_iexpr_vars(e.b, used);
}

void KernelGen::collect_vars(const Index& ix, std::set<int>& used) const {
  if (!ix.affine()) return collect_iexpr_vars(ix.general, used);
  for (size_t v = 0; v < ix.strides.size(); ++v)
    if ((ix.strides[v] || stride_param(ix, v) >= 0) && !unit_ext(v))
      used.insert(static_cast<int>(v));
}

// Declares loop variables first..first+count-1 (those used) from a flat row-major index.
void KernelGen::decompose(const std::string& flat, int first, int count,
                          const std::string& prefix) {
  int64_t below = 1;       // product of the extents after the current dim: the static ones,
  std::string below_syms;  // times the symbolic ones
  std::vector<std::string> lines;
  for (int d = first + count - 1; d >= first; --d) {
    const size_t v = static_cast<size_t>(d);
    int64_t ext = ext_[v];
    if (used_vars_.count(d)) {
      std::string e = flat;
      if (!below_syms.empty())
        e = "(" + e + " / (" + ilit(below) + below_syms + "))";
      else if (below != 1)
        e = "(" + e + " / " + ilit(below) + ")";
      if (d != first) e += " % " + ext_str(v);
      if (unit_ext(v)) e = ilit(0);
      lines.push_back("const " + itype_ + " " + prefix + std::to_string(d) + " = " + e + ";");
    }
    // A symbolic extent is nonzero wherever an index is decomposed (an empty dim has no points).
    if (ext_param(v) >= 0)
      below_syms += " * " + pname(ext_param(v));
    else
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
          fail(ErrorKind::Runtime, "internal: cuda codegen: instruction ", i, " of stage ", s,
               " of kernel ", k_.name, " uses a later value");
      if ((in.kind == IKind::Load || in.kind == IKind::LoadScalar) &&
          (in.arg < 0 || in.arg >= static_cast<int>(k_.args.size())))
        fail(ErrorKind::Runtime, "internal: cuda codegen: bad argument ", in.arg, " in kernel ",
             k_.name);
      if (in.kind == IKind::ReduceResult && (in.arg < 0 || in.arg >= static_cast<int>(s) ||
                                             k_.stages[in.arg].kind != StageKind::Reduce))
        fail(ErrorKind::Runtime, "internal: cuda codegen: stage ", s, " of kernel ", k_.name,
             " reads the result of stage ", in.arg, ", which is not an earlier reduction");
    }
    if (st.kind == StageKind::Reduce) {
      if (!reduce_functor(st.reduce_op))
        fail(ErrorKind::NotImplemented, "not implemented: reduction ", op_name(st.reduce_op),
             " on cuda (kernel ", k_.name, ")");
      if (st.reduce_value < 0 || st.reduce_value >= static_cast<int>(st.body.size()))
        fail(ErrorKind::Runtime, "internal: cuda codegen: reduction of stage ", s, " of kernel ",
             k_.name, " has no value");
    }
    for (const auto& store : st.stores)
      if (store.arg < 0 || store.arg >= static_cast<int>(k_.args.size()) ||
          k_.args[store.arg].scalar || store.value < 0 ||
          store.value >= static_cast<int>(st.body.size()))
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
      if (e.empty())
        e = in.kind == IKind::LoadScalar ? p + "[0]" : p + "[" + index_expr(in.index) + "]";
      return cast_expr(arg.dtype, in.dtype, from_storage(arg.dtype, e));
    }
    case IKind::Const: {
      if (in.param < 0) return literal(in.dtype, in.value);
      // A size parameter (or its reciprocal) in double, then converted to the dtype as literal()
      // converts the static constant lowering computed the same way.
      const std::string d = in.param_reciprocal ? "(1.0 / (double)" + pname(in.param) + ")"
                                                : "(double)" + pname(in.param);
      switch (in.dtype) {
        case DType::Bool:
          return "(" + d + " != 0.0)";
        case DType::UInt8:
          return "(unsigned char)(long long)" + d;
        case DType::Int8:
          return "(signed char)(long long)" + d;
        case DType::Int32:
          return "(int)(long long)" + d;
        case DType::Int64:
          return "(long long)" + d;
        case DType::Float16:
        case DType::BFloat16:
        case DType::Float32:
          return round_to(in.dtype, "(float)" + d);
        case DType::Float64:
          return d;
      }
      return d;
    }
    case IKind::Op: {
      if (in.a < 0)
        fail(ErrorKind::Runtime, "internal: cuda codegen: ", op_name(in.op), " without operands");
      auto need = [&](int id) {
        if (id < 0)
          fail(ErrorKind::Runtime, "internal: cuda codegen: ", op_name(in.op),
               " is missing an operand in ", k_.name);
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
          return cast_expr(DType::Bool, t,
                           op_expr(in.op, DType::Bool, dt(in.a), val(in.a), b_as_a(), "", k_.name));
        case OpClass::Logical:
          return cast_expr(DType::Bool, t,
                           op_expr(in.op, DType::Bool, DType::Bool, as(in.a, DType::Bool),
                                   as(need(in.b), DType::Bool), "", k_.name));
        case OpClass::Predicate1:
          return cast_expr(
              DType::Bool, t,
              op_expr(in.op, DType::Bool, DType::Bool, as(in.a, DType::Bool), "", "", k_.name));
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
      fail(ErrorKind::NotImplemented, "not implemented: ", op_name(in.op),
           " inside a kernel on cuda (kernel ", k_.name, ")");
    }
    case IKind::RandUniform: {
      if (!is_floating(in.dtype))
        fail(ErrorKind::NotImplemented, "not implemented: rand of ", dtype_name(in.dtype),
             " on cuda (kernel ", k_.name, ")");
      std::string seed = cast_expr(dt(in.a), DType::Int64, val(in.a));
      std::string off = cast_expr(dt(in.b), DType::Int64, val(in.b));
      std::string args = seed + ", " + off + ", (long long)(" + index_expr(in.index) + "), " +
                         int_literal(in.stream);
      if (in.dtype == DType::Float64) return "lt_rand_f64(" + args + ")";
      return round_to(in.dtype, "lt_rand_f32(" + args + ")");
    }
    case IKind::Position:
      return cast_expr(DType::Int64, in.dtype, "(long long)(" + index_expr(in.index) + ")");
    case IKind::ReduceResult: {
      const Stage& rs = k_.stages[static_cast<size_t>(in.arg)];
      return cast_expr(rs.acc_dtype, in.dtype, "r" + std::to_string(in.arg));
    }
  }
  return "0";
}

void KernelGen::emit_body(int s, const Hooks& h) {
  if (regions_.empty())
    for (const Stage& st : k_.stages) regions_.push_back(loop::branch_regions(k_, st));
  emit_region(s, h, regions_[static_cast<size_t>(s)], -1);
}

// The instructions of region `r` in body order; a select with regions of its own becomes a branch
// whose sides compute their own instructions (lowering/branch_regions.h: one piece of a cat
// loaded per element instead of every piece).
void KernelGen::emit_region(int s, const Hooks& h, const loop::BranchRegions& br, int r) {
  const Stage& st = k_.stages[static_cast<size_t>(s)];
  for (size_t i = 0; i < st.body.size(); ++i) {
    if (br.region[i] != r) continue;
    const Instr& in = st.body[i];
    const std::string v = "v" + std::to_string(i);
    if (!br.branch[i]) {
      line("const " + std::string(ctype(in.dtype)) + " " + v + " = " +
           instr_expr(s, static_cast<int>(i), h) + ";");
      continue;
    }
    // The select's operands converted as instr_expr's Where converts them.
    auto dt = [&](int id) { return st.body.at(static_cast<size_t>(id)).dtype; };
    const DType t = in.dtype, bt = dt(in.b);
    const int w = static_cast<int>(i);
    line(std::string(ctype(t)) + " " + v + ";");
    open("if (" + cast_expr(dt(in.a), DType::Bool, "v" + std::to_string(in.a)) + ")");
    emit_region(s, h, br, 2 * w);
    line(v + " = " + cast_expr(bt, t, "v" + std::to_string(in.b)) + ";");
    close(" else {");
    ++ind_;
    emit_region(s, h, br, 2 * w + 1);
    line(v + " = " + cast_expr(bt, t, cast_expr(dt(in.c), bt, "v" + std::to_string(in.c))) + ";");
    close();
  }
}

void KernelGen::emit_stores(int s, const Hooks& h) {
  const Stage& st = k_.stages[static_cast<size_t>(s)];
  for (const auto& store : st.stores) {
    const loop::Arg& arg = k_.args[static_cast<size_t>(store.arg)];
    std::string v = cast_expr(st.body[static_cast<size_t>(store.value)].dtype, arg.dtype,
                              "v" + std::to_string(store.value));
    const std::string at = "a" + std::to_string(store.arg) + "[" + index_expr(store.index) + "]";
    if (store.accumulate) {
      const char* fn = arg.dtype == DType::Float16    ? "lt_atomic_add_f16"
                       : arg.dtype == DType::BFloat16 ? "lt_atomic_add_bf16"
                                                      : "lt_atomic_add";
      if (arg.dtype == DType::Bool)
        fail(ErrorKind::NotImplemented, "not implemented: accumulating into bool on cuda (kernel ",
             k_.name, ")");
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
  // Symbolic sizes: each size parameter the kernel reads, by value (cuda_codegen.h).
  for (int p : params_) sig << ", const long long " << pname(p);
  sig << ")";
  open(sig.str());
}

// The C condition that every pointer of `args` is aligned for 4-element vector accesses (16 bytes
// for 4-byte elements, 8 for 2-byte ones, 4 for bytes).
std::string KernelGen::all_aligned(const std::set<int>& args) const {
  std::string bits;
  for (int a : args) {
    const int bytes = 4 * static_cast<int>(dtype_size(k_.args[a].dtype));
    bits += std::string(bits.empty() ? "" : " | ") + "(reinterpret_cast<unsigned long long>(a" +
            std::to_string(a) + ") & " + std::to_string(bytes - 1) + "ull)";
  }
  return "(" + bits + ") == 0ull";
}

CudaKernelLaunch KernelGen::generate() {
  check_kernel();
  nouter_ = static_cast<int>(k_.outer.size());
  ninner_ = static_cast<int>(k_.inner.size());
  ext_.assign(k_.outer.begin(), k_.outer.end());
  ext_.insert(ext_.end(), k_.inner.begin(), k_.inner.end());
  outer_n_ = numel(k_.outer);
  inner_n_ = numel(k_.inner);
  sym_ = k_.symbolic();
  if (sym_) {
    ep_.assign(ext_.size(), -1);
    for (size_t d = 0; d < k_.outer_params.size() && d < k_.outer.size(); ++d)
      ep_[d] = k_.outer_params[d];
    for (size_t d = 0; d < k_.inner_params.size() && d < k_.inner.size(); ++d)
      ep_[k_.outer.size() + d] = k_.inner_params[d];
    std::set<int> ps;
    for (int p : ep_) ps.insert(p);
    for (const auto& e : k_.iexprs)
      if (e.kind == IExpr::Kind::Const) ps.insert(e.param);
    auto index_params = [&](const Index& ix) {
      if (!ix.affine()) return;
      ps.insert(ix.offset_param);
      for (int p : ix.stride_params) ps.insert(p);
    };
    for (const auto& st : k_.stages) {
      for (const auto& in : st.body) {
        if (in.kind == IKind::Const) ps.insert(in.param);
        if (loop::has_index(in)) index_params(in.index);
      }
      for (const auto& store : st.stores) index_params(store.index);
    }
    ps.erase(-1);
    params_.assign(ps.begin(), ps.end());
  }
  for (const auto& a : k_.args) uses_half_ |= is_half(a.dtype);
  for (const auto& st : k_.stages) {
    uses_half_ |= is_half(st.acc_dtype) && st.kind == StageKind::Reduce;
    for (const auto& in : st.body) {
      uses_half_ |= is_half(in.dtype);
      uses_rand_ |= in.kind == IKind::RandUniform;
      if (loop::has_index(in)) {
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
  launch.size_params = params_;
  bool rows = std::any_of(k_.stages.begin(), k_.stages.end(),
                          [](const Stage& s) { return s.kind != StageKind::MapOuter; });
  if (rows) {
    gen_rows(launch);
  } else {
    for (const auto& st : k_.stages)
      for (const auto& in : st.body)
        if (in.kind == IKind::ReduceResult)
          fail(ErrorKind::Runtime, "internal: cuda codegen: kernel ", k_.name,
               " reads a reduction it does not have");
    gen_elementwise(launch);
  }
  if (outer_n_ == 0) launch.max_blocks = 0;
  return launch;
}

}  // namespace lt::cudagen
