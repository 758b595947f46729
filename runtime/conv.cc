#include "runtime/conv.h"

#include <unordered_map>

#include "backends/backend.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "runtime/autograd.h"
#include "runtime/ops.h"
#include "runtime/tensor_impl.h"
#include "runtime/vjp.h"
#include "runtime/windows.h"

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

// The gradient of the sliding-window decomposition w.r.t. one of its operands, at a stand-in
// zero value of that operand (the convolution is linear in each, so where it is taken is moot).
Tensor decomposition_grad(const Tensor& x, const Tensor& w, bool wrt_input, const Tensor& dy,
                          const ConvParams& p) {
  EnableGradGuard on;
  Tensor leaf = zeros((wrt_input ? x : w).shape(), dy.dtype(), dy.device());
  leaf.requires_grad_();
  Tensor y =
      conv2d_windows(wrt_input ? leaf : x.detach(), wrt_input ? w.detach() : leaf, Tensor(), p);
  return grad({y}, {leaf}, {dy}).at(0);
}

}  // namespace

bool conv_library(const Device& d, DType t) {
  return get_backend(d.backend_name()).lower_options().conv(t);
}

Tensor conv2d_nchw(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p) {
  // An empty batch stays with the decomposition (library steps skip empty outputs).
  if (x.size(0) == 0 || !conv_library(x.device(), x.dtype())) return conv2d_windows(x, w, b, p);
  std::vector<Tensor> srcs = {x, w};
  if (b.defined()) srcs.push_back(b);
  return conv_prim(Op::Conv2d, srcs, p.ints());
}

Tensor conv2d_grad_input(const Tensor& dy, const Tensor& w, const ConvParams& p, int64_t H,
                         int64_t W) {
  if (dy.size(0) == 0 || !conv_library(dy.device(), dy.dtype())) {
    Tensor x = zeros({dy.size(0), w.size(1) * p.groups, H, W}, dy.dtype(), dy.device());
    return decomposition_grad(x, w, true, dy, p);
  }
  return conv_prim(Op::Conv2dGradInput, {dy, w}, p.ints({H, W}));
}

Tensor conv2d_grad_weight(const Tensor& x, const Tensor& dy, const ConvParams& p, int64_t kh,
                          int64_t kw) {
  if (x.size(0) == 0 || !conv_library(x.device(), x.dtype())) {
    Tensor w = zeros({dy.size(1), x.size(1) / p.groups, kh, kw}, x.dtype(), x.device());
    return decomposition_grad(x, w, false, dy, p);
  }
  return conv_prim(Op::Conv2dGradWeight, {x, dy}, p.ints({kh, kw}));
}

NodeList expand_library_prims_for(const NodeList& roots, const std::string& backend) {
  return expand_library_prims_for(roots, get_backend(backend).lower_options(), backend);
}

NodeList expand_library_prims_for(const NodeList& roots, const LowerOptions& opts,
                                  const std::string& backend) {
  std::vector<const Node*> r;
  for (const NodePtr& n : roots) r.push_back(n.get());
  const Graph g = collect_graph(r);
  bool any = false;
  for (const Node* n : g.order) any |= op_info(n->op).cls == OpClass::Conv && !opts.conv(n->dtype);
  if (!any) return roots;
  const Device dev{Device::Type::Lazy, 0, backend};
  NoGradGuard no_grad;
  std::unordered_map<const Node*, NodePtr> memo;  // rebuilt nodes
  for (const Node* n : g.order) {
    NodeList in;
    bool changed = false;
    for (const NodePtr& i : n->inputs) {
      auto it = memo.find(i.get());
      changed |= it != memo.end();
      in.push_back(it != memo.end() ? it->second : i);
    }
    if (op_info(n->op).cls == OpClass::Conv && !opts.conv(n->dtype)) {
      std::vector<Tensor> t;
      for (const NodePtr& i : in) t.emplace_back(make_tensor(i, dev));
      const ConvParams p = ConvParams::from(n->op, n->attrs);
      Tensor y = n->op == Op::Conv2d
                     ? conv2d_windows(t[0], t[1], t.size() == 3 ? t[2] : Tensor(), p)
                 : n->op == Op::Conv2dGradInput
                     ? conv2d_grad_input(t[0], t[1], p, n->attrs.ints[7], n->attrs.ints[8])
                     : conv2d_grad_weight(t[0], t[1], p, n->attrs.ints[7], n->attrs.ints[8]);
      memo[n] = y.node();
    } else if (changed) {
      memo[n] = make_node(n->op, std::move(in), n->attrs);
    }
  }
  NodeList out;
  for (const NodePtr& n : roots) {
    auto it = memo.find(n.get());
    out.push_back(it != memo.end() ? it->second : n);
  }
  return out;
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
