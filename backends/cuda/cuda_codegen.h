// Loop IR -> CUDA C. One translation unit per plan, one `extern "C" __global__` function per
// kernel, compiled by NVRTC (nvrtc_compiler.h). Nothing here touches a GPU, so CI tests it without
// one.
//
// Grid mapping (see kernel_gen_elementwise.cc and kernel_gen_rows.cc for the details and the
// reasons):
//   Elementwise  - only MapOuter stages: one thread per outer point, grid-stride loop over the
//                  flattened outer index; 4 points per thread with 16/8/4-byte vector loads and
//                  stores (float4, ...) when the contiguous accesses allow it and the body is
//                  light (cuda_point_cost <= kVectorPointCostLimit).
//   Block        - Reduce/MapInner stages over a large inner space: one 256..1024-thread block per
//                  outer point; each Reduce is a warp-shuffle + shared-memory block reduction whose
//                  result every thread sees, so later stages of the same row read it.
//   Warp         - the same with one warp per outer point (8 rows per block) for small inner
//   spaces.
//                  Optionally (CudaCodegenOptions), a load that several stages repeat is read
//                  once and kept in registers; by default later stages re-read it from L1/L2.
//   Tile         - reductions whose loads are contiguous along the outer index (column sums): the
//                  32 lanes of a warp take 32 adjacent outer points, the 8 to 32 warps of a block
//                  split the inner space and combine through shared memory.
//   Thread       - one thread per outer point looping over its (tiny, <= 16) inner space.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lowering/loop_ir.h"

namespace lt {

enum class CudaKernelMode : uint8_t { Elementwise, Thread, Warp, Block, Tile };

// How one generated kernel is launched. The kernel is grid-stride, so any grid from 1 to
// `max_blocks` is correct; the backend caps it by the device's size.
//
// Symbolic sizes (issue 30, lowering/generalize.h): a symbolic kernel (loop::Kernel::symbolic)
// takes, after its buffer and scalar arguments, one `const long long p<i>` by value for each
// size parameter i (an index into Plan::sym.params) that its fields name, in ascending order:
// size_params. The launcher passes each parameter's value at the binding run (PlanSymbols::
// values), one 8-byte slot each, and computes the grid from this binding's outer extent
// (cuda_launch_blocks); max_blocks then only describes the binding the plan was made for. The
// kernel reads every annotated field from those parameters (extents, strides, offsets, index
// and instruction constants; static fields stay literals) and indexes in 64 bits. No choice in
// its code rests on the hint's sizes: modes, vector accesses and register caching are chosen on
// what holds at every binding (kernel_gen_rows.cc, kernel_gen_elementwise.cc). A static kernel
// has no size_params and its code is what it was before symbolic sizes.
struct CudaKernelLaunch {
  std::string name;  // the extern "C" symbol
  CudaKernelMode mode;
  int threads;                   // block size (a multiple of 32)
  int64_t max_blocks;            // blocks that still get work; 0 when the kernel has nothing to do
  bool vectorized = false;       // Elementwise: a vector path (4 points per thread) exists
  std::vector<int> size_params;  // symbolic: the size parameters passed after the arguments
};

// The blocks that still get work when the kernel's flattened outer space has `outer_n` points
// (max_blocks for that size; 0 when it is empty).
int64_t cuda_launch_blocks(const CudaKernelLaunch& l, int64_t outer_n);

struct CudaModuleSource {
  std::string source;                     // the whole translation unit
  std::vector<CudaKernelLaunch> kernels;  // one per loop::Kernel, in order
};

// Tuning knobs (the defaults are what the backend uses; benchmarks vary them).
struct CudaCodegenOptions {
  // Register caching of row vectors (Block/Warp modes with row_vectors): when a thread holds at
  // most this many 4-point chunks of the row, a vector that several stages load (softmax and
  // layer_norm read x in every stage) is loaded once and kept in registers; 0 disables it. Measured
  // on an H100 (tests/gpu/profile_rows.py): softmax 4096x4096 kernel 62.5 -> 47.5 us, gelu(layer_
  // norm)+r 8192x4096 unchanged (140 us; vectors alone took it from 170). Caching single points
  // (before vectors) made both ~25% slower than re-reading the row from L1/L2, so points are not
  // cached.
  int max_cached_per_thread = 4;
  int block_threads = 0;  // Block mode's block size; 0 picks it from the row length
  // 16-byte loads/stores of rows in Block/Warp modes (4 consecutive points per thread at a time).
  bool row_vectors = true;

  // The defaults, or LT_CUDA_ROW_CACHE / LT_CUDA_BLOCK_THREADS / LT_CUDA_ROW_VEC where set: tuning
  // knobs for benchmarks (tests/gpu/profile_rows.py), not part of the public contract.
  static CudaCodegenOptions from_env();
  // "" for the defaults, else a tag naming the non-default values (part of the disk cache's key).
  std::string tag() const;
};

// Elementwise bodies costing more per point than this (about 10 inline sines) take the scalar
// grid-stride loop only: they are bound by arithmetic, and one copy of the body compiles ~3x
// faster than the vector path's five.
constexpr int64_t kVectorPointCostLimit = 400;

// A rough count of the instructions one point of `k`'s body costs, from each op's cost tier
// (ir/ops.h): inline sin/cos ~40, libdevice calls and the division helpers ~20, anything else 1.
int64_t cuda_point_cost(const loop::Kernel& k);

// Generates the translation unit and each kernel's launch description. Throws lt::Error
// (NotImplemented) for IR it cannot express, naming the kernel and the op.
CudaModuleSource generate_cuda(const std::vector<loop::Kernel>& kernels,
                               const CudaCodegenOptions& options = {});

// The CUDA C source alone (what dumps and lt.debug.kernel_sources show).
std::string cuda_source(const std::vector<loop::Kernel>& kernels);

const char* cuda_kernel_mode_name(CudaKernelMode m);

}  // namespace lt
