#include "runtime/attention.h"

#include <cmath>
#include <limits>
#include <memory>

#include "ir/attention.h"
#include "ir/error.h"
#include "runtime/indexing.h"
#include "runtime/ops.h"
#include "runtime/saved.h"
#include "runtime/tape.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

std::vector<int64_t> vec(const Shape& s) { return std::vector<int64_t>(s.begin(), s.end()); }

// Row statistics (L, D) and the softmax correction run in float32 for half/bfloat16 inputs: a
// bfloat16 logsumexp is off by up to ~3% uniformly over a row.
DType stats_dtype(DType t) { return attention_stats_dtype(t); }

// Key/value with Hk heads (dim -3) repeated to Hk * rep heads, each head rep times in a row
// (repeat_interleave), as movement ops; and the reverse for gradients (the rep copies summed).
Tensor repeat_heads(const Tensor& t, int64_t rep) {
  if (rep == 1) return t;
  std::vector<int64_t> s = vec(t.shape()), grown = s;
  grown.insert(grown.end() - 2, rep);
  std::vector<int64_t> out = s;
  out[out.size() - 3] *= rep;
  return t.unsqueeze(-3).expand(grown).reshape(out);
}
Tensor sum_heads(const Tensor& g, int64_t rep) {
  if (rep == 1) return g;
  std::vector<int64_t> s = vec(g.shape());
  std::vector<int64_t> split = s;
  split[split.size() - 3] /= rep;
  split.insert(split.end() - 2, rep);
  return g.reshape(split).sum({-3});
}

// What the backward needs, held as IR snapshots (a later in-place rebinding of q/k/v cannot change
// them, and the output's own history holds no reference to itself). On the lazy device the
// forward's probabilities are IR, so the backward reuses that node: the compiled step computes P
// once (the GEMMs need it materialized anyway). Eager devices keep only the row logsumexp L and
// recompute P = exp(S - L) (one GEMM) rather than hold the [..., L, S] matrix until backward.
struct Ctx {
  bool prims = false;  // traced as attention prims: out and lse saved
  Saved q, k, v, mask;
  Saved probs;     // lazy: the forward's P (before dropout)
  Saved out, lse;  // eager: the output and the row logsumexp, [..., L, 1]
  Saved keep;      // dropout: the kept positions times 1/(1-p)
  bool bool_mask = false, causal = false;
  int64_t rep = 1;
  double scale = 1;
  bool need_q = false, need_k = false, need_v = false, need_mask = false;
};

// The attention prim `op` (ir/attention.h) over `srcs`, recorded for autograd like any op (the
// gradient prims have no gradient rule: differentiating them again fails with a clear error).
Tensor attention_prim(Op op, const std::vector<Tensor>& srcs, const AttentionParams& p) {
  NodeList ins;
  for (const Tensor& t : srcs) ins.push_back(t.node());
  const Attrs at = p.attrs();
  Tensor out(make_tensor(make_node(op, ins, at), srcs[0].device()));
  record_op(op, at, out, ins, srcs);
  return out;
}

// The backward as the gradient prims: dsum = rowsum(dO * O) here, P recomputed from the saved
// logsumexp there (by the backend's fused kernels; where lowering expands the prims, P and D are
// computed as the decomposition does: lowering/expand_attention.h).
std::vector<Tensor> prim_attention_vjp(const Ctx& c, const Tensor& g) {
  Tensor q = c.q.get(), k = repeat_heads(c.k.get(), c.rep), v = repeat_heads(c.v.get(), c.rep);
  const DType st = stats_dtype(g.dtype());
  Tensor dsum = (cast(g, st) * cast(c.out.get(), st)).sum({-1}, true);
  const std::vector<Tensor> srcs = {q, k, v, g, c.lse.get(), dsum};
  const AttentionParams p{c.causal, c.scale};
  std::vector<Tensor> r(3);
  if (c.need_q) r[0] = attention_prim(Op::AttentionGradQ, srcs, p);
  if (c.need_k) r[1] = sum_heads(attention_prim(Op::AttentionGradK, srcs, p), c.rep);
  if (c.need_v) r[2] = sum_heads(attention_prim(Op::AttentionGradV, srcs, p), c.rep);
  return r;
}

