#include "ir/symbolic_graph.h"

#include <algorithm>
#include <map>

#include "ir/error.h"

namespace lt {
namespace {

// How far from a dim's end a slice bound is still read as "the end minus c" (x[:, -1], x[:, 1:],
// x[:, :-2]) rather than as a constant.
constexpr int64_t kSliceEndSlack = 2;

// Whether node n's attrs.ints are sizes: what Analysis::shape_of reads as size attributes.
bool has_size_attrs(const Node& n) {
  switch (op_info(n.op).cls) {
    case OpClass::Reshape:
    case OpClass::Expand:
    case OpClass::Slice:
    case OpClass::Rand:
      return true;
    default:
      return false;
  }
}

// The program apart from sizes: per node its op, dtypes, flags, its attributes that are no sizes
// (all of attrs.ints where size_attrs[i] is empty, or for ops without size attributes when
// size_attrs is null), its scalar attribute and operand positions; per leaf its input number; the
// roots.
Hash128 structure_hash(const Graph& g, const std::vector<SymShape>* size_attrs) {
  PtrMap<Node, int> index(g.order.size());
  Hasher h(0x737472);
  for (size_t i = 0; i < g.order.size(); ++i) {
    const Node& n = *g.order[i];
    index.emplace(&n, static_cast<int>(i));
    h.add(static_cast<uint64_t>(n.op) | static_cast<uint64_t>(n.dtype) << 8 |
          static_cast<uint64_t>(n.attrs.dtype) << 16 |
          static_cast<uint64_t>(n.attrs.keepdim) << 24);
    h.add(n.shape.size());
    if (size_attrs ? (*size_attrs)[i].empty() : !has_size_attrs(n)) {
      h.add(n.attrs.ints.size());
      for (int64_t v : n.attrs.ints) h.add(static_cast<uint64_t>(v));
    } else {
      h.add(n.attrs.ints.size() | (1ull << 40));
    }
    h.add_double(n.attrs.value).add(static_cast<uint64_t>(n.attrs.stream));
    for (const auto& in : n.inputs) h.add(static_cast<uint64_t>(*index.find(in.get())));
    if (const int* input = g.input_of.find(&n)) h.add(0x1ea7ull ^ (uint64_t(*input) << 8));
  }
  for (const Node* r : g.roots) h.add(static_cast<uint64_t>(*index.find(r)));
  return h.digest();
}

class Analysis {
 public:
  Analysis(const Graph& g, SymbolicGraph& sg) : g_(g), sg_(sg) {}

  void run(std::span<const DynamicDim> dynamic) {
    make_symbols(dynamic);
    index_.reserve(g_.order.size());
    sg_.shapes.resize(g_.order.size());
    sg_.size_attrs.resize(g_.order.size());
    for (size_t i = 0; i < g_.order.size(); ++i) {
      index_.emplace(g_.order[i], static_cast<int>(i));
      const Node& n = *g_.order[i];
      SymShape s = shape_of(n, sg_.size_attrs[i]);
      if (s.size() != n.shape.size())
        fail(ErrorKind::Runtime, "symbolic shapes: ", op_name(n.op), " gave rank ", s.size(),
             " for a node of shape ", shape_str(n.shape));
      for (size_t d = 0; d < s.size(); ++d) {
        if (sg_.env.hint(s[d]) != n.shape[d])
          fail(ErrorKind::Runtime, "symbolic shapes: ", op_name(n.op), " dim ", d, " is ",
               s[d].str(), " = ", sg_.env.hint(s[d]), " but the node's size is ", n.shape[d]);
        learn(s[d]);
      }
      sg_.shapes[i] = std::move(s);
    }
    // Shapes made before an equality was solved still name the solved symbol.
    for (auto* list : {&sg_.shapes, &sg_.size_attrs})
      for (SymShape& s : *list)
        for (SizeExpr& d : s)
          if (!d.is_const()) d = sg_.env.simplify(d);
    sg_.key = key();
  }

