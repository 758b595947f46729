#include "autograd/vjp.h"

#include <cmath>
#include <map>
#include <numbers>
#include <string>

#include "autograd/autograd.h"
#include "ir/attention.h"
#include "ir/error.h"
#include "runtime/attention.h"
#include "runtime/collectives.h"
#include "runtime/conv.h"
#include "runtime/indexing.h"
#include "runtime/ops.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {

using Grads = std::vector<Tensor>;

std::vector<int64_t> to_vec(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

std::vector<int64_t> norm_axes(const Attrs& a, size_t rank) {
  std::vector<int64_t> r;
  for (auto x : a.ints)
    r.push_back(rank ? normalize_axis(x, static_cast<int64_t>(rank), "vjp") : 0);
  return rank ? r : std::vector<int64_t>{};
}

// A reduced value brought back to the input's shape (keepdim restored, then expanded).
Tensor expand_back(const Tensor& v, const Shape& in, const Attrs& a) {
  Shape keep = in;
  for (auto ax : norm_axes(a, in.size())) keep[ax] = 1;
  return v.reshape(to_vec(keep)).expand(to_vec(in));
}

int64_t reduced_count(const Shape& in, const Attrs& a) {
  int64_t c = 1;
  for (auto ax : norm_axes(a, in.size())) c *= in[ax];
  return c;
}

Tensor sign(const Tensor& x) { return cast(gt(x, 0.0), x.dtype()) - cast(lt(x, 0.0), x.dtype()); }

Tensor mask(const Tensor& cond, DType t) { return cast(cond, t); }

// The composite ops' rules compute float16/bfloat16 values in float32 and round each gradient once
// to its operand's dtype, as PyTorch's backward kernels do (opmath) and as lowering's expansions
// of the ops themselves do (lowering/decompose.cc's in_opmath).
// (cast() of a tensor to its own dtype is the tensor itself.)
Tensor wide(const Tensor& t) { return cast(t, opmath_dtype(t.dtype())); }
// Gradient `g` (computed wide) rounded once to operand i's dtype, read from the saved operand
// (c.x(i) would trace a saved view again).
Tensor narrow(const VjpCtx& c, size_t i, const Tensor& g) { return cast(g, c.inputs[i].dtype()); }

Grads matmul_vjp(const VjpCtx& c, const Tensor& g) {
  Tensor a = c.x(0), b = c.x(1);
  Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = b.dim() == 1 ? b.unsqueeze(-1) : b;
  Shape out2 = infer(Op::Matmul, {a2.node(), b2.node()}, Attrs{}).shape;
  Tensor g2 = g.reshape(to_vec(out2));
  Tensor ga = unbroadcast(matmul(g2, b2.transpose(-1, -2)), a2.shape()).reshape(to_vec(a.shape()));
  Tensor gb;
  if (b2.dim() == 2 && a2.dim() > 2) {
    // A weight shared by every row of a batched input (x [.., T, K] @ W [K, N]): its gradient is
    // one GEMM over all rows, x^T [K, rows] @ g [rows, N], not a batch of products summed after.
    const int64_t k = a2.size(-1);
    gb = matmul(a2.reshape({-1, k}).transpose(0, 1), g2.reshape({-1, g2.size(-1)}))
             .reshape(to_vec(b.shape()));
  } else {
    gb = unbroadcast(matmul(a2.transpose(-1, -2), g2), b2.shape()).reshape(to_vec(b.shape()));
  }
  return {ga, gb};
}

Grads layer_norm_vjp(const VjpCtx& c, const Tensor& g16) {
  const Tensor x = wide(c.x(0)), g = wide(g16);
  int64_t k = c.attrs.ints[0];
  bool has_w = c.attrs.ints[1], has_b = c.attrs.ints[2];
  std::vector<int64_t> ax, lead;
  for (int64_t d = 0; d < x.dim(); ++d) (d >= x.dim() - k ? ax : lead).push_back(d);
  Tensor mean = x.mean(ax, true);
  Tensor xc = x - mean;
  Tensor rstd = ((xc * xc).mean(ax, true) + c.attrs.value).rsqrt();
  Tensor xhat = xc * rstd;
  Tensor gxhat = has_w ? g * wide(c.x(1)) : g;
  Tensor gx = rstd * (gxhat - gxhat.mean(ax, true) - xhat * (gxhat * xhat).mean(ax, true));
  Grads r = {narrow(c, 0, gx)};
  if (has_w) r.push_back(narrow(c, 1, lead.empty() ? g * xhat : (g * xhat).sum(lead)));
  if (has_b) r.push_back(narrow(c, has_w ? 2 : 1, lead.empty() ? g : g.sum(lead)));
  return r;
}

// gather's gradient: g added back at the positions it was read from. When each output row picks
// one element of a full row (index of size 1 along the axis and the source's size elsewhere: a
// loss's target pick), that is a one-hot select, elementwise and fused into its consumers; the
// general case is a scatter_add into zeros (accumulating duplicates, e.g. embedding rows).
Grads gather_vjp(const VjpCtx& c, const Tensor& g) {
  const Shape& in = c.inputs[0].shape();
  const int64_t axis =
      normalize_axis(c.attrs.ints.at(0), static_cast<int64_t>(in.size()), "gather");
  Tensor index = c.x(1);
  bool pick = index.shape()[axis] == 1;
  for (size_t d = 0; d < in.size(); ++d)
    pick &= static_cast<int64_t>(d) == axis || index.shape()[d] == in[d];
  if (pick) {
    std::vector<int64_t> along(in.size(), 1);
    along[axis] = in[axis];
    Tensor hit = eq(index, positions(in[axis], g.device()).reshape(along));
    return {where(hit, g, zeros_like(g)), Tensor()};
  }
  return {scatter_add_node(zeros(in, g.dtype(), g.device()), axis, index, g), Tensor()};
}

// scatter_add's gradient: g itself for the base; for src, g read back where src was added (src
// positions beyond the index's extent were not added: zero).
Grads scatter_add_vjp(const VjpCtx& c, const Tensor& g) {
  const Shape& src = c.inputs[2].shape();
  const int64_t axis =
      normalize_axis(c.attrs.ints.at(0), static_cast<int64_t>(src.size()), "scatter_add");
  Tensor index = c.x(1);
  Tensor gs = gather_node(g, axis, index);
  std::vector<int64_t> pads;
  bool padded = false;
  for (size_t d = src.size(); d-- > 0;) {
    pads.insert(pads.end(), {0, src[d] - index.shape()[d]});
    padded |= src[d] != index.shape()[d];
  }
  return {g, Tensor(), padded ? pad(gs, pads) : gs};
}

// The gradient of a strided slice: g placed back at the positions it was read from, zeros
// elsewhere.
Grads slice_vjp(const VjpCtx& c, const Tensor& g) {
  const Shape& in = c.inputs[0].shape();
  const auto& s = c.attrs.ints;
  Tensor r = g;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    int64_t start = s[3 * d], step = s[3 * d + 1], size = s[3 * d + 2], n = in[d];
    if (size == 0) {
      Shape z = r.shape();
      z[d] = n;
      r = zeros(z, r.dtype(), r.device()) + r.sum({d}, true);  // keeps the graph connected
      continue;
    }
    if (step < 0) {  // read backwards: flip, then it is a forward read from the other end
      r = flip(r, {d});
      start += step * (size - 1);
      step = -step;
    }
    if (step > 1) {  // dilate: step-1 zeros after every element, then drop the trailing ones
      Shape grown = r.shape();
      grown[d] = size * step;
      r = pad_dim(r.unsqueeze(d + 1), d + 1, 0, step - 1).reshape(to_vec(grown));
      r = narrow(r, d, 0, step * (size - 1) + 1);
    }
    int64_t covered = r.shape()[d];
    r = pad_dim(r, d, start, n - start - covered);
  }
  return {r};
}

