// Small node builders for lowering's expansions of library prims (expand_attention.cc,
// expand_conv.cc): the node-level forms of the runtime ops those expansions were traced with, so
// the expanded graph is the one the runtime used to trace (runtime/ops.cc, runtime/indexing.cc).
#pragma once
#include <utility>
#include <vector>

#include "ir/node.h"

namespace lt::nb {

inline NodePtr bin(Op op, NodePtr a, NodePtr b) {
  return make_node(op, {std::move(a), std::move(b)});
}
inline NodePtr with_ints(Op op, NodePtr x, IntList ints) {
  Attrs a;
  a.ints = std::move(ints);
  return make_node(op, {std::move(x)}, a);
}
// A cast to the dtype a value already has is no node (as runtime cast()).
inline NodePtr cast_to(NodePtr x, DType t) {
  if (x->dtype == t) return x;
  Attrs a;
  a.dtype = t;
  return make_node(Op::Cast, {std::move(x)}, a);
}
inline NodePtr reshape(NodePtr x, Shape s) {
  if (x->shape == s) return x;
  return with_ints(Op::Reshape, std::move(x), std::move(s));
}
inline NodePtr expand(NodePtr x, Shape s) {
  if (x->shape == s) return x;
  return with_ints(Op::Expand, std::move(x), std::move(s));
}
inline NodePtr permute(NodePtr x, IntList perm) {
  return with_ints(Op::Permute, std::move(x), std::move(perm));
}
// Dims a and b swapped (Tensor::transpose).
inline NodePtr transpose(NodePtr x, int64_t a, int64_t b) {
  IntList p;
  for (size_t d = 0; d < x->shape.size(); ++d) p.push_back(static_cast<int64_t>(d));
  std::swap(p[static_cast<size_t>(a)], p[static_cast<size_t>(b)]);
  return permute(std::move(x), std::move(p));
}
// The last two dims swapped.
inline NodePtr transposed(NodePtr x) {
  const auto r = static_cast<int64_t>(x->shape.size());
  return transpose(std::move(x), r - 2, r - 1);
}
inline NodePtr matmul(NodePtr a, NodePtr b) { return bin(Op::Matmul, std::move(a), std::move(b)); }
inline NodePtr scaled(NodePtr x, double s) { return bin(Op::Mul, x, make_constant(x->dtype, s)); }

}  // namespace lt::nb