 private:
  // Duck sizing: dynamic input dims of one size share a symbol; sizes 0 and 1 stay static.
  void make_symbols(std::span<const DynamicDim> dynamic) {
    std::vector<DynamicDim> dims(dynamic.begin(), dynamic.end());
    std::sort(dims.begin(), dims.end());
    dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
    for (const DynamicDim& d : dims) {
      if (d.input < 0 || d.input >= static_cast<int>(g_.inputs.size())) continue;
      const Node& leaf = *g_.inputs[d.input];
      if (d.dim < 0 || d.dim >= static_cast<int>(leaf.shape.size())) continue;
      const int64_t v = leaf.shape[d.dim];
      if (v < ShapeEnv::kMinSymbolValue) continue;
      auto [it, fresh] = symbol_of_value_.emplace(v, 0);
      if (fresh) {
        it->second = sg_.env.add_symbol(v);
        sg_.symbol_dims.push_back(d);
        learn(SizeExpr::symbol(it->second));
      }
      input_dims_[{d.input, d.dim}] = it->second;
    }
  }

  // Remembers a symbolic expression by its value, for matching attributes (first seen wins).
  void learn(const SizeExpr& e) {
    if (!e.is_const()) known_.emplace(sg_.env.hint(e), e);
  }

  // A size written into an attribute, as the expression of the graph's sizes it equals.
  SizeExpr match(int64_t v) const {
    if (v >= ShapeEnv::kMinSymbolValue)
      if (auto it = known_.find(v); it != known_.end()) return sg_.env.simplify(it->second);
    return v;
  }

  // An operand's shape, with what equalities solved since it was made substituted.
  SymShape shape(const NodePtr& n) const {
    SymShape s = sg_.shapes[*index_.find(n.get())];
    for (SizeExpr& d : s)
      if (!d.is_const()) d = sg_.env.simplify(d);
    return s;
  }

  // Pins every symbol in the operands' shapes to its value: an op without a symbolic rule.
  SymShape pinned(const Node& n) {
    for (const auto& in : n.inputs)
      for (const SizeExpr& d : shape(in))
        if (!d.is_const()) sg_.env.eq(d, sg_.env.hint(d));
    sg_.pinned_by.emplace_back(op_name(n.op));
    return SymShape(n.shape.begin(), n.shape.end());
  }

  // NumPy broadcasting of two symbolic shapes whose concrete sizes broadcast.
  SymShape broadcast(const SymShape& a, const SymShape& b) {
    const size_t r = std::max(a.size(), b.size());
    SymShape out(r);
    for (size_t i = 0; i < r; ++i) {
      const SizeExpr* x = i + a.size() >= r ? &a[i + a.size() - r] : nullptr;
      const SizeExpr* y = i + b.size() >= r ? &b[i + b.size() - r] : nullptr;
      if (!x || (x->is_const() && x->const_term() == 1)) {
        out[i] = y ? *y : SizeExpr(1);
      } else if (!y || (y->is_const() && y->const_term() == 1)) {
        out[i] = *x;
      } else {
        if (*x != *y) sg_.env.eq(*x, *y);  // equal sizes by the concrete check; keep it a guard
        out[i] = x->is_const() ? *y : *x;
      }
    }
    return out;
  }