// Whether this attention is traced as the attention prims, on every backend (lowering runs them
// as the backend's fused step or expands them: lowering/expand_attention.h): no explicit mask,
// no dropout, one batch shape for q, k and v (after repeating GQA heads) and nothing empty.
bool prim_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                    double dropout_p) {
  if (mask.defined() || dropout_p != 0.0 || q.dim() < 2 || k.dim() != q.dim() || v.dim() != q.dim())
    return false;
  for (int64_t d = 0; d + 2 < q.dim(); ++d)
    if (k.size(d) != q.size(d) || v.size(d) != q.size(d)) return false;
  return q.numel() != 0 && k.numel() != 0 && v.numel() != 0;
}

std::vector<Tensor> attention_vjp(const Ctx& c, const Tensor& g) {
  if (c.prims) return prim_attention_vjp(c, g);
  Tensor q = c.q.get(), k = repeat_heads(c.k.get(), c.rep), v = repeat_heads(c.v.get(), c.rep);
  const DType t = g.dtype(), st = stats_dtype(t);
  const bool lazy = c.probs.defined();
  Tensor p;
  if (lazy) {
    p = c.probs.get();
  } else {  // P = exp(S - L), S recomputed
    Tensor s = attention_scores(q, k, c.mask.get(), c.bool_mask, c.causal, c.scale);
    p = cast((cast(s, st) - c.lse.get()).exp(), t);
  }
  Tensor keep = c.keep.get();
  Tensor pd = keep.defined() ? p * keep : p;  // the probabilities O was made from
  std::vector<Tensor> r(c.need_mask ? 4 : 3);
  if (c.need_v) r[2] = sum_heads(unbroadcast(pd.transpose(-2, -1).matmul(g), v.shape()), c.rep);
  if (!c.need_q && !c.need_k && !c.need_mask) return r;
  Tensor dp = g.matmul(v.transpose(-2, -1));  // d(loss)/d(dropped probabilities)
  if (keep.defined()) dp = dp * keep;
  Tensor pf = cast(p, st), dpf = cast(dp, st);
  // The softmax correction D = rowsum(dP * P) = rowsum(dO * O). Eager devices take the second,
  // a reduction over Ev instead of S. On lazy the first is free: it is one more stage of the row
  // kernel that computes dS and reads P and dP anyway, where rowsum(dO * O) is a kernel of its
  // own (fusion groups reductions by row length) reading dO and O once more.
  Tensor d =
      lazy ? (dpf * pf).sum({-1}, true) : (cast(g, st) * cast(c.out.get(), st)).sum({-1}, true);
  Tensor ds = unbroadcast(cast(pf * (dpf - d), t), p.shape());  // d(loss)/d(masked scores)
  if (c.need_mask) r[3] = ds;
  Tensor dss = ds * c.scale;
  if (c.need_q) r[0] = dss.matmul(k);
  if (c.need_k) r[1] = sum_heads(unbroadcast(dss.transpose(-2, -1).matmul(q), k.shape()), c.rep);
  return r;
}

}  // namespace

