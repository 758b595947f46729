#include "runtime/windows.h"

#include <limits>

#include "ir/error.h"
#include "runtime/conv.h"
#include "runtime/indexing.h"
#include "runtime/ops.h"
#include "runtime/pool_grad.h"

namespace lt {
namespace {

// A 1- or 2-element size argument as two values (PyTorch's _pair), checked to be >= lo.
std::vector<int64_t> pair(const char* op, const char* what, std::vector<int64_t> v, int64_t lo) {
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2)
    fail(ErrorKind::Runtime, op, ": ", what, " must be one or two integers, got ", shape_str(v));
  for (auto x : v)
    if (x < lo)
      fail(ErrorKind::Runtime, op, ": ", what, " must be ", lo == 0 ? "non-negative" : "positive",
           ", got ", shape_str(v));
  return v;
}

// Checks a pooling/conv input is [N, C, H, W] or [C, H, W]; returns it as 4-D.
Tensor batched4(const char* op, const Tensor& x) {
  if (!x.defined()) fail(ErrorKind::Runtime, op, ": undefined input");
  if (x.dim() == 3) return x.unsqueeze(0);
  if (x.dim() != 4)
    fail(ErrorKind::Runtime, op,
         ": expected 3-D (unbatched) or 4-D (batched) input, got input of shape ",
         shape_str(x.shape()));
  return x;
}

// Output length of a window over n (already padded) and the extra right padding ceil_mode needs.
struct Extent {
  int64_t out = 0;
  int64_t extra = 0;
};
Extent pool_extent(const char* op, int64_t n, int64_t k, int64_t s, int64_t p, int64_t dl,
                   bool ceil_mode) {
  const int64_t span = dl * (k - 1) + 1, padded = n + 2 * p;
  // PyTorch's size: floor division, so with ceil_mode an input smaller than the window still
  // makes one (partial) window when the rounding up reaches it.
  const int64_t num = padded - span + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  // PyTorch: the last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * s >= n + p) --out;
  if (out < 1)
    fail(ErrorKind::Runtime, op, ": input size ", n, " with padding ", p,
         " is smaller than the kernel extent ", span, " (output size ", out, ")");
  return {out, std::max<int64_t>(0, (out - 1) * s + span - padded)};
}

// The [N, C, OH, kH, OW, kW] window view of x padded by (ph, pw) plus ceil-mode extras.
Tensor windows2d(const Tensor& x, const std::vector<int64_t>& k, const std::vector<int64_t>& s,
                 const std::vector<int64_t>& p, const std::vector<int64_t>& dl, const Extent& eh,
                 const Extent& ew, double pad_value) {
  Tensor xp = x;
  if (p[0] || p[1] || eh.extra || ew.extra)
    xp = pad(x, {p[1], p[1] + ew.extra, p[0], p[0] + eh.extra}, pad_value);
  return sliding_window(sliding_window(xp, 2, k[0], s[0], dl[0]), 4, k[1], s[1], dl[1]);
}

// Where windows2d's view reads x (pool_grad.h), for the pooling ops' gradients.
WindowGeometry geometry(const Tensor& x, const std::vector<int64_t>& k,
                        const std::vector<int64_t>& s, const std::vector<int64_t>& p,
                        const std::vector<int64_t>& dl, const Extent& eh, const Extent& ew) {
  return {{k[0], k[1]},
          {s[0], s[1]},
          {p[0], p[1]},
          {dl[0], dl[1]},
          {x.size(2) + 2 * p[0] + eh.extra, x.size(3) + 2 * p[1] + ew.extra}};
}

// The checked, pair-expanded arguments of a pooling op over a floating [N, C, H, W] input.
struct PoolArgs {
  Tensor x;
  std::vector<int64_t> kernel, stride, padding;
};
PoolArgs pool_args(const char* op, const Tensor& input, std::vector<int64_t> kernel,
                   std::vector<int64_t> stride, std::vector<int64_t> padding) {
  PoolArgs a{batched4(op, input), {}, {}, {}};
  if (!is_floating(a.x.dtype()))
    fail(ErrorKind::Runtime, op, ": not implemented for ", dtype_name(a.x.dtype()),
         " input (shape ", shape_str(input.shape()), ")");
  a.kernel = pair(op, "kernel_size", std::move(kernel), 1);
  a.stride = stride.empty() ? a.kernel : pair(op, "stride", std::move(stride), 1);
  a.padding = pair(op, "padding", std::move(padding), 0);
  for (int i = 0; i < 2; ++i)
    if (2 * a.padding[i] > a.kernel[i])
      fail(ErrorKind::Runtime, op,
           ": pad should be at most half of effective kernel size, but got pad=", a.padding[i],
           ", kernel_size=", a.kernel[i]);
  return a;
}

}  // namespace

