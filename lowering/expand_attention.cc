#include "lowering/expand_attention.h"

#include <limits>

#include "ir/attention.h"
#include "lowering/node_builders.h"

namespace lt {
namespace attention_expansion {
namespace {

NodePtr positions(int64_t n, Shape shape) {  // 0, 1, ..., n - 1 read at `shape`
  return nb::reshape(make_iota(n), std::move(shape));
}
// q k^T * scale, with keys after the query's position masked to -inf when causal (top-left
// aligned: key j is visible to query i when j <= i).
NodePtr scores(const NodePtr& q, const NodePtr& k, const AttentionParams& p) {
  NodePtr s = nb::scaled(nb::matmul(q, nb::transposed(k)), p.scale);
  if (!p.causal) return s;
  const int64_t l = q->shape[q->shape.size() - 2], n = k->shape[k->shape.size() - 2];
  NodePtr keep = nb::bin(Op::Le, positions(n, {1, n}), positions(l, {l, 1}));
  return make_node(Op::Where,
                   {keep, s, make_constant(s->dtype, -std::numeric_limits<double>::infinity())});
}
NodePtr row_op(Op op, NodePtr x) {  // softmax / logsumexp / sum over the last dim, kept
  Attrs a;
  a.ints = {-1};
  a.keepdim = op != Op::Softmax;
  return make_node(op, {std::move(x)}, a);
}

bool expands(const Node& n, const LowerOptions& opts) {
  if (op_info(n.op).cls != OpClass::Attention) return false;
  const Shape &q = n.inputs.at(0)->shape, &v = n.inputs.at(2)->shape;
  return !opts.attention(n.inputs[0]->dtype, q.back(), v.back());
}

NodePtr expansion(const Node& n, const NodeList& in) {
  const AttentionParams p = AttentionParams::from(n.op, n.attrs);
  const NodePtr &q = in.at(0), &k = in.at(1), &v = in.at(2);
  const DType t = q->dtype, st = attention_stats_dtype(t);
  NodePtr s = scores(q, k, p);
  if (n.op == Op::AttentionLse) return row_op(Op::LogSumExp, nb::cast_to(s, st));
  NodePtr prob = nb::cast_to(row_op(Op::Softmax, nb::cast_to(s, st)), t);
  if (n.op == Op::Attention) return nb::matmul(prob, v);
  const NodePtr& dout = in.at(3);
  if (n.op == Op::AttentionGradV) return nb::matmul(nb::transposed(prob), dout);
  // dS = P * (dP - D) with D = rowsum(dP * P), the softmax correction, in the statistics dtype.
  NodePtr pf = nb::cast_to(prob, st), dpf = nb::cast_to(nb::matmul(dout, nb::transposed(v)), st);
  NodePtr d = row_op(Op::ReduceSum, nb::bin(Op::Mul, dpf, pf));
  NodePtr dss = nb::scaled(nb::cast_to(nb::bin(Op::Mul, pf, nb::bin(Op::Sub, dpf, d)), t), p.scale);
  if (n.op == Op::AttentionGradQ) return nb::matmul(dss, k);
  return nb::matmul(nb::transposed(dss), q);  // attention_grad_k
}

}  // namespace
}  // namespace attention_expansion

bool expands_attention(const Node& n, const LowerOptions& opts) {
  return attention_expansion::expands(n, opts);
}

NodePtr expand_attention(const Node& n, const NodeList& in) {
  return attention_expansion::expansion(n, in);
}

}  // namespace lt
