// Compiled (not run) by tests/gpu/run.sh where cuDNN's headers are installed (PyTorch's
// nvidia-cudnn wheel): the declarations backends/cuda/cudnn_api.h makes for the dlopen'ed cuDNN
// must match the real ones, value for value and byte for byte, or the build of this file fails.
#include <cudnn.h>

#include <cstddef>

#include "backends/cuda/cudnn_api.h"

namespace c = lt::cudnn;

constexpr int I(int v) { return v; }  // enums of two types compare as ints

static_assert(I(CUDNN_STATUS_SUCCESS) == I(c::kSuccess));
static_assert(I(CUDNN_DATA_FLOAT) == I(c::kFloat) && I(CUDNN_DATA_DOUBLE) == I(c::kDouble) &&
              I(CUDNN_DATA_HALF) == I(c::kHalf) && I(CUDNN_DATA_BFLOAT16) == I(c::kBFloat16));
static_assert(I(CUDNN_TENSOR_NCHW) == I(c::kNCHW) && I(CUDNN_TENSOR_NHWC) == I(c::kNHWC) &&
              I(CUDNN_CROSS_CORRELATION) == I(c::kCrossCorrelation));
static_assert(I(CUDNN_DEFAULT_MATH) == I(c::kDefaultMath) &&
              I(CUDNN_TENSOR_OP_MATH) == I(c::kTensorOpMath) &&
              I(CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) == I(c::kTensorOpMathAllowConversion) &&
              I(CUDNN_FMA_MATH) == I(c::kFmaMath));
static_assert(I(CUDNN_ACTIVATION_RELU) == I(c::kRelu) &&
              I(CUDNN_PROPAGATE_NAN) == I(c::kPropagateNan));

template <typename Perf>
constexpr bool same_layout() {
  return sizeof(Perf) == sizeof(c::AlgoPerf) &&
         offsetof(Perf, algo) == offsetof(c::AlgoPerf, algo) &&
         offsetof(Perf, status) == offsetof(c::AlgoPerf, status) &&
         offsetof(Perf, memory) == offsetof(c::AlgoPerf, memory) &&
         offsetof(Perf, mathType) == offsetof(c::AlgoPerf, math_type) &&
         sizeof(Perf::algo) == sizeof(int) && sizeof(Perf::status) == sizeof(c::Status) &&
         sizeof(Perf::mathType) == sizeof(int);
}
static_assert(same_layout<cudnnConvolutionFwdAlgoPerf_t>());
static_assert(same_layout<cudnnConvolutionBwdDataAlgoPerf_t>());
static_assert(same_layout<cudnnConvolutionBwdFilterAlgoPerf_t>());
// Enums passed as int must be int-sized.
static_assert(sizeof(cudnnDataType_t) == sizeof(int) && sizeof(cudnnMathType_t) == sizeof(int) &&
              sizeof(cudnnConvolutionFwdAlgo_t) == sizeof(int));

int main() { return 0; }