// The forward's scores and, on eager devices, the backward's recomputation: the same ops in the
// same order.
Tensor attention_scores(const Tensor& q, const Tensor& k, const Tensor& mask, bool bool_mask,
                        bool causal, double scale) {
  Tensor s = q.matmul(k.transpose(-2, -1)) * scale;
  if (causal) {
    const int64_t l = q.size(-2), n = k.size(-2);
    Tensor keep = le(positions(n, q.device()).reshape({1, n}),
                     positions(l, q.device()).reshape({l, 1}));  // key j <= query i
    s = where(keep, s, -std::numeric_limits<double>::infinity());
  } else if (mask.defined()) {
    s = bool_mask ? where(mask, s, -std::numeric_limits<double>::infinity())
                  : s + cast(mask, s.dtype());
  }
  return s;
}

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa) {
  if (!query.defined() || !key.defined() || !value.defined())
    fail(ErrorKind::Runtime, kOp, ": undefined query, key or value");
  if (query.dim() < 2 || key.dim() < 2 || value.dim() < 2 || query.size(-1) != key.size(-1) ||
      key.size(-2) != value.size(-2))
    fail(ErrorKind::Runtime, kOp, ": shapes do not match: query ", shape_str(query.shape()),
         ", key ", shape_str(key.shape()), ", value ", shape_str(value.shape()),
         " (expected [..., L, E], [..., S, E], [..., S, Ev])");
  if (!is_floating(query.dtype()) || query.dtype() != key.dtype() || query.dtype() != value.dtype())
    fail(ErrorKind::Runtime, kOp,
         ": expected query, key and value to be floating tensors of the same dtype, got ",
         dtype_name(query.dtype()), ", ", dtype_name(key.dtype()), " and ",
         dtype_name(value.dtype()));
  if (is_causal && attn_mask.defined())
    fail(ErrorKind::Runtime, kOp, ": explicit attn_mask should not be set when is_causal=True");
  if (attn_mask.defined() && !is_bool(attn_mask.dtype()) && !is_floating(attn_mask.dtype()))
    fail(ErrorKind::Runtime, kOp, ": expected a bool or floating attn_mask, got ",
         dtype_name(attn_mask.dtype()), " (shape ", shape_str(attn_mask.shape()), ")");
  if (!(dropout_p >= 0.0 && dropout_p <= 1.0))
    fail(ErrorKind::Value, kOp, ": dropout probability has to be between 0 and 1, but got ",
         dropout_p);
  int64_t rep = 1;
  if (enable_gqa && query.dim() >= 3 && key.dim() >= 3 && value.dim() >= 3 &&
      key.size(-3) != query.size(-3)) {
    const int64_t hq = query.size(-3), hk = key.size(-3);
    if (hk == 0 || hq % hk != 0 || value.size(-3) != hk)
      fail(ErrorKind::Runtime, kOp, ": with enable_gqa the query heads (", hq,
           ") must be a multiple of the key and value heads (", hk, ", ", value.size(-3), ")");
    rep = hq / hk;
  }
  auto c = std::make_shared<Ctx>();
  c->bool_mask = attn_mask.defined() && is_bool(attn_mask.dtype());
  c->causal = is_causal;
  c->rep = rep;
  c->scale = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
  const DType t = query.dtype(), st = stats_dtype(t);
  std::vector<Tensor> inputs = {query, key, value};
  if (attn_mask.defined() && !c->bool_mask) inputs.push_back(attn_mask);
  const bool need_grad = grad_enabled() && any_requires_grad(inputs);
  if (Tensor k = repeat_heads(key, rep), v = repeat_heads(value, rep);
      prim_attention(query, k, v, attn_mask, dropout_p)) {
    const AttentionParams p{is_causal, c->scale};
    Tensor out, lse;
    {
      NoGradGuard no_grad;  // one node: prim_attention_vjp is its gradient
      out = attention_prim(Op::Attention, {query, k, v}, p);
      if (need_grad) lse = attention_prim(Op::AttentionLse, {query, k, v}, p);
    }
    if (!need_grad) return out;
    const Device dev = out.device();
    c->prims = true;
    c->q = Saved(query.node(), dev);
    c->k = Saved(key.node(), dev);
    c->v = Saved(value.node(), dev);
    c->out = Saved(out.node(), dev);
    c->lse = Saved(lse.node(), dev);
    c->need_q = query.requires_grad();
    c->need_k = key.requires_grad();
    c->need_v = value.requires_grad();
    record(out, inputs, "ScaledDotProductAttentionBackward",
           [c](const Tensor& g) { return attention_vjp(*c, g); });
    return out;
  }
  Tensor out, scores, probs, keep;
  {
    NoGradGuard no_grad;  // the internals are one node: the rule below is their gradient
    Tensor k = repeat_heads(key, rep), v = repeat_heads(value, rep);
    scores = attention_scores(query, k, attn_mask, c->bool_mask, is_causal, c->scale);
    probs = cast(softmax(cast(scores, st), -1), t);
    Tensor p = probs;
    if (dropout_p > 0.0) {
      // p == 1 drops everything (0, not 0 * inf).
      const double factor = dropout_p < 1.0 ? 1.0 / (1.0 - dropout_p) : 0.0;
      keep = cast(ge(rand(p.shape(), t, p.device()), dropout_p), t) * factor;
      p = p * keep;
    }
    out = p.matmul(v);
  }
  if (!need_grad) return out;
  const Device dev = out.device();
  c->q = Saved(query.node(), dev);
  c->k = Saved(key.node(), dev);
  c->v = Saved(value.node(), dev);
  if (attn_mask.defined()) c->mask = Saved(attn_mask.node(), dev);
  if (dev.is_lazy()) {
    c->probs = Saved(probs.node(), dev);
  } else {
    NoGradGuard no_grad;
    c->out = Saved(out.node(), dev);
    c->lse = Saved(logsumexp(cast(scores, st), {-1}, true).node(), dev);
  }
  if (keep.defined()) c->keep = Saved(keep.node(), dev);
  c->need_q = query.requires_grad();
  c->need_k = key.requires_grad();
  c->need_v = value.requires_grad();
  c->need_mask = inputs.size() == 4 && attn_mask.requires_grad();
  record(out, inputs, "ScaledDotProductAttentionBackward",
         [c](const Tensor& g) { return attention_vjp(*c, g); });
  return out;
}

}  // namespace lt
