// Gemm plan steps on CUDA through cuBLAS, loaded with dlopen like NVRTC and the driver, so the
// library builds and loads without it. float32 runs with CUBLAS_COMPUTE_32F in pedantic math mode
// (no TF32) unless LT_ALLOW_TF32=1; float64 with CUBLAS_COMPUTE_64F; bfloat16 and float16 operands
// and output with CUBLAS_COMPUTE_32F accumulation in the default math mode (tensor cores).
#pragma once
#include <cuda.h>

#include <memory>
#include <string>

#include "lowering/gemm.h"

namespace lt {

// Whether libcublas loads and has every entry point used (the backend then offers GEMMs).
bool cublas_available();
// Why not, when !cublas_available().
std::string cublas_error();

// One cuBLAS handle bound to a stream; created once per device and reused by every executable.
// The device's context must be current when it is created, used and destroyed.
class CublasHandle {
 public:
  // Throws lt::Error "not implemented: gemm on cuda: <why>" when cuBLAS cannot be loaded.
  explicit CublasHandle(CUstream stream);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  // Enqueues out = A @ B on the handle's stream (asynchronous); pointers are the plan's buffers.
  void gemm(const Gemm& g, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out) const;

 private:
  void* handle_ = nullptr;
  bool tf32_ = false;
};

}  // namespace lt