Grads gelu_vjp(const VjpCtx& c, const Tensor& g16) {
  const Tensor x = wide(c.x(0)), g = wide(g16);
  Tensor dx;
  if (c.attrs.stream == 0) {
    Tensor cdf = (x * M_SQRT1_2).erf() * 0.5 + 0.5;
    Tensor pdf = (x * x * -0.5).exp() * (0.5 * M_2_SQRTPI * M_SQRT1_2);
    dx = g * (cdf + x * pdf);
  } else {
    const double k = M_2_SQRTPI * M_SQRT1_2;  // sqrt(2/pi)
    Tensor t = ((x + x * x * x * 0.044715) * k).tanh();
    Tensor du = (x * x * (3 * 0.044715) + 1.0) * k;
    dx = g * ((t + 1.0) * 0.5 + x * 0.5 * (1.0 - t * t) * du);
  }
  return {narrow(c, 0, dx)};
}

// d prod / d x_i is the product of the other entries. Dividing the product by x_i gives that only
// when no entry is zero; with zeros it is the product of the nonzero entries at the one zero of a
// group that has a single zero, and 0 everywhere else (PyTorch's prod_backward).
Grads prod_vjp(const VjpCtx& c, const Tensor& g) {
  Tensor x = c.x(0);
  const Shape& in = x.shape();
  const std::vector<int64_t> ax = norm_axes(c.attrs, in.size());
  Tensor is_zero = eq(x, 0.0);
  Tensor zeros_in_group = cast(is_zero, DType::Int64).sum(ax, true);
  Tensor nonzero = where(is_zero, Scalar(1.0), x);
  Tensor gp = expand_back(g, in, c.attrs) * nonzero.prod(ax, true);  // times the nonzero product
  Tensor at_single_zero =
      where(logical_and(is_zero, eq(zeros_in_group, Scalar(1))), gp, Scalar(0.0));
  return {where(eq(zeros_in_group, Scalar(0)), gp / nonzero, at_single_zero)};
}

