#include "backends/cpu/codegen.h"

#include "backends/cpu/kernel_emitter.h"

namespace lt::cpu {

void KernelEmitter::emit(const std::string& name) {
  reuse_ = find_row_reuse(k_, kMaxReuseRow, /*any_row=*/inner_symbolic());
  llvm::Function* apart = emit_body_function(name + ".body", /*aliased=*/false);
  llvm::Function* same = k_.inplace.empty() ? nullptr : emit_body_function(name + ".inplace", true);
  llvm::Function* fast = nullptr;
  if (uses_fast_trig() && rerunnable()) {
    trig_bound_ = trig_load_bound(k_);
    fast = emit_body_function(name + ".fast", false, /*fast_trig=*/true);
  }
  // A kernel with a large output gets a streaming body (streaming_stores.h), the plain one's
  // twin for distinct buffers whose outputs are aligned.
  llvm::Function* stream = nullptr;
  streamed_ = streamed_outputs(k_);
  if (!fast && llvm::Triple(llvm::sys::getProcessTriple()).isX86() &&
      std::find(streamed_.begin(), streamed_.end(), true) != streamed_.end()) {
    stream = emit_body_function(name + ".stream", false, false, /*streaming=*/true);
    mark_streaming_body(stream, streamed_);
  }
  emit_wrapper(apart, same, fast, stream, name);
}

bool KernelEmitter::uses_fast_trig() const {
  for (const auto& st : k_.stages)
    for (const auto& in : st.body)
      if (in.kind == IKind::Op && in.a >= 0 && has_fast_trig(in.op, in.dtype)) return true;
  return false;
}

bool KernelEmitter::rerunnable() const {
  const auto loaded = loaded_args();
  for (size_t i = 0; i < k_.args.size(); ++i)
    if (k_.args[i].output && loaded[i]) return false;
  return true;
}

std::vector<bool> KernelEmitter::loaded_args() const {
  std::vector<bool> r(k_.args.size(), false);
  for (const auto& st : k_.stages)
    for (const auto& in : st.body)
      if (in.kind == IKind::Load || in.kind == IKind::LoadScalar) r[in.arg] = true;
  for (const auto& st : k_.stages)
    for (const auto& s : st.stores)
      if (s.accumulate) r[s.arg] = true;  // read-modify-write
  return r;
}

llvm::Function* KernelEmitter::emit_body_function(const std::string& name, bool aliased,
                                                  bool fast_trig, bool streaming) {
  const size_t nargs = k_.args.size();
  std::vector<bool> paired(nargs, false);
  // Aliased body: per paired input, the output whose pointer reads it.
  std::vector<int> read_through(nargs, -1);
  for (auto [in, out] : k_.inplace) {
    paired[static_cast<size_t>(in)] = paired[static_cast<size_t>(out)] = true;
    if (aliased) read_through[static_cast<size_t>(in)] = out;
  }
  args_.clear();
  std::vector<llvm::Type*> params(nargs, b_.getPtrTy());
  params.push_back(i64());
  params.push_back(i64());
  if (sym_) params.push_back(b_.getPtrTy());  // the size parameters' values
  auto* fty = llvm::FunctionType::get(fast_trig ? b_.getInt32Ty() : b_.getVoidTy(), params, false);
  fn_ = llvm::Function::Create(fty, llvm::Function::InternalLinkage, name, m_);
  // A streaming body stays out of line: stream_stores finds its stores by its arguments.
  fn_->addFnAttr(streaming ? llvm::Attribute::NoInline : llvm::Attribute::AlwaysInline);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  const auto loaded = loaded_args();
  for (size_t i = 0; i < nargs; ++i) {
    const bool out = k_.args[i].output;
    unsigned a = static_cast<unsigned>(i);
    // Apart: a paired arg may share memory with its partner, so it promises nothing. Aliased:
    // a paired input is never dereferenced (its output's pointer reads it), so the output is
    // again the only pointer to that memory, and it is read as well as written.
    const bool may_alias = paired[i] && !aliased;
    const bool also_read = loaded[i] || (aliased && paired[i] && out);
    // Not on scalar slots: their loads are invariant (load_arg), and every noalias argument
    // becomes an alias scope on each memory access once the body is inlined, so a kernel with
    // hundreds of scalars made alias queries (GVN, LICM) scan scope lists that long: ~40% of
    // the compile of bench_trace_cost's 2,001-node chain.
    if (!(out && loaded[i]) && !may_alias && read_through[i] < 0 && !k_.args[i].scalar)
      fn_->addParamAttr(a, llvm::Attribute::NoAlias);
    fn_->addParamAttr(a, llvm::Attribute::NoCapture);
    if (!out) fn_->addParamAttr(a, llvm::Attribute::ReadOnly);
    if (out && !also_read) fn_->addParamAttr(a, llvm::Attribute::WriteOnly);
    if (streaming && streamed_[i])  // the wrapper checked it
      fn_->addParamAttr(a, llvm::Attribute::getWithAlignment(ctx_, llvm::Align(kStreamAlign)));
    args_.push_back(fn_->getArg(a));
  }
  for (size_t i = 0; i < nargs; ++i)
    if (read_through[i] >= 0) args_[i] = fn_->getArg(static_cast<unsigned>(read_through[i]));
  Value* begin = fn_->getArg(static_cast<unsigned>(nargs));
  Value* end = fn_->getArg(static_cast<unsigned>(nargs + 1));
  values_ = nullptr;
  param_vals_.clear();
  if (sym_) {
    const unsigned a = static_cast<unsigned>(nargs + 2);
    fn_->addParamAttr(a, llvm::Attribute::NoAlias);
    fn_->addParamAttr(a, llvm::Attribute::NoCapture);
    fn_->addParamAttr(a, llvm::Attribute::ReadOnly);
    values_ = fn_->getArg(a);
  }

  BasicBlock* entry = BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry);
  vars_.assign(k_.outer.size() + k_.inner.size(), nullptr);
  results_.assign(k_.stages.size(), nullptr);
  accs_.assign(k_.stages.size(), nullptr);
  for (size_t s = 0; s < k_.stages.size(); ++s)
    if (k_.stages[s].kind == StageKind::Reduce)
      accs_[s] = b_.CreateAlloca(compute_type(ctx_, k_.stages[s].acc_dtype), nullptr,
                                 llvm::Twine("acc") + llvm::Twine(s));
  range_flag_ = nullptr;
  size_t body_size = 0;
  for (const auto& st : k_.stages) body_size += st.body.size();
  interleave_ = body_size >= kLongBody ? 1 : kInterleave;
  const int64_t points = k_.outer_numel() * std::max<int64_t>(1, numel(k_.inner));
  vectorize_ = sym_ || body_size < kLongVectorBody || points >= kMinVectorPoints;
  row_scratch_ = nullptr;
  if (fast_trig) {
    interleave_ = kFastTrigInterleave;
    range_flag_ = b_.CreateAlloca(b_.getInt32Ty(), nullptr, "trig_range");
    b_.CreateStore(b_.getInt32(0), range_flag_);
  }
  if (sym_ ? !outer_static_empty() : k_.outer_numel() > 0) {
    if (reuse_.stage >= 0 && inner_symbolic()) {
      // A symbolic row reuses values only when it fits the scratch row; else, as a static row
      // that long, it computes them again.
      Value* fits = b_.CreateICmpULE(inner_numel_value(), c64(kMaxReuseRow));
      BasicBlock* with = BasicBlock::Create(ctx_, "reuse", fn_);
      BasicBlock* without = BasicBlock::Create(ctx_, "no_reuse", fn_);
      BasicBlock* done = BasicBlock::Create(ctx_, "body.end");
      b_.CreateCondBr(fits, with, without);
      b_.SetInsertPoint(with);
      emit_outer(begin, end);
      b_.CreateBr(done);
      b_.SetInsertPoint(without);
      const RowReuse keep = reuse_;
      reuse_ = RowReuse{};
      emit_outer(begin, end);
      reuse_ = keep;
      b_.CreateBr(done);
      done->insertInto(fn_);
      b_.SetInsertPoint(done);
    } else {
      emit_outer(begin, end);
    }
  }
  if (fast_trig)
    b_.CreateRet(b_.CreateLoad(b_.getInt32Ty(), range_flag_));
  else
    b_.CreateRetVoid();
  range_flag_ = nullptr;
  interleave_ = kInterleave;
  return fn_;
}

