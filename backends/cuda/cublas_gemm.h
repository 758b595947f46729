// Gemm plan steps on CUDA through cuBLAS, loaded with dlopen like NVRTC and the driver, so the
// library builds and loads without it. float32 runs with CUBLAS_COMPUTE_32F in pedantic math mode
// (no TF32) unless LT_ALLOW_TF32=1; float64 with CUBLAS_COMPUTE_64F; bfloat16 and float16 operands
// and output with CUBLAS_COMPUTE_32F accumulation in the default math mode (tensor cores).
#pragma once
#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

#include "lowering/gemm.h"

namespace lt {

// Whether libcublas loads and has every entry point used (the backend then offers GEMMs).
bool cublas_available();
// Why not, when !cublas_available().
std::string cublas_error();

// Device memory for a batched GEMM's A, B and C address arrays, and the host vector staged into it.
struct CublasPointerArrays {
  CUdeviceptr device = 0;
  std::vector<uint64_t>* host = nullptr;
  // The device arrays already hold this call's addresses (CublasHandle::stage): gemm() only
  // launches, which is what a CUDA graph captures (cuda_graph.h); the copy stays outside it.
  bool staged = false;
};

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
  // A batch whose dims do not collapse into one stride (attention's [B, H] over a fused qkv
  // buffer) runs as one pointer-array call when `arrays` is given (pointer_array_bytes(g) bytes of
  // device memory the caller keeps for this step; its host copy is staged into it on the stream),
  // else as a host loop of strided-batched calls, one per outer batch point.
  using PointerArrays = CublasPointerArrays;
  // `tf32`: float32 products may round inputs to TF32 (matmul_allow_tf32() when the step was made).
  // `sm_target` > 0: cuBLAS picks its kernel and grid for that many SMs (cublasSetSmCountTarget),
  // for a GEMM that runs while other work (NCCL's kernels) holds the rest; 0: all of them.
  void gemm(const Gemm& g, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out, PointerArrays arrays = {},
            bool tf32 = false, int sm_target = 0) const;
  // Fills arrays.host with the pointer-array form's A, B and C addresses and copies them into
  // arrays.device on the stream (what gemm() does first unless arrays.staged).
  void stage(const Gemm& g, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out,
             PointerArrays arrays) const;
  // Device bytes the pointer-array form of g needs; 0 when g's batch collapses into one call.
  static size_t pointer_array_bytes(const Gemm& g);

 private:
  void* handle_ = nullptr;
  CUstream stream_ = nullptr;
  // The handle's own workspace (cublasSetWorkspace): without one, cuBLAS allocates during stream
  // capture (cuda_graph.h), which a child graph node cannot hold.
  CUdeviceptr workspace_ = 0;
};

}  // namespace lt
