// KernelEmitter's values of one point (kernel_emitter.h): size parameters and extents, index
// expressions, loads, the stage bodies and their stores.
#include "backends/cpu/kernel_emitter.h"

namespace lt::cpu {

Value* KernelEmitter::param(int p) {
  LT_CHECK(values_ && p >= 0, ErrorKind::Runtime, "internal: kernel ", k_.name,
           " reads size parameter ", p, " without a parameter array");
  if (static_cast<size_t>(p) >= param_vals_.size())
    param_vals_.resize(static_cast<size_t>(p) + 1, nullptr);
  Value*& v = param_vals_[static_cast<size_t>(p)];
  if (!v) {
    llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    llvm::LoadInst* ld =
        entry.CreateLoad(i64(), entry.CreateConstInBoundsGEP1_64(i64(), values_, p),
                         llvm::Twine("size") + llvm::Twine(p));
    ld->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(ctx_, {}));
    v = ld;
  }
  return v;
}

int KernelEmitter::extent_param(size_t v) const {
  const size_t no = k_.outer.size();
  const std::vector<int>& ps = v < no ? k_.outer_params : k_.inner_params;
  const size_t d = v < no ? v : v - no;
  return d < ps.size() ? ps[d] : -1;
}

int64_t KernelEmitter::extent_hint(size_t v) const {
  const size_t no = k_.outer.size();
  return v < no ? k_.outer[v] : k_.inner[v - no];
}

Value* KernelEmitter::extent(size_t v) {
  const int p = extent_param(v);
  return p >= 0 ? param(p) : c64(extent_hint(v));
}

bool KernelEmitter::static_extent_is(size_t v, int64_t e) const {
  return extent_param(v) < 0 && extent_hint(v) == e;
}

bool KernelEmitter::inner_symbolic() const {
  for (size_t d = 0; d < k_.inner.size(); ++d)
    if (extent_param(k_.outer.size() + d) >= 0) return true;
  return false;
}

bool KernelEmitter::inner_static_empty() const {
  for (size_t d = 0; d < k_.inner.size(); ++d)
    if (static_extent_is(k_.outer.size() + d, 0)) return true;
  return false;
}

bool KernelEmitter::outer_static_empty() const {
  for (size_t d = 0; d < k_.outer.size(); ++d)
    if (static_extent_is(d, 0)) return true;
  return false;
}

Value* KernelEmitter::inner_numel_value() {
  Value* n = c64(1);
  for (size_t d = 0; d < k_.inner.size(); ++d)
    n = b_.CreateMul(n, extent(k_.outer.size() + d), "", true, true);
  return n;
}

Value* KernelEmitter::inner_flat() {
  Value* pos = c64(0);
  Value* stride = c64(1);
  for (size_t d = k_.inner.size(); d-- > 0;) {
    const size_t v = k_.outer.size() + d;
    Value* iv = vars_[v];
    const bool unit = d + 1 == k_.inner.size();
    pos = b_.CreateAdd(pos, unit ? iv : b_.CreateMul(iv, stride, "", true, true), "", true, true);
    stride = b_.CreateMul(stride, extent(v), "", true, true);
  }
  return pos;
}

llvm::AllocaInst* KernelEmitter::entry_alloca(llvm::Type* t, int64_t n, const char* name) {
  llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  return entry.CreateAlloca(t, c64(n), name);
}

Value* KernelEmitter::row_scratch_ptr(llvm::Type* t) {
  // A symbolic row: room for the longest row that reuses (the body checks the row's length).
  if (!row_scratch_)
    row_scratch_ =
        entry_alloca(t, inner_symbolic() ? kMaxReuseRow : numel(k_.inner), "row_scratch");
  LT_CHECK(row_scratch_->getAllocatedType() == t, ErrorKind::Runtime,
           "internal: row reuse type mismatch in ", k_.name);
  return b_.CreateGEP(t, row_scratch_, inner_flat());
}

