// The part of cuDNN's legacy convolution API (cuDNN 8 and 9: cudnn_ops.h, cudnn_cnn.h) that
// backends/cuda/cudnn_conv.cc calls, declared here because cuDNN is loaded with dlopen and its
// headers are not on the build machines (it ships with PyTorch on the GPU machine, in the
// nvidia-cudnn wheel). The values and the layout of the perf structs are cuDNN's ABI, stable
// across cuDNN 8 and 9; tests/gpu/cudnn_abi_check.cc compares them with the real headers where
// those are installed.
#pragma once
#include <cstddef>

namespace lt::cudnn {

using Handle = struct Context*;
using TensorDesc = struct TensorStruct*;
using FilterDesc = struct FilterStruct*;
using ConvDesc = struct ConvolutionStruct*;
using ActivationDesc = struct ActivationStruct*;
using Status = int;  // cudnnStatus_t; 0 is CUDNN_STATUS_SUCCESS

inline constexpr Status kSuccess = 0;

enum DataType : int { kFloat = 0, kDouble = 1, kHalf = 2, kBFloat16 = 9 };
enum TensorFormat : int { kNCHW = 0, kNHWC = 1 };
enum ConvMode : int { kCrossCorrelation = 1 };
enum MathType : int {
  kDefaultMath = 0,
  kTensorOpMath = 1,
  kTensorOpMathAllowConversion = 2,
  kFmaMath = 3
};
enum ActivationMode : int { kRelu = 1 };
enum NanPropagation : int { kPropagateNan = 1 };

// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t share this layout.
struct AlgoPerf {
  int algo;
  Status status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};

// The entry points, as dlsym finds them (C linkage, cuDNN's names in the comments of
// cudnn_conv.cc's loader).
struct Api {
  Status (*create)(Handle*);
  Status (*destroy)(Handle);
  Status (*set_stream)(Handle, void* stream);
  size_t (*get_version)();
  const char* (*error_string)(Status);
  Status (*create_tensor)(TensorDesc*);
  Status (*set_tensor_4d)(TensorDesc, int format, int dtype, int n, int c, int h, int w);
  Status (*destroy_tensor)(TensorDesc);
  Status (*create_filter)(FilterDesc*);
  Status (*set_filter_4d)(FilterDesc, int dtype, int format, int k, int c, int h, int w);
  Status (*destroy_filter)(FilterDesc);
  Status (*create_conv)(ConvDesc*);
  Status (*set_conv_2d)(ConvDesc, int pad_h, int pad_w, int u, int v, int dil_h, int dil_w,
                        int mode, int compute_type);
  Status (*set_conv_groups)(ConvDesc, int);
  Status (*set_conv_math)(ConvDesc, int);
  Status (*destroy_conv)(ConvDesc);
  Status (*fwd_algos)(Handle, TensorDesc x, FilterDesc w, ConvDesc, TensorDesc y, int requested,
                      int* returned, AlgoPerf*);
  Status (*fwd_workspace)(Handle, TensorDesc x, FilterDesc w, ConvDesc, TensorDesc y, int algo,
                          size_t*);
  Status (*forward)(Handle, const void* alpha, TensorDesc x, const void* xp, FilterDesc w,
                    const void* wp, ConvDesc, int algo, void* ws, size_t ws_bytes, const void* beta,
                    TensorDesc y, void* yp);
  Status (*bwd_data_algos)(Handle, FilterDesc w, TensorDesc dy, ConvDesc, TensorDesc dx,
                           int requested, int* returned, AlgoPerf*);
  Status (*bwd_data_workspace)(Handle, FilterDesc w, TensorDesc dy, ConvDesc, TensorDesc dx,
                               int algo, size_t*);
  Status (*backward_data)(Handle, const void* alpha, FilterDesc w, const void* wp, TensorDesc dy,
                          const void* dyp, ConvDesc, int algo, void* ws, size_t ws_bytes,
                          const void* beta, TensorDesc dx, void* dxp);
  Status (*bwd_filter_algos)(Handle, TensorDesc x, TensorDesc dy, ConvDesc, FilterDesc dw,
                             int requested, int* returned, AlgoPerf*);
  Status (*bwd_filter_workspace)(Handle, TensorDesc x, TensorDesc dy, ConvDesc, FilterDesc dw,
                                 int algo, size_t*);
  Status (*backward_filter)(Handle, const void* alpha, TensorDesc x, const void* xp, TensorDesc dy,
                            const void* dyp, ConvDesc, int algo, void* ws, size_t ws_bytes,
                            const void* beta, FilterDesc dw, void* dwp);
  Status (*add_tensor)(Handle, const void* alpha, TensorDesc a, const void* ap, const void* beta,
                       TensorDesc c, void* cp);
  Status (*create_activation)(ActivationDesc*);
  Status (*set_activation)(ActivationDesc, int mode, int nan, double coef);
  Status (*destroy_activation)(ActivationDesc);
  Status (*activation_forward)(Handle, ActivationDesc, const void* alpha, TensorDesc x,
                               const void* xp, const void* beta, TensorDesc y, void* yp);
};

}  // namespace lt::cudnn
