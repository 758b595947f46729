// The reference rules of the conv prims: the direct 7-deep loop over every (output point, input
// channel, kernel tap), accumulating in double. Slow and obviously right: the oracle that oneDNN's
// steps and lowering's sliding-window expansion (lowering/expand_conv.h) are tested against.
#include "backends/reference/kernels.h"
#include "ir/conv.h"

namespace lt::ref {
namespace {

// Calls f(x index, w index, y index) for every pair of input and weight elements that one output
// element of conv(x, w) multiplies together (taps that land in the padding are skipped).
template <class F>
void for_each_tap(const Shape& x, const Shape& w, const Shape& y, const ConvParams& p, F f) {
  const int64_t N = x[0], C = x[1], H = x[2], W = x[3], O = w[0], Cg = w[1], KH = w[2], KW = w[3];
  const int64_t OH = y[2], OW = y[3], Og = O / p.groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / Og;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t yi = ((n * O + o) * OH + oh) * OW + ow;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                if (iw < 0 || iw >= W) continue;
                const int64_t xi = ((n * C + g * Cg + c) * H + ih) * W + iw;
                f(xi, ((o * Cg + c) * KH + kh) * KW + kw, yi);
              }
            }
        }
    }
}

}  // namespace

void eval_conv2d(Ctx& c) {
  const ConvParams p = ConvParams::from(c.node.op, c.node.attrs);
  const Value &x = *c.in[0], &w = *c.in[1];
  std::vector<double>& y = c.out.f;
  y.assign(static_cast<size_t>(numel(c.out.shape)), 0.0);
  for_each_tap(x.shape, w.shape, c.out.shape, p,
               [&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += x.f[xi] * w.f[wi]; });
  if (c.in.size() == 3) {
    const int64_t O = c.out.shape[1], plane = c.out.shape[2] * c.out.shape[3];
    for (size_t i = 0; i < y.size(); ++i) y[i] += c.in[2]->f[(static_cast<int64_t>(i) / plane) % O];
  }
}

void eval_conv2d_grad_input(Ctx& c) {
  const ConvParams p = ConvParams::from(c.node.op, c.node.attrs);
  const Value &dy = *c.in[0], &w = *c.in[1];
  std::vector<double>& dx = c.out.f;
  dx.assign(static_cast<size_t>(numel(c.out.shape)), 0.0);
  for_each_tap(c.out.shape, w.shape, dy.shape, p,
               [&](int64_t xi, int64_t wi, int64_t yi) { dx[xi] += dy.f[yi] * w.f[wi]; });
}

void eval_conv2d_grad_weight(Ctx& c) {
  const ConvParams p = ConvParams::from(c.node.op, c.node.attrs);
  const Value &x = *c.in[0], &dy = *c.in[1];
  std::vector<double>& dw = c.out.f;
  dw.assign(static_cast<size_t>(numel(c.out.shape)), 0.0);
  for_each_tap(x.shape, c.out.shape, dy.shape, p,
               [&](int64_t xi, int64_t wi, int64_t yi) { dw[wi] += x.f[xi] * dy.f[yi]; });
}

}  // namespace lt::ref
