#include "lowering/gemm_match.h"

#include <algorithm>
#include <ostream>
#include <utility>

#include "lowering/library_match.h"
#include "lowering/symbolic.h"

namespace lt {
namespace {

bool is_view(OpClass c) {
  return c == OpClass::Reshape || c == OpClass::Permute || c == OpClass::Expand ||
         c == OpClass::Slice;
}

// Index into the operand of a broadcasting elementwise op or an expand (same rule as fusion).
std::vector<Lin> broadcast_index(const std::vector<Lin>& idx, const Shape& out, const Shape& in) {
  std::vector<Lin> ci(in.size());
  size_t off = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) ci[d] = in[d] == 1 ? SymCtx::constant(0) : idx[d + off];
  return ci;
}

// The nodes a value is read through, from `start` down to the first realized or non-view node,
// each with the multi-index it is read at (mirrors the index arithmetic fusion emits).
std::vector<std::pair<int, std::vector<Lin>>> view_chain(const PrimGraph& g, SymCtx& sym, int start,
                                                         std::vector<Lin> idx,
                                                         const fusion::FusionNodes& nodes) {
  std::vector<std::pair<int, std::vector<Lin>>> chain{{start, idx}};
  int cur = start;
  while (!nodes[cur].realized && is_view(op_info(g.nodes[cur].op).cls)) {
    const PNode& p = g.nodes[cur];
    const PNode& in = g.nodes[p.inputs[0]];
    std::vector<Lin> ci;
    switch (op_info(p.op).cls) {
      case OpClass::Reshape:
        ci = sym.unflatten(sym.flatten(idx, p.shape), in.shape);
        break;
      case OpClass::Permute:
        ci.resize(idx.size());
        for (size_t i = 0; i < idx.size(); ++i) ci[p.attrs.ints[i]] = idx[i];
        break;
      case OpClass::Expand:
        ci = broadcast_index(idx, p.shape, in.shape);
        break;
      default:  // Slice
        ci.resize(idx.size());
        for (size_t d = 0; d < idx.size(); ++d)
          ci[d] = sym.add(sym.mul(idx[d], p.attrs.ints[3 * d + 1]),
                          SymCtx::constant(p.attrs.ints[3 * d]));
    }
    cur = p.inputs[0];
    idx = std::move(ci);
    chain.emplace_back(cur, idx);
  }
  return chain;
}

struct Affine {
  int64_t offset;
  std::vector<int64_t> strides;  // per loop variable
};

// The flat element offset as offset + sum(strides[v] * var v), when it is that simple.
std::optional<Affine> affine(SymCtx& sym, const Lin& flat) {
  Affine a{flat.c, {}};
  Lin rebuilt = SymCtx::constant(flat.c);
  for (size_t v = 0; v < sym.num_vars(); ++v) {
    auto s = sym.var_stride(flat, static_cast<int>(v));
    if (!s || *s < 0) return std::nullopt;
    a.strides.push_back(*s);
    if (*s) rebuilt = sym.add(rebuilt, sym.mul(sym.var(static_cast<int>(v)), *s));
  }
  if (!(rebuilt == flat) || a.offset < 0) return std::nullopt;
  return a;
}

}  // namespace

