#include "runtime/conv.h"

#include "ir/error.h"
#include "runtime/ops.h"
#include "runtime/tape.h"
#include "runtime/tensor_impl.h"

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

}  // namespace lt
