#include "lowering/simplify.h"

#include <cstring>
#include <map>
#include <optional>

#include "ir/half.h"
#include "ir/scalar_ops.h"

namespace lt {
namespace {

bool is_const(const PNode& n, double v) { return n.op == Op::Constant && n.attrs.value == v; }

// Folding computes what the reference interpreter would (ir/scalar_ops.h): the op's floating form
// on operands rounded to the node's dtype, the result rounded again (round_to_dtype). Only floating
// nodes fold: integer ones would need the integer forms and wrapping to the width, and folding
// them would change which graphs compile to what (they never folded).
std::optional<double> fold_unary(Op op, double x) {
  if (auto f = scalar_rule(op).f1) return f.fn(x);
  return std::nullopt;
}
std::optional<double> fold_binary(Op op, double a, double b) {
  if (auto f = scalar_rule(op).f2) return f.fn(a, b);
  return std::nullopt;
}

class Simplifier {
 public:
  explicit Simplifier(const PrimGraph& g) : in_(g) {}

  PrimGraph run() {
    std::vector<int> map(in_.nodes.size(), -1);
    for (size_t i = 0; i < in_.nodes.size(); ++i) {
      PNode n = in_.nodes[i];
      for (int& x : n.inputs) x = map[x];
      map[i] = rewrite(std::move(n));
    }
    out_.num_inputs = in_.num_inputs;
    for (int o : in_.outputs) out_.outputs.push_back(map[o]);
    return dce();
  }

 private:
  const PNode& at(int i) const { return out_.nodes[i]; }

  // Adds n (CSE: an identical node already added is reused).
  int emit(PNode n) {
    std::vector<int64_t> key = {static_cast<int64_t>(n.op),
                                static_cast<int64_t>(n.dtype),
                                n.input_index,
                                static_cast<int64_t>(n.attrs.dtype),
                                n.attrs.keepdim,
                                n.attrs.stream};
    int64_t vbits;
    std::memcpy(&vbits, &n.attrs.value, sizeof vbits);
    key.push_back(vbits);
    key.push_back(static_cast<int64_t>(n.shape.size()));
    key.insert(key.end(), n.shape.begin(), n.shape.end());
    key.push_back(static_cast<int64_t>(n.attrs.ints.size()));
    key.insert(key.end(), n.attrs.ints.begin(), n.attrs.ints.end());
    key.push_back(-1);
    key.insert(key.end(), n.inputs.begin(), n.inputs.end());
    // Graph inputs are distinct even when they look alike; rand draws are distinct by their
    // operands.
    auto it = cse_.find(key);
    if (it != cse_.end()) return it->second;
    out_.nodes.push_back(std::move(n));
    int id = static_cast<int>(out_.nodes.size()) - 1;
    cse_.emplace(std::move(key), id);
    return id;
  }

  // x stands for a node of shape `shape` and dtype `t`: usable only when both match.
  bool same(int x, const PNode& n) const {
    return at(x).shape == n.shape && at(x).dtype == n.dtype;
  }

  int constant(const PNode& like, double v) {
    PNode c;
    c.op = Op::Constant;
    c.dtype = like.dtype;
    c.shape = like.shape;
    c.attrs.value = round_to_dtype(v, like.dtype);
    c.source = like.source;
    return emit(std::move(c));
  }

