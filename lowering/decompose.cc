#include "lowering/decompose.h"

#include <cmath>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "lowering/expand_attention.h"
#include "lowering/expand_conv.h"
#include "lowering/node_builders.h"

namespace lt {
namespace {

NodePtr cnst(DType t, double v) { return make_constant(t, v); }
NodePtr un(Op op, NodePtr x) { return make_node(op, {std::move(x)}); }
NodePtr bin(Op op, NodePtr a, NodePtr b) { return make_node(op, {std::move(a), std::move(b)}); }
// The permutation that swaps the last two of `rank` dims (a batched transpose).
Attrs swap_last_two(size_t rank) {
  Attrs a;
  for (size_t d = 0; d < rank; ++d) a.ints.push_back(static_cast<int64_t>(d));
  std::swap(a.ints[rank - 1], a.ints[rank - 2]);
  return a;
}
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
NodePtr matmul_rule(const Node& n, const NodeList& in) {
  NodePtr a = in[0], b = in[1];
  bool va = a->shape.size() == 1, vb = b->shape.size() == 1;
  if (va) a = reshape(a, {1, a->shape[0]});
  if (vb) b = reshape(b, {b->shape[0], 1});
  Shape sa = a->shape, sb = b->shape;
  int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "matmul");
  // The product is laid out [.., M, N, K] and reduced over K, the innermost loop, so both operands
  // are read along K: A as stored, B through a transpose. For x @ w.T (nn.Linear) that transpose
  // cancels against the user's; for a plain [K, N] B, fusion makes one contiguous transposed copy.
  Shape full = batch;
  full.insert(full.end(), {M, N, K});
  Shape a3 = ba, b3 = bb;
  a3.insert(a3.end(), {M, 1, K});
  b3.insert(b3.end(), {1, N, K});
  NodePtr bt = make_node(Op::Permute, {b}, swap_last_two(sb.size()));
  NodePtr prod = bin(Op::Mul, expand(reshape(a, a3), full), expand(reshape(bt, b3), full));
  Attrs r;
  r.ints = {static_cast<int64_t>(full.size()) - 1};
  NodePtr out = make_node(Op::ReduceSum, {prod}, r);
  return reshape(out, n.shape);
}

NodePtr reduce(Op op, NodePtr x, IntList axes, bool keepdim) {
  Attrs a;
  a.ints = std::move(axes);
  a.keepdim = keepdim;
  return make_node(op, {std::move(x)}, a);
}

// The reduced axes of a reduction-like node, normalized (empty attrs already mean "these axes").
IntList axes_of(const Node& n, const Shape& in) {
  IntList r;
  int64_t rank = static_cast<int64_t>(in.size());
  for (auto a : n.attrs.ints) r.push_back(rank ? (a < 0 ? a + rank : a) : 0);
  return rank ? r : IntList{};
}

NodePtr softmax_rule(const Node& n, const NodeList& in, bool log) {
  auto ax = axes_of(n, in[0]->shape);
  NodePtr m = reduce(Op::ReduceMax, in[0], ax, true);
  NodePtr z = bin(Op::Sub, in[0], m);
  NodePtr e = un(Op::Exp, z);
  NodePtr s = reduce(Op::ReduceSum, e, ax, true);
  // e * (1 / s), as PyTorch's CPU and CUDA kernels do: the reciprocal is per row, so a fused row
  // kernel computes it once and multiplies each element (a divide per element is ~5x the cost).
  return log ? bin(Op::Sub, z, un(Op::Log, s)) : bin(Op::Mul, e, un(Op::Recip, s));
}

NodePtr logsumexp_rule(const Node& n, const NodeList& in) {
  auto ax = axes_of(n, in[0]->shape);
  NodePtr m = reduce(Op::ReduceMax, in[0], ax, true);
  // An all -inf (or +inf) row would give inf - inf = NaN: shift by 0 there instead.
  NodePtr finite = bin(Op::Lt, un(Op::Abs, m), cnst(m->dtype, INFINITY));
  NodePtr shift = make_node(Op::Where, {finite, m, cnst(m->dtype, 0)});
  NodePtr r = bin(
      Op::Add,
      un(Op::Log, reduce(Op::ReduceSum, un(Op::Exp, bin(Op::Sub, in[0], shift)), ax, true)), shift);
  return reshape(r, n.shape);
}

NodePtr var_rule(const Node& n, const NodeList& in) {
  auto ax = axes_of(n, in[0]->shape);
  int64_t count = 1;
  for (auto a : ax) count *= in[0]->shape.empty() ? 1 : in[0]->shape[a];
  NodePtr mean = bin(Op::Mul, reduce(Op::ReduceSum, in[0], ax, true),
                     cnst(n.dtype, count ? 1.0 / count : NAN));
  NodePtr d = bin(Op::Sub, in[0], mean);
  double denom = static_cast<double>(count) - n.attrs.value;
  NodePtr ss = reduce(Op::ReduceSum, bin(Op::Mul, d, d), ax, n.attrs.keepdim);
  return bin(Op::Mul, ss, cnst(n.dtype, denom > 0 ? 1.0 / denom : NAN));
}

NodePtr layer_norm_rule(const Node& n, const NodeList& in) {
  int64_t rank = static_cast<int64_t>(in[0]->shape.size()), k = n.attrs.ints[0];
  IntList ax;
  int64_t count = 1;
  for (int64_t d = rank - k; d < rank; ++d) ax.push_back(d), count *= in[0]->shape[d];
  DType t = n.dtype;
  NodePtr inv = cnst(t, count ? 1.0 / count : NAN);
  NodePtr xc = bin(Op::Sub, in[0], bin(Op::Mul, reduce(Op::ReduceSum, in[0], ax, true), inv));
  NodePtr var = bin(Op::Mul, reduce(Op::ReduceSum, bin(Op::Mul, xc, xc), ax, true), inv);
  NodePtr y =
      bin(Op::Mul, xc, un(Op::Recip, un(Op::Sqrt, bin(Op::Add, var, cnst(t, n.attrs.value)))));
  size_t next = 1;
  if (n.attrs.ints[1]) y = bin(Op::Mul, y, in[next++]);
  if (n.attrs.ints[2]) y = bin(Op::Add, y, in[next++]);
  return y;
}

NodePtr gelu_rule(const Node& n, const NodeList& in) {
  DType t = n.dtype;
  const NodePtr& x = in[0];
  NodePtr half_x = bin(Op::Mul, x, cnst(t, 0.5));
  if (n.attrs.stream == 0)  // 0.5 x (1 + erf(x / sqrt 2))
    return bin(Op::Mul, half_x,
               bin(Op::Add, cnst(t, 1), un(Op::Erf, bin(Op::Mul, x, cnst(t, M_SQRT1_2)))));
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  NodePtr x3 = bin(Op::Mul, bin(Op::Mul, x, x), x);
  NodePtr inner = bin(Op::Mul, cnst(t, M_2_SQRTPI * M_SQRT1_2),
                      bin(Op::Add, x, bin(Op::Mul, x3, cnst(t, 0.044715))));
  return bin(Op::Mul, half_x, bin(Op::Add, cnst(t, 1), un(Op::Tanh, inner)));
}

// A composite op of float16/bfloat16 values computes in float32 and rounds once at the end, as
// PyTorch's kernels do (their "opmath"). Expanded op by op in 16 bits, every intermediate and
// constant was rounded: on random bfloat16 inputs layer_norm matched PyTorch's result in 63% of
// the elements (errors up to 0.09 on values up to 11), softmax in 24%, the tanh GELU in 57% (a
// relative error up to 0.75 where 1 + tanh cancels); each rounding also cost a GPU kernel two
// instructions.
DecompRule in_opmath(DecompRule rule) {
  return [rule = std::move(rule)](const Node& n, const NodeList& in) {
    if (!is_half(n.dtype)) return rule(n, in);
    NodeList wide;
    for (const NodePtr& x : in) wide.push_back(nb::cast_to(x, opmath_dtype(x->dtype)));
    Node n32(n);
    n32.dtype = DType::Float32;
    return nb::cast_to(rule(n32, wide), n.dtype);
  };
}

const std::map<Op, DecompRule>& rules() {
  static const std::map<Op, DecompRule> table = {
      {Op::Relu,
       [](const Node& n, const NodeList& in) { return bin(Op::Maximum, in[0], cnst(n.dtype, 0)); }},
      {Op::Sigmoid, in_opmath([](const Node& n, const NodeList& in) {
         return un(Op::Recip, bin(Op::Add, cnst(n.dtype, 1), un(Op::Exp, un(Op::Neg, in[0]))));
       })},
      {Op::Rsqrt, in_opmath([](const Node& n, const NodeList& in) {
         return un(Op::Recip, un(Op::Sqrt, in[0]));
       })},
      {Op::Mean, in_opmath([](const Node& n, const NodeList& in) {
         int64_t count = numel(in[0]->shape) / std::max<int64_t>(1, numel(n.shape));
         NodePtr s = make_node(Op::ReduceSum, {in[0]}, n.attrs);
         // mean of an empty reduction is NaN, as in PyTorch (0 * inf would hide it).
         return bin(Op::Mul, s, cnst(n.dtype, count ? 1.0 / static_cast<double>(count) : NAN));
       })},
      {Op::Matmul, matmul_rule},
      {Op::Silu, in_opmath([](const Node& n, const NodeList& in) {
         return bin(Op::Mul, in[0],
                    un(Op::Recip, bin(Op::Add, cnst(n.dtype, 1), un(Op::Exp, un(Op::Neg, in[0])))));
       })},
      {Op::Gelu, in_opmath(gelu_rule)},
      {Op::Softmax,
       in_opmath([](const Node& n, const NodeList& in) { return softmax_rule(n, in, false); })},
      {Op::LogSoftmax,
       in_opmath([](const Node& n, const NodeList& in) { return softmax_rule(n, in, true); })},
      {Op::LogSumExp, in_opmath(logsumexp_rule)},
      {Op::Var, in_opmath(var_rule)},
      {Op::LayerNorm, in_opmath(layer_norm_rule)},
  };
  return table;
}

// The rule expanding library prim `n` where the backend (`opts`) has no library step for it, or
// nullptr.
const DecompRule* library_expansion(const Node& n, const LowerOptions& opts) {
  static const DecompRule attention = expand_attention, conv = expand_conv;
  if (expands_attention(n, opts)) return &attention;
  if (expands_conv(n, opts)) return &conv;
  return nullptr;
}

struct Flattener {
  const LowerOptions& opts;
  PrimGraph pg;
  std::unordered_map<const Node*, int> index;  // node -> prim graph index
  std::map<std::vector<uint64_t>, int> cse;    // (hash, input index, operand indices) -> index
  NodeList keep;  // stand-ins and rule outputs stay alive: addresses are keys

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

