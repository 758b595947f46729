#include "runtime/conv.h"

#include "ir/error.h"
#include "runtime/autograd.h"
#include "runtime/ops.h"
#include "runtime/tensor_impl.h"
#include "runtime/vjp.h"

namespace lt {
namespace {

// The traced prim `op` over `operands` (their tensors in `srcs`), recorded for autograd.
Tensor conv_prim(Op op, const std::vector<Tensor>& srcs, IntList ints) {
  const Device& d = srcs[0].device();
  NodeList ins;
  for (const Tensor& t : srcs) {
    if (!(t.device() == d))
      fail(ErrorKind::Runtime, op_name(op), ": expected all tensors on one device, got ", d.str(),
           " and ", t.device().str());
    ins.push_back(t.node());
  }
  Attrs at;
  at.ints = std::move(ints);
  Tensor out(make_tensor(make_node(op, ins, at), d));
  record_op(op, at, out, ins, srcs);
  return out;
}

}  // namespace

Tensor conv2d_nchw(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p) {
  std::vector<Tensor> srcs = {x, w};
  if (b.defined()) srcs.push_back(b);
  return conv_prim(Op::Conv2d, srcs, p.ints());
}

Tensor conv2d_grad_input(const Tensor& dy, const Tensor& w, const ConvParams& p, int64_t H,
                         int64_t W) {
  return conv_prim(Op::Conv2dGradInput, {dy, w}, p.ints({H, W}));
}

Tensor conv2d_grad_weight(const Tensor& x, const Tensor& dy, const ConvParams& p, int64_t kh,
                          int64_t kw) {
  return conv_prim(Op::Conv2dGradWeight, {x, dy}, p.ints({kh, kw}));
}

std::vector<Tensor> conv2d_vjp(const VjpCtx& c, const Tensor& g) {
  const ConvParams p = ConvParams::from(c.op, c.attrs);
  const Shape &xs = c.inputs[0].shape(), &ws = c.inputs[1].shape();
  std::vector<Tensor> r(c.inputs.size());
  if (c.needs(0)) r[0] = conv2d_grad_input(g, c.x(1), p, xs[2], xs[3]);
  if (c.needs(1)) r[1] = conv2d_grad_weight(c.x(0), g, p, ws[2], ws[3]);
  if (c.inputs.size() == 3 && c.needs(2)) r[2] = g.sum({0, 2, 3});
  return r;
}

// conv is bilinear, so its gradients' gradients are convolutions again: with GI and GW the two
// backward prims, <g, GI(dy, w)> = <conv(g, w), dy> = <GW(g, dy), w>, and likewise
// <g, GW(x, dy)> = <GI(dy, g), x> = <conv(x, g), dy>.
std::vector<Tensor> conv2d_grad_input_vjp(const VjpCtx& c, const Tensor& g) {
  const ConvParams p = ConvParams::from(c.op, c.attrs);
  const Shape& ws = c.inputs[1].shape();
  std::vector<Tensor> r(2);
  if (c.needs(0)) r[0] = conv2d_nchw(g, c.x(1), Tensor(), p);
  if (c.needs(1)) r[1] = conv2d_grad_weight(g, c.x(0), p, ws[2], ws[3]);
  return r;
}

std::vector<Tensor> conv2d_grad_weight_vjp(const VjpCtx& c, const Tensor& g) {
  const ConvParams p = ConvParams::from(c.op, c.attrs);
  const Shape& xs = c.inputs[0].shape();
  std::vector<Tensor> r(2);
  if (c.needs(0)) r[0] = conv2d_grad_input(c.x(1), g, p, xs[2], xs[3]);
  if (c.needs(1)) r[1] = conv2d_nchw(c.x(0), g, Tensor(), p);
  return r;
}

}  // namespace lt