  // A reshape's target: the target dims group with runs of input dims of equal product (dims of
  // size 1 apart); each group's target dims are matched against the group's expressions and the
  // symbols the graph knows, dividing them out of the group's product, which must end at 1.
  SymShape reshape(const Node& n, const SymShape& in) {
    const Shape& src = n.inputs[0]->shape;
    const IntList& t = n.attrs.ints;
    SymShape out(t.size());
    if (numel(src) == 0) {
      for (size_t j = 0; j < t.size(); ++j) out[j] = match(t[j]);
      return out;
    }
    size_t i = 0, j = 0;
    while (j < t.size() || i < src.size()) {
      if (j < t.size() && t[j] == 1) {
        out[j++] = 1;
        continue;
      }
      if (i < src.size() && src[i] == 1) {
        ++i;
        continue;
      }
      if (i >= src.size() || j >= t.size()) return pinned(n);  // cannot happen: equal numel
      // One group: extend the side with the smaller product until the products meet.
      const size_t i0 = i, j0 = j;
      int64_t pi = src[i++], pt = t[j++];
      while (pi != pt) {
        if (pi < pt && i < src.size())
          pi *= src[i++];
        else if (pt < pi && j < t.size())
          pt *= t[j++];
        else
          return pinned(n);
      }
      SizeExpr product = 1;
      SymShape group;
      for (size_t k = i0; k < i; ++k) {
        product = product * in[k];
        if (!in[k].is_const()) group.push_back(in[k]);
      }
      if (j - j0 == 1) {
        out[j0] = product;
        continue;
      }
      // A group the expressions cannot split (a symbolic width into heads of a constant size):
      // its symbols are pinned to their values, the other groups stay symbolic.
      auto pin_group = [&] {
        for (const SizeExpr& e : group) sg_.env.eq(e, sg_.env.hint(e));
        for (size_t k = j0; k < j; ++k) out[k] = t[k];
        sg_.pinned_by.emplace_back(op_name(n.op));
      };
      for (size_t k = j0; k < j; ++k) {
        if (t[k] == 1) {
          out[k] = 1;
          continue;
        }
        // The group's own dims first, then a size the graph knows, then the constant: a known
        // size that equals a constant dim by chance (a length of 64 beside a head dim of 64)
        // fails the division and the constant takes its place.
        SymShape candidates;
        for (const SizeExpr& e : group)
          if (sg_.env.hint(e) == t[k]) candidates.push_back(e);
        if (SizeExpr m = match(t[k]); !m.is_const()) candidates.push_back(std::move(m));
        candidates.push_back(t[k]);
        bool placed = false;
        for (const SizeExpr& c : candidates)
          if (auto q = product.div_exact(c)) {
            out[k] = c;
            product = *q;
            placed = true;
            break;
          }
        if (!placed) break;
      }
      if (!(product.is_const() && product.const_term() == 1)) pin_group();
    }
    return out;
  }

  SymShape expand(const Node& n, const SymShape& in, SymShape& attrs) {
    const IntList& t = n.attrs.ints;
    const size_t off = t.size() - in.size();
    SymShape out(t.size());
    for (size_t i = 0; i < t.size(); ++i) {
      const bool kept = i >= off && n.inputs[0]->shape[i - off] != 1;
      out[i] = kept ? in[i - off] : match(t[i]);
    }
    attrs = out;
    return out;
  }

  // A slice bound or length: the dim's own expression, the end minus a little, a size the graph
  // knows, or a constant.
  SizeExpr slice_value(int64_t v, const SizeExpr& dim) const {
    if (!dim.is_const()) {
      const int64_t end = sg_.env.hint(dim);
      if (v == end) return dim;
      if (v < end && end - v <= kSliceEndSlack && v >= 0) return dim - (end - v);
    }
    return match(v);
  }

  SymShape slice(const Node& n, const SymShape& in, SymShape& attrs) {
    SymShape out(in.size());
    attrs.resize(n.attrs.ints.size());
    for (size_t d = 0; d < in.size(); ++d) {
      const int64_t start = n.attrs.ints[3 * d], step = n.attrs.ints[3 * d + 1],
                    size = n.attrs.ints[3 * d + 2];
      attrs[3 * d] = start == 0 ? SizeExpr(0) : slice_value(start, in[d]);
      attrs[3 * d + 1] = step;
      attrs[3 * d + 2] = slice_value(size, in[d]);
      out[d] = attrs[3 * d + 2];
    }
    return out;
  }