  // An opaque leaf standing for prim node `in` (hashing as `hash`), for a rule to build on.
  NodePtr stand_in(int in, const Hash128& hash) {
    auto s = std::make_shared<Node>();
    s->op = Op::Param;
    s->dtype = pg.nodes[static_cast<size_t>(in)].dtype;
    s->shape = pg.nodes[static_cast<size_t>(in)].shape;
    s->hash = hash;
    keep.push_back(s);
    index.emplace(s.get(), in);
    return s;
  }

  // Adds node n whose operands are already indexed; composites are rewritten by their rule,
  // recursively, into primitives. Returns n's prim graph index.
  int add_node(const Node& n, int32_t source) {
    std::vector<int> ins;
    for (auto& c : n.inputs) ins.push_back(lookup(c, source));
    const DecompRule* expansion = library_expansion(n, opts);
    if (op_info(n.op).primitive && !expansion) return add(n, std::move(ins), -1, source);
    const DecompRule* rule = expansion ? expansion : decomposition(n.op);
    if (!rule) fail(ErrorKind::NotImplemented, "not implemented: decomposition of ", op_name(n.op));
    // The rule sees opaque stand-ins for the operands (rules use only their dtype and shape).
    NodeList operands;
    for (size_t i = 0; i < ins.size(); ++i) operands.push_back(stand_in(ins[i], n.inputs[i]->hash));
    NodePtr out = (*rule)(n, operands);
    keep.push_back(out);  // its nodes' addresses are keys in `index`: they must not be reused
    return lookup(out, n.source >= 0 ? n.source : source);
  }

