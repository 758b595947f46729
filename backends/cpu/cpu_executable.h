// A Plan compiled for the host CPU: one JIT-compiled function per kernel, run in plan order on
// the thread pool, and oneDNN matmuls and convolutions for its Gemm and Conv steps. Internal to
// backends/cpu.
//
// Symbolic plans (Plan::sym, issue 30) compile once and run for any binding of their size symbols
// (run_symbolic). A symbolic kernel's function is called with one more entry in its argument
// array: args[k.args.size()] points at the int64 value of every size parameter, in
// PlanSymbols::params order, followed by the products that merging dims added (merge_dims in
// kernel_prep.h); its code reads every annotated size from there. Library steps are instantiated
// per binding (with_sizes); a Gemm step runs through oneDNN primitives with runtime dims
// (OnednnSymbolicGemm), made once per step, other steps through primitives kept per distinct
// instantiation.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/collective_queue.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/onednn_conv.h"
#include "backends/cpu/onednn_gemm.h"
#include "lowering/plan.h"

namespace lt::cpu {

// Distinct kernels per compile thread before a plan's compile is split across threads.
constexpr size_t kKernelsPerCompileThread = 8;
// Body instructions that count as one more kernel when splitting compile work across threads.
constexpr size_t kInstrsPerKernelUnit = 32;

class CpuExecutable : public Executable {
 public:
  // Compiles the plan's kernels.
  explicit CpuExecutable(const Plan& plan);
  // Links code that serialize() wrote for the same plan (the disk cache); compiles nothing.
  // Throws lt::Error when the bytes do not fit the plan.
  CpuExecutable(const Plan& plan, std::string_view cached);
  // The object code and kernel sources, for the disk cache.
  std::string serialize() const;
  std::vector<BufferPtr> run(const std::vector<RunInput>& inputs, RunStats* stats) override;
  std::vector<BufferPtr> run_symbolic(const std::vector<RunInput>& inputs, RunStats* stats,
                                      std::span<const int64_t> symbols) override;
  bool symbolic() const { return sym_.symbolic(); }
  int num_kernels() const override {
    return static_cast<int>(kernels_.size() + gemms_.size() + convs_.size());
  }
  std::vector<std::string> kernel_sources() const override { return sources_; }
  const JitTimings& timings() const { return timings_; }

 private:
  struct CompiledKernel {
    std::string name;
    std::vector<int> arg_buffers;  // Plan buffer of each kernel arg
    int64_t outer_numel = 1;       // the range the function is called over
    int64_t inner_numel = 1;
    int64_t inner_contiguous = 1;  // chunk alignment along the outer range (whole vectors)
    bool serial = false;           // accumulating stores (scatter_add): one thread
    bool symbolic = false;         // reads size parameters (gets the parameter array)
    // Symbolic: the merged kernel's outer and inner dims' size parameters (-1: static, then
    // outer_ext / inner_ext hold the extent).
    std::vector<int> outer_params, inner_params;
    std::vector<int64_t> outer_ext, inner_ext;
    KernelFn fn = nullptr;
  };
  std::vector<BufferSpec> buffers_;
  std::vector<Donation> donations_;  // outputs a run may write into an input's memory
  MemoryPlan memory_;                // which temporaries share an allocation
  std::vector<CompiledKernel> kernels_;
  // A library step: the static one's primitive; a symbolic one's runtime-dims primitives (rt),
  // and where oneDNN has none for its layout, per binding (keyed by its instantiated size fields,
  // size_fields.h) the primitive made for it.
  struct BoundGemm {
    int a, b, out;  // plan buffers
    Gemm step;
    StepSizeParams sizes;  // symbolic fields (empty: static)
    std::shared_ptr<const OnednnGemm> op;
    std::shared_ptr<const OnednnSymbolicGemm> rt;
    std::map<std::vector<int64_t>, std::shared_ptr<const OnednnGemm>> per_binding;
  };
  std::vector<BoundGemm> gemms_;
  struct BoundConv {
    int a, b, bias, out;  // plan buffers (bias -1: none)
    ConvStep step;
    StepSizeParams sizes;
    std::shared_ptr<const OnednnConv> op;
    std::map<std::vector<int64_t>, std::shared_ptr<const OnednnConv>> per_binding;
  };
  std::vector<BoundConv> convs_;
  std::vector<CollectiveStep> collectives_;  // run through the process group (host_collective.h)
  // The collectives' worker (collective_queue.h): made with the first plan that has one.
  std::unique_ptr<CollectiveQueue> comm_;
  std::vector<std::vector<int>> step_touches_;    // per step, its buffers (plans with collectives)
  std::atomic<bool> collectives_checked_{false};  // check_same_collectives ran (first run)
  std::string collectives_differ_;                // its error, when the ranks disagreed
  std::mutex steps_mutex_;  // guards per_binding (runs may come from several threads)
  // Symbolic sizes: the plan's symbols, its parameters followed by those merge_dims added, and
  // the plan's buffers and memory plan (for slot_bytes_at). Empty for a static plan.
  PlanSymbols sym_;
  std::vector<SizeExpr> params_;
  Plan layout_;
  std::vector<PlanStep> steps_;
  std::vector<std::string> sources_;
  std::vector<std::string> objects_;  // the linked object files, kept for serialize()
  std::unique_ptr<JitCode> code_;
  JitTimings timings_;

  // Validates the plan's kernels and fills kernels_ (all but fn); returns the merged kernels.
  std::vector<loop::Kernel> prepare(const Plan& plan);
  // Validates the plan's gemms and convs and creates their primitives; records the step order.
  void prepare_gemms(const Plan& plan);
  void bind(std::unique_ptr<JitCode> code);
  // Keeps the plan's size symbols (checks a static plan names none).
  void keep_symbols(const Plan& plan);
  // The run for parameter values `values` (empty for a static plan).
  std::vector<BufferPtr> run_with(const std::vector<RunInput>& inputs, RunStats* stats,
                                  std::span<const int64_t> values);
  // Runs gemm step g at parameter values `values` (empty for a static plan).
  void run_gemm(BoundGemm& g, std::span<const int64_t> values, const std::vector<void*>& data);
  // The primitives for this binding of a symbolic step (made on first use).
  std::shared_ptr<const OnednnGemm> gemm_at(BoundGemm& g, const Gemm& at);
  std::shared_ptr<const OnednnConv> conv_at(BoundConv& c, std::span<const int64_t> values);
};

}  // namespace lt::cpu