Value* KernelEmitter::pairs_shared(const std::vector<Value*>& call_args, bool all) {
  Value* r = all ? b_.getTrue() : b_.getFalse();
  for (auto [in, out] : k_.inplace) {
    Value* eq =
        b_.CreateICmpEQ(call_args[static_cast<size_t>(in)], call_args[static_cast<size_t>(out)]);
    r = all ? b_.CreateAnd(r, eq) : b_.CreateOr(r, eq);
  }
  return r;
}

void KernelEmitter::call_and_return_if(Value* cond, llvm::Function* callee,
                                       const std::vector<Value*>& args, llvm::Function* fn,
                                       const char* taken, const char* otherwise) {
  BasicBlock* yes = BasicBlock::Create(ctx_, taken, fn);
  BasicBlock* no = BasicBlock::Create(ctx_, otherwise, fn);
  b_.CreateCondBr(cond, yes, no);
  b_.SetInsertPoint(yes);
  b_.CreateCall(callee, args);
  b_.CreateRetVoid();
  b_.SetInsertPoint(no);
}

void KernelEmitter::emit_wrapper(llvm::Function* apart, llvm::Function* same, llvm::Function* fast,
                                 llvm::Function* stream, const std::string& name) {
  auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {b_.getPtrTy(), i64(), i64()}, false);
  auto* fn = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, name, m_);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  // The argument array is the executor's own (no buffer overlaps it) and only read here: alias
  // analysis may then keep its loads apart from the kernel's stores (sink_broadcasts.h).
  fn->addParamAttr(0, llvm::Attribute::NoAlias);
  fn->addParamAttr(0, llvm::Attribute::NoCapture);
  fn->addParamAttr(0, llvm::Attribute::ReadOnly);
  b_.SetInsertPoint(BasicBlock::Create(ctx_, "entry", fn));
  std::vector<Value*> call_args;
  for (size_t i = 0; i < k_.args.size(); ++i) {
    Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), fn->getArg(0), i);
    call_args.push_back(b_.CreateLoad(b_.getPtrTy(), slot, llvm::Twine("arg") + llvm::Twine(i)));
  }
  call_args.push_back(fn->getArg(1));
  call_args.push_back(fn->getArg(2));
  // Symbolic: args[k.args.size()] points at every size parameter's value (cpu_executable.h).
  if (sym_) {
    Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), fn->getArg(0), k_.args.size());
    call_args.push_back(b_.CreateLoad(b_.getPtrTy(), slot, "sizes"));
  }
  // Distinct buffers: fast(range), and apart(range) again if it saw a sin/cos argument out of
  // its range; or plain apart(range). The rerun is only sound when no paired input shares its
  // output's buffer (the fast pass would have overwritten it), so with some pairs shared and
  // others not, apart runs alone.
  auto run_apart = [&] {
    if (fast) {
      call_and_return_if(pairs_shared(call_args, /*all=*/false), apart, call_args, fn, "plain",
                         "try_fast");
      Value* flag = b_.CreateCall(fast, call_args);
      BasicBlock* rerun = BasicBlock::Create(ctx_, "out_of_range", fn);
      BasicBlock* done = BasicBlock::Create(ctx_, "checked", fn);
      const float limit =
          trig_bound_.usable ? std::nextafter(trig_bound_.max_load, INFINITY) : kInlineTrigLimit;
      b_.CreateCondBr(emit_trig_out_of_range(b_, flag, limit), rerun, done);
      b_.SetInsertPoint(rerun);
      b_.CreateCall(apart, call_args);
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    } else {
      if (stream) {
        Value* aligned = b_.getTrue();
        for (size_t i = 0; i < k_.args.size(); ++i) {
          if (!streamed_[i]) continue;
          Value* low = b_.CreateAnd(b_.CreatePtrToInt(call_args[i], i64()), c64(kStreamAlign - 1));
          aligned = b_.CreateAnd(aligned, b_.CreateICmpEQ(low, c64(0)));
        }
        call_and_return_if(aligned, stream, call_args, fn, "stream", "unaligned");
      }
      b_.CreateCall(apart, call_args);
    }
    b_.CreateRetVoid();
  };
  if (!same) {
    run_apart();
    return;
  }
  call_and_return_if(pairs_shared(call_args, /*all=*/true), same, call_args, fn, "in_place",
                     "distinct");
  run_apart();
}