  // permute(a @ b) swapping the last two dims, as b^T @ a^T: the GEMM writes the product in the
  // layout its reader wants. Otherwise the reader (a weight's SGD update w - lr * grad, whose
  // grad is (x^T dy)^T) walks the GEMM's output column by column: strided loads on a CPU,
  // uncoalesced ones on a GPU. `mm` was not added (see decompose); its operands were.
  int add_transposed_product(const Node& permute, const Node& mm) {
    NodeList t;
    for (size_t i : {size_t{1}, size_t{0}}) {
      NodePtr s = stand_in(index.at(mm.inputs[i].get()), mm.inputs[i]->hash);
      t.push_back(make_node(Op::Permute, {s}, swap_last_two(s->shape.size())));
    }
    NodePtr out = make_node(Op::Matmul, std::move(t));
    keep.push_back(out);
    const int32_t source = permute.source >= 0 ? permute.source : mm.source;
    return lookup(out, source);
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

namespace {

bool swaps_last_two(const Node& p) {
  const auto& perm = p.attrs.ints;
  const size_t r = perm.size();
  if (r < 2 || perm[r - 1] != static_cast<int64_t>(r - 2) ||
      perm[r - 2] != static_cast<int64_t>(r - 1))
    return false;
  for (size_t d = 0; d + 2 < r; ++d)
    if (perm[d] != static_cast<int64_t>(d)) return false;
  return true;
}

// Matmuls read only through one permute that swaps their last two dims (and not outputs of the
// graph): Flattener::add_transposed_product computes them at that permute instead.
std::unordered_map<const Node*, const Node*> transposed_products(const Graph& g) {
  std::unordered_map<const Node*, int> users;
  for (const Node* n : g.order)
    for (const auto& c : n->inputs) ++users[c.get()];
  for (const Node* r : g.roots) ++users[r];
  std::unordered_map<const Node*, const Node*> by_permute;  // permute -> its matmul
  for (const Node* n : g.order) {
    if (n->op != Op::Permute || !swaps_last_two(*n)) continue;
    const Node* m = n->inputs[0].get();
    if (m->op == Op::Matmul && users[m] == 1 && m->inputs[0]->shape.size() >= 2 &&
        m->inputs[1]->shape.size() >= 2)
      by_permute.emplace(n, m);
  }
  return by_permute;
}

}  // namespace

PrimGraph decompose(const Graph& g, const LowerOptions& opts) {
  Flattener f{opts};
  const auto transposed = transposed_products(g);
  std::unordered_set<const Node*> deferred;  // matmuls their permute computes
  for (const auto& [p, m] : transposed) deferred.insert(m);
  // g.order is a post order, so every operand is indexed before its users (no deep recursion).
  for (const Node* n : g.order) {
    if (deferred.count(n)) continue;
    int id;
    if (n->op == Op::Param || n->op == Op::Scalar)
      id = f.add(*n, {}, g.input_of.at(n), n->source);
    else if (auto t = transposed.find(n); t != transposed.end())
      id = f.add_transposed_product(*n, *t->second);
    else
      id = f.add_node(*n, n->source);
    f.index.emplace(n, id);
  }
  for (const Node* r : g.roots) f.pg.outputs.push_back(f.index.at(r));
  f.pg.num_inputs = static_cast<int>(g.inputs.size());
  return std::move(f.pg);
}

}  // namespace lt
