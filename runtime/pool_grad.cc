#include "runtime/pool_grad.h"

#include <memory>

#include "ir/error.h"
#include "runtime/indexing.h"
#include "runtime/ops.h"
#include "runtime/saved.h"
#include "runtime/tape.h"

namespace lt {
namespace {

// t's dim `dim` (size m) placed at start, start + step, ... of a zero dim of size n.
Tensor place(const Tensor& t, int64_t dim, int64_t start, int64_t step, int64_t n) {
  const int64_t m = t.size(dim);
  Tensor r = t;
  if (step > 1 && m > 1) {  // step - 1 zeros after every element, the trailing ones dropped
    std::vector<int64_t> grown(t.shape().begin(), t.shape().end());
    grown[dim] = m * step;
    r = narrow(pad_dim(r.unsqueeze(dim + 1), dim + 1, 0, step - 1).reshape(grown), dim, 0,
               step * (m - 1) + 1);
  }
  return pad_dim(r, dim, start, n - start - r.size(dim));
}

// Window offsets 0 .. kH*kW-1 in row-major (kH, kW) order, [1, 1, 1, kH, 1, kW], as floats: the
// first-maximum search runs in floating point like the max (int64 made it 2x slower on the CPU):
// float64 for float64 data, else float32 (exact for any kernel area below 2^24).
Tensor offsets(int64_t kh, int64_t kw, DType data, const Device& device) {
  DType t = data == DType::Float64 ? DType::Float64 : DType::Float32;
  return cast(positions(kh * kw, device), t).reshape({1, 1, 1, kh, 1, kw});
}

}  // namespace

Tensor col2im(const Tensor& g6, const Shape& input, const WindowGeometry& w) {
  const int64_t n = input[0], c = input[1], h = input[2], wd = input[3];
  const int64_t oh = g6.size(2), ow = g6.size(4);
  Tensor acc;
  for (int64_t jh = 0; jh < w.kernel[0]; ++jh) {
    for (int64_t jw = 0; jw < w.kernel[1]; ++jw) {
      // The gradient every window sends to its offset (jh, jw): [N, C, OH, OW].
      Tensor t = narrow(narrow(g6, 3, g6.size(3) == 1 ? 0 : jh, 1), 5, g6.size(5) == 1 ? 0 : jw, 1)
                     .expand({n, c, oh, 1, ow, 1})
                     .reshape({n, c, oh, ow});
      t = place(t, 2, jh * w.dilation[0], w.stride[0], w.padded[0]);
      t = place(t, 3, jw * w.dilation[1], w.stride[1], w.padded[1]);
      acc = acc.defined() ? acc + t : t;
    }
  }
  return narrow(narrow(acc, 2, w.padding[0], h), 3, w.padding[1], wd);
}

Tensor window_max(const Tensor& x, const Tensor& win, const WindowGeometry& w) {
  const int64_t n = win.size(0), c = win.size(1), oh = win.size(2), kh = win.size(3);
  const int64_t ow = win.size(4), kw = win.size(5);
  const bool track = grad_enabled() && x.requires_grad();
  Tensor out, first;
  {
    NoGradGuard no_grad;     // one node: the rule recorded below is the gradient
    out = win.amax({3, 5});  // materialized as the output; read back below as a view
    Tensor peak = out.reshape({n, c, oh, 1, ow, 1});
    if (!track) return out;
    // Window offsets in row-major (kH, kW) order; the first maximum has the smallest.
    Tensor pos = offsets(kh, kw, win.dtype(), win.device());
    first = where(eq(win, peak), pos, Scalar(static_cast<double>(kh * kw))).amin({3, 5}, true);
  }
  // Saved, not a captured tensor: a live pending tensor would become an output of every graph.
  auto saved = std::make_shared<Saved>(first.node(), win.device());
  const Shape in = x.shape();
  const std::vector<int64_t> keep = {n, c, oh, 1, ow, 1};
  const bool via_view = w.is_reshape();
  auto rule = [saved, keep, kh, kw, in, w, via_view](const Tensor& g) {
    Tensor at = offsets(kh, kw, g.dtype(), g.device());
    Tensor g6 = where(eq(at, saved->get()), g.reshape(keep), Scalar(0.0));  // g at the first max
    return std::vector<Tensor>{via_view ? g6 : col2im(g6, in, w)};
  };
  record(out, {via_view ? win : x}, "MaxPool2DBackward", rule);
  return out;
}

Tensor window_sum(const Tensor& x, const Tensor& win, const WindowGeometry& w) {
  if (w.is_reshape()) return win.sum({3, 5});  // sum's VJP (an expand) and the reshape's: optimal
  const bool track = grad_enabled() && x.requires_grad();
  Tensor out;
  {
    NoGradGuard no_grad;
    out = win.sum({3, 5});
  }
  if (!track) return out;
  const Shape in = x.shape();
  const std::vector<int64_t> keep = {out.size(0), out.size(1), out.size(2), 1, out.size(3), 1};
  record(out, {x}, "SumPool2DBackward", [keep, in, w](const Tensor& g) {
    return std::vector<Tensor>{col2im(g.reshape(keep), in, w)};
  });
  return out;
}

}  // namespace lt