void KernelEmitter::emit_loop(Value* lo, Value* hi, bool nonempty,
                              const std::function<void(Value*)>& body) {
  BasicBlock* pre = b_.GetInsertBlock();
  BasicBlock* header = BasicBlock::Create(ctx_, "loop", fn_);
  // Owned by fn_ from the start (so an exception from body() cannot leak it); moved last below.
  BasicBlock* exit = BasicBlock::Create(ctx_, "loop.end", fn_);
  if (nonempty)
    b_.CreateBr(header);
  else
    b_.CreateCondBr(b_.CreateICmpSLT(lo, hi), header, exit);
  b_.SetInsertPoint(header);
  llvm::PHINode* iv = b_.CreatePHI(i64(), 2, "i");
  iv->addIncoming(lo, pre);
  body(iv);
  Value* next = b_.CreateAdd(iv, c64(1), "i.next", /*HasNUW=*/true, /*HasNSW=*/true);
  iv->addIncoming(next, b_.GetInsertBlock());
  llvm::BranchInst* back = b_.CreateCondBr(b_.CreateICmpSLT(next, hi), header, exit);
  // Interleave 4 vectorized iterations: a fused chain of dependent transcendental calls (20
  // vector sin calls per element in `x = x + sin(x)` x20) is latency-bound with one chain in
  // flight, and LLVM's cost model picks 1 for loops with calls. 2.4x on that chain, and softmax
  // and gelu(layer_norm) gain too (bench/README.md).
  llvm::LLVMContext& c = ctx_;
  llvm::Metadata* il[] = {llvm::MDString::get(c, "llvm.loop.interleave.count"),
                          llvm::ConstantAsMetadata::get(
                              llvm::ConstantInt::get(llvm::Type::getInt32Ty(c), interleave_))};
  llvm::Metadata* ve[] = {
      llvm::MDString::get(c, "llvm.loop.vectorize.enable"),
      llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt1Ty(c), 0))};
  llvm::MDNode* self = vectorize_
                           ? llvm::MDNode::getDistinct(c, {nullptr, llvm::MDNode::get(c, il)})
                           : llvm::MDNode::getDistinct(
                                 c, {nullptr, llvm::MDNode::get(c, il), llvm::MDNode::get(c, ve)});
  self->replaceOperandWith(0, self);
  back->setMetadata(llvm::LLVMContext::MD_loop, self);
  exit->moveAfter(&fn_->back());
  b_.SetInsertPoint(exit);
}

