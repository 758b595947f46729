// Convolution in the runtime: conv2d and its two gradients are traced as single prims (ir/conv.h)
// with a dedicated VJP on every backend, so one model traces one graph everywhere. Lowering runs
// them as the backend's library step (LowerOptions::conv: oneDNN on the CPU, cuDNN on CUDA, direct
// loops on the reference interpreter) or expands them into the sliding-window + im2col GEMM
// decomposition (lowering/expand_conv.h: CUDA without cuDNN, a CPU without oneDNN, LT_GEMM=0,
// float64 on the CPU, an empty batch).
#pragma once
#include <vector>

#include "ir/conv.h"
#include "runtime/tensor.h"

namespace lt {

// conv2d of a checked 4-D input [N, C, H, W] and weight [O, C/groups, kH, kW], bias [O] or none.
Tensor conv2d_nchw(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p);
// The gradients of conv2d_nchw w.r.t. x (whose spatial size is {H, W}) and w (kernel {kH, kW}).
Tensor conv2d_grad_input(const Tensor& dy, const Tensor& w, const ConvParams& p, int64_t H,
                         int64_t W);
Tensor conv2d_grad_weight(const Tensor& x, const Tensor& dy, const ConvParams& p, int64_t kh,
                          int64_t kw);

}  // namespace lt
