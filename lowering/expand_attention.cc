#include "lowering/expand_attention.h"

#include <limits>

#include "ir/attention.h"
#include "lowering/node_builders.h"

namespace lt {
namespace {

using nb::bin;
using nb::cast_to;
using nb::matmul;
using nb::scaled;
using nb::transposed;

NodePtr positions(int64_t n, Shape shape) {  // 0, 1, ..., n - 1 read at `shape`
  return nb::reshape(make_iota(n), std::move(shape));
}
// q k^T * scale, with keys after the query's position masked to -inf when causal (top-left
// aligned: key j is visible to query i when j <= i).
NodePtr scores(const NodePtr& q, const NodePtr& k, const AttentionParams& p) {
  NodePtr s = scaled(matmul(q, transposed(k)), p.scale);
  if (!p.causal) return s;
  const int64_t l = q->shape[q->shape.size() - 2], n = k->shape[k->shape.size() - 2];
  NodePtr keep = bin(Op::Le, positions(n, {1, n}), positions(l, {l, 1}));
  return make_node(Op::Where,
                   {keep, s, make_constant(s->dtype, -std::numeric_limits<double>::infinity())});
}
NodePtr row_op(Op op, NodePtr x) {  // softmax / logsumexp / sum over the last dim, kept
  Attrs a;
  a.ints = {-1};
  a.keepdim = op != Op::Softmax;
  return make_node(op, {std::move(x)}, a);
}

}  // namespace

bool expands_attention(const Node& n, const LowerOptions& opts) {
  if (op_info(n.op).cls != OpClass::Attention) return false;
  const Shape &q = n.inputs.at(0)->shape, &v = n.inputs.at(2)->shape;
  return !opts.attention(n.inputs[0]->dtype, q.back(), v.back());
}

NodePtr expand_attention(const Node& n, const NodeList& in) {
  const AttentionParams p = AttentionParams::from(n.op, n.attrs);
  const NodePtr &q = in.at(0), &k = in.at(1), &v = in.at(2);
  const DType t = q->dtype, st = attention_stats_dtype(t);
  NodePtr s = scores(q, k, p);
  if (n.op == Op::AttentionLse) return row_op(Op::LogSumExp, cast_to(s, st));
  NodePtr prob = cast_to(row_op(Op::Softmax, cast_to(s, st)), t);
  if (n.op == Op::Attention) return matmul(prob, v);
  const NodePtr& dout = in.at(3);
  if (n.op == Op::AttentionGradV) return matmul(transposed(prob), dout);
  // dS = P * (dP - D) with D = rowsum(dP * P), the softmax correction, in the statistics dtype.
  NodePtr pf = cast_to(prob, st), dpf = cast_to(matmul(dout, transposed(v)), st);
  NodePtr d = row_op(Op::ReduceSum, bin(Op::Mul, dpf, pf));
  NodePtr dss = scaled(cast_to(bin(Op::Mul, pf, bin(Op::Sub, dpf, d)), t), p.scale);
  if (n.op == Op::AttentionGradQ) return matmul(dss, k);
  return matmul(transposed(dss), q);  // attention_grad_k
}

}  // namespace lt
