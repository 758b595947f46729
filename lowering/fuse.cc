#include "lowering/fuse.h"

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "lowering/kernel_builder.h"
#include "lowering/library_match.h"
#include "lowering/size_choices.h"

namespace lt {
namespace {

using fusion::FusionNode;
using fusion::FusionNodes;
using fusion::KernelBuilder;
using fusion::LibraryMatch;
using fusion::Refusal;

// Reduction pairs (reduction, host) tried in absorb_targets that did not fit.
using NoAbsorb = std::set<std::pair<int, int>>;

// The nodes that need a buffer whatever fuses around them: graph outputs, leaves, reductions read
// by several prims (or none) and scatter_add (written by its own two kernels). Counts users too.
FusionNodes realize_required(const PrimGraph& g) {
  const int n = static_cast<int>(g.nodes.size());
  FusionNodes nodes(n);
  for (const auto& p : g.nodes)
    for (int c : p.inputs) nodes[c].users++;
  for (int o : g.outputs) nodes[o].realized = true;
  for (int i = 0; i < n; ++i) {
    const PNode& p = g.nodes[i];
    if (p.op == Op::Param || p.op == Op::Scalar) nodes[i].realized = true;
    if (op_info(p.op).cls == OpClass::Reduce && nodes[i].users != 1) nodes[i].realized = true;
    if (p.op == Op::ScatterAdd) nodes[i].realized = true;
  }
  return nodes;
}

// A value read by several consumers is recomputed by each of them while that is cheap. What makes
// it costly is rarely arithmetic but loads: a residual stream x0 + a1 + b1 + ... recomputed in
// every kernel that reads it (layer norm statistics, its gradient's row and column reductions, the
// loss) re-reads every branch's buffer there, several times the traffic of reading it once.
// So a shared value whose computation reads kMaxSharedLoads or more distinct buffers is realized:
// one write, then one load per consumer. Reads of 1-2 buffers (softmax's exp(x - max), a
// 20-step x + sin(x) chain over one input) stay fused.
void realize_shared_wide_values(const PrimGraph& g, FusionNodes& nodes) {
  constexpr size_t kMaxSharedLoads = 3;
  const int n = static_cast<int>(g.nodes.size());
  // Per node: up to kMaxSharedLoads of the buffers its inline computation reads. A capped set is
  // enough: the union of two sets is at least kMaxSharedLoads exactly when the true union is.
  std::vector<std::vector<int>> loads(n);
  for (int i = 0; i < n; ++i) {
    const PNode& p = g.nodes[i];
    auto& mine = loads[i];
    if (p.op == Op::Scalar || p.op == Op::Constant) continue;
    if (nodes[i].realized || op_info(p.op).cls == OpClass::Reduce) {
      mine.push_back(i);  // a load (a reduction hosted here is computed once per kernel as well)
      continue;
    }
    // Only reads about as large as the value count: a broadcast vector (a layer norm's weight, a
    // row statistic) stays in cache whoever reads it.
    const int64_t size = numel(p.shape);
    for (int c : p.inputs)
      for (int b : loads[c])
        if (mine.size() < kMaxSharedLoads && std::find(mine.begin(), mine.end(), b) == mine.end() &&
            size_choice(2 * numel(g.nodes[b].shape) > size))
          mine.push_back(b);
    if (nodes[i].users >= 2 && mine.size() >= kMaxSharedLoads) {
      nodes[i].realized = true;
      mine.assign(1, i);
    }
  }
}

// A 0-d value computed with costly math (a transcendental, or a float64 division or root) and
// read by a kernel over a tensor is realized: a tiny kernel computes it once. Inlined, every
// thread of the reader computed it again: AdamW's bias corrections 1 - beta^t (float64, from the
// device step count) were a third of each parameter's update kernel on the H200. Rank, not size,
// decides, so symbolic lowering makes the same choice at every size.
void realize_costly_scalars(const PrimGraph& g, FusionNodes& nodes) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<bool> costly(n, false);  // 0-d, unrealized, costly math in its inline computation
  for (int i = 0; i < n; ++i) {
    const PNode& p = g.nodes[i];
    if (nodes[i].realized || !p.shape.empty()) continue;
    const OpCost c = op_info(p.op).cost;
    bool k = c >= OpCost::Transcendental || (c == OpCost::Divide && p.dtype == DType::Float64);
    for (int in : p.inputs) k = k || costly[in];
    costly[i] = k;
  }
  for (const PNode& p : g.nodes)
    if (!p.shape.empty())
      for (int c : p.inputs)
        if (costly[c]) nodes[c].realized = true;
}

// Kernel emission recurses through inlined operands: bound the inlined depth by materializing.
// After library matching (whose operands are realized already), and never at a broadcast: a node
// bigger than its deepest operand (a matmul's [.., M, N, K] product) realizes that operand instead.
void bound_inline_depth(const PrimGraph& g, FusionNodes& nodes) {
  constexpr int kMaxInlineDepth = 256;
  const int n = static_cast<int>(g.nodes.size());
  std::vector<int> depth(n, 0);
  for (int i = 0; i < n; ++i) {
    if (nodes[i].realized) continue;
    int deepest = -1;
    for (int c : g.nodes[i].inputs)
      if (depth[c] + 1 > depth[i]) depth[i] = depth[c] + 1, deepest = c;
    if (depth[i] <= kMaxInlineDepth) continue;
    if (deepest >= 0 && g.nodes[deepest].input_index < 0 &&
        size_choice(numel(g.nodes[deepest].shape) < numel(g.nodes[i].shape))) {
      nodes[deepest].realized = nodes[deepest].deep = true;
      depth[i] = 1;
      for (int c : g.nodes[i].inputs)
        if (c != deepest) depth[i] = std::max(depth[i], depth[c] + 1);
    } else {
      nodes[i].realized = nodes[i].deep = true, depth[i] = 0;
    }
  }
}

// Calls visit(c) once for each realized node that the inline computation of `values` reads,
// until visit returns false.
template <typename Visit>
void for_realized_reads(const PrimGraph& g, const FusionNodes& nodes,
                        const std::vector<int>& values, const Visit& visit) {
  std::vector<int> todo;
  std::set<int> walked;
  for (int v : values) todo.insert(todo.end(), g.nodes[v].inputs.begin(), g.nodes[v].inputs.end());
  while (!todo.empty()) {
    const int c = todo.back();
    todo.pop_back();
    if (!walked.insert(c).second) continue;
    if (!nodes[c].realized)
      todo.insert(todo.end(), g.nodes[c].inputs.begin(), g.nodes[c].inputs.end());
    else if (!visit(c))
      return;
  }
}

// 0-d kernels computed from the graph's leaves alone (each parameter's step count and bias
// corrections) go into one kernel, up to kMaxLeafScalars values each: they were one launch per
// parameter, 148 one-thread kernels in a GPT-2 step. Such a kernel may run before any kernel,
// so at the place of the first: every reader of a value comes later than the value's node.
template <typename Candidate>
void group_leaf_scalars(const PrimGraph& g, const NoAbsorb& no_absorb, FusionNodes& nodes,
                        const Candidate& candidate, const std::vector<std::vector<int>>& readers) {
  constexpr int kMaxLeafScalars = 48;  // a kernel's arguments stay a few KB
  const int n = static_cast<int>(g.nodes.size());
  std::vector<std::vector<int>> values(n);  // per 0-d kernel root: itself and what it absorbed
  std::vector<int> roots, absorbed(n, 0);
  for (int i = 0; i < n; ++i) {
    if (nodes[i].absorbed_into >= 0) ++absorbed[nodes[i].absorbed_into];
    if (candidate(i) && g.nodes[i].shape.empty() && nodes[i].absorbed_into < 0 &&
        op_info(g.nodes[i].op).cls != OpClass::Reduce)
      roots.push_back(i), values[i].push_back(i);
  }
  for (int i = 0; i < n; ++i) {
    const int root = nodes[i].absorbed_into;
    if (root >= 0 && !values[root].empty() && candidate(i) && g.nodes[i].shape.empty() &&
        op_info(g.nodes[i].op).cls != OpClass::Reduce)
      values[root].push_back(i);
  }
  int host = -1;
  size_t members = 0;
  for (int r : roots) {
    // Only kernels of 0-d elementwise values move (an absorbed reduction keeps its host).
    if (absorbed[r] + 1 != static_cast<int>(values[r].size())) continue;
    // Every realized value the kernel reads is a leaf, or computed by this kernel or the group.
    bool leaves_only = true;
    for_realized_reads(g, nodes, values[r], [&](int c) {
      const PNode& p = g.nodes[c];
      const int at = nodes[c].absorbed_into >= 0 ? nodes[c].absorbed_into : c;
      leaves_only =
          p.input_index >= 0 || p.op == Op::Scalar || at == r || (host >= 0 && at == host);
      return leaves_only;
    });
    if (!leaves_only) continue;
    // Every other kernel reading one of them runs after the group's.
    auto after_host = [&](int v) {
      for (int j : readers[v]) {
        const int at = nodes[j].absorbed_into >= 0 ? nodes[j].absorbed_into : j;
        if (at != r && at <= host) return false;
      }
      return true;
    };
    if (host >= 0 && members + values[r].size() <= kMaxLeafScalars &&
        std::all_of(values[r].begin(), values[r].end(), after_host) &&
        std::none_of(values[r].begin(), values[r].end(), [&](int v) {
          return no_absorb.count({v, host}) > 0;
        })) {
      for (int v : values[r]) nodes[v].absorbed_into = host, nodes[v].store_absorbed = true;
      members += values[r].size();
    } else {
      host = r;
      members = values[r].size();
    }
  }
}

// Multi-output row kernels. A reduction read by several kernels is realized, which costs it a
// kernel of its own (cross_entropy's row max: read by the sum of exp(x - max) and by the loss).
// Instead, the first kernel that reads it computes it as one more Reduce stage over the same rows
// and, when later kernels or the graph's outputs need it, also stores it: one pass over the rows
// yields both the max and the sum. Sets absorbed_into (-1: not absorbed), store_absorbed and
// blocks_others of every node (see FusionNode). Candidates in no_absorb were tried and did not fit
// (another row shape, or a store in a kernel without a per-row store stage); the kernel builder
// reports those. They are (reduction, host) pairs: realizing more nodes may give the reduction
// another first reader.
//
// The same for elementwise values: a realized elementwise value (a graph output, or shared) whose
// first reader is an elementwise kernel of its shape is computed and stored by that kernel at the
// reader's own point. An optimizer step becomes one kernel per parameter: AdamW's new moments are
// outputs that its parameter update reads, and were three kernels, re-reading the gradient and
// writing then reading both moments. Values realized to bound the inline depth stay apart, and so
// do values over a reduction computed inline (that would change the host's loops).
void absorb_targets(const PrimGraph& g, const NoAbsorb& no_absorb, FusionNodes& nodes) {
  const int n = static_cast<int>(g.nodes.size());
  for (FusionNode& node : nodes)
    node.absorbed_into = -1, node.store_absorbed = false, node.blocks_others = false;
  auto realized_value = [&](int r) {
    const PNode& p = g.nodes[r];
    return nodes[r].realized && p.input_index < 0 && nodes[r].library < 0 && numel(p.shape) > 0;
  };
  // Elementwise values whose inline computation (down to realized nodes) holds no reduction.
  std::vector<bool> pure(n, false);
  for (int i = 0; i < n; ++i) {
    const OpClass cls = op_info(g.nodes[i].op).cls;
    bool ok = cls != OpClass::Reduce && cls != OpClass::ScatterAdd && cls != OpClass::Rand &&
              cls != OpClass::Leaf;
    for (int c : g.nodes[i].inputs) ok = ok && (nodes[c].realized || pure[c]);
    pure[i] = ok;
  }
  auto candidate = [&](int r) {
    if (!realized_value(r)) return false;
    return op_info(g.nodes[r].op).cls == OpClass::Reduce ||
           (pure[r] && is_elementwise(op_info(g.nodes[r].op).cls) && !nodes[r].deep);
  };
  // Per candidate: the kernels (by root) that read it, in root order.
  std::vector<std::vector<int>> readers(n);
  std::vector<int> seen(n, -1);
  for (int j = 0; j < n; ++j) {
    if (!nodes[j].realized || g.nodes[j].input_index >= 0) continue;
    std::vector<int> todo(g.nodes[j].inputs.begin(), g.nodes[j].inputs.end());
    while (!todo.empty()) {
      const int c = todo.back();
      todo.pop_back();
      if (seen[c] == j) continue;
      seen[c] = j;
      if (nodes[c].realized) {
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
    if (op_info(g.nodes[r].op).cls != OpClass::Reduce) {
      // An elementwise value goes only into an elementwise kernel over its own shape.
      const PNode& host = g.nodes[j];
      if (!no_absorb.count({r, j}) && nodes[j].absorbed_into < 0 && nodes[j].library < 0 &&
          is_elementwise(op_info(host.op).cls) && host.shape == g.nodes[r].shape) {
        nodes[r].absorbed_into = j;
        nodes[r].store_absorbed = true;
      }
      continue;
    }
    const PNode& host = g.nodes[j];
    if (nodes[j].absorbed_into >= 0) nodes[j].blocks_others = true;  // r could have gone into j's
    if (no_absorb.count({r, j}) || nodes[j].absorbed_into >= 0 || nodes[j].library >= 0 ||
        host.op == Op::ScatterAdd || numel(host.shape) == 0)
      continue;
    nodes[r].absorbed_into = j;
    nodes[r].store_absorbed = is_output[r] || readers[r].size() > 1;
  }
  // A 0-d value read by kernels over tensors only (realize_costly_scalars': a bias correction)
  // joins the 0-d kernel that computes the latest value it reads (the step count), when that
  // kernel comes before its first reader: one kernel per parameter computes the step and both
  // corrections.
  for (int r = 0; r < n; ++r) {
    if (!candidate(r) || nodes[r].absorbed_into >= 0 || !g.nodes[r].shape.empty() ||
        readers[r].empty() || op_info(g.nodes[r].op).cls == OpClass::Reduce)
      continue;
    int host = -1;  // the latest kernel computing a realized value that r's computation reads
    for_realized_reads(g, nodes, {r}, [&](int c) {
      if (g.nodes[c].input_index < 0)
        host = std::max(host, nodes[c].absorbed_into >= 0 ? nodes[c].absorbed_into : c);
      return true;
    });
    if (host < 0 || host == r || host >= readers[r].front() || no_absorb.count({r, host})) continue;
    const PNode& h = g.nodes[host];
    if (!h.shape.empty() || nodes[host].absorbed_into >= 0 || nodes[host].library >= 0 ||
        !is_elementwise(op_info(h.op).cls) || !nodes[host].realized)
      continue;
    nodes[r].absorbed_into = host;
    nodes[r].store_absorbed = true;
  }
  group_leaf_scalars(g, no_absorb, nodes, candidate, readers);
}

// One pass of building the plan's steps over the current realization. Building a kernel can find
// that a value must be realized after all, or that an absorbed reduction does not fit its host:
// the pass records that (in nodes and no_absorb) and returns no plan, and fuse() runs another.
class PlanPass {
 public:
  PlanPass(const PrimGraph& g, const std::vector<LibraryMatch>& library, FusionNodes& nodes,
           NoAbsorb& no_absorb)
      : g_(g), library_(library), nodes_(nodes), no_absorb_(no_absorb) {}

  // The plan (without its prims), or nullopt when the realization changed.
  std::optional<Plan> run() {
    add_buffers();
    // Absorbed elementwise values grouped by host (a counting sort: one pass over the nodes).
    const int n = static_cast<int>(g_.nodes.size());
    first_absorbed_.assign(n + 1, 0);
    for (int i = 0; i < n; ++i)
      if (nodes_[i].absorbed_into >= 0 && op_info(g_.nodes[i].op).cls != OpClass::Reduce)
        ++first_absorbed_[nodes_[i].absorbed_into + 1];
    for (int i = 0; i < n; ++i) first_absorbed_[i + 1] += first_absorbed_[i];
    absorbed_list_.assign(first_absorbed_[n], 0);
    std::vector<int> fill(first_absorbed_.begin(), first_absorbed_.end() - 1);
    for (int i = 0; i < n; ++i)
      if (nodes_[i].absorbed_into >= 0 && op_info(g_.nodes[i].op).cls != OpClass::Reduce)
        absorbed_list_[fill[nodes_[i].absorbed_into]++] = i;
    bool restart = false;
    for (int i = 0; i < static_cast<int>(g_.nodes.size()) && !restart; ++i) {
      const FusionNode& node = nodes_[i];
      if (!node.realized || g_.nodes[i].input_index >= 0 || numel(g_.nodes[i].shape) == 0) continue;
      if (node.absorbed_into >= 0) continue;  // computed (and stored) by a later kernel
      if (node.library >= 0) {
        // An attention group's later prims are written by the step of its first.
        const LibraryMatch& m = library_[node.library];
        if (m.root == i) fusion::emit_library_step(g_, m, nodes_, plan_, grouping_);
        continue;
      }
      restart = !place_kernels(i);
    }
    for (int u : unhostable_) nodes_[u].realized = true;
    if (restart || !unhostable_.empty()) return std::nullopt;
    for (int o : g_.outputs) {
      plan_.output_buffers.push_back(nodes_[o].buffer);
      plan_.output_shapes.push_back(g_.nodes[o].shape);
    }
    plan_.grouping = grouping_.str();
    return std::move(plan_);
  }

 private:
  // Graph inputs first, in input order, so BufferSpec::input lines up with RunInput; then one
  // buffer per realized node, in node order.
  void add_buffers() {
    const int n = static_cast<int>(g_.nodes.size());
    std::vector<int> input_node(g_.num_inputs, -1);
    for (int i = 0; i < n; ++i)
      if (g_.nodes[i].input_index >= 0) input_node.at(g_.nodes[i].input_index) = i;
    for (int in = 0; in < g_.num_inputs; ++in) {
      const int i = input_node[in];
      if (i < 0) fail(ErrorKind::Runtime, "internal: graph input ", in, " has no leaf");
      const PNode& p = g_.nodes[i];
      auto kind = p.op == Op::Scalar ? BufferSpec::Kind::Scalar : BufferSpec::Kind::Input;
      plan_.buffers.push_back({kind, p.dtype, numel(p.shape), in});
    }
    for (int i = 0; i < n; ++i) {
      const PNode& p = g_.nodes[i];
      nodes_[i].buffer = -1;
      if (p.input_index >= 0) {
        nodes_[i].buffer = p.input_index;
      } else if (nodes_[i].realized) {
        bool out = std::find(g_.outputs.begin(), g_.outputs.end(), i) != g_.outputs.end();
        plan_.buffers.push_back(
            {out ? BufferSpec::Kind::Output : BufferSpec::Kind::Temp, p.dtype, numel(p.shape)});
        nodes_[i].buffer = static_cast<int>(plan_.buffers.size()) - 1;
      }
    }
  }

  // The elementwise values absorbed into the kernel rooted at `host` (those given back since the
  // pass began have their own kernels now).
  std::vector<int> absorbed_values_of(int host) const {
    std::vector<int> out;
    for (int i = first_absorbed_[host]; i < first_absorbed_[host + 1]; ++i)
      if (nodes_[absorbed_list_[i]].absorbed_into == host) out.push_back(absorbed_list_[i]);
    return out;
  }

  // Adds the kernel rooted at `root` (scatter_add: its two), each as it is built. Returns why
  // one was refused, or nullopt when all were added.
  std::optional<Refusal> add_kernels(int root) {
    const bool scatter = g_.nodes[root].op == Op::ScatterAdd;
    for (int part = scatter ? 0 : 1; part < 2; ++part) {
      std::vector<int> touched;
      KernelBuilder kb(g_, nodes_, plan_.buffers, root);
      std::optional<loop::Kernel> k = scatter ? kb.build_scatter(part == 0, &touched)
                                              : kb.build(&touched, absorbed_values_of(root));
      if (!k) return kb.refusal();
      // Every elementwise value absorbed here must be stored here: nothing else writes it.
      for (int r : absorbed_values_of(root))
        if (std::none_of(
                k->stages.back().stores.begin(), k->stages.back().stores.end(),
                [&](const loop::Store& st) { return k->args[st.arg].buffer == nodes_[r].buffer; }))
          return Refusal{Refusal::Kind::Unabsorbable, r, root};
      grouping_ << k->name << ": outer " << shape_str(k->outer) << " inner " << shape_str(k->inner)
                << ", " << k->stages.size() << " stage(s)"
                << (k->accumulates() ? ", accumulating" : "") << ", nodes";
      for (int t : touched) grouping_ << " %" << t << ":" << op_name(g_.nodes[t].op);
      grouping_ << "\n";
      plan_.steps.push_back({PlanStep::Kind::Kernel, static_cast<int>(plan_.kernels.size())});
      plan_.kernels.push_back(std::move(*k));
    }
    return std::nullopt;
  }

  // Adds the kernels rooted at `root`. A value its kernel cannot compute is recorded in
  // unhostable_ and the pass goes on to find the other kernels' (each kernel's build depends on
  // what is realized, not on earlier kernels being built), so a graph needing k such values
  // restarts about once instead of k times (a GPT step: 66 passes over ~90 kernels). An absorbed
  // reduction that does not fit gets its own kernel, placed right here (its readers are this
  // kernel and later ones), and the root's kernel is built again. Returns false when the pass must
  // stop at once: the reduction blocked an earlier one from being absorbed, or its own kernel
  // refused an absorbed reduction in turn.
  bool place_kernels(int root) {
    for (;;) {
      std::optional<Refusal> refused = add_kernels(root);
      if (!refused) return true;
      if (refused->kind == Refusal::Kind::Unhostable) {
        unhostable_.push_back(refused->node);
        return true;
      }
      const int r = refused->node;
      no_absorb_.insert({r, refused->host});
      // Had it not been absorbed, an earlier reduction might have gone into its kernel.
      if (nodes_[r].blocks_others) return false;
      nodes_[r].absorbed_into = -1;
      if (std::optional<Refusal> own = add_kernels(r)) {
        if (own->kind == Refusal::Kind::Unabsorbable) return false;
        unhostable_.push_back(own->node);
        return true;
      }
    }
  }

  const PrimGraph& g_;
  const std::vector<LibraryMatch>& library_;
  FusionNodes& nodes_;
  NoAbsorb& no_absorb_;
  Plan plan_;
  std::ostringstream grouping_;
  std::vector<int> unhostable_;  // found in this pass; realized together before the next
  std::vector<int> first_absorbed_, absorbed_list_;  // absorbed_values_of's index
};

}  // namespace

// The phases, in order: what must be realized, library steps, realization for cost (shared wide
// values) and for bounded recursion (inline depth); then passes of kernel building, each after
// choosing multi-output row kernels, until a pass builds every kernel it tries.
Plan fuse(PrimGraph g, const LowerOptions& opts) {
  const int n = static_cast<int>(g.nodes.size());
  FusionNodes nodes = realize_required(g);
  const std::vector<LibraryMatch> library = fusion::match_library_steps(g, opts, nodes);
  realize_shared_wide_values(g, nodes);
  realize_costly_scalars(g, nodes);
  bound_inline_depth(g, nodes);
  NoAbsorb no_absorb;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 4 * n + 8) fail(ErrorKind::Runtime, "internal: fusion did not converge");
    absorb_targets(g, no_absorb, nodes);
    std::optional<Plan> plan = PlanPass(g, library, nodes, no_absorb).run();
    if (!plan) continue;
    plan->prims = std::move(g);
    return std::move(*plan);
  }
}

}  // namespace lt