std::optional<GemmMatch> match_gemm(const PrimGraph& g, int reduce,
                                    const fusion::FusionNodes& nodes) {
  const PNode& r = g.nodes[reduce];
  if (r.op != Op::ReduceSum || r.inputs.size() != 1) return std::nullopt;
  const int mul = r.inputs[0];
  const PNode& prod = g.nodes[mul];
  const Shape& full = prod.shape;  // [batch..., M, N, K]
  const int rank = static_cast<int>(full.size());
  if (prod.op != Op::Mul || prod.dtype != r.dtype || rank < 3 || nodes[mul].realized)
    return std::nullopt;
  if (r.attrs.ints.size() != 1 || (r.attrs.ints[0] != rank - 1 && r.attrs.ints[0] != -1))
    return std::nullopt;
  for (int64_t e : full)
    if (e < 1) return std::nullopt;  // empty products (K = 0 sums to zeros) stay loop kernels
  const int vm = rank - 3, vn = rank - 2, vk = rank - 1;
  GemmMatch m;
  m.reduce = reduce;
  Gemm& gm = m.gemm;
  gm.dtype = r.dtype;
  gm.M = full[vm], gm.N = full[vn], gm.K = full[vk];
  if (numel(r.shape) != numel(full) / gm.K) return std::nullopt;

  SymCtx sym(full);
  std::vector<Lin> idx;
  for (int v = 0; v < rank; ++v) idx.push_back(sym.var(v));
  int ops[2] = {prod.inputs[0], prod.inputs[1]};
  // Whether the operand's value changes along loop v: asked of the node under its views, since a
  // view's own (expanded) index changes where the value it reads does not.
  auto depends = [&](int node, int v) {
    auto chain = view_chain(g, sym, node, broadcast_index(idx, full, g.nodes[node].shape), nodes);
    const auto& [base, base_idx] = chain.back();
    return sym.depends_on(sym.flatten(base_idx, g.nodes[base].shape), v);
  };
  if (depends(ops[0], vn) || depends(ops[1], vm)) std::swap(ops[0], ops[1]);
  if (depends(ops[0], vn) || depends(ops[1], vm)) return std::nullopt;  // not a matrix product

  // Picks the deepest node of the operand's view chain that a library can read as a strided
  // matrix: its buffer is what the GEMM reads, so views above it cost nothing.
  auto pick = [&](int op, bool is_a, int* node, int64_t* offset, int64_t* rs, int64_t* cs,
                  std::vector<int64_t>* bstride) {
    auto chain = view_chain(g, sym, op, broadcast_index(idx, full, g.nodes[op].shape), nodes);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const PNode& p = g.nodes[it->first];
      const OpClass cls = op_info(p.op).cls;
      if (cls == OpClass::Expand || p.op == Op::Constant || p.op == Op::Scalar ||
          p.dtype != gm.dtype)
        continue;
      auto a = affine(sym, sym.flatten(it->second, p.shape));
      if (!a) continue;
      int64_t r0 = is_a ? a->strides[vm] : a->strides[vk];
      int64_t c0 = is_a ? a->strides[vk] : a->strides[vn];
      if (!normalize_matrix_layout(is_a ? gm.M : gm.K, is_a ? gm.K : gm.N, &r0, &c0)) continue;
      *node = it->first, *offset = a->offset, *rs = r0, *cs = c0;
      bstride->assign(a->strides.begin(), a->strides.begin() + vm);
      return true;
    }
    return false;
  };
  std::vector<int64_t> sa, sb;
  if (!pick(ops[0], true, &m.a_node, &gm.a_offset, &gm.a_rs, &gm.a_cs, &sa)) return std::nullopt;
  if (!pick(ops[1], false, &m.b_node, &gm.b_offset, &gm.b_rs, &gm.b_cs, &sb)) return std::nullopt;

  // Batch dims, innermost first, with extent-1 dims dropped and dims merged where both operands
  // step through them as one (a contiguous batch becomes one strided batch for the library).
  std::vector<int64_t> ext, ta, tb;
  for (int d = vm - 1; d >= 0; --d) {
    if (full[d] == 1) continue;
    if (!ext.empty() && sa[d] == ta.back() * ext.back() && sb[d] == tb.back() * ext.back()) {
      ext.back() *= full[d];
      continue;
    }
    ext.push_back(full[d]), ta.push_back(sa[d]), tb.push_back(sb[d]);
  }
  // A batch that B does not vary over, with A's rows stacked across it (x @ W for x [B, T, K]):
  // one GEMM with M * batch rows instead of a strided batch of small ones.
  while (!ext.empty() && tb.front() == 0 && gm.a_cs == 1 && gm.a_rs > 0 &&
         ta.front() == gm.M * gm.a_rs) {
    gm.M *= ext.front();
    ext.erase(ext.begin()), ta.erase(ta.begin()), tb.erase(tb.begin());
  }
  // More rows can change which layout A's strides normalize to (M = K = 1 stacked into a column
  // reads as transposed), and the library steps check the normalized form.
  normalize_matrix_layout(gm.M, gm.K, &gm.a_rs, &gm.a_cs);
  gm.batch.assign(ext.rbegin(), ext.rend());
  gm.a_batch_stride.assign(ta.rbegin(), ta.rend());
  gm.b_batch_stride.assign(tb.rbegin(), tb.rend());
  return m;
}

}  // namespace lt

