#include "ir/attention.h"

#include <string>

#include "ir/error.h"

namespace lt {

Attrs AttentionParams::attrs() const {
  Attrs a;
  a.ints = {causal ? 1 : 0};
  a.value = scale;
  return a;
}

AttentionParams AttentionParams::from(Op op, const Attrs& a) {
  if (a.ints.size() != 1 || (a.ints[0] != 0 && a.ints[0] != 1))
    fail(ErrorKind::Runtime, op_name(op), ": malformed attributes (expected {causal} of 0 or 1)");
  AttentionParams p;
  p.causal = a.ints[0] == 1;
  p.scale = a.value;
  return p;
}

DType attention_stats_dtype(DType t) { return opmath_dtype(t); }

Inferred infer_attention(Op op, const NodeList& in, const Attrs& a) {
  const std::string name(op_name(op));
  AttentionParams::from(op, a);
  const size_t want = op == Op::Attention || op == Op::AttentionLse ? 3 : 6;
  if (in.size() != want)
    fail(ErrorKind::Runtime, name, ": expected ", want, " operands, got ", in.size());
  const Shape &q = in[0]->shape, &k = in[1]->shape, &v = in[2]->shape;
  const DType t = in[0]->dtype, st = attention_stats_dtype(t);
  auto shapes = [&] {
    return "query " + shape_str(q) + ", key " + shape_str(k) + ", value " + shape_str(v);
  };
  if (!is_floating(t) || in[1]->dtype != t || in[2]->dtype != t)
    fail(ErrorKind::Runtime, name, ": expected floating query, key and value of one dtype, got ",
         dtype_name(t), ", ", dtype_name(in[1]->dtype), " and ", dtype_name(in[2]->dtype));
  if (q.size() < 2 || k.size() != q.size() || v.size() != q.size() ||
      !std::equal(q.begin(), q.end() - 2, k.begin()) ||
      !std::equal(q.begin(), q.end() - 2, v.begin()) || q.back() != k.back() ||
      k.end()[-2] != v.end()[-2])
    fail(ErrorKind::Runtime, name, ": shapes do not match: ", shapes(),
         " (expected [..., L, E], [..., S, E], [..., S, Ev] with the same batch dims)");
  Shape out = q;
  out.back() = v.back();
  Shape rows = q;
  rows.back() = 1;
  if (want == 6) {
    if (in[3]->shape != out || in[3]->dtype != t)
      fail(ErrorKind::Runtime, name, ": grad_output ", shape_str(in[3]->shape), " ",
           dtype_name(in[3]->dtype), " does not match the output ", shape_str(out), " of ",
           shapes());
    for (int i : {4, 5})
      if (in[i]->shape != rows || in[i]->dtype != st)
        fail(ErrorKind::Runtime, name, ": expected row statistics ", shape_str(rows), " ",
             dtype_name(st), ", got ", shape_str(in[i]->shape), " ", dtype_name(in[i]->dtype));
  }
  switch (op) {
    case Op::Attention:
      return {t, out};
    case Op::AttentionLse:
      return {st, rows};
    case Op::AttentionGradQ:
      return {t, q};
    case Op::AttentionGradK:
      return {t, k};
    default:
      return {t, v};
  }
}

}  // namespace lt
