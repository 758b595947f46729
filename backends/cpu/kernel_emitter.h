// The CPU code generator's emitter of one kernel (codegen.h says what the code it writes does):
// the class, its tuning constants and its small helpers. Its members live in two files:
// codegen.cc, the function, its wrapper and its loop nests (rows, stages, pipelines, column
// reductions); kernel_body.cc, the values of one point (indices, loads, the stage bodies, stores)
// and the size parameters. Included by those two files alone.
#pragma once

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
  void emit(const std::string& name);

 private:
  llvm::Type* i64() { return b_.getInt64Ty(); }
  Value* c64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }

  // Symbolic sizes (loop_ir.h): a size parameter's value, loaded once in the body's entry block
  // from the parameter array (the body's last argument), an invariant load.
  Value* param(int p);

  // Loop variable v's extent: its size parameter (or -1), its value at the plan's binding, and
  // the value this run has.
  int extent_param(size_t v) const;
  int64_t extent_hint(size_t v) const;
  Value* extent(size_t v);
  // The extent is e at every binding.
  bool static_extent_is(size_t v, int64_t e) const;
  bool inner_symbolic() const;
  // Some inner (outer) dim has extent 0 at every binding: nothing to loop.
  bool inner_static_empty() const;
  bool outer_static_empty() const;
  Value* inner_numel_value();

  // The flat position of the current inner point in a contiguous row (row scratch index).
  Value* inner_flat();

  // An array of n `t` in the body's entry block (allocas there are the function's frame, made once,
  // wherever the builder is now).
  llvm::AllocaInst* entry_alloca(llvm::Type* t, int64_t n, const char* name);

  // The row scratch element for the current inner point; the array is made in the body's entry
  // block on first use, of the value's own type.
  Value* row_scratch_ptr(llvm::Type* t);

  bool uses_fast_trig() const;

  // Running a range twice on distinct buffers gives the same result: no output is also read
  // (accumulating stores read theirs).
  bool rerunnable() const;

  // Which args the kernel reads through memory (a written arg that is also read gets no noalias).
  std::vector<bool> loaded_args() const;

  // fast_trig: the function returns the trig_range_flag slot (llvm_ops.h), i32.
  llvm::Function* emit_body_function(const std::string& name, bool aliased, bool fast_trig = false,
                                     bool streaming = false);

  // Whether every (all) or any (!all) in-place pair of the kernel shares one buffer in this call.
  Value* pairs_shared(const std::vector<Value*>& call_args, bool all);

  // In `fn`: when `cond` holds, calls `callee` with `args` and returns; the builder goes on in the
  // block where it does not (named `otherwise`).
  void call_and_return_if(Value* cond, llvm::Function* callee, const std::vector<Value*>& args,
                          llvm::Function* fn, const char* taken, const char* otherwise);

  // `same` (may be null): the body for every in-place pair sharing one buffer. `fast` (may be
  // null): the fast_trig body, run first on distinct buffers, with `apart` as its fallback.
  // `stream` (may be null, never with `fast`): `apart` with streaming stores, for distinct buffers
  // whose streamed outputs are aligned.
  void emit_wrapper(llvm::Function* apart, llvm::Function* same, llvm::Function* fast,
                    llvm::Function* stream, const std::string& name);

  // for (iv = lo; iv < hi; ++iv) body(iv); `nonempty` promises lo < hi (no guard).
  void emit_loop(Value* lo, Value* hi, bool nonempty, const std::function<void(Value*)>& body);

  void emit_outer(Value* begin, Value* end);

  // Splits the outer positions [begin, end) into runs along the innermost outer dim, each up to
  // the end of its row or of the range: per run, the outer vars but the last are set (the flat
  // position split into dims once) and segment(first, len) emits the run from last-dim index
  // `first`, `len` > 0 points long.
  void emit_row_segments(Value* begin, Value* end,
                         const std::function<void(Value*, Value*)>& segment);

  // A reduction down columns: one Reduce stage whose loads step along the innermost outer dim
  // (stride 1 in some load) but never along the innermost inner dim (the bias gradient
  // x.sum(0) of x [128, 1024]: each output reads one column, 1,024 floats apart). Reducing one
  // output at a time gathers its column element by element; instead emit_column_segment sums a
  // block of neighbouring outputs at once, row after row, each row's loads contiguous across the
  // block. Later stages may only be per-output (MapOuter): they run per block lane at the end.
  bool column_reduction() const;

  // Outputs [first, first + len) of the innermost outer dim, kColumnBlock at a time: each block
  // keeps one accumulator per output in a stack array (L1), updated by a loop across the block per
  // inner point, which LLVM vectorizes (contiguous loads and accumulators, no reassociation).
  void emit_column_segment(Value* first, Value* len);

  void emit_inner_nest(size_t level, const std::function<void()>& body);

  void emit_point() { emit_stages(0, nullptr); }

  // Resets stage s's accumulator (or `slot`, one of emit_column_segment's) to the identity.
  void reset_acc(size_t s, Value* slot = nullptr);

  // Combines stage s's value at the current point into its accumulator (or `slot`).
  void accumulate(size_t s, Value* slot = nullptr);

  // Stage s's reduction over the current row, left in its accumulator.
  void reduce_row(size_t s);

  Value* load_acc(size_t s);

  // The stages from `first` on at the current outer point; `in_last_loop` (may be null) is emitted
  // inside the inner loop of the last stage, after its stores.
  void emit_stages(size_t first, const std::function<void()>& in_last_loop);

  // Whether rows are pipelined (emit_pipelined_rows): one outer dim of rows, one long inner dim, a
  // first stage that reduces loads alone (layer_norm's sum, softmax's max) and a last stage that
  // maps over the row. Not when the first stage reads an argument of an in-place pair (the next
  // row's loads would share a pointer with this row's stores), nor with accumulating stores or in
  // a fast_trig body.
  bool pipelines_rows() const;

  // Rows [begin, end) with the first stage of row i + 1 computed inside row i's last loop: its
  // loads (the next row, from memory) overlap that loop's arithmetic instead of stalling a pass of
  // their own, and each row makes one pass fewer. gelu(layer_norm(x)) + r: the fused kernel cost
  // about the same kernel with precomputed row statistics plus its two statistics passes.
  // The last row recomputes its own first stage there (the result goes unused), so the loop body
  // has no branch and the loads stay in bounds.
  void emit_pipelined_rows(Value* begin, Value* end);

  Value* iexpr(int id);

  Value* index(const loop::Index& ix);

  Value* element_ptr(int arg, Value* idx);

  Value* load_arg(int arg, Value* ptr, DType want);

  std::vector<Value*> emit_body(const loop::Stage& st);

  void emit_stores(const loop::Stage& st, const std::vector<Value*>& vals);

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

}  // namespace lt::cpu