// all_reduce: sum and avg are linear in every rank's value, so each rank's gradient is the same
// collective over the ranks' output gradients (torch.distributed.nn's rule). max, broadcast and
// all_gather need this rank's number, which a rule does not see yet.
Grads all_reduce_vjp(const VjpCtx& c, const Tensor& g) {
  const auto op = static_cast<ReduceOp>(c.attrs.ints.at(0));
  if (op == ReduceOp::Max)
    fail(ErrorKind::NotImplemented, "not implemented: the gradient of all_reduce with op max");
  return {all_reduce(g, op, static_cast<int>(c.attrs.ints.at(1)))};
}

// concat: each operand's gradient is its range of g.
Grads concat_vjp(const VjpCtx& c, const Tensor& g) {
  Grads gs;
  int64_t off = 0;
  for (const Saved& x : c.inputs) {
    const int64_t n = x.shape().at(0);
    gs.push_back(narrow(g, 0, off, n));
    off += n;
  }
  return gs;
}

Grads rank_dependent_vjp(const VjpCtx& c, const Tensor&) {
  fail(ErrorKind::NotImplemented, "not implemented: the gradient of ", op_name(c.op),
       " (it depends on this rank's number)");
}

// conv2d: its two gradients are the backward prims (runtime/conv.h).
Grads conv2d_vjp(const VjpCtx& c, const Tensor& g) {
  const ConvParams p = ConvParams::from(c.op, c.attrs);
  const Shape &xs = c.inputs[0].shape(), &ws = c.inputs[1].shape();
  Grads r(c.inputs.size());
  if (c.needs(0)) r[0] = conv2d_grad_input(g, c.x(1), p, xs[2], xs[3]);
  if (c.needs(1)) r[1] = conv2d_grad_weight(c.x(0), g, p, ws[2], ws[3]);
  if (c.inputs.size() == 3 && c.needs(2)) r[2] = g.sum({0, 2, 3});
  return r;
}

// conv is bilinear, so its gradients' gradients are convolutions again: with GI and GW the two
// backward prims, <g, GI(dy, w)> = <conv(g, w), dy> = <GW(g, dy), w>, and likewise
// <g, GW(x, dy)> = <GI(dy, g), x> = <conv(x, g), dy>.
Grads conv2d_grad_input_vjp(const VjpCtx& c, const Tensor& g) {
  const ConvParams p = ConvParams::from(c.op, c.attrs);
  const Shape& ws = c.inputs[1].shape();
  Grads r(2);
  if (c.needs(0)) r[0] = conv2d_nchw(g, c.x(1), Tensor(), p);
  if (c.needs(1)) r[1] = conv2d_grad_weight(g, c.x(0), p, ws[2], ws[3]);
  return r;
}

