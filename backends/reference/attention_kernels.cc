// The reference rules of the attention prims (ir/attention.h): per query row, the scores of the
// visible keys, their logsumexp and softmax, in double; the gradients by the same formulas as the
// flash kernels (P = exp(S - lse), dS = P * (dO V^T - dsum)), but row by row and obviously right.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/reference/kernels.h"
#include "ir/attention.h"

namespace lt::ref {
namespace {

struct Dims {
  int64_t batch = 1, L, S, E, Ev;
};

Dims dims_of(const Ctx& c) {
  const Shape &q = c.in[0]->shape, &k = c.in[1]->shape, &v = c.in[2]->shape;
  Dims d;
  d.L = q.end()[-2], d.E = q.back(), d.S = k.end()[-2], d.Ev = v.back();
  for (size_t i = 0; i + 2 < q.size(); ++i) d.batch *= q[i];
  return d;
}

// Calls f(b, i, scores, lse) for every (batch point, query row): scores[j] of the visible keys
// (the rest -inf) and their logsumexp.
template <class F>
void for_each_row(const Ctx& c, const Dims& d, const AttentionParams& p, F f) {
  const std::vector<double>&q = c.in[0]->f, &k = c.in[1]->f;
  std::vector<double> s(static_cast<size_t>(d.S));
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t i = 0; i < d.L; ++i) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < d.S; ++j) {
        if (p.causal && j > i) {
          s[j] = -std::numeric_limits<double>::infinity();
          continue;
        }
        double dot = 0;
        for (int64_t e = 0; e < d.E; ++e)
          dot += q[(b * d.L + i) * d.E + e] * k[(b * d.S + j) * d.E + e];
        s[j] = dot * p.scale;
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < d.S; ++j) sum += std::exp(s[j] - m);
      f(b, i, s, m + std::log(sum));
    }
}

}  // namespace

void eval_attention(Ctx& c) {
  const AttentionParams p = AttentionParams::from(c.node.op, c.node.attrs);
  const Dims d = dims_of(c);
  const std::vector<double>& v = c.in[2]->f;
  std::vector<double>& out = c.out.f;
  const bool lse_only = c.node.op == Op::AttentionLse;
  out.assign(static_cast<size_t>(numel(c.out.shape)), 0.0);
  for_each_row(c, d, p, [&](int64_t b, int64_t i, const std::vector<double>& s, double lse) {
    if (lse_only) {
      out[b * d.L + i] = lse;
      return;
    }
    double* o = &out[(b * d.L + i) * d.Ev];
    for (int64_t j = 0; j < d.S; ++j) {
      const double pj = std::exp(s[j] - lse);
      if (pj == 0) continue;
      for (int64_t e = 0; e < d.Ev; ++e) o[e] += pj * v[(b * d.S + j) * d.Ev + e];
    }
  });
}

// The three gradients share one rule: each fills its own operand's gradient, with P from the
// operands lse and dsum (as the flash kernels read them).
void eval_attention_grad(Ctx& c) {
  const AttentionParams p = AttentionParams::from(c.node.op, c.node.attrs);
  const Dims d = dims_of(c);
  const std::vector<double>&q = c.in[0]->f, &k = c.in[1]->f, &v = c.in[2]->f, &dout = c.in[3]->f,
        &lse_in = c.in[4]->f, &dsum = c.in[5]->f;
  std::vector<double>& g = c.out.f;
  g.assign(static_cast<size_t>(numel(c.out.shape)), 0.0);
  const Op op = c.node.op;
  for_each_row(c, d, p, [&](int64_t b, int64_t i, const std::vector<double>& s, double) {
    const int64_t row = b * d.L + i;
    for (int64_t j = 0; j < d.S; ++j) {
      if (s[j] == -std::numeric_limits<double>::infinity()) continue;
      const double pj = std::exp(s[j] - lse_in[row]);
      const int64_t kv = b * d.S + j;
      if (op == Op::AttentionGradV) {
        for (int64_t e = 0; e < d.Ev; ++e) g[kv * d.Ev + e] += pj * dout[row * d.Ev + e];
        continue;
      }
      double dp = 0;
      for (int64_t e = 0; e < d.Ev; ++e) dp += dout[row * d.Ev + e] * v[kv * d.Ev + e];
      const double ds = pj * (dp - dsum[row]) * p.scale;
      if (op == Op::AttentionGradQ)
        for (int64_t e = 0; e < d.E; ++e) g[row * d.E + e] += ds * k[kv * d.E + e];
      else
        for (int64_t e = 0; e < d.E; ++e) g[kv * d.E + e] += ds * q[row * d.E + e];
    }
  });
}

}  // namespace lt::ref