Tensor sliding_window(const Tensor& x, int64_t dim, int64_t kernel, int64_t stride,
                      int64_t dilation) {
  dim = normalize_axis(dim, x.dim(), "sliding_window");
  const int64_t n = x.shape()[dim];
  if (kernel < 1 || stride < 1 || dilation < 1)
    fail(ErrorKind::Runtime, "sliding_window: kernel ", kernel, ", stride ", stride,
         " and dilation ", dilation, " must be positive");
  const int64_t span = dilation * (kernel - 1) + 1;
  if (n < span)
    fail(ErrorKind::Runtime, "sliding_window: dimension ", dim, " of size ", n, " (shape ",
         shape_str(x.shape()), ") is smaller than the kernel extent ", span);
  const int64_t out = (n - span) / stride + 1;
  const Shape& shape = x.shape();
  auto with = [&](std::vector<int64_t> mid) {  // `shape` with dim replaced by `mid`
    std::vector<int64_t> r(shape.begin(), shape.begin() + dim);
    r.insert(r.end(), mid.begin(), mid.end());
    r.insert(r.end(), shape.begin() + dim + 1, shape.end());
    return r;
  };
  if (kernel == 1) return slice(x, dim, 0, (out - 1) * stride + 1, stride).unsqueeze(dim + 1);
  if (dilation == 1 && stride == kernel)  // non-overlapping windows: a plain reshape
    return narrow(x, dim, 0, out * kernel).reshape(with({out, kernel}));
  // Overlapping windows (tinygrad's trick): repeat x R times along dim, read it as rows of length
  // L = m*n + dilation, so row j starts at j*dilation (mod n); window o of row j is column
  // o*stride.
  const int64_t m = std::max<int64_t>(1, ((out - 1) * stride + 1 - dilation + n - 1) / n);
  const int64_t row = m * n + dilation, total = kernel * row, reps = (total + n - 1) / n;
  std::vector<int64_t> rep = with({reps, n});
  Tensor t = x.unsqueeze(dim).expand(rep).reshape(with({reps * n}));
  t = narrow(t, dim, 0, total).reshape(with({kernel, row}));
  t = slice(t, dim + 1, 0, (out - 1) * stride + 1, stride);  // [.., kernel, out, ..]
  return t.transpose(dim, dim + 1);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
              std::vector<int64_t> stride, std::vector<int64_t> padding,
              std::vector<int64_t> dilation, int64_t groups) {
  const char* op = "conv2d";
  Tensor x = batched4(op, input);
  if (!weight.defined() || weight.dim() != 4)
    fail(ErrorKind::Runtime, op,
         ": expected a 4-D weight [out_channels, in_channels/groups, kH, kW], got ",
         weight.defined() ? shape_str(weight.shape()) : std::string("none"));
  stride = pair(op, "stride", stride, 1);
  padding = pair(op, "padding", padding, 0);
  dilation = pair(op, "dilation", dilation, 1);
  const int64_t C = x.size(1), O = weight.size(0), Cg = weight.size(1);
  if (groups < 1 || C != Cg * groups || O % groups != 0)
    fail(ErrorKind::Runtime, op, ": input ", shape_str(input.shape()), " and weight ",
         shape_str(weight.shape()), " do not match with groups=", groups,
         " (expected input channels = weight.size(1) * groups = ", Cg * groups,
         " and out_channels divisible by groups)");
  if (!is_floating(x.dtype()) || x.dtype() != weight.dtype())
    fail(ErrorKind::Runtime, op, ": input (", dtype_name(x.dtype()), ") and weight (",
         dtype_name(weight.dtype()), ") must be floating tensors of the same dtype");
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != O || bias.dtype() != x.dtype()))
    fail(ErrorKind::Runtime, op, ": expected bias of shape [", O, "] and dtype ",
         dtype_name(x.dtype()), ", got ", shape_str(bias.shape()), " ", dtype_name(bias.dtype()));
  ConvParams p;
  for (int i = 0; i < 2; ++i)
    p.stride[i] = stride[i], p.padding[i] = padding[i], p.dilation[i] = dilation[i];
  p.groups = groups;
  conv_output_shape(Op::Conv2d, x.shape(), weight.shape(), p);  // kernel vs padded input size
  Tensor out = conv2d_nchw(x, weight, bias, p);
  return input.dim() == 3 ? out.squeeze(0) : out;
}

Tensor conv1d(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups) {
  if (!input.defined() || (input.dim() != 2 && input.dim() != 3))
    fail(ErrorKind::Runtime, "conv1d: expected 2-D (unbatched) or 3-D (batched) input, got ",
         input.defined() ? shape_str(input.shape()) : std::string("none"));
  if (!weight.defined() || weight.dim() != 3)
    fail(ErrorKind::Runtime,
         "conv1d: expected a 3-D weight [out_channels, in_channels/groups, k], got ",
         weight.defined() ? shape_str(weight.shape()) : std::string("none"));
  // A conv2d over [.., C, 1, L] with a [O, C/g, 1, k] kernel.
  Tensor out = conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, {1, stride}, {0, padding},
                      {1, dilation}, groups);
  return out.squeeze(-2);
}

