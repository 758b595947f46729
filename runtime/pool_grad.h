// Pooling reductions over a window view as single autograd nodes whose backward is a gather-form
// col2im: the input gradient is a sum over the kH x kW window offsets of the output gradient,
// strided and shifted into place (index arithmetic, one fused kernel), instead of the window
// view's movement VJPs, which for overlapping windows sum mostly-zero copies across several
// kernels. max_pool2d's gradient goes to the first maximum of each window (PyTorch's rule; amax's
// VJP splits it over ties), found once in the forward as one more stage of the max's reduction.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace lt {

// Where a [N, C, OH, kH, OW, kW] window view reads its [N, C, H, W] input: window (oh, ow) at
// offset (jh, jw) reads padded[oh * stride + jh * dilation] (same for W), padded being the input
// with `padding` before and `padded - H - padding` after.
struct WindowGeometry {
  int64_t kernel[2], stride[2], padding[2], dilation[2], padded[2];
  // Non-overlapping windows (stride == kernel, no dilation; or kernel 1) are a reshape of the
  // input (runtime/windows.cc sliding_window), whose VJP is already the cheapest col2im.
  bool is_reshape() const {
    for (int i = 0; i < 2; ++i)
      if (kernel[i] != 1 && (dilation[i] != 1 || stride[i] != kernel[i])) return false;
    return true;
  }
};

// The gradient of the window view: g6 broadcasts to [N, C, OH, kH, OW, kW]; returns the input's
// [N, C, H, W] gradient (overlapping reads summed).
Tensor col2im(const Tensor& g6, const Shape& input, const WindowGeometry& w);

// max / sum of `win` (the window view of x) over its window axes, [N, C, OH, OW], recorded as one
// node from x (from win when w.is_reshape(): the view's own VJP is then the col2im).
Tensor window_max(const Tensor& x, const Tensor& win, const WindowGeometry& w);
Tensor window_sum(const Tensor& x, const Tensor& win, const WindowGeometry& w);

}  // namespace lt
