// A plan's kernels -> CUDA C -> NVRTC images. NVRTC compiles one program on one thread, and a
// training step's ~250 kernels in one program took 1.5 s on a 16-core machine, so the distinct
// kernels are split into several programs (balanced by size) compiled in parallel, each in a
// worker process where one can run (nvrtc_worker.h), else on a thread; each is a full cubin (or
// PTX) for the target, loaded as its own CUmodule. Identical kernels are
// still generated and compiled once. Needs no GPU.
#pragma once
#include <string>
#include <vector>

#include "backends/cuda/cuda_module_image.h"
#include "lowering/plan.h"

namespace lt {

struct CudaCompileTimings {
  double codegen_s = 0;          // CUDA C generation (sizing pass + every program's)
  double nvrtc_s = 0;            // wall time of the parallel phase (generation + NVRTC)
  double slowest_program_s = 0;  // the longest single NVRTC compile
  int programs = 0;
  int worker_programs = 0;            // of them, compiled in worker processes (nvrtc_worker.h)
  std::vector<double> program_s;      // each program's NVRTC compile, wall
  std::vector<double> program_cpu_s;  // and its thread's or worker's CPU time (the critical path
                                      // on idle cores)
};

// Bytes of kernel source per NVRTC program before a plan is split. NVRTC spent about 20 ms of CPU
// per KB of our kernels; a program with no kernels costs 57 ms of CPU, 37 ms with -minimal
// (nvrtc_compiler.cc; CUDA 13, 2-core dev machine), so 8 KB programs keep that fixed cost under a
// fifth of each while the slowest program (the critical path on a many-core host) halves.
constexpr size_t kSourceBytesPerProgram = 8192;
// Programs compiled at once, at most (and never more than the hardware's threads).
constexpr size_t kMaxPrograms = 16;

// `programs` 0: by the plan's size, at most min(hardware threads, kMaxPrograms); else that many
// (at most one per distinct kernel); 1 is one program for the whole plan.
CudaModuleImage compile_cuda_module(const Plan& plan, const std::string& target, bool cubin,
                                    CudaCompileTimings* timings = nullptr, size_t programs = 0);

}  // namespace lt
