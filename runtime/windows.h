// Pooling, built from sliding windows: a window view of a tensor made of movement ops only (expand,
// reshape, strided slice), which lowering turns into index arithmetic; pooling is a reduction over
// the window axes. Its gradient comes from the autograd rules of the movement ops: the VJP of the
// window view is col2im (an expand's VJP sums the overlapping reads), which fuses into one
// reduction kernel. conv2d / conv1d check their arguments here and trace the conv prims
// (runtime/conv.h); lowering expands those into the same window view times the weight where the
// backend has no convolution library (lowering/expand_conv.h).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/tensor.h"

namespace lt {

// Replaces dimension `dim` (size n) of `x` by two dimensions (out, kernel):
// result[..., o, j, ...] = x[..., o * stride + j * dilation, ...], out = (n - dilation*(kernel-1) -
// 1) / stride + 1. Movement ops only.
Tensor sliding_window(const Tensor& x, int64_t dim, int64_t kernel, int64_t stride,
                      int64_t dilation);

// torch.nn.functional.conv2d / conv1d. input [N, C, H, W] (or [C, H, W]), weight [O, C/groups, kH,
// kW].
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              std::vector<int64_t> stride = {1, 1}, std::vector<int64_t> padding = {0, 0},
              std::vector<int64_t> dilation = {1, 1}, int64_t groups = 1);
Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);

// torch.nn.functional.max_pool2d / avg_pool2d (stride defaults to kernel_size when empty).
Tensor max_pool2d(const Tensor& input, std::vector<int64_t> kernel,
                  std::vector<int64_t> stride = {}, std::vector<int64_t> padding = {0, 0},
                  std::vector<int64_t> dilation = {1, 1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& input, std::vector<int64_t> kernel,
                  std::vector<int64_t> stride = {}, std::vector<int64_t> padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
// Output sizes that divide the input sizes (the common (1, 1) global pool among them).
Tensor adaptive_avg_pool2d(const Tensor& input, std::vector<int64_t> output_size);

}  // namespace lt
