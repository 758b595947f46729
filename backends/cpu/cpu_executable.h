// A Plan compiled for the host CPU: one JIT-compiled function per kernel, run in plan order on
// the thread pool. Internal to backends/cpu.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/jit.h"

namespace lt::cpu {

class CpuExecutable : public Executable {
 public:
  explicit CpuExecutable(const Plan& plan);
  std::vector<BufferPtr> run(const std::vector<RunInput>& inputs, RunStats* stats) override;
  int num_kernels() const override { return static_cast<int>(kernels_.size()); }
  std::vector<std::string> kernel_sources() const override { return sources_; }
  const JitTimings& timings() const { return timings_; }

 private:
  struct CompiledKernel {
    std::string name;
    std::vector<int> arg_buffers;  // Plan buffer of each kernel arg
    int64_t outer_numel = 1;       // the range the function is called over
    int64_t inner_numel = 1;
    int64_t inner_contiguous = 1;  // chunk alignment along the outer range (whole vectors)
    KernelFn fn = nullptr;
  };
  std::vector<BufferSpec> buffers_;
  std::vector<CompiledKernel> kernels_;
  std::vector<std::string> sources_;
  std::unique_ptr<JitCode> code_;
  JitTimings timings_;
};

}  // namespace lt::cpu