  SymShape shape_of(const Node& n, SymShape& attrs) {
    const auto in = [&](size_t i) { return shape(n.inputs[i]); };
    switch (op_info(n.op).cls) {
      case OpClass::Leaf: {
        SymShape s(n.shape.begin(), n.shape.end());
        if (n.op == Op::Param) {
          const int input = *g_.input_of.find(&n);
          for (size_t d = 0; d < s.size(); ++d)
            if (auto it = input_dims_.find({input, static_cast<int>(d)}); it != input_dims_.end())
              s[d] = SizeExpr::symbol(it->second);
        } else {
          for (auto& d : s) d = match(d.const_term());  // constant, iota: sizes written in
        }
        return s;
      }
      case OpClass::Rand:
        for (int64_t d : n.attrs.ints) attrs.push_back(match(d));
        return attrs;
      case OpClass::Unary:
      case OpClass::Predicate1:
      case OpClass::Cast:
      case OpClass::AxisUnary:
      case OpClass::LayerNorm:
        return in(0);
      case OpClass::Binary:
      case OpClass::Compare:
      case OpClass::Logical:
        return broadcast(in(0), in(1));
      case OpClass::Where:
        return broadcast(broadcast(in(0), in(1)), in(2));
      case OpClass::Reduce: {
        const SymShape& s = in(0);
        std::vector<bool> red(s.size(), false);
        for (int64_t ax : n.attrs.ints)
          if (!s.empty()) red[normalize_axis(ax, static_cast<int64_t>(s.size()), "reduce")] = true;
        SymShape r;
        for (size_t i = 0; i < s.size(); ++i)
          if (!red[i])
            r.push_back(s[i]);
          else if (n.attrs.keepdim)
            r.push_back(1);
        return r;
      }
      case OpClass::Reshape: {
        SymShape r = reshape(n, in(0));
        attrs = r;
        return r;
      }
      case OpClass::Permute: {
        SymShape r;
        for (int64_t p : n.attrs.ints) r.push_back(in(0)[p]);
        return r;
      }
      case OpClass::Expand:
        return expand(n, in(0), attrs);
      case OpClass::Slice:
        return slice(n, in(0), attrs);
      case OpClass::Gather:
        return in(1);
      case OpClass::ScatterAdd:
        return in(0);
      case OpClass::Matmul: {
        const SymShape &x = in(0), &y = in(1);
        const SizeExpr& kx = x.back();
        const SizeExpr& ky = y.size() == 1 ? y[0] : y[y.size() - 2];
        if (kx != ky) sg_.env.eq(kx, ky);
        SymShape bx(x.begin(), x.end() - std::min<size_t>(x.size(), 2));
        SymShape by(y.begin(), y.end() - std::min<size_t>(y.size(), 2));
        SymShape r = broadcast(bx, by);
        if (x.size() >= 2) r.push_back(x[x.size() - 2]);
        if (y.size() >= 2) r.push_back(y.back());
        return r;
      }
      case OpClass::Attention: {
        const SymShape &q = in(0), &k = in(1), &v = in(2);
        SymShape r = q;
        switch (n.op) {
          case Op::Attention:
            r.back() = v.back();
            return r;
          case Op::AttentionLse:
            r.back() = 1;
            return r;
          case Op::AttentionGradQ:
            return q;
          case Op::AttentionGradK:
            return k;
          default:
            return v;
        }
      }
      case OpClass::Conv:
        return pinned(n);  // output sizes are floor divisions: symbolic form to come
      case OpClass::Collective:
        return pinned(n);  // every rank must compile the same graph: sizes stay static
      case OpClass::Concat:
        return pinned(n);  // a DDP bucket: parameter sizes, static
    }
    return pinned(n);
  }