void KernelEmitter::emit_outer(Value* begin, Value* end) {
  const size_t n = k_.outer.size();
  if (n == 0) {
    BasicBlock* run = BasicBlock::Create(ctx_, "point", fn_);
    BasicBlock* done = BasicBlock::Create(ctx_, "done");
    b_.CreateCondBr(b_.CreateICmpSLT(begin, end), run, done);
    b_.SetInsertPoint(run);
    emit_point();
    b_.CreateBr(done);
    done->insertInto(fn_);
    b_.SetInsertPoint(done);
    return;
  }
  if (n == 1 && pipelines_rows()) {
    emit_pipelined_rows(begin, end);
    return;
  }
  if (column_reduction()) {
    emit_row_segments(begin, end,
                      [&](Value* first, Value* len) { emit_column_segment(first, len); });
    return;
  }
  if (n == 1) {
    emit_loop(begin, end, false, [&](Value* iv) {
      vars_[0] = iv;
      emit_point();
    });
    return;
  }
  emit_row_segments(begin, end, [&](Value* first, Value* len) {
    emit_loop(first, b_.CreateAdd(first, len), true, [&](Value* iv) {
      vars_[n - 1] = iv;
      emit_point();
    });
  });
}

void KernelEmitter::emit_row_segments(Value* begin, Value* end,
                                      const std::function<void(Value*, Value*)>& segment) {
  const size_t n = k_.outer.size();
  BasicBlock* pre = b_.GetInsertBlock();
  BasicBlock* row = BasicBlock::Create(ctx_, "row", fn_);
  BasicBlock* done = BasicBlock::Create(ctx_, "rows.end");
  b_.CreateCondBr(b_.CreateICmpSLT(begin, end), row, done);
  b_.SetInsertPoint(row);
  llvm::PHINode* pos = b_.CreatePHI(i64(), 2, "pos");
  pos->addIncoming(begin, pre);
  Value* rem = pos;
  Value* last = nullptr;
  for (size_t d = n; d-- > 0;) {
    Value* id = rem;
    if (d > 0) {
      Value* e = extent(d);
      id = b_.CreateURem(rem, e);
      rem = b_.CreateUDiv(rem, e);
    }
    if (d == n - 1)
      last = id;
    else
      vars_[d] = id;
  }
  Value* avail = b_.CreateSub(extent(n - 1), last);
  Value* len = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, avail, b_.CreateSub(end, pos));
  segment(last, len);
  Value* next = b_.CreateAdd(pos, len);
  pos->addIncoming(next, b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateICmpSLT(next, end), row, done);
  done->insertInto(fn_);
  b_.SetInsertPoint(done);
}

