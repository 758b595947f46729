#include "backends/cpu/codegen.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "backends/cpu/llvm_dtype.h"
#include "backends/cpu/llvm_ops.h"
#include "backends/cpu/row_reuse.h"
#include "backends/cpu/streaming_stores.h"
#include "backends/cpu/trig_bounds.h"
#include "ir/error.h"

namespace lt::cpu {
namespace {

using llvm::BasicBlock;
using llvm::Value;
using loop::IKind;
using loop::StageKind;

// Interleave of a fast_trig body's loops: inline sin/cos is a chain of ~15 dependent FMAs, so 4
// vectors in flight leave the FMA units mostly idle; 8 made `x = x + sin(x)` x20 1.5x faster than
// 4 (16 no faster; counts that are not powers of two are not honored).
constexpr int kFastTrigInterleave = 8;
// Interleave of other loops (see emit_loop).
constexpr int kInterleave = 4;
// A body this long (instructions over all stages) has instruction-level parallelism of its own,
// and its loops are not interleaved: an LSTM backward fuses ~1000-instruction elementwise bodies,
// whose 4x-interleaved vector loop LLVM 19's vectorizer (sinkScalarOperands, znver3 host) took
// tens of minutes to compile.
constexpr size_t kLongBody = 256;
// A body at least kLongVectorBody long over a static space of fewer than kMinVectorPoints points is
// not vectorized at all: on that host LLVM 19 also hung vectorizing the LSTM backward's cell
// kernels ([2, 8] points, 64-178 instructions) without interleave; vectors gain nothing there.
constexpr size_t kLongVectorBody = 64;
constexpr int64_t kMinVectorPoints = 1024;
// Rows shorter than this are not pipelined (emit_pipelined_rows): the pass it saves is short.
constexpr int64_t kPipelineMinRow = 256;
// Outputs a column reduction (emit_column_segment) accumulates at once: 8 AVX2 vectors of float.
constexpr int64_t kColumnBlock = 64;
// Longest row whose reused values (row_reuse.h) are kept on the stack: 64 KiB of float32.
constexpr int64_t kMaxReuseRow = 16384;

class KernelEmitter {
 public:
  KernelEmitter(llvm::Module& m, const loop::Kernel& k)
      : m_(m), k_(k), ctx_(m.getContext()), b_(ctx_), sym_(k.symbolic()) {}

  // A kernel with in-place pairs (lowering/donation.h) gets two bodies: one for distinct buffers
  // (no noalias on the paired args, so LLVM guards its vector loop with overlap checks) and one
  // for the donated case, which reads each paired input through its output's pointer so the
  // loop is a plain same-index update that vectorizes without checks. The wrapper picks by
  // comparing the pointers.
  //
  // A kernel that computes float32 sin/cos and can be rerun on distinct buffers (it reads no
  // buffer it writes) also gets a fast body with inline sin/cos (llvm_ops.h), which reports
  // arguments beyond their range; the wrapper then reruns the same range with the libm body.
  // Where trig_bounds.h can bound the arguments by the loads they come from, the fast body
  // reports the largest load instead, checked against the matching threshold.
  void emit(const std::string& name) {
    reuse_ = find_row_reuse(k_, kMaxReuseRow, /*any_row=*/inner_symbolic());
    llvm::Function* apart = emit_body_function(name + ".body", /*aliased=*/false);
    llvm::Function* same =
        k_.inplace.empty() ? nullptr : emit_body_function(name + ".inplace", true);
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

 private:
  llvm::Type* i64() { return b_.getInt64Ty(); }
  Value* c64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }

  // Symbolic sizes (loop_ir.h): a size parameter's value, loaded once in the body's entry block
  // from the parameter array (the body's last argument), an invariant load.
  Value* param(int p) {
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

  // Loop variable v's extent: its size parameter (or -1), its value at the plan's binding, and
  // the value this run has.
  int extent_param(size_t v) const {
    const size_t no = k_.outer.size();
    const std::vector<int>& ps = v < no ? k_.outer_params : k_.inner_params;
    const size_t d = v < no ? v : v - no;
    return d < ps.size() ? ps[d] : -1;
  }
  int64_t extent_hint(size_t v) const {
    const size_t no = k_.outer.size();
    return v < no ? k_.outer[v] : k_.inner[v - no];
  }
  Value* extent(size_t v) {
    const int p = extent_param(v);
    return p >= 0 ? param(p) : c64(extent_hint(v));
  }
  // The extent is e at every binding.
  bool static_extent_is(size_t v, int64_t e) const {
    return extent_param(v) < 0 && extent_hint(v) == e;
  }
  bool inner_symbolic() const {
    for (size_t d = 0; d < k_.inner.size(); ++d)
      if (extent_param(k_.outer.size() + d) >= 0) return true;
    return false;
  }
  // Some inner (outer) dim has extent 0 at every binding: nothing to loop.
  bool inner_static_empty() const {
    for (size_t d = 0; d < k_.inner.size(); ++d)
      if (static_extent_is(k_.outer.size() + d, 0)) return true;
    return false;
  }
  bool outer_static_empty() const {
    for (size_t d = 0; d < k_.outer.size(); ++d)
      if (static_extent_is(d, 0)) return true;
    return false;
  }
  Value* inner_numel_value() {
    Value* n = c64(1);
    for (size_t d = 0; d < k_.inner.size(); ++d)
      n = b_.CreateMul(n, extent(k_.outer.size() + d), "", true, true);
    return n;
  }

  // The flat position of the current inner point in a contiguous row (row scratch index).
  Value* inner_flat() {
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

  // An array of n `t` in the body's entry block (allocas there are the function's frame, made once,
  // wherever the builder is now).
  llvm::AllocaInst* entry_alloca(llvm::Type* t, int64_t n, const char* name) {
    llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    return entry.CreateAlloca(t, c64(n), name);
  }

  // The row scratch element for the current inner point; the array is made in the body's entry
  // block on first use, of the value's own type.
  Value* row_scratch_ptr(llvm::Type* t) {
    // A symbolic row: room for the longest row that reuses (the body checks the row's length).
    if (!row_scratch_)
      row_scratch_ =
          entry_alloca(t, inner_symbolic() ? kMaxReuseRow : numel(k_.inner), "row_scratch");
    LT_CHECK(row_scratch_->getAllocatedType() == t, ErrorKind::Runtime,
             "internal: row reuse type mismatch in ", k_.name);
    return b_.CreateGEP(t, row_scratch_, inner_flat());
  }

  bool uses_fast_trig() const {
    for (const auto& st : k_.stages)
      for (const auto& in : st.body)
        if (in.kind == IKind::Op && in.a >= 0 && has_fast_trig(in.op, in.dtype)) return true;
    return false;
  }

  // Running a range twice on distinct buffers gives the same result: no output is also read
  // (accumulating stores read theirs).
  bool rerunnable() const {
    const auto loaded = loaded_args();
    for (size_t i = 0; i < k_.args.size(); ++i)
      if (k_.args[i].output && loaded[i]) return false;
    return true;
  }

  // Which args the kernel reads through memory (a written arg that is also read gets no noalias).
  std::vector<bool> loaded_args() const {
    std::vector<bool> r(k_.args.size(), false);
    for (const auto& st : k_.stages)
      for (const auto& in : st.body)
        if (in.kind == IKind::Load || in.kind == IKind::LoadScalar) r[in.arg] = true;
    for (const auto& st : k_.stages)
      for (const auto& s : st.stores)
        if (s.accumulate) r[s.arg] = true;  // read-modify-write
    return r;
  }

  // fast_trig: the function returns the trig_range_flag slot (llvm_ops.h), i32.
  llvm::Function* emit_body_function(const std::string& name, bool aliased, bool fast_trig = false,
                                     bool streaming = false) {
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
    auto* fty =
        llvm::FunctionType::get(fast_trig ? b_.getInt32Ty() : b_.getVoidTy(), params, false);
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

  // Whether every (all) or any (!all) in-place pair of the kernel shares one buffer in this call.
  Value* pairs_shared(const std::vector<Value*>& call_args, bool all) {
    Value* r = all ? b_.getTrue() : b_.getFalse();
    for (auto [in, out] : k_.inplace) {
      Value* eq =
          b_.CreateICmpEQ(call_args[static_cast<size_t>(in)], call_args[static_cast<size_t>(out)]);
      r = all ? b_.CreateAnd(r, eq) : b_.CreateOr(r, eq);
    }
    return r;
  }

  // In `fn`: when `cond` holds, calls `callee` with `args` and returns; the builder goes on in the
  // block where it does not (named `otherwise`).
  void call_and_return_if(Value* cond, llvm::Function* callee, const std::vector<Value*>& args,
                          llvm::Function* fn, const char* taken, const char* otherwise) {
    BasicBlock* yes = BasicBlock::Create(ctx_, taken, fn);
    BasicBlock* no = BasicBlock::Create(ctx_, otherwise, fn);
    b_.CreateCondBr(cond, yes, no);
    b_.SetInsertPoint(yes);
    b_.CreateCall(callee, args);
    b_.CreateRetVoid();
    b_.SetInsertPoint(no);
  }

  // `same` (may be null): the body for every in-place pair sharing one buffer. `fast` (may be
  // null): the fast_trig body, run first on distinct buffers, with `apart` as its fallback.
  // `stream` (may be null, never with `fast`): `apart` with streaming stores, for distinct buffers
  // whose streamed outputs are aligned.
  void emit_wrapper(llvm::Function* apart, llvm::Function* same, llvm::Function* fast,
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
            Value* low =
                b_.CreateAnd(b_.CreatePtrToInt(call_args[i], i64()), c64(kStreamAlign - 1));
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

  // for (iv = lo; iv < hi; ++iv) body(iv); `nonempty` promises lo < hi (no guard).
  void emit_loop(Value* lo, Value* hi, bool nonempty, const std::function<void(Value*)>& body) {
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
    llvm::MDNode* self =
        vectorize_ ? llvm::MDNode::getDistinct(c, {nullptr, llvm::MDNode::get(c, il)})
                   : llvm::MDNode::getDistinct(
                         c, {nullptr, llvm::MDNode::get(c, il), llvm::MDNode::get(c, ve)});
    self->replaceOperandWith(0, self);
    back->setMetadata(llvm::LLVMContext::MD_loop, self);
    exit->moveAfter(&fn_->back());
    b_.SetInsertPoint(exit);
  }

  void emit_outer(Value* begin, Value* end) {
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

  // Splits the outer positions [begin, end) into runs along the innermost outer dim, each up to
  // the end of its row or of the range: per run, the outer vars but the last are set (the flat
  // position split into dims once) and segment(first, len) emits the run from last-dim index
  // `first`, `len` > 0 points long.
  void emit_row_segments(Value* begin, Value* end,
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

  // A reduction down columns: one Reduce stage whose loads step along the innermost outer dim
  // (stride 1 in some load) but never along the innermost inner dim (the bias gradient
  // x.sum(0) of x [128, 1024]: each output reads one column, 1,024 floats apart). Reducing one
  // output at a time gathers its column element by element; instead emit_column_segment sums a
  // block of neighbouring outputs at once, row after row, each row's loads contiguous across the
  // block. Later stages may only be per-output (MapOuter): they run per block lane at the end.
  bool column_reduction() const {
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

  // Outputs [first, first + len) of the innermost outer dim, kColumnBlock at a time: each block
  // keeps one accumulator per output in a stack array (L1), updated by a loop across the block per
  // inner point, which LLVM vectorizes (contiguous loads and accumulators, no reassociation).
  void emit_column_segment(Value* first, Value* len) {
    const size_t last_outer = k_.outer.size() - 1;
    llvm::Type* acc_t = compute_type(ctx_, k_.stages.front().acc_dtype);
    Value* accs = entry_alloca(acc_t, kColumnBlock, "col_accs");
    Value* blocks = b_.CreateUDiv(b_.CreateAdd(len, c64(kColumnBlock - 1)), c64(kColumnBlock));
    emit_loop(c64(0), blocks, true, [&](Value* bi) {
      Value* off = b_.CreateMul(bi, c64(kColumnBlock), "", true, true);
      Value* lo = b_.CreateAdd(first, off, "", true, true);
      Value* nb = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, c64(kColumnBlock),
                                           b_.CreateSub(len, off));
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

  void emit_inner_nest(size_t level, const std::function<void()>& body) {
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

  void emit_point() { emit_stages(0, nullptr); }

  // Resets stage s's accumulator (or `slot`, one of emit_column_segment's) to the identity.
  void reset_acc(size_t s, Value* slot = nullptr) {
    const loop::Stage& st = k_.stages[s];
    const bool mx = st.reduce_op == Op::ReduceMax, mn = st.reduce_op == Op::ReduceMin;
    b_.CreateStore(reduce_identity(ctx_, st.acc_dtype, mx, mn, st.reduce_op == Op::ReduceProd),
                   slot ? slot : accs_[s]);
  }

  // Combines stage s's value at the current point into its accumulator (or `slot`).
  void accumulate(size_t s, Value* slot = nullptr) {
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

  // Stage s's reduction over the current row, left in its accumulator.
  void reduce_row(size_t s) {
    reset_acc(s);
    if (!inner_static_empty()) emit_inner_nest(0, [&] { accumulate(s); });
  }

  Value* load_acc(size_t s) {
    return b_.CreateLoad(compute_type(ctx_, k_.stages[s].acc_dtype), accs_[s],
                         llvm::Twine("r") + llvm::Twine(s));
  }

  // The stages from `first` on at the current outer point; `in_last_loop` (may be null) is emitted
  // inside the inner loop of the last stage, after its stores.
  void emit_stages(size_t first, const std::function<void()>& in_last_loop) {
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

  // Whether rows are pipelined (emit_pipelined_rows): one outer dim of rows, one long inner dim, a
  // first stage that reduces loads alone (layer_norm's sum, softmax's max) and a last stage that
  // maps over the row. Not when the first stage reads an argument of an in-place pair (the next
  // row's loads would share a pointer with this row's stores), nor with accumulating stores or in
  // a fast_trig body.
  bool pipelines_rows() const {
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

  // Rows [begin, end) with the first stage of row i + 1 computed inside row i's last loop: its
  // loads (the next row, from memory) overlap that loop's arithmetic instead of stalling a pass of
  // their own, and each row makes one pass fewer. gelu(layer_norm(x)) + r: the fused kernel cost
  // about the same kernel with precomputed row statistics plus its two statistics passes.
  // The last row recomputes its own first stage there (the result goes unused), so the loop body
  // has no branch and the loads stay in bounds.
  void emit_pipelined_rows(Value* begin, Value* end) {
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

  Value* iexpr(int id) {
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

  Value* index(const loop::Index& ix) {
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

  Value* element_ptr(int arg, Value* idx) {
    return b_.CreateInBoundsGEP(storage_type(ctx_, k_.args[arg].dtype), args_[arg], idx);
  }

  Value* load_arg(int arg, Value* ptr, DType want) {
    const DType t = k_.args[arg].dtype;
    llvm::LoadInst* raw = b_.CreateLoad(storage_type(ctx_, t), ptr);
    // A runtime scalar's slot is the executor's, written before the kernel runs and never during
    // it: an invariant load, which LICM hoists and GVN merges without asking alias analysis.
    if (k_.args[arg].scalar)
      raw->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(ctx_, {}));
    return convert(b_, from_storage(b_, raw, t), t, want);
  }

  std::vector<Value*> emit_body(const loop::Stage& st) {
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
          v = load_arg(
              in.arg, in.kind == IKind::Load ? element_ptr(in.arg, index(in.index)) : args_[in.arg],
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
          v = convert(b_, emit_rand_uniform(b_, seed, off, index(in.index), in.stream, in.dtype),
                      rt, in.dtype);
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

  void emit_stores(const loop::Stage& st, const std::vector<Value*>& vals) {
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

  llvm::Module& m_;
  const loop::Kernel& k_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  std::vector<Value*> args_, vars_, results_, memo_;
  // The stage body being emitted and its values, for IExpr::Value indices.
  const std::vector<Value*>* vals_ = nullptr;
  const std::vector<loop::Instr>* body_ = nullptr;
  std::vector<llvm::AllocaInst*> accs_;
  RowReuse reuse_;                           // of this kernel (find_row_reuse)
  llvm::AllocaInst* row_scratch_ = nullptr;  // the row's kept values, in the body being emitted
  llvm::AllocaInst* range_flag_ = nullptr;   // set while emitting a fast_trig body
  TrigLoadBound trig_bound_;                 // of this kernel, when it has a fast_trig body
  std::vector<bool> streamed_;               // per arg: streamed in the streaming body
  int interleave_ = kInterleave;
  bool vectorize_ = true;  // false: loops carry llvm.loop.vectorize.enable = false
  // Symbolic sizes: whether the kernel reads any, the body's parameter array argument and the
  // parameters loaded from it so far.
  bool sym_ = false;
  Value* values_ = nullptr;
  std::vector<Value*> param_vals_;
};

}  // namespace

void emit_kernel(llvm::Module& m, const loop::Kernel& k, const std::string& name) {
  KernelEmitter(m, k).emit(name);
}

}  // namespace lt::cpu
