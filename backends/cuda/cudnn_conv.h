// Library convolution plan steps (lowering/conv.h) on CUDA through cuDNN's convolution API,
// loaded with dlopen as cuBLAS and NVRTC are, so the library builds and loads without it. cuDNN
// picks implicit-GEMM kernels on the tensor cores, reading and writing NCHW directly (no im2col,
// no permute kernels). Float32 convolutions may use TF32 when conv_allow_tf32() is on
// (torch.backends.cudnn.allow_tf32, on by default as in PyTorch); float16 and bfloat16 run on the
// tensor cores with float32 accumulation; float64 in float64.
//
// Where cuDNN is looked for: $LT_CUDNN_LIBRARY (a file), libcudnn.so.9 on the loader's path (or
// already loaded, e.g. by PyTorch), then the nvidia-cudnn wheel of the Python the build was
// configured with.
#pragma once
#include <cuda.h>

#include <memory>
#include <string>

#include "lowering/conv.h"

namespace lt {

// Whether cuDNN loads and has every entry point used (the backend then offers conv steps).
bool cudnn_available();
// Why not, when !cudnn_available().
std::string cudnn_error();
// cudnnGetVersion() (e.g. 91000), 0 when not loaded.
size_t cudnn_version();

// One cuDNN handle bound to the device's stream; created once per backend and shared by its
// executables. The device's context must be current when it is created, used and destroyed.
class CudnnHandle {
 public:
  // Throws lt::Error "not implemented: conv on cuda: <why>" when cuDNN cannot be loaded.
  explicit CudnnHandle(CUstream stream);
  ~CudnnHandle();
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  void* get() const { return handle_; }

 private:
  void* handle_ = nullptr;
};

// One conv step's descriptors and its algorithm for each TF32 setting (chosen by cuDNN's
// heuristics on first use: host work only, no device memory, so it is safe before a graph
// capture).
class CudnnConv {
 public:
  CudnnConv(std::shared_ptr<const CudnnHandle> handle, const ConvStep& step);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // Chooses the algorithm for `tf32` if not yet chosen; returns the workspace bytes it needs.
  // Throws lt::Error naming the step when cuDNN offers no algorithm for it.
  size_t prepare(bool tf32);
  // Enqueues the step on the handle's stream: a, b, bias, out as ConvStep names them (bias 0
  // when absent), `workspace` at least prepare(tf32) bytes.
  void run(CUdeviceptr a, CUdeviceptr b, CUdeviceptr bias, CUdeviceptr out, CUdeviceptr workspace,
           bool tf32) const;
  const ConvStep& step() const { return step_; }

 private:
  void release();  // destroys the descriptors made so far
  struct Choice {
    bool chosen = false;
    int algo = 0, math = 0;
    size_t workspace = 0;
  };
  std::shared_ptr<const CudnnHandle> handle_;
  ConvStep step_;
  void *x_ = nullptr, *y_ = nullptr, *w_ = nullptr, *conv_ = nullptr, *bias_ = nullptr,
       *relu_ = nullptr;
  Choice choice_[2];  // [tf32]
};

}  // namespace lt