  // Graph::key's construction over symbolic shapes and attributes: per node its op, dtypes, shape,
  // attributes and operand positions; per leaf its input number; the roots and their repeats; and
  // which symbols the inputs' dims are (two bindings with another duck-sizing pattern differ).
  Hash128 key() const {
    sg_.structure = structure_hash(g_, &sg_.size_attrs);
    Hasher h(0x5359);
    for (size_t i = 0; i < g_.order.size(); ++i) {
      const Node& n = *g_.order[i];
      h.add(static_cast<uint64_t>(n.op) | static_cast<uint64_t>(n.dtype) << 8 |
            static_cast<uint64_t>(n.attrs.dtype) << 16 |
            static_cast<uint64_t>(n.attrs.keepdim) << 24);
      h.add(sg_.shapes[i].size());
      for (const SizeExpr& d : sg_.shapes[i]) d.hash_into(h);
      const SymShape& sa = sg_.size_attrs[i];
      h.add(sa.empty() ? n.attrs.ints.size() : sa.size() | (1ull << 40));
      if (sa.empty())
        for (int64_t v : n.attrs.ints) h.add(static_cast<uint64_t>(v));
      else
        for (const SizeExpr& v : sa) v.hash_into(h);
      h.add_double(n.attrs.value).add(static_cast<uint64_t>(n.attrs.stream));
      for (const auto& in : n.inputs) h.add(static_cast<uint64_t>(*index_.find(in.get())));
      if (const int* input = g_.input_of.find(&n)) h.add(0x1ea7ull ^ (uint64_t(*input) << 8));
    }
    for (const Node* r : g_.roots) h.add(static_cast<uint64_t>(*index_.find(r)));
    for (const DynamicDim& d : sg_.symbol_dims)
      h.add(static_cast<uint64_t>(d.input) << 32 | static_cast<uint32_t>(d.dim));
    return h.digest();
  }