Grads conv2d_grad_weight_vjp(const VjpCtx& c, const Tensor& g) {
  const ConvParams p = ConvParams::from(c.op, c.attrs);
  const Shape& xs = c.inputs[0].shape();
  Grads r(2);
  if (c.needs(0)) r[0] = conv2d_grad_input(c.x(1), g, p, xs[2], xs[3]);
  if (c.needs(1)) r[1] = conv2d_nchw(c.x(0), g, Tensor(), p);
  return r;
}

// The attention prims differentiated as ops of their own (a replayed trace;
// scaled_dot_product_attention records one node with its own rule instead, runtime/attention.cc):
// attention and attention_lse by the decomposition's formulas; the gradient prims (a double
// backward through fused attention) fail with NotImplemented.
Grads attention_prim_vjp(const VjpCtx& c, const Tensor& g) {
  if (c.op != Op::Attention && c.op != Op::AttentionLse)
    fail(ErrorKind::NotImplemented, "not implemented: the gradient of ", op_name(c.op),
         " (a double backward through scaled_dot_product_attention traced as attention prims: "
         "an explicit attn_mask traces the decomposition, which has one)");
  const AttentionParams p = AttentionParams::from(c.op, c.attrs);
  Tensor q = c.x(0), k = c.x(1), v = c.x(2);
  const DType t = q.dtype(), st = attention_stats_dtype(t);
  Tensor s = cast(attention_scores(q, k, Tensor(), false, p.causal, p.scale), st);
  Tensor prob = (s - logsumexp(s, {-1}, true)).exp();
  Grads r(3);
  Tensor ds;                       // d(loss)/d(scaled scores), times the scale
  if (c.op == Op::AttentionLse) {  // d lse / d s = P; v does not enter
    ds = cast(prob * cast(g, st), t) * p.scale;
  } else {
    if (c.needs(2)) r[2] = cast(prob, t).transpose(-2, -1).matmul(g);
    Tensor dp = cast(g.matmul(v.transpose(-2, -1)), st);
    ds = cast(prob * (dp - (dp * prob).sum({-1}, true)), t) * p.scale;
  }
  if (c.needs(0)) r[0] = ds.matmul(k);
  if (c.needs(1)) r[1] = ds.transpose(-2, -1).matmul(q);
  return r;
}