Value* KernelEmitter::iexpr(int id) {
  if (memo_[id]) return memo_[id];
  const loop::IExpr& e = k_.iexprs[id];
  using K = loop::IExpr::Kind;
  Value* r = nullptr;
  switch (e.kind) {
    case K::Const:
      r = e.param >= 0 ? param(e.param) : c64(e.value);
      break;
    case K::Var:
      r = vars_[e.value];
      break;
    case K::Value:  // a gathered index, already clamped into range by the kernel
      LT_CHECK(e.value >= 0 && e.value < static_cast<int64_t>(vals_->size()) && (*vals_)[e.value],
               ErrorKind::Runtime, "internal: kernel ", k_.name, " indexes by instruction ",
               e.value, " before computing it");
      r = convert(b_, (*vals_)[e.value], (*body_)[e.value].dtype, DType::Int64);
      break;
    case K::Add:
      r = b_.CreateAdd(iexpr(e.a), iexpr(e.b), "", false, true);
      break;
    case K::Mul:
      r = b_.CreateMul(iexpr(e.a), iexpr(e.b), "", false, true);
      break;
    case K::FloorDiv:
    case K::Mod: {
      const loop::IExpr& d = k_.iexprs[e.b];
      const bool static_divisor = d.kind == K::Const && d.param < 0;
      LT_CHECK(!static_divisor || d.value > 0, ErrorKind::Runtime, "internal: kernel ", k_.name,
               " divides an index by ", d.value);
      Value* divisor = iexpr(e.b);
      // A run-time divisor is a size, nonzero wherever the index is evaluated (its dim is not
      // empty); umax keeps a 0 from faulting anyway (loop-invariant, hoisted).
      if (sym_ && !static_divisor)
        divisor = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umax, divisor, c64(1));
      // Index values are non-negative, so unsigned division is floor division.
      r = e.kind == K::FloorDiv ? b_.CreateUDiv(iexpr(e.a), divisor)
                                : b_.CreateURem(iexpr(e.a), divisor);
      break;
    }
  }
  memo_[id] = r;
  return r;
}

Value* KernelEmitter::index(const loop::Index& ix) {
  if (!ix.affine()) return iexpr(ix.general);
  Value* r = ix.offset_param >= 0 ? param(ix.offset_param) : c64(ix.offset);
  for (size_t v = 0; v < ix.strides.size(); ++v) {
    const int p = v < ix.stride_params.size() ? ix.stride_params[v] : -1;
    const int64_t s = ix.strides[v];
    if (p < 0 && s == 0) continue;
    // nsw only: the sum fits in int64, but a (future) negative stride would break nuw.
    Value* term = p >= 0   ? b_.CreateMul(vars_[v], param(p), "", false, true)
                  : s == 1 ? vars_[v]
                           : b_.CreateMul(vars_[v], c64(s), "", false, true);
    r = b_.CreateAdd(r, term, "", false, true);
  }
  return r;
}

Value* KernelEmitter::element_ptr(int arg, Value* idx) {
  return b_.CreateInBoundsGEP(storage_type(ctx_, k_.args[arg].dtype), args_[arg], idx);
}

Value* KernelEmitter::load_arg(int arg, Value* ptr, DType want) {
  const DType t = k_.args[arg].dtype;
  llvm::LoadInst* raw = b_.CreateLoad(storage_type(ctx_, t), ptr);
  // A runtime scalar's slot is the executor's, written before the kernel runs and never during
  // it: an invariant load, which LICM hoists and GVN merges without asking alias analysis.
  if (k_.args[arg].scalar)
    raw->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(ctx_, {}));
  return convert(b_, from_storage(b_, raw, t), t, want);
}

