#include "lowering/fuse.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "ir/attention.h"
#include "ir/error.h"
#include "lowering/gemm_match.h"
#include "lowering/kernel_builder.h"
#include "lowering/symbolic.h"

namespace lt {
namespace {

using fusion::KernelBuilder;
using fusion::Unabsorbable;
using fusion::Unhostable;

// A value read by several consumers is recomputed by each of them while that is cheap. What makes
// it costly is rarely arithmetic but loads: a residual stream x0 + a1 + b1 + ... recomputed in
// every kernel that reads it (layer norm statistics, its gradient's row and column reductions, the
// loss) re-reads every branch's buffer there, several times the traffic of reading it once.
// So a shared value whose computation reads kMaxSharedLoads or more distinct buffers is realized:
// one write, then one load per consumer. Reads of 1-2 buffers (softmax's exp(x - max), a
// 20-step x + sin(x) chain over one input) stay fused.
void realize_shared_wide_values(const PrimGraph& g, const std::vector<int>& users,
                                std::vector<bool>& realized) {
  constexpr size_t kMaxSharedLoads = 3;
  const int n = static_cast<int>(g.nodes.size());
  // Per node: up to kMaxSharedLoads of the buffers its inline computation reads. A capped set is
  // enough: the union of two sets is at least kMaxSharedLoads exactly when the true union is.
  std::vector<std::vector<int>> loads(n);
  for (int i = 0; i < n; ++i) {
    const PNode& p = g.nodes[i];
    auto& mine = loads[i];
    if (p.op == Op::Scalar || p.op == Op::Constant) continue;
    if (realized[i] || op_info(p.op).cls == OpClass::Reduce) {
      mine.push_back(i);  // a load (a reduction hosted here is computed once per kernel as well)
      continue;
    }
    // Only reads about as large as the value count: a broadcast vector (a layer norm's weight, a
    // row statistic) stays in cache whoever reads it.
    const int64_t size = numel(p.shape);
    for (int c : p.inputs)
      for (int b : loads[c])
        if (mine.size() < kMaxSharedLoads && 2 * numel(g.nodes[b].shape) > size &&
            std::find(mine.begin(), mine.end(), b) == mine.end())
          mine.push_back(b);
    if (users[i] >= 2 && mine.size() >= kMaxSharedLoads) {
      realized[i] = true;
      mine.assign(1, i);
    }
  }
}

// Multi-output row kernels. A reduction read by several kernels is realized, which costs it a
// kernel of its own (cross_entropy's row max: read by the sum of exp(x - max) and by the loss).
// Instead, the first kernel that reads it computes it as one more Reduce stage over the same rows
// and, when later kernels or the graph's outputs need it, also stores it: one pass over the rows
// yields both the max and the sum. Returns absorbed_into (-1: not absorbed) and whether each
// absorbed reduction must be stored. Candidates in no_absorb were tried and did not fit (another
// row shape, or a store in a kernel without a per-row store stage); the builder reports those.
// They are (reduction, host) pairs: realizing more nodes may give the reduction another first
// reader. blocks_others[r]: an earlier reduction was not absorbed into r's kernel because r is
// absorbed.
void absorb_targets(const PrimGraph& g, const std::vector<bool>& realized,
                    const std::vector<int>& gemm_at, const std::vector<int>& library_at,
                    const std::set<std::pair<int, int>>& no_absorb, std::vector<int>& absorbed_into,
                    std::vector<bool>& store_absorbed, std::vector<bool>& blocks_others) {
  const int n = static_cast<int>(g.nodes.size());
  absorbed_into.assign(n, -1);
  store_absorbed.assign(n, false);
  blocks_others.assign(n, false);
  auto candidate = [&](int r) {
    const PNode& p = g.nodes[r];
    return realized[r] && p.input_index < 0 && op_info(p.op).cls == OpClass::Reduce &&
           gemm_at[r] < 0 && numel(p.shape) > 0;
  };
  // Per candidate: the kernels (by root) that read it, in root order.
  std::vector<std::vector<int>> readers(n);
  std::vector<int> seen(n, -1);
  for (int j = 0; j < n; ++j) {
    if (!realized[j] || g.nodes[j].input_index >= 0) continue;
    std::vector<int> todo(g.nodes[j].inputs.begin(), g.nodes[j].inputs.end());
    while (!todo.empty()) {
      const int c = todo.back();
      todo.pop_back();
      if (seen[c] == j) continue;
      seen[c] = j;
      if (realized[c]) {
        if (candidate(c)) readers[c].push_back(j);
        continue;
      }
      todo.insert(todo.end(), g.nodes[c].inputs.begin(), g.nodes[c].inputs.end());
    }
  }
  std::vector<bool> is_output(n, false);
  for (int o : g.outputs) is_output[o] = true;
  // Latest first, so a kernel that is itself absorbed elsewhere is known not to host others.
  for (int r = n - 1; r >= 0; --r) {
    if (!candidate(r) || readers[r].empty()) continue;
    const int j = readers[r].front();
    const PNode& host = g.nodes[j];
    if (absorbed_into[j] >= 0) blocks_others[j] = true;  // r could have gone into j's kernel
    if (no_absorb.count({r, j}) || absorbed_into[j] >= 0 || gemm_at[j] >= 0 || library_at[j] >= 0 ||
        host.op == Op::ScatterAdd || numel(host.shape) == 0)
      continue;
    absorbed_into[r] = j;
    store_absorbed[r] = is_output[r] || readers[r].size() > 1;
  }
}

// The library step computing conv prim `node` into the buffer of `root` (node, or its ReLU).
ConvStep conv_step(const PrimGraph& g, int node, int root, bool relu,
                   const std::vector<int>& buffer_of) {
  const PNode& p = g.nodes[node];
  ConvStep c;
  c.kind = ConvStep::kind_of(p.op);
  c.name = "c" + std::to_string(node) + "_" + std::string(op_name(p.op));
  c.dtype = p.dtype;
  c.params = ConvParams::from(p.op, p.attrs);
  const Shape &s0 = g.nodes[p.inputs[0]].shape, &s1 = g.nodes[p.inputs[1]].shape;
  switch (c.kind) {
    case ConvStep::Kind::Forward:
      c.x = s0, c.w = s1, c.y = p.shape;
      break;
    case ConvStep::Kind::GradInput:
      c.y = s0, c.w = s1, c.x = p.shape;
      break;
    case ConvStep::Kind::GradWeight:
      c.x = s0, c.y = s1, c.w = p.shape;
      break;
  }
  c.a = buffer_of[p.inputs[0]], c.b = buffer_of[p.inputs[1]], c.out = buffer_of[root];
  if (p.inputs.size() == 3) c.bias = buffer_of[p.inputs[2]];
  c.relu = relu;
  return c;
}

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

bool forward_attention(Op op) { return op == Op::Attention || op == Op::AttentionLse; }

// The library step computing the attention prims `members` (one forward or one backward group
// over the same operands and attributes) into their buffers.
AttentionStep attention_step(const PrimGraph& g, const std::vector<int>& members,
                             const std::vector<int>& buffer_of) {
  const PNode& first = g.nodes[members.front()];
  const Shape &q = g.nodes[first.inputs[0]].shape, &k = g.nodes[first.inputs[1]].shape,
              &v = g.nodes[first.inputs[2]].shape;
  const AttentionParams params = AttentionParams::from(first.op, first.attrs);
  AttentionStep a;
  a.name = "a" + std::to_string(members.front()) + "_attention";
  a.kind =
      forward_attention(first.op) ? AttentionStep::Kind::Forward : AttentionStep::Kind::Backward;
  a.dtype = g.nodes[first.inputs[0]].dtype;
  a.causal = params.causal;
  a.scale = params.scale;
  a.L = q.end()[-2], a.E = q.back(), a.S = k.end()[-2], a.Ev = v.back();
  a.batch = 1;
  for (size_t d = 0; d + 2 < q.size(); ++d) a.batch *= q[d];
  a.q = buffer_of[first.inputs[0]], a.k = buffer_of[first.inputs[1]],
  a.v = buffer_of[first.inputs[2]];
  if (a.kind == AttentionStep::Kind::Backward) {
    a.dout = buffer_of[first.inputs[3]], a.lse = buffer_of[first.inputs[4]];
    a.dsum = buffer_of[first.inputs[5]];
  }
  for (int m : members) {
    const int b = buffer_of[m];
    switch (g.nodes[m].op) {
      case Op::Attention:
        a.out = b;
        break;
      case Op::AttentionLse:
        a.lse = b;
        break;
      case Op::AttentionGradQ:
        a.dq = b;
        break;
      case Op::AttentionGradK:
        a.dk = b;
        break;
      default:
        a.dv = b;
        break;
    }
  }
  return a;
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

Plan fuse(PrimGraph g, const LowerOptions& opts) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<int> users(n, 0);
  for (const auto& p : g.nodes)
    for (int c : p.inputs) users[c]++;
  std::vector<bool> realized(n, false);
  for (int o : g.outputs) realized[o] = true;
  for (int i = 0; i < n; ++i) {
    const PNode& p = g.nodes[i];
    if (p.op == Op::Param || p.op == Op::Scalar) realized[i] = true;
    if (op_info(p.op).cls == OpClass::Reduce && users[i] != 1) realized[i] = true;
    if (p.op == Op::ScatterAdd) realized[i] = true;  // written by its own two kernels
  }
  // Matrix products the backend's library computes: the sum and its operands get buffers; the
  // GEMM writes the sum's buffer (or, when the sum only feeds an output reshape, that one's).
  std::vector<int> gemm_at(n, -1);
  std::vector<GemmMatch> gemms;
  for (int i = 0; i < n && !opts.gemm_dtypes.empty(); ++i) {
    if (g.nodes[i].op != Op::ReduceSum || !opts.gemm(g.nodes[i].dtype)) continue;
    auto m = match_gemm(g, i, realized);
    if (!m) continue;
    realized[m->a_node] = realized[m->b_node] = true;
    int root = i;
    if (users[i] == 1 && !realized[i]) {
      for (int u = i + 1; u < n; ++u) {
        const PNode& p = g.nodes[u];
        if (std::find(p.inputs.begin(), p.inputs.end(), i) == p.inputs.end()) continue;
        if (p.op == Op::Reshape && realized[u]) root = u;
        // A product read only transposed (a weight gradient x^T @ g, stored as [out, in]): the
        // GEMM writes the transpose, B^T A^T, instead of a kernel transposing its result.
        if (transposes_matrices(p, g.nodes[i]) && m->gemm.M == g.nodes[i].shape.end()[-2]) {
          transpose_product(*m);
          root = u;
        }
        break;
      }
    }
    realized[root] = true;
    gemm_at[root] = static_cast<int>(gemms.size());
    gemms.push_back(std::move(*m));
  }
  // Library convolutions: every operand gets a buffer. A forward conv whose only user is a ReLU
  // (maximum with 0) writes that node's buffer with the ReLU as a oneDNN post-op instead.
  std::vector<int> conv_at(n, -1), conv_node;
  std::vector<bool> conv_relu;
  for (int i = 0; i < n; ++i) {
    const PNode& p = g.nodes[i];
    if (op_info(p.op).cls != OpClass::Conv) continue;
    if (!opts.conv(p.dtype))
      fail(ErrorKind::Runtime, "internal: ", op_name(p.op), " in ", dtype_name(p.dtype),
           " reached fusion without a convolution library (decompose expands it for such "
           "backends)");
    for (int c : p.inputs) realized[c] = true;
    int root = i;
    if (p.op == Op::Conv2d && users[i] == 1 && !realized[i]) {
      for (int u = i + 1; u < n; ++u) {
        const PNode& q = g.nodes[u];
        if (std::find(q.inputs.begin(), q.inputs.end(), i) == q.inputs.end()) continue;
        const int other = q.inputs.size() == 2 ? q.inputs[q.inputs[0] == i ? 1 : 0] : -1;
        if (q.op == Op::Maximum && other >= 0 && other != i && q.shape == p.shape &&
            g.nodes[other].op == Op::Constant && g.nodes[other].attrs.value == 0.0)
          root = u;
        break;
      }
    }
    realized[root] = true;
    conv_at[root] = static_cast<int>(conv_node.size());
    conv_node.push_back(i);
    conv_relu.push_back(root != i);
  }
  // Library attention: operands and the prims get buffers. The prims over the same (q, k, v)
  // and attributes, forward (output, logsumexp) or backward (dq, dk, dv), are one step, emitted
  // at the first of them (every operand comes before it, every reader after).
  std::vector<int> attn_at(n, -1);
  std::vector<std::vector<int>> attn_groups;
  for (int i = 0; i < n; ++i) {
    const PNode& p = g.nodes[i];
    if (op_info(p.op).cls != OpClass::Attention) continue;
    const PNode &q = g.nodes[p.inputs[0]], &v = g.nodes[p.inputs[2]];
    if (!opts.attention(q.dtype, q.shape.back(), v.shape.back()))
      fail(ErrorKind::Runtime, "internal: ", op_name(p.op), " in ", dtype_name(q.dtype),
           " with head dims ", q.shape.back(), " and ", v.shape.back(),
           " reached fusion without an attention library (decompose expands it for such "
           "backends)");
    for (int c : p.inputs) realized[c] = true;
    realized[i] = true;
    for (size_t gi = 0; gi < attn_groups.size() && attn_at[i] < 0; ++gi) {
      const PNode& f = g.nodes[attn_groups[gi].front()];
      if (forward_attention(f.op) != forward_attention(p.op) || f.inputs != p.inputs ||
          f.attrs.ints != p.attrs.ints || f.attrs.value != p.attrs.value)
        continue;
      bool repeated = false;
      for (int m : attn_groups[gi]) repeated |= g.nodes[m].op == p.op;
      if (repeated) continue;
      attn_at[i] = static_cast<int>(gi);
      attn_groups[gi].push_back(i);
    }
    if (attn_at[i] < 0) {
      attn_at[i] = static_cast<int>(attn_groups.size());
      attn_groups.push_back({i});
    }
  }
  std::vector<int> library_at = conv_at;  // nodes a library step writes: never kernel hosts
  for (int i = 0; i < n; ++i)
    if (attn_at[i] >= 0) library_at[i] = attn_at[i];
  realize_shared_wide_values(g, users, realized);
  // Kernel emission recurses through inlined operands: bound the inlined depth by materializing.
  // After GEMM matching (whose operands are realized already), and never at a broadcast: a node
  // bigger than its deepest operand (a matmul's [.., M, N, K] product) realizes that operand
  // instead.
  constexpr int kMaxInlineDepth = 256;
  std::vector<int> depth(n, 0);
  for (int i = 0; i < n; ++i) {
    if (realized[i]) continue;
    int deepest = -1;
    for (int c : g.nodes[i].inputs)
      if (depth[c] + 1 > depth[i]) depth[i] = depth[c] + 1, deepest = c;
    if (depth[i] <= kMaxInlineDepth) continue;
    if (deepest >= 0 && numel(g.nodes[deepest].shape) < numel(g.nodes[i].shape) &&
        g.nodes[deepest].input_index < 0) {
      realized[deepest] = true;
      depth[i] = 1;
      for (int c : g.nodes[i].inputs)
        if (c != deepest) depth[i] = std::max(depth[i], depth[c] + 1);
    } else {
      realized[i] = true, depth[i] = 0;
    }
  }
  std::set<std::pair<int, int>> no_absorb;
  std::vector<int> absorbed_into;
  std::vector<bool> store_absorbed, blocks_others;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 4 * n + 8) fail(ErrorKind::Runtime, "internal: fusion did not converge");
    absorb_targets(g, realized, gemm_at, library_at, no_absorb, absorbed_into, store_absorbed,
                   blocks_others);
    Plan plan;
    std::vector<int> buffer_of(n, -1);
    // Graph inputs first, in input order, so BufferSpec::input lines up with RunInput.
    std::vector<int> input_node(g.num_inputs, -1);
    for (int i = 0; i < n; ++i)
      if (g.nodes[i].input_index >= 0) input_node.at(g.nodes[i].input_index) = i;
    for (int in = 0; in < g.num_inputs; ++in) {
      int i = input_node[in];
      if (i < 0) fail(ErrorKind::Runtime, "internal: graph input ", in, " has no leaf");
      const PNode& p = g.nodes[i];
      auto kind = p.op == Op::Scalar ? BufferSpec::Kind::Scalar : BufferSpec::Kind::Input;
      plan.buffers.push_back({kind, p.dtype, numel(p.shape), in});
    }
    for (int i = 0; i < n; ++i) {
      if (g.nodes[i].input_index >= 0) {
        buffer_of[i] = g.nodes[i].input_index;
      } else if (realized[i]) {
        bool out = std::find(g.outputs.begin(), g.outputs.end(), i) != g.outputs.end();
        plan.buffers.push_back({out ? BufferSpec::Kind::Output : BufferSpec::Kind::Temp,
                                g.nodes[i].dtype, numel(g.nodes[i].shape)});
        buffer_of[i] = static_cast<int>(plan.buffers.size()) - 1;
      }
    }
    std::ostringstream grouping;
    std::vector<int> unhostable;  // found in this pass; realized together before the next
    bool restart = false;
    try {
      for (int i = 0; i < n; ++i) {
        if (!realized[i] || g.nodes[i].input_index >= 0 || numel(g.nodes[i].shape) == 0) continue;
        if (absorbed_into[i] >= 0) continue;  // computed (and stored) by a later kernel
        if (gemm_at[i] >= 0) {
          const GemmMatch& m = gemms[gemm_at[i]];
          Gemm gm = m.gemm;
          gm.name = "g" + std::to_string(i) + "_matmul";
          gm.a = buffer_of[m.a_node], gm.b = buffer_of[m.b_node], gm.out = buffer_of[i];
          plan.steps.push_back({PlanStep::Kind::Gemm, static_cast<int>(plan.gemms.size())});
          plan.gemms.push_back(gm);
          grouping << gm.name << ": gemm " << dtype_name(gm.dtype) << " batch "
                   << shape_str(gm.batch) << " M " << gm.M << " N " << gm.N << " K " << gm.K
                   << (gm.a_transposed() ? " A^T" : "") << (gm.b_transposed() ? " B^T" : "")
                   << ", nodes %" << m.reduce << " from %" << m.a_node << " @ %" << m.b_node
                   << "\n";
          continue;
        }
        if (conv_at[i] >= 0) {
          const int ci = conv_node[conv_at[i]];
          plan.steps.push_back({PlanStep::Kind::Conv, static_cast<int>(plan.convs.size())});
          plan.convs.push_back(conv_step(g, ci, i, conv_relu[conv_at[i]], buffer_of));
          const ConvStep& c = plan.convs.back();
          grouping << c.name << ": conv " << dtype_name(c.dtype) << " input " << shape_str(c.x)
                   << " weight " << shape_str(c.w) << " output " << shape_str(c.y)
                   << (c.bias >= 0 ? " +bias" : "") << (c.relu ? " +relu" : "") << ", nodes %" << ci
                   << (ci != i ? " %" + std::to_string(i) : "") << "\n";
          continue;
        }
        if (attn_at[i] >= 0) {
          const std::vector<int>& members = attn_groups[attn_at[i]];
          if (members.front() != i) continue;  // written by the step of the group's first prim
          plan.steps.push_back(
              {PlanStep::Kind::Attention, static_cast<int>(plan.attentions.size())});
          plan.attentions.push_back(attention_step(g, members, buffer_of));
          const AttentionStep& a = plan.attentions.back();
          grouping << a.name << ": attention " << dtype_name(a.dtype)
                   << (a.kind == AttentionStep::Kind::Forward ? " forward" : " backward")
                   << " batch " << a.batch << " L " << a.L << " S " << a.S << " E " << a.E << " Ev "
                   << a.Ev << (a.causal ? " causal" : "") << ", nodes";
          for (int m : members) grouping << " %" << m << ":" << op_name(g.nodes[m].op);
          grouping << "\n";
          continue;
        }
        // A kernel (scatter_add: two) rooted at `root`, appended once built.
        auto add_kernels = [&](int root) {
          const bool scatter = g.nodes[root].op == Op::ScatterAdd;
          for (int part = scatter ? 0 : 1; part < 2; ++part) {
            std::vector<int> touched;
            KernelBuilder kb(g, realized, buffer_of, plan.buffers, root, absorbed_into,
                             store_absorbed);
            loop::Kernel k = scatter ? kb.build_scatter(part == 0, &touched) : kb.build(&touched);
            grouping << k.name << ": outer " << shape_str(k.outer) << " inner "
                     << shape_str(k.inner) << ", " << k.stages.size() << " stage(s)"
                     << (k.accumulates() ? ", accumulating" : "") << ", nodes";
            for (int t : touched) grouping << " %" << t << ":" << op_name(g.nodes[t].op);
            grouping << "\n";
            plan.steps.push_back({PlanStep::Kind::Kernel, static_cast<int>(plan.kernels.size())});
            plan.kernels.push_back(std::move(k));
          }
        };
        try {
          for (;;) {
            try {
              add_kernels(i);
              break;
            } catch (const Unabsorbable& u) {
              no_absorb.insert({u.node, u.host});
              // Had it not been absorbed, an earlier reduction might have gone into its kernel.
              if (blocks_others[u.node]) throw;
              // Else it gets its own kernel, placed right here: its readers are this kernel and
              // later ones, so no restart is needed.
              absorbed_into[u.node] = -1;
              add_kernels(u.node);
            }
          }
        } catch (const Unhostable& u) {
          // The pass goes on to find the other kernels' (each kernel's build depends on what is
          // realized, not on earlier kernels being built), so a graph needing k such values
          // restarts about once instead of k times (a GPT step: 66 passes over ~90 kernels).
          unhostable.push_back(u.node);
        }
      }
    } catch (const Unabsorbable&) {
      restart = true;  // no_absorb has grown
    }
    for (int u : unhostable) realized[u] = true;
    if (restart || !unhostable.empty()) continue;
    for (int o : g.outputs) {
      plan.output_buffers.push_back(buffer_of[o]);
      plan.output_shapes.push_back(g.nodes[o].shape);
    }
    plan.grouping = grouping.str();
    plan.prims = std::move(g);
    return plan;
  }
}

}  // namespace lt