const std::map<Op, VjpRule>& rules() {
  using C = const VjpCtx&;
  using G = const Tensor&;
  static const std::map<Op, VjpRule> table = {
      {Op::Neg, [](C, G g) { return Grads{-g}; }},
      {Op::Exp, [](C c, G g) { return Grads{g * c.y()}; }},
      {Op::Log, [](C c, G g) { return Grads{g / c.x(0)}; }},
      {Op::Log1p, [](C c, G g) { return Grads{g / (c.x(0) + 1.0)}; }},
      {Op::Expm1, [](C c, G g) { return Grads{g * (c.y() + 1.0)}; }},
      {Op::Sqrt, [](C c, G g) { return Grads{g / (c.y() * 2.0)}; }},
      {Op::Sin, [](C c, G g) { return Grads{g * c.x(0).cos()}; }},
      {Op::Cos, [](C c, G g) { return Grads{-(g * c.x(0).sin())}; }},
      {Op::Tanh,
       [](C c, G g) {
         Tensor y = c.y();
         return Grads{g * (1.0 - y * y)};
       }},
      {Op::Erf,
       [](C c, G g) {
         Tensor x = c.x(0);
         return Grads{g * (x * x * -1.0).exp() * M_2_SQRTPI};
       }},
      {Op::Abs, [](C c, G g) { return Grads{g * sign(c.x(0))}; }},
      {Op::Floor, [](C c, G g) { return Grads{zeros_like(g)}; }},
      {Op::Recip,
       [](C c, G g) {
         Tensor y = c.y();
         return Grads{-(g * y * y)};
       }},
      {Op::Add,
       [](C, G g) {
         return Grads{g, g};
       }},
      {Op::Sub,
       [](C, G g) {
         return Grads{g, -g};
       }},
      {Op::Mul,
       [](C c, G g) {
         return Grads{g * c.x(1), g * c.x(0)};
       }},
      {Op::Div,
       [](C c, G g) {
         Tensor b = c.x(1);
         return Grads{g / b, -(g * c.y() / b)};
       }},
      {Op::Pow,
       [](C c, G g) {
         Tensor a = c.x(0), b = c.x(1), y = c.y();
         // d/db a^b = a^b log a; defined as 0 where a <= 0 (PyTorch masks the base-zero case).
         Tensor gb =
             where(gt(a, 0.0), g * y * where(gt(a, 0.0), a, ones_like(a)).log(), zeros_like(y));
         return Grads{g * b * pow(a, b - 1.0), gb};
       }},
      // floor_divide is a step function: zero almost everywhere (PyTorch raises on its backward).
      {Op::FloorDiv,
       [](C, G g) {
         return Grads{zeros_like(g), zeros_like(g)};
       }},
      // a - b * floor(a / b) and a - b * trunc(a / b): torch's (1, -floor(a/b)) and (1,
      // -trunc(a/b)).
      {Op::Remainder,
       [](C c, G g) {
         return Grads{g, -(g * floor_divide(c.x(0), c.x(1)))};
       }},
      {Op::Fmod,
       [](C c, G g) {
         Tensor q = c.x(0) / c.x(1);
         Tensor trunc = where(lt(q, 0.0), -((-q).floor()), q.floor());
         return Grads{g, -(g * trunc)};
       }},
      {Op::Maximum,
       [](C c, G g) {
         Tensor a = c.x(0), b = c.x(1);
         Tensor m =
             mask(gt(a, b), g.dtype()) + mask(eq(a, b), g.dtype()) * 0.5;  // ties split evenly
         return Grads{g * m, g * (1.0 - m)};
       }},
      {Op::Minimum,
       [](C c, G g) {
         Tensor a = c.x(0), b = c.x(1);
         Tensor m = mask(lt(a, b), g.dtype()) + mask(eq(a, b), g.dtype()) * 0.5;
         return Grads{g * m, g * (1.0 - m)};
       }},
      {Op::Where,
       [](C c, G g) {
         Tensor cond = c.x(0), z = zeros_like(g);
         return Grads{Tensor(), where(cond, g, z), where(cond, z, g)};
       }},
      {Op::Cast,
       [](C c, G g) {
         DType t = c.inputs[0].dtype();
         return Grads{is_floating(t) ? cast(g, t) : Tensor()};
       }},
      {Op::ReduceSum, [](C c, G g) { return Grads{expand_back(g, c.inputs[0].shape(), c.attrs)}; }},
      {Op::Mean,
       [](C c, G g) {
         const Shape& in = c.inputs[0].shape();
         return Grads{expand_back(g, in, c.attrs) /
                      static_cast<double>(std::max<int64_t>(1, reduced_count(in, c.attrs)))};
       }},
      {Op::ReduceMax, nullptr},  // filled below (shared with ReduceMin)
      {Op::ReduceProd, prod_vjp},
      {Op::Reshape, [](C c, G g) { return Grads{g.reshape(to_vec(c.inputs[0].shape()))}; }},
      {Op::Permute,
       [](C c, G g) {
         std::vector<int64_t> inv(c.attrs.ints.size());
         for (size_t i = 0; i < inv.size(); ++i) inv[c.attrs.ints[i]] = static_cast<int64_t>(i);
         return Grads{g.permute(inv)};
       }},
      {Op::Expand, [](C c, G g) { return Grads{unbroadcast(g, c.inputs[0].shape())}; }},
      {Op::Slice, slice_vjp},
      {Op::Gather, gather_vjp},
      {Op::ScatterAdd, scatter_add_vjp},
      {Op::Matmul, matmul_vjp},
      {Op::Conv2d, conv2d_vjp},
      {Op::Conv2dGradInput, conv2d_grad_input_vjp},
      {Op::AllReduce, all_reduce_vjp},
      {Op::Broadcast, rank_dependent_vjp},
      {Op::AllGather, rank_dependent_vjp},
      {Op::Concat, concat_vjp},
      {Op::Conv2dGradWeight, conv2d_grad_weight_vjp},
      {Op::Attention, attention_prim_vjp},
      {Op::AttentionLse, attention_prim_vjp},
      {Op::AttentionGradQ, attention_prim_vjp},
      {Op::AttentionGradK, attention_prim_vjp},
      {Op::AttentionGradV, attention_prim_vjp},
      {Op::Relu, [](C c, G g) { return Grads{g * mask(gt(c.x(0), 0.0), g.dtype())}; }},
      {Op::Sigmoid,
       [](C c, G g) {
         Tensor y = wide(c.y());
         return Grads{narrow(c, 0, wide(g) * y * (1.0 - y))};
       }},
      {Op::Rsqrt,
       [](C c, G g) {
         Tensor y = wide(c.y());
         return Grads{narrow(c, 0, wide(g) * y * y * y * -0.5)};
       }},
      {Op::Silu,
       [](C c, G g) {
         Tensor x = wide(c.x(0)), s = x.sigmoid();
         return Grads{narrow(c, 0, wide(g) * s * (1.0 + x * (1.0 - s)))};
       }},
      {Op::Gelu, gelu_vjp},
      {Op::Softmax,
       [](C c, G g16) {
         Tensor y = wide(c.y()), g = wide(g16);
         return Grads{narrow(c, 0, y * (g - (g * y).sum({c.attrs.ints[0]}, true)))};
       }},
      {Op::LogSoftmax,
       [](C c, G g16) {
         Tensor g = wide(g16);
         return Grads{narrow(c, 0, g - wide(c.y()).exp() * g.sum({c.attrs.ints[0]}, true))};
       }},
      {Op::LogSumExp,
       [](C c, G g) {
         const Shape& in = c.inputs[0].shape();
         return Grads{narrow(c, 0,
                             expand_back(wide(g), in, c.attrs) *
                                 (wide(c.x(0)) - expand_back(wide(c.y()), in, c.attrs)).exp())};
       }},
      {Op::Var,
       [](C c, G g) {
         Tensor x = wide(c.x(0));
         const Shape& in = x.shape();
         std::vector<int64_t> ax = norm_axes(c.attrs, in.size());
         double denom = static_cast<double>(reduced_count(in, c.attrs)) - c.attrs.value;
         return Grads{narrow(
             c, 0, expand_back(wide(g), in, c.attrs) * (x - x.mean(ax, true)) * (2.0 / denom))};
       }},
      {Op::LayerNorm, layer_norm_vjp},
  };
  return table;
}

