// What the on-disk compile cache (runtime/disk_cache.h) keeps of a CUDA executable: the loadable
// images NVRTC produced (cubins, or PTX for the driver's JIT; a plan's kernels are split into
// several NVRTC programs compiled in parallel, cuda_compile.h), the CUDA C they came from (for
// lt.debug.kernel_sources) and each kernel's launch description and program. A second process
// loads the images with cuModuleLoadData and launches as the first did, without running code
// generation or NVRTC. Needs no GPU: CI round-trips the byte format.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/cuda_codegen.h"

namespace lt {

struct CudaModuleImage {
  std::string target;  // "sm_90" (cubin) or "compute_90" (PTX), as compiled
  bool cubin = true;
  std::vector<std::vector<char>>
      images;          // one per program: what cuModuleLoadData takes (PTX ends in its NUL)
  std::string source;  // the CUDA C of every program, one after the other
  std::vector<CudaKernelLaunch> launches;  // one per plan kernel, in plan order
  std::vector<uint32_t> program_of;        // the image holding each launch's function
};

std::string encode_cuda_module(const CudaModuleImage& m);

// The inverse of encode_cuda_module for a plan of `kernels` kernels compiled for `target`.
// Throws lt::Error (never crashes) on bytes that are truncated, corrupt, of another format or
// target, or whose launches do not fit (kernel count, block size, names, programs); the cache
// then rebuilds.
CudaModuleImage decode_cuda_module(std::string_view bytes, size_t kernels,
                                   const std::string& target);

}  // namespace lt