std::vector<Value*> KernelEmitter::emit_body(const loop::Stage& st) {
  const size_t stage = static_cast<size_t>(&st - k_.stages.data());
  // In a fast body: fold the loads the sin/cos arguments depend on, or the arguments themselves.
  const bool track_loads = range_flag_ && trig_bound_.usable;
  memo_.assign(k_.iexprs.size(), nullptr);
  std::vector<Value*> vals(st.body.size(), nullptr);
  vals_ = &vals;
  body_ = &st.body;
  auto dt = [&](int i) { return st.body[i].dtype; };
  const bool reuses = reuse_.stage >= 0 && stage + 1 == k_.stages.size();
  for (size_t i = 0; i < st.body.size(); ++i) {
    const loop::Instr& in = st.body[i];
    Value* v = nullptr;
    if (reuses && static_cast<int>(i) == reuse_.dst) {  // kept by the Reduce stage (RowReuse)
      llvm::Type* t = row_scratch_ ? row_scratch_->getAllocatedType() : nullptr;
      LT_CHECK(t, ErrorKind::Runtime, "internal: row reuse before its Reduce stage in ", k_.name);
      vals[i] = b_.CreateLoad(t, row_scratch_ptr(t), "reused");
      continue;
    }
    switch (in.kind) {
      case IKind::Load:
      case IKind::LoadScalar:
        v = load_arg(in.arg,
                     in.kind == IKind::Load ? element_ptr(in.arg, index(in.index)) : args_[in.arg],
                     in.dtype);
        if (track_loads && trig_bound_.tracked[stage][i]) emit_trig_track(b_, v, range_flag_);
        break;
      case IKind::Const:
        if (in.param >= 0) {
          // A size parameter (or its reciprocal) in float64, then converted to the dtype, as
          // lowering computes the static constant and make_constant converts it.
          Value* d = b_.CreateSIToFP(param(in.param), b_.getDoubleTy());
          if (in.param_reciprocal)
            d = b_.CreateFDiv(llvm::ConstantFP::get(b_.getDoubleTy(), 1.0), d);
          v = convert(b_, d, DType::Float64, in.dtype);
        } else {
          v = make_constant(ctx_, in.dtype, in.value);
        }
        break;
      case IKind::Op: {
        if (in.op == Op::Where) {
          LT_CHECK(in.b >= 0 && in.c >= 0, ErrorKind::Runtime,
                   "internal: where without operands in ", k_.name);
          Value* cond = to_bool(b_, vals[in.a], dt(in.a));
          Value* other = convert(b_, vals[in.c], dt(in.c), dt(in.b));
          v = emit_elementwise(b_, m_, in.op, in.dtype, dt(in.b), cond, vals[in.b], other);
        } else {
          Value* y = in.b >= 0 ? convert(b_, vals[in.b], dt(in.b), dt(in.a)) : nullptr;
          v = emit_elementwise(b_, m_, in.op, in.dtype, dt(in.a), vals[in.a], y, nullptr,
                               range_flag_, /*trig_track_args=*/!track_loads);
        }
        // Predicates produce i1 whatever dtype the instr names; convert so users see in.dtype.
        const OpClass cls = op_info(in.op).cls;
        if (cls == OpClass::Compare || cls == OpClass::Logical || cls == OpClass::Predicate1)
          v = convert(b_, v, DType::Bool, in.dtype);
        else if (in.op != Op::Cast)
          v = round_to(b_, v, in.dtype);
        break;
      }
      case IKind::RandUniform: {
        Value* seed = convert(b_, vals[in.a], dt(in.a), DType::Int64);
        Value* off = convert(b_, vals[in.b], dt(in.b), DType::Int64);
        const DType rt = in.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
        v = convert(b_, emit_rand_uniform(b_, seed, off, index(in.index), in.stream, in.dtype), rt,
                    in.dtype);
        break;
      }
      case IKind::Position:
        v = convert(b_, index(in.index), DType::Int64, in.dtype);
        break;
      case IKind::ReduceResult:
        LT_CHECK(results_[in.arg], ErrorKind::Runtime, "internal: kernel ", k_.name,
                 " reads stage ", in.arg, " before it ran");
        v = convert(b_, results_[in.arg], k_.stages[in.arg].acc_dtype, in.dtype);
        break;
    }
    vals[i] = v;
  }
  return vals;
}

void KernelEmitter::emit_stores(const loop::Stage& st, const std::vector<Value*>& vals) {
  vals_ = &vals;
  body_ = &st.body;
  for (const loop::Store& s : st.stores) {
    const DType t = k_.args[s.arg].dtype;
    Value* ptr = element_ptr(s.arg, index(s.index));
    Value* v = convert(b_, vals[s.value], st.body[s.value].dtype, t);
    if (s.accumulate) {
      // scatter_add: read-modify-write, rounded to the element's dtype like any op. Safe without
      // atomics: an accumulating kernel runs on one thread (CpuExecutable).
      Value* old = load_arg(s.arg, ptr, t);
      Value* sum = emit_elementwise(b_, m_, Op::Add, t, t, old, v, nullptr);
      v = round_to(b_, sum, t);
    }
    b_.CreateStore(to_storage(b_, v, t), ptr);
  }
}

}  // namespace lt::cpu