Grads minmax_vjp(const VjpCtx& c, const Tensor& g) {
  const Shape& in = c.inputs[0].shape();
  Tensor x = c.x(0);
  Tensor hit = mask(eq(x, expand_back(c.y(), in, c.attrs)), g.dtype());
  // Ties share the gradient evenly, as in PyTorch's amax/amin.
  Tensor count = hit.sum(norm_axes(c.attrs, in.size()), true).expand(to_vec(in));
  return {expand_back(g, in, c.attrs) * hit / count};
}

}  // namespace

bool non_differentiable(Op op) {
  OpClass c = op_info(op).cls;
  // Bitwise ops take integers and bools only, which never require grad.
  const bool bitwise = op == Op::BitAnd || op == Op::BitOr || op == Op::BitXor ||
                       op == Op::BitNot || op == Op::Shl || op == Op::Shr;
  return c == OpClass::Compare || c == OpClass::Logical || c == OpClass::Predicate1 ||
         c == OpClass::Rand || c == OpClass::Leaf || bitwise;
}

const VjpRule* vjp_rule(Op op) {
  static const VjpRule minmax = minmax_vjp;
  if (op == Op::ReduceMax || op == Op::ReduceMin) return &minmax;
  auto it = rules().find(op);
  return it == rules().end() || !it->second ? nullptr : &it->second;
}