bool KernelEmitter::column_reduction() const {
  const size_t n = k_.outer.size(), m = k_.inner.size();
  // (A symbolic last outer dim is taken to be long: the choice is for speed, either is right.)
  if (n == 0 || m == 0 || inner_static_empty() ||
      (extent_param(n - 1) < 0 && k_.outer[n - 1] < 2) || range_flag_ || k_.accumulates())
    return false;  // an empty inner space: the plain path stores the identity
  if (k_.stages.front().kind != StageKind::Reduce) return false;
  for (size_t s = 1; s < k_.stages.size(); ++s)
    if (k_.stages[s].kind != StageKind::MapOuter) return false;
  const size_t last_outer = n - 1, last_inner = n + m - 1;
  // A symbolic stride counts as unknown (-1): not 1 at every binding.
  auto stride = [](const loop::Index& ix, size_t v) -> int64_t {
    if (v < ix.stride_params.size() && ix.stride_params[v] >= 0) return -1;
    return v < ix.strides.size() ? ix.strides[v] : 0;
  };
  bool along_outer = false;
  for (const loop::Instr& in : k_.stages.front().body) {
    if (in.kind == IKind::ReduceResult || in.kind == IKind::RandUniform ||
        in.kind == IKind::Position)
      return false;
    if (in.kind != IKind::Load) continue;
    if (!in.index.affine() || stride(in.index, last_inner) == 1) return false;
    along_outer = along_outer || stride(in.index, last_outer) == 1;
  }
  return along_outer;
}

void KernelEmitter::emit_column_segment(Value* first, Value* len) {
  const size_t last_outer = k_.outer.size() - 1;
  llvm::Type* acc_t = compute_type(ctx_, k_.stages.front().acc_dtype);
  Value* accs = entry_alloca(acc_t, kColumnBlock, "col_accs");
  Value* blocks = b_.CreateUDiv(b_.CreateAdd(len, c64(kColumnBlock - 1)), c64(kColumnBlock));
  emit_loop(c64(0), blocks, true, [&](Value* bi) {
    Value* off = b_.CreateMul(bi, c64(kColumnBlock), "", true, true);
    Value* lo = b_.CreateAdd(first, off, "", true, true);
    Value* nb =
        b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, c64(kColumnBlock), b_.CreateSub(len, off));
    auto lane = [&](Value* j) { return b_.CreateGEP(acc_t, accs, j); };
    emit_loop(c64(0), nb, true, [&](Value* j) { reset_acc(0, lane(j)); });
    emit_inner_nest(0, [&] {
      emit_loop(c64(0), nb, true, [&](Value* j) {
        vars_[last_outer] = b_.CreateAdd(lo, j, "", true, true);
        accumulate(0, lane(j));
      });
    });
    emit_loop(c64(0), nb, true, [&](Value* j) {
      vars_[last_outer] = b_.CreateAdd(lo, j, "", true, true);
      results_[0] = b_.CreateLoad(acc_t, lane(j), "r0");
      emit_stages(1, nullptr);
    });
  });
}

void KernelEmitter::emit_inner_nest(size_t level, const std::function<void()>& body) {
  if (level == k_.inner.size()) {
    body();
    return;
  }
  const size_t v = k_.outer.size() + level;
  if (static_extent_is(v, 1)) {
    vars_[v] = c64(0);
    emit_inner_nest(level + 1, body);
    return;
  }
  // A static extent is nonzero here (callers skip empty inner spaces); a symbolic one may be 0.
  emit_loop(c64(0), extent(v), extent_param(v) < 0, [&](Value* iv) {
    vars_[v] = iv;
    emit_inner_nest(level + 1, body);
  });
}

void KernelEmitter::reset_acc(size_t s, Value* slot) {
  const loop::Stage& st = k_.stages[s];
  const bool mx = st.reduce_op == Op::ReduceMax, mn = st.reduce_op == Op::ReduceMin;
  b_.CreateStore(reduce_identity(ctx_, st.acc_dtype, mx, mn, st.reduce_op == Op::ReduceProd),
                 slot ? slot : accs_[s]);
}

