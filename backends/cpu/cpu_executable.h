// A Plan compiled for the host CPU: one JIT-compiled function per kernel, run in plan order on
// the thread pool, and oneDNN matmuls and convolutions for its Gemm and Conv steps. Internal to
// backends/cpu.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
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
    KernelFn fn = nullptr;
  };
  std::vector<BufferSpec> buffers_;
  std::vector<Donation> donations_;  // outputs a run may write into an input's memory
  MemoryPlan memory_;                // which temporaries share an allocation
  std::vector<CompiledKernel> kernels_;
  struct BoundGemm {
    int a, b, out;  // plan buffers
    OnednnGemm op;
  };
  std::vector<BoundGemm> gemms_;
  struct BoundConv {
    int a, b, bias, out;  // plan buffers (bias -1: none)
    OnednnConv op;
  };
  std::vector<BoundConv> convs_;
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
};

}  // namespace lt::cpu