namespace {

constexpr unsigned kOut = 1u << 7;  // reads_of: the rule reads the op's output
constexpr unsigned kAll = 0xffu;

// Which saved values each op's rule reads (bit i: operand i; kOut: the output), as PyTorch's
// derivatives.yaml declares what a formula saves. Only those are kept live for a sync to
// materialize (Saved); the rest are read for their shapes at most. An op not listed keeps all
// (a missing entry costs extra outputs, never a wrong gradient).
unsigned reads_of(Op op, const std::vector<bool>& needs_grad) {
  auto needs = [&](size_t i) { return i >= needs_grad.size() || needs_grad[i]; };
  switch (op) {
    case Op::Neg:
    case Op::Add:
    case Op::Sub:
    case Op::Floor:
    case Op::Cast:
    case Op::ReduceSum:
    case Op::Mean:
    case Op::Reshape:
    case Op::Permute:
    case Op::Expand:
    case Op::Slice:
    case Op::FloorDiv:
      return 0;
    case Op::Exp:
    case Op::Expm1:
    case Op::Sqrt:
    case Op::Tanh:
    case Op::Recip:
    case Op::Sigmoid:
    case Op::Rsqrt:
    case Op::Softmax:
    case Op::LogSoftmax:
      return kOut;
    case Op::Log:
    case Op::Log1p:
    case Op::Sin:
    case Op::Cos:
    case Op::Erf:
    case Op::Abs:
    case Op::Relu:
    case Op::Silu:
    case Op::Gelu:
    case Op::Var:
    case Op::ReduceProd:
    case Op::Where:
      return 1u;
    case Op::Mul:  // each operand's gradient reads only the other one
      return (needs(1) ? 1u : 0u) | (needs(0) ? 2u : 0u);
    case Op::Matmul:  // as Mul: d/da reads b, d/db reads a
      return (needs(1) ? 1u : 0u) | (needs(0) ? 2u : 0u);
    case Op::Gather:
    case Op::ScatterAdd:  // the index alone
      return 2u;
    case Op::Maximum:
    case Op::Minimum:
      return 1u | 2u;
    case Op::Remainder:
    case Op::Fmod:  // d/da is g; d/db reads both operands
      return needs(1) ? 1u | 2u : 0u;
    case Op::Div:  // a / b: d/da reads b; d/db reads b and the output
      return 2u | (needs(1) ? kOut : 0u);
    case Op::LogSumExp:
    case Op::ReduceMax:
    case Op::ReduceMin:
      return 1u | kOut;
    default:
      return kAll;
  }
}

}  // namespace

namespace {

// "<op>_backward" per op, made once: GradNode names have static storage.
const char* backward_name(Op op) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const OpInfo& info : kOpTable) v.push_back(std::string(info.name) + "_backward");
    return v;
  }();
  return names[static_cast<size_t>(op)].c_str();
}

}  // namespace

void record_rule(Op op, const Attrs& attrs, const Tensor& out, const NodeList& operands,
                 const std::vector<Tensor>& sources) {
  if (non_differentiable(op)) return;
  const VjpRule* rule = vjp_rule(op);
  if (!rule) fail(ErrorKind::NotImplemented, "not implemented: the gradient of ", op_name(op));
  auto ctx = std::make_shared<VjpCtx>();
  ctx->op = op;
  ctx->attrs = attrs;
  Device dev = out.device();
  ctx->needs_grad.reserve(sources.size());  // sized once (see record_node())
  for (auto& s : sources) ctx->needs_grad.push_back(s.defined() && s.requires_grad());
  const unsigned reads = reads_of(op, ctx->needs_grad);
  ctx->inputs.reserve(operands.size());
  for (size_t i = 0; i < operands.size(); ++i)
    ctx->inputs.emplace_back(operands[i], dev, (reads >> std::min<size_t>(i, 6)) & 1u);
  ctx->output = Saved(out.node(), dev, (reads & kOut) != 0);
  record_node(out, sources, backward_name(op),
              [ctx, rule](const Tensor& g) { return (*rule)(*ctx, g); });
}

}  // namespace lt