Tensor max_pool2d(const Tensor& input, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil_mode) {
  const char* op = "max_pool2d";
  const PoolArgs a = pool_args(op, input, std::move(kernel), std::move(stride), std::move(padding));
  const Tensor& x = a.x;
  dilation = pair(op, "dilation", dilation, 1);
  Extent eh =
      pool_extent(op, x.size(2), a.kernel[0], a.stride[0], a.padding[0], dilation[0], ceil_mode);
  Extent ew =
      pool_extent(op, x.size(3), a.kernel[1], a.stride[1], a.padding[1], dilation[1], ceil_mode);
  Tensor win = windows2d(x, a.kernel, a.stride, a.padding, dilation, eh, ew,
                         -std::numeric_limits<double>::infinity());
  // One node: the gradient goes to the first maximum of each window (PyTorch's rule).
  Tensor out = window_max(x, win, geometry(x, a.kernel, a.stride, a.padding, dilation, eh, ew));
  return input.dim() == 3 ? out.squeeze(0) : out;
}

Tensor avg_pool2d(const Tensor& input, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, bool ceil_mode, bool count_include_pad,
                  std::optional<int64_t> divisor_override) {
  const char* op = "avg_pool2d";
  const PoolArgs a = pool_args(op, input, std::move(kernel), std::move(stride), std::move(padding));
  const Tensor& x = a.x;
  if (divisor_override && *divisor_override == 0)
    fail(ErrorKind::Runtime, op, ": divisor must be not zero");
  const std::vector<int64_t> one = {1, 1};
  Extent eh = pool_extent(op, x.size(2), a.kernel[0], a.stride[0], a.padding[0], 1, ceil_mode);
  Extent ew = pool_extent(op, x.size(3), a.kernel[1], a.stride[1], a.padding[1], 1, ceil_mode);
  Tensor sum = window_sum(x, windows2d(x, a.kernel, a.stride, a.padding, one, eh, ew, 0.0),
                          geometry(x, a.kernel, a.stride, a.padding, one, eh, ew));
  Tensor out;
  if (divisor_override) {
    out = sum / static_cast<double>(*divisor_override);
  } else if ((count_include_pad || (!a.padding[0] && !a.padding[1])) && !eh.extra && !ew.extra) {
    out = sum / static_cast<double>(a.kernel[0] * a.kernel[1]);
  } else {
    // Per-window element counts: 1 over the input (and over the padding when it counts), 0 over
    // the ceil-mode overhang; windowed and summed like the data (constants, folded by lowering).
    Tensor inside = ones({x.size(2), x.size(3)}, x.dtype(), x.device());
    Tensor counted =
        count_include_pad
            ? pad(inside, {a.padding[1], a.padding[1], a.padding[0], a.padding[0]}, 1.0)
            : inside;
    std::vector<int64_t> rest_pad =
        count_include_pad ? std::vector<int64_t>{0, ew.extra, 0, eh.extra}
                          : std::vector<int64_t>{a.padding[1], a.padding[1] + ew.extra,
                                                 a.padding[0], a.padding[0] + eh.extra};
    counted = pad(counted, rest_pad, 0.0)
                  .reshape({1, 1, x.size(2) + 2 * a.padding[0] + eh.extra,
                            x.size(3) + 2 * a.padding[1] + ew.extra});
    Tensor counts = windows2d(counted, a.kernel, a.stride, {0, 0}, one, {}, {}, 0.0);
    out = sum / counts.sum({3, 5});
  }
  return input.dim() == 3 ? out.squeeze(0) : out;
}

Tensor adaptive_avg_pool2d(const Tensor& input, std::vector<int64_t> output_size) {
  const char* op = "adaptive_avg_pool2d";
  Tensor x = batched4(op, input);
  output_size = pair(op, "output_size", output_size, 1);
  const int64_t h = x.size(2), w = x.size(3);
  Tensor out;
  if (output_size[0] == 1 && output_size[1] == 1) {
    out = x.mean({2, 3}, true);
  } else if (h % output_size[0] == 0 && w % output_size[1] == 0) {
    std::vector<int64_t> k = {h / output_size[0], w / output_size[1]};
    out = avg_pool2d(x, k, k);
  } else {
    fail(ErrorKind::NotImplemented, "not implemented: adaptive_avg_pool2d from ", h, "x", w, " to ",
         output_size[0], "x", output_size[1], " (output sizes must divide the input sizes)");
  }
  return input.dim() == 3 ? out.squeeze(0) : out;
}

}  // namespace lt