  const Graph& g_;
  SymbolicGraph& sg_;
  PtrMap<Node, int> index_;
  std::map<int64_t, SymId> symbol_of_value_;
  std::map<std::pair<int, int>, SymId> input_dims_;
  std::map<int64_t, SizeExpr> known_;
};

}  // namespace

SymbolicGraph symbolic_graph(const Graph& g, std::span<const DynamicDim> dynamic) {
  SymbolicGraph sg;
  Analysis(g, sg).run(dynamic);
  return sg;
}

Hash128 program_structure(const Graph& g) { return structure_hash(g, nullptr); }

std::optional<std::vector<int64_t>> bind_to(const SymbolicGraph& ref, const Graph& g) {
  if (ref.shapes.size() != g.order.size() || structure_hash(g, &ref.size_attrs) != ref.structure)
    return std::nullopt;
  const size_t n = ref.env.num_symbols();
  std::vector<int64_t> free(n, ShapeEnv::kMinSymbolValue);
  for (size_t s = 0; s < n && s < ref.symbol_dims.size(); ++s) {
    const DynamicDim& d = ref.symbol_dims[s];
    if (d.input < 0 || d.input >= static_cast<int>(g.inputs.size()) ||
        d.dim >= static_cast<int>(g.inputs[d.input]->shape.size()))
      return std::nullopt;
    free[s] = g.inputs[d.input]->shape[d.dim];
    if (free[s] < ShapeEnv::kMinSymbolValue) return std::nullopt;
  }
  std::vector<int64_t> v = all_symbol_values(ref, free);
  if (!ref.env.guards_hold(v)) return std::nullopt;
  auto same = [&](const SymShape& e, const IntList& actual) {
    if (e.size() != actual.size()) return false;
    for (size_t d = 0; d < e.size(); ++d)
      if (e[d].eval(v) != actual[d]) return false;
    return true;
  };
  for (size_t i = 0; i < g.order.size(); ++i) {
    const Node& node = *g.order[i];
    if (!same(ref.shapes[i], node.shape)) return std::nullopt;
    if (!ref.size_attrs[i].empty() && !same(ref.size_attrs[i], node.attrs.ints))
      return std::nullopt;
  }
  return v;
}

std::vector<int64_t> all_symbol_values(const SymbolicGraph& sg, std::span<const int64_t> free) {
  const size_t n = sg.env.num_symbols();
  LT_CHECK(free.size() == n, ErrorKind::Runtime, "symbolic shapes: ", free.size(),
           " symbol values for ", n, " symbols");
  std::vector<int64_t> v(free.begin(), free.end());
  // Solutions name lower symbols only, so one pass in order settles every symbol.
  for (size_t s = 0; s < n; ++s) {
    SizeExpr e = sg.env.simplify(SizeExpr::symbol(static_cast<SymId>(s)));
    if (e != SizeExpr::symbol(static_cast<SymId>(s))) v[s] = e.eval(v);
  }
  return v;
}

InstantiatedGraph instantiate(const Graph& g, const SymbolicGraph& sg,
                              std::span<const int64_t> symbols) {
  LT_CHECK(sg.shapes.size() == g.order.size(), ErrorKind::Runtime,
           "internal: a symbolic view of another graph");
  auto eval = [&](const SymShape& s) {
    Shape r;
    r.reserve(s.size());
    for (const SizeExpr& d : s) r.push_back(d.eval(symbols));
    return r;
  };
  InstantiatedGraph out;
  out.nodes.reserve(g.order.size());
  PtrMap<Node, int> index(g.order.size());
  for (size_t i = 0; i < g.order.size(); ++i) {
    const Node& n = *g.order[i];
    index.emplace(&n, static_cast<int>(i));
    Shape shape = eval(sg.shapes[i]);
    NodePtr made;
    switch (n.op) {
      case Op::Param:
        made = make_param(n.dtype, shape, n.data);
        break;
      case Op::Scalar:
        made = std::make_shared<Node>(n);
        break;
      case Op::Constant:
        made = make_constant(n.dtype, n.attrs.value, shape);
        break;
      case Op::Iota:
        LT_CHECK(shape.size() == 1, ErrorKind::Runtime, "internal: iota of rank ", shape.size());
        made = make_iota(shape[0]);
        break;
      default: {
        LT_CHECK(op_info(n.op).cls != OpClass::Leaf, ErrorKind::NotImplemented,
                 "not implemented: symbolic sizes for leaf ", op_name(n.op));
        NodeList inputs;
        inputs.reserve(n.inputs.size());
        for (const auto& in : n.inputs)
          inputs.push_back(out.nodes[static_cast<size_t>(*index.find(in.get()))]);
        Attrs attrs = n.attrs;
        const SymShape& sa = sg.size_attrs[i];
        if (!sa.empty()) {
          LT_CHECK(sa.size() == attrs.ints.size(), ErrorKind::Runtime, "internal: ", op_name(n.op),
                   " has ", attrs.ints.size(), " size attributes, ", sa.size(), " expressions");
          attrs.ints = IntList(eval(sa));
        }
        made = make_node(n.op, std::move(inputs), std::move(attrs));
        if (made->shape != shape)
          fail(ErrorKind::Runtime, "symbolic shapes: ", op_name(n.op), " made ",
               shape_str(made->shape), " where its symbolic shape gives ", shape_str(shape));
      }
    }
    out.nodes.push_back(std::move(made));
  }
  std::vector<const Node*> roots;
  roots.reserve(g.roots.size());
  for (const Node* r : g.roots)
    roots.push_back(out.nodes[static_cast<size_t>(*index.find(r))].get());
  out.graph = collect_graph(roots);
  LT_CHECK(out.graph.order.size() == g.order.size() && out.graph.inputs.size() == g.inputs.size(),
           ErrorKind::Runtime, "internal: an instantiated graph of another structure");
  return out;
}

std::string describe(const SymbolicGraph& sg) {
  std::string s;
  for (size_t i = 0; i < sg.symbol_dims.size(); ++i)
    s += "s" + std::to_string(i) + " = input " + std::to_string(sg.symbol_dims[i].input) + " dim " +
         std::to_string(sg.symbol_dims[i].dim) + " (" + std::to_string(sg.env.hints()[i]) + ")\n";
  for (const auto& g : sg.env.guards()) s += "guard " + g.str() + "\n";
  for (const auto& p : sg.pinned_by) s += "pinned by " + p + "\n";
  return s;
}

}  // namespace lt