  int rewrite(PNode n) {
    if (n.input_index >= 0 || n.inputs.empty()) return emit(std::move(n));
    const OpClass cls = op_info(n.op).cls;
    const int a = n.inputs[0];
    const int b = n.inputs.size() > 1 ? n.inputs[1] : -1;

    if (cls == OpClass::Binary) {
      // Identities: the surviving operand must already have the result's shape and dtype.
      bool b_neutral = (n.op == Op::Add || n.op == Op::Sub) ? is_const(at(b), 0)
                       : (n.op == Op::Mul || n.op == Op::Div || n.op == Op::Pow)
                           ? is_const(at(b), 1)
                           : false;
      if (b_neutral && same(a, n)) return a;
      bool a_neutral =
          (n.op == Op::Add && is_const(at(a), 0)) || (n.op == Op::Mul && is_const(at(a), 1));
      if (a_neutral && same(b, n)) return b;
      if (is_floating(n.dtype) && at(a).op == Op::Constant && at(b).op == Op::Constant)
        if (auto v = fold_binary(n.op, round_to_dtype(at(a).attrs.value, n.dtype),
                                 round_to_dtype(at(b).attrs.value, n.dtype)))
          return constant(n, *v);
    }
    if (cls == OpClass::Unary) {
      if (n.op == Op::Neg && at(a).op == Op::Neg) return at(a).inputs[0];
      if (is_floating(n.dtype) && at(a).op == Op::Constant)
        if (auto v = fold_unary(n.op, round_to_dtype(at(a).attrs.value, n.dtype)))
          return constant(n, *v);
    }
    if (n.op == Op::Cast && at(a).dtype == n.dtype) return a;
    // cast(cast(x, wide), x's dtype) is x when `wide` holds every value of x's dtype exactly
    // (x.float().bfloat16(): a round trip that autocast's casts and user code make).
    if (n.op == Op::Cast && at(a).op == Op::Cast && at(at(a).inputs[0]).dtype == n.dtype &&
        widens_exactly(n.dtype, at(a).dtype))
      return at(a).inputs[0];
    if (n.op == Op::Reshape) {
      if (at(a).shape == n.shape) return a;
      if (at(a).op == Op::Reshape) n.inputs[0] = at(a).inputs[0];
      if (at(n.inputs[0]).shape == n.shape) return n.inputs[0];
    }
    if (n.op == Op::Permute) {
      if (at(a).op == Op::Permute) {  // permute(permute(y, p), q) = permute(y, p[q[i]])
        const auto& p = at(a).attrs.ints;
        IntList r(n.attrs.ints.size());
        for (size_t i = 0; i < r.size(); ++i) r[i] = p[n.attrs.ints[i]];
        n.attrs.ints = std::move(r);
        n.inputs[0] = at(a).inputs[0];
      }
      bool identity = true;
      for (size_t i = 0; i < n.attrs.ints.size(); ++i)
        identity &= n.attrs.ints[i] == static_cast<int64_t>(i);
      if (identity) return n.inputs[0];
    }
    if (n.op == Op::Expand) {
      if (at(a).op == Op::Expand) n.inputs[0] = at(a).inputs[0];
      if (at(n.inputs[0]).shape == n.shape) return n.inputs[0];
    }
    if (cls == OpClass::Reduce && at(a).op == Op::Expand) {
      if (auto r = reduce_of_expand(n)) return *r;
    }
    return emit(std::move(n));
  }

  // sum/max/min over axes that an expand only broadcast: no reduction loop is needed.
  std::optional<int> reduce_of_expand(const PNode& n) {
    const PNode& e = at(n.inputs[0]);
    const PNode& x = at(e.inputs[0]);
    if (x.shape.size() != e.shape.size()) return std::nullopt;
    std::vector<bool> reduced(e.shape.size(), false);
    const auto rank = static_cast<int64_t>(e.shape.size());
    for (auto ax : n.attrs.ints) {
      if (ax < -rank || ax >= rank) return std::nullopt;
      reduced[ax < 0 ? ax + rank : ax] = true;
    }
    int64_t count = 1;
    for (size_t d = 0; d < e.shape.size(); ++d) {
      if (reduced[d] && x.shape[d] != 1) return std::nullopt;            // a real reduction axis
      if (!reduced[d] && x.shape[d] != e.shape[d]) return std::nullopt;  // still broadcast after
      if (reduced[d]) count *= e.shape[d];
    }
    if (n.op == Op::ReduceProd || (n.op == Op::ReduceSum && !is_floating(n.dtype)))
      return std::nullopt;
    int v = e.inputs[0];
    if (x.shape != n.shape) {
      PNode r;
      r.op = Op::Reshape;
      r.dtype = x.dtype;
      r.shape = n.shape;
      r.attrs.ints = n.shape;
      r.inputs = {v};
      r.source = n.source;
      v = emit(std::move(r));
    }
    if (at(v).dtype != n.dtype) return std::nullopt;
    if (n.op != Op::ReduceSum || count == 1) return v;
    PNode m;
    m.op = Op::Mul;
    m.dtype = n.dtype;
    m.shape = n.shape;
    m.source = n.source;
    PNode c;
    c.op = Op::Constant;
    c.dtype = n.dtype;
    c.attrs.value = static_cast<double>(count);
    m.inputs = {v, emit(std::move(c))};
    return emit(std::move(m));
  }

  // Keeps what the outputs need, plus every graph input's leaf, in the original order.
  PrimGraph dce() {
    std::vector<bool> live(out_.nodes.size(), false);
    for (int o : out_.outputs) live[o] = true;
    for (size_t i = out_.nodes.size(); i-- > 0;) {
      if (out_.nodes[i].input_index >= 0) live[i] = true;
      if (live[i])
        for (int x : out_.nodes[i].inputs) live[x] = true;
    }
    PrimGraph r;
    r.num_inputs = out_.num_inputs;
    std::vector<int> map(out_.nodes.size(), -1);
    for (size_t i = 0; i < out_.nodes.size(); ++i) {
      if (!live[i]) continue;
      PNode n = out_.nodes[i];
      for (int& x : n.inputs) x = map[x];
      r.nodes.push_back(std::move(n));
      map[i] = static_cast<int>(r.nodes.size()) - 1;
    }
    for (int o : out_.outputs) r.outputs.push_back(map[o]);
    return r;
  }

  const PrimGraph& in_;
  PrimGraph out_;
  std::map<std::vector<int64_t>, int> cse_;
};

}  // namespace

PrimGraph simplify(const PrimGraph& g) { return Simplifier(g).run(); }

}  // namespace lt
