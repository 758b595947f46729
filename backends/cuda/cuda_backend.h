// The CUDA backend: loop IR -> CUDA C (cuda_codegen.h) -> NVRTC cubin for the device's
// architecture -> cuModuleLoadData, launched in plan order on one stream (from an executable's
// 4th run on as one CUDA graph, cuda_graph.h); memory from a caching allocator. The compiled
// module goes into the on-disk cache (cuda_module_image.h). The driver is loaded with dlopen, so
// this library links and loads without a GPU.
//
// Symbolic plans (Plan::sym, issue 30; symbolic_sizes() is true): compiled once, run at any
// binding of their size symbols with run_symbolic. Kernels take their size parameters by value
// (cuda_codegen.h); per binding the executable sizes buffers and temporary slots, checks inputs,
// computes grids, and instantiates its cuBLAS, cuDNN and flash attention steps (with_sizes), kept
// with that binding's CUDA graph (cuda_graph.h). Symbolic executables are not written to the
// disk cache (serialize() is false for them).
#pragma once
#include <functional>
#include <memory>

#include "backends/backend.h"
#include "backends/cuda/caching_allocator.h"

namespace lt {

// Device memory of the CUDA backend; returned to the caching allocator on destruction.
class CudaBuffer : public Buffer {
 public:
  // `prefer`: the address this buffer's role had last time (CudaCachingAllocator::allocate).
  CudaBuffer(std::shared_ptr<CudaCachingAllocator> alloc, size_t bytes, CUdeviceptr prefer = 0);
  // Device memory owned elsewhere (a DLPack producer's tensor, on this backend's device):
  // `release` runs when the last user is gone, instead of a return to the allocator.
  CudaBuffer(CUdeviceptr ptr, size_t bytes, std::function<void()> release);
  ~CudaBuffer() override;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  bool on_host() const override { return false; }
  bool runtime_owned() const override { return alloc_ != nullptr; }  // its owner may still read it
  CUdeviceptr ptr() const { return reinterpret_cast<CUdeviceptr>(data_); }

 private:
  std::shared_ptr<CudaCachingAllocator> alloc_;
  std::function<void()> release_;
};

class CudaBackend : public Backend {
 public:
  virtual CudaAllocatorStats memory_stats() const = 0;
  virtual void empty_cache() = 0;
  virtual const CudaDevice& device() const = 0;
  // "sm_90" (or "compute_NN" when the device is newer than NVRTC).
  virtual std::string target() const = 0;
};

// The backend on device `ordinal`; throws lt::Error mentioning "no CUDA device" when there is none.
std::unique_ptr<Backend> make_cuda_backend(int ordinal = 0);

}  // namespace lt
