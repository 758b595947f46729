#include "lowering/decompose.h"

#include <cmath>
#include <map>
#include <unordered_map>

#include "ir/error.h"

namespace lt {
namespace {

NodePtr cnst(DType t, double v) { return make_constant(t, v); }
NodePtr un(Op op, NodePtr x) { return make_node(op, {std::move(x)}); }
NodePtr bin(Op op, NodePtr a, NodePtr b) { return make_node(op, {std::move(a), std::move(b)}); }
NodePtr reshape(NodePtr x, Shape s) {
  if (x->shape == s) return x;
  Attrs a;
  a.ints = std::move(s);
  return make_node(Op::Reshape, {std::move(x)}, a);
}
NodePtr expand(NodePtr x, Shape s) {
  if (x->shape == s) return x;
  Attrs a;
  a.ints = std::move(s);
  return make_node(Op::Expand, {std::move(x)}, a);
}

// matmul as broadcast-multiply and a sum over K: a[..., M, K, 1] * b[..., 1, K, N] -> sum(-2).
// The loop kernel this fuses into is correct everywhere; library matmul replaces it per backend.
NodePtr matmul_rule(const Node& n, const std::vector<NodePtr>& in) {
  NodePtr a = in[0], b = in[1];
  bool va = a->shape.size() == 1, vb = b->shape.size() == 1;
  if (va) a = reshape(a, {1, a->shape[0]});
  if (vb) b = reshape(b, {b->shape[0], 1});
  Shape sa = a->shape, sb = b->shape;
  int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "matmul");
  Shape full = batch;
  full.insert(full.end(), {M, K, N});
  Shape a3 = ba, b3 = bb;
  a3.insert(a3.end(), {M, K, 1});
  b3.insert(b3.end(), {1, K, N});
  NodePtr prod = bin(Op::Mul, expand(reshape(a, a3), full), expand(reshape(b, b3), full));
  Attrs r;
  r.ints = {static_cast<int64_t>(full.size()) - 2};
  NodePtr out = make_node(Op::ReduceSum, {prod}, r);
  return reshape(out, n.shape);
}

const std::map<Op, DecompRule>& rules() {
  static const std::map<Op, DecompRule> table = {
      {Op::Relu, [](const Node& n, const std::vector<NodePtr>& in) { return bin(Op::Maximum, in[0], cnst(n.dtype, 0)); }},
      {Op::Sigmoid,
       [](const Node& n, const std::vector<NodePtr>& in) {
         return un(Op::Recip, bin(Op::Add, cnst(n.dtype, 1), un(Op::Exp, un(Op::Neg, in[0]))));
       }},
      {Op::Rsqrt, [](const Node& n, const std::vector<NodePtr>& in) { return un(Op::Recip, un(Op::Sqrt, in[0])); }},
      {Op::Mean,
       [](const Node& n, const std::vector<NodePtr>& in) {
         int64_t count = numel(in[0]->shape) / std::max<int64_t>(1, numel(n.shape));
         NodePtr s = make_node(Op::ReduceSum, {in[0]}, n.attrs);
         // mean of an empty reduction is NaN, as in PyTorch (0 * inf would hide it).
         return bin(Op::Mul, s, cnst(n.dtype, count ? 1.0 / static_cast<double>(count) : NAN));
       }},
      {Op::Matmul, matmul_rule},
  };
  return table;
}

struct Flattener {
  PrimGraph pg;
  std::unordered_map<const Node*, int> index;  // node -> prim graph index
  std::map<std::vector<uint64_t>, int> cse;     // (hash, input index, operand indices) -> index
  std::vector<NodePtr> keep;                    // stand-ins and rule outputs stay alive: addresses are keys

  int add(const Node& n, std::vector<int> ins, int input_index, int32_t source) {
    // Graph inputs are distinct by input index; everything else by structure (CSE).
    std::vector<uint64_t> key = {n.hash.lo, n.hash.hi, static_cast<uint64_t>(input_index + 1)};
    for (int i : ins) key.push_back(static_cast<uint64_t>(i));
    auto it = cse.find(key);
    if (it != cse.end()) return it->second;
    pg.nodes.push_back(PNode{n.op, n.dtype, n.shape, n.attrs, std::move(ins), input_index,
                             n.source >= 0 ? n.source : source});
    int id = static_cast<int>(pg.nodes.size()) - 1;
    cse.emplace(std::move(key), id);
    return id;
  }

  // Adds node n whose operands are already indexed; composites are rewritten by their rule,
  // recursively, into primitives. Returns n's prim graph index.
  int add_node(const Node& n, int32_t source) {
    std::vector<int> ins;
    for (auto& c : n.inputs) ins.push_back(lookup(c, source));
    if (op_info(n.op).primitive) return add(n, std::move(ins), -1, source);
    const DecompRule* rule = decomposition(n.op);
    if (!rule) fail(ErrorKind::NotImplemented, "not implemented: decomposition of ", op_name(n.op));
    // The rule sees opaque stand-ins for the operands (rules use only their dtype and shape).
    std::vector<NodePtr> operands;
    for (size_t i = 0; i < ins.size(); ++i) {
      auto s = std::make_shared<Node>();
      s->op = Op::Param;
      s->dtype = pg.nodes[ins[i]].dtype;
      s->shape = pg.nodes[ins[i]].shape;
      s->hash = n.inputs[i]->hash;
      keep.push_back(s);
      index.emplace(s.get(), ins[i]);
      operands.push_back(s);
    }
    NodePtr out = (*rule)(n, operands);
    keep.push_back(out);  // its nodes' addresses are keys in `index`: they must not be reused
    return lookup(out, n.source >= 0 ? n.source : source);
  }

  int lookup(const NodePtr& n, int32_t source) {
    auto it = index.find(n.get());
    if (it != index.end()) return it->second;
    int id = add_node(*n, source);
    index.emplace(n.get(), id);
    return id;
  }
};

}  // namespace

const DecompRule* decomposition(Op op) {
  auto it = rules().find(op);
  return it == rules().end() ? nullptr : &it->second;
}

PrimGraph decompose(const Graph& g) {
  Flattener f;
  // g.order is a post order, so every operand is indexed before its users (no deep recursion).
  for (const Node* n : g.order) {
    int id = (n->op == Op::Param || n->op == Op::Scalar) ? f.add(*n, {}, g.input_of.at(n), n->source)
                                                          : f.add_node(*n, n->source);
    f.index.emplace(n, id);
  }
  for (const Node* r : g.roots) f.pg.outputs.push_back(f.index.at(r));
  f.pg.num_inputs = static_cast<int>(g.inputs.size());
  return std::move(f.pg);
}

}  // namespace lt