void KernelEmitter::accumulate(size_t s, Value* slot) {
  if (!slot) slot = accs_[s];
  const loop::Stage& st = k_.stages[s];
  std::vector<Value*> vals = emit_body(st);
  if (static_cast<int>(s) == reuse_.stage) {
    Value* keep = vals[static_cast<size_t>(reuse_.src)];
    b_.CreateStore(keep, row_scratch_ptr(keep->getType()));
  }
  Value* v = convert(b_, vals[st.reduce_value], st.body[st.reduce_value].dtype, st.acc_dtype);
  Value* acc = b_.CreateLoad(compute_type(ctx_, st.acc_dtype), slot);
  b_.CreateStore(emit_reduce_combine(b_, st.reduce_op, st.acc_dtype, acc, v), slot);
}

void KernelEmitter::reduce_row(size_t s) {
  reset_acc(s);
  if (!inner_static_empty()) emit_inner_nest(0, [&] { accumulate(s); });
}

Value* KernelEmitter::load_acc(size_t s) {
  return b_.CreateLoad(compute_type(ctx_, k_.stages[s].acc_dtype), accs_[s],
                       llvm::Twine("r") + llvm::Twine(s));
}

void KernelEmitter::emit_stages(size_t first, const std::function<void()>& in_last_loop) {
  const bool inner_empty = inner_static_empty();  // an inner dim of extent 0: nothing to loop
  for (size_t s = first; s < k_.stages.size(); ++s) {
    const loop::Stage& st = k_.stages[s];
    switch (st.kind) {
      case StageKind::Reduce:
        reduce_row(s);
        results_[s] = load_acc(s);
        break;
      case StageKind::MapInner:
        if (!inner_empty) {
          emit_inner_nest(0, [&] {
            std::vector<Value*> vals = emit_body(st);
            emit_stores(st, vals);
            if (in_last_loop && s + 1 == k_.stages.size()) in_last_loop();
          });
        }
        break;
      case StageKind::MapOuter: {
        for (size_t v = k_.outer.size(); v < vars_.size(); ++v) vars_[v] = c64(0);
        std::vector<Value*> vals = emit_body(st);
        emit_stores(st, vals);
        break;
      }
    }
  }
}

bool KernelEmitter::pipelines_rows() const {
  // A symbolic row is taken to be long (pipelining is right for every length, and only fast
  // for long rows).
  if (k_.outer.size() != 1 || k_.inner.size() != 1 ||
      (extent_param(1) < 0 && k_.inner[0] < kPipelineMinRow))
    return false;
  if (k_.stages.size() < 2 || k_.stages.front().kind != StageKind::Reduce ||
      k_.stages.back().kind != StageKind::MapInner)
    return false;
  if (k_.accumulates() || range_flag_) return false;
  for (const loop::Instr& in : k_.stages.front().body) {
    if (in.kind == IKind::ReduceResult || in.kind == IKind::RandUniform ||
        in.kind == IKind::Position)
      return false;
    if (in.kind != IKind::Load) continue;
    if (!in.index.affine()) return false;
    for (auto [i, o] : k_.inplace)
      if (in.arg == i || in.arg == o) return false;
  }
  return true;
}

void KernelEmitter::emit_pipelined_rows(Value* begin, Value* end) {
  BasicBlock* run = BasicBlock::Create(ctx_, "rows", fn_);
  BasicBlock* done = BasicBlock::Create(ctx_, "rows.done");
  b_.CreateCondBr(b_.CreateICmpSLT(begin, end), run, done);
  b_.SetInsertPoint(run);
  vars_[0] = begin;
  reduce_row(0);
  Value* last = b_.CreateSub(end, c64(1));
  emit_loop(begin, end, true, [&](Value* iv) {
    vars_[0] = iv;
    results_[0] = load_acc(0);
    reset_acc(0);
    Value* next = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin,
                                           b_.CreateAdd(iv, c64(1), "", true, true), last);
    emit_stages(1, [&] {
      vars_[0] = next;
      accumulate(0);
      vars_[0] = iv;
    });
  });
  b_.CreateBr(done);
  done->insertInto(fn_);
  b_.SetInsertPoint(done);
}

void emit_kernel(llvm::Module& m, const loop::Kernel& k, const std::string& name) {
  KernelEmitter(m, k).emit(name);
}

}  // namespace lt::cpu