namespace lt::fusion {
namespace {

// Whether `p` is a permute of `of` that swaps its last two dims and keeps the others in place.
bool transposes_matrices(const PNode& p, const PNode& of) {
  const int64_t r = static_cast<int64_t>(of.shape.size());
  if (p.op != Op::Permute || r < 2 || static_cast<int64_t>(p.attrs.ints.size()) != r) return false;
  for (int64_t d = 0; d < r; ++d) {
    int64_t want = d == r - 2 ? r - 1 : d == r - 1 ? r - 2 : d;
    int64_t got = p.attrs.ints[static_cast<size_t>(d)];
    if (got < 0) got += r;
    if (got != want) return false;
  }
  return true;
}

// The match of C = A B turned into C^T = B^T A^T: each operand's row and column strides trade
// places, so the library writes the transposed product contiguously.
void transpose_product(GemmMatch& m) {
  Gemm& g = m.gemm;
  Gemm t = g;
  t.M = g.N, t.N = g.M;
  t.a_offset = g.b_offset, t.a_rs = g.b_cs, t.a_cs = g.b_rs, t.a_batch_stride = g.b_batch_stride;
  t.b_offset = g.a_offset, t.b_rs = g.a_cs, t.b_cs = g.a_rs, t.b_batch_stride = g.a_batch_stride;
  g = t;
  std::swap(m.a_node, m.b_node);
}

}  // namespace

// Matrix products the backend's library computes: the sum and its operands get buffers; the GEMM
// writes the sum's buffer (or, when the sum only feeds an output reshape, that one's).
std::optional<LibraryMatch> match_gemm_step(const MatchContext& c, int node) {
  const PrimGraph& g = c.g;
  if (g.nodes[node].op != Op::ReduceSum || !c.opts.gemm(g.nodes[node].dtype)) return std::nullopt;
  std::optional<GemmMatch> m = match_gemm(g, node, c.nodes);
  if (!m) return std::nullopt;
  int root = node;
  if (c.nodes[node].users == 1 && !c.nodes[node].realized) {
    for (int u = node + 1; u < static_cast<int>(g.nodes.size()); ++u) {
      const PNode& p = g.nodes[u];
      if (std::find(p.inputs.begin(), p.inputs.end(), node) == p.inputs.end()) continue;
      if (p.op == Op::Reshape && c.nodes[u].realized) root = u;
      // A product read only transposed (a weight gradient x^T @ g, stored as [out, in]): the GEMM
      // writes the transpose, B^T A^T, instead of a kernel transposing its result.
      if (transposes_matrices(p, g.nodes[node]) && m->gemm.M == g.nodes[node].shape.end()[-2]) {
        transpose_product(*m);
        root = u;
      }
      break;
    }
  }
  LibraryMatch match{PlanStep::Kind::Gemm, node, root};
  match.operands = {m->a_node, m->b_node};
  match.outputs = {root};
  match.gemm = std::move(*m);
  return match;
}

void emit_gemm_step(const PrimGraph&, const LibraryMatch& match, const FusionNodes& nodes,
                    Plan& plan, std::ostream& grouping) {
  const GemmMatch& m = match.gemm;
  Gemm gm = m.gemm;
  gm.name = "g" + std::to_string(match.root) + "_matmul";
  gm.a = nodes[m.a_node].buffer, gm.b = nodes[m.b_node].buffer, gm.out = nodes[match.root].buffer;
  plan.steps.push_back({PlanStep::Kind::Gemm, static_cast<int>(plan.gemms.size())});
  plan.gemms.push_back(gm);
  grouping << gm.name << ": gemm " << dtype_name(gm.dtype) << " batch " << shape_str(gm.batch)
           << " M " << gm.M << " N " << gm.N << " K " << gm.K << (gm.a_transposed() ? " A^T" : "")
           << (gm.b_transposed() ? " B^T" : "") << ", nodes %" << m.reduce << " from %" << m.a_node
           << " @ %" << m.b_node << "\n";
}

}  // namespace lt::fusion
