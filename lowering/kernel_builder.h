// The kernel builder of fusion (lowering/fuse.cc): one loop::Kernel rooted at a realized node,
// computing every unrealized value it needs inline, hosting the reductions of its row, and
// throwing Unhostable / Unabsorbable when a value cannot be computed there (fuse() then realizes
// it, or gives it its own kernel, and tries again). Internal to lowering.
#pragma once
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "lowering/loop_ir.h"
#include "lowering/plan.h"
#include "lowering/prim_graph.h"
#include "lowering/symbolic.h"

namespace lt::fusion {

using loop::IKind;
using loop::Instr;
using loop::Stage;
using loop::StageKind;

// Thrown while building a kernel when reduction `node` cannot be hosted there.
struct Unhostable {
  int node;
};
// Thrown when realized reduction `node`, absorbed into the kernel being built (see absorb_targets),
// cannot be computed there after all; it gets its own kernel again (or a later reader's).
struct Unabsorbable {
  int node, host;
};

struct ReduceSig {
  Shape in_shape;
  std::vector<int64_t> axes;  // sorted, non-negative
  bool operator==(const ReduceSig& o) const { return in_shape == o.in_shape && axes == o.axes; }
};

class KernelBuilder {
 public:
  // absorbed_into[r] == root: realized reduction r is computed by this kernel (not its own), which
  // writes its buffer as a second output when store_absorbed[r].
  KernelBuilder(const PrimGraph& g, const std::vector<bool>& realized,
                const std::vector<int>& buffer_of, const std::vector<BufferSpec>& buffers, int root,
                const std::vector<int>& absorbed_into, const std::vector<bool>& store_absorbed)
      : g_(g),
        realized_(realized),
        buffer_of_(buffer_of),
        buffers_(buffers),
        root_(root),
        absorbed_into_(absorbed_into),
        store_absorbed_(store_absorbed) {}

  loop::Kernel build(std::vector<int>* touched);
  // scatter_add's two kernels: `init` copies base into the output buffer; the other runs over the
  // index's shape and adds src into it at the indexed positions (accumulating stores).
  loop::Kernel build_scatter(bool init, std::vector<int>* touched);

 private:
  int emit(int stage, int node, const std::vector<Lin>& idx, bool compute_root = false);
  int push(int stage, Instr in) {
    auto& body = k_.stages[stage].body;
    body.push_back(std::move(in));
    return static_cast<int>(body.size()) - 1;
  }
  int cast_to(int stage, int v, DType t) {
    if (k_.stages[stage].body[v].dtype == t) return v;
    Instr c{IKind::Op, Op::Cast, t, v};
    return push(stage, c);
  }
  int arg_for(int buffer, bool output);
  // A data-dependent index (int64 instruction iv) checked against [0, hi]: returns the index
  // clamped into range (every address stays in bounds) and whether it was in range.
  std::pair<int, int> clamp_index(int stage, int iv, int64_t hi);
  std::string name_of(const char* suffix) const;
  std::vector<Lin> outer_vars();
  std::vector<Lin> reduce_input_index(const ReduceSig& s);
  void collect_reductions(int node, std::set<int>& out, std::set<int>& seen);
  int inline_cost(int node);
  bool in_loop_over_inner(int stage) const {
    return !k_.inner.empty() && k_.stages[stage].kind != StageKind::MapOuter;
  }
  bool broadcast_over_outer(const Lin& flat) const;
  bool absorbed(int node) const { return node != root_ && absorbed_into_[node] == root_; }

  const PrimGraph& g_;
  const std::vector<bool>& realized_;
  const std::vector<int>& buffer_of_;
  const std::vector<BufferSpec>& buffers_;
  int root_;
  const std::vector<int>& absorbed_into_;
  const std::vector<bool>& store_absorbed_;
  loop::Kernel k_;
  std::unique_ptr<SymCtx> sym_;
  ReduceSig sig_;
  std::map<int, int> stage_of_;  // hosted reduction -> its stage
  std::map<int, int> arg_of_;    // buffer -> kernel arg
  // Per node, the (index, instruction) pairs emitted in the current stage. A node is read at one
  // to a few indices, so a short list searched in place spares copying the index into a map key
  // on every lookup (those copies and their frees were a third of fuse's time on a GPT step).
  std::unordered_map<int, std::vector<std::pair<std::vector<Lin>, int>>> memo_;
  // The memoized instruction of `node` at `idx`, or null.
  int* memo_find(int node, const std::vector<Lin>& idx) {
    auto hit = memo_.find(node);
    if (hit == memo_.end()) return nullptr;
    for (auto& [at, instr] : hit->second)
      if (at == idx) return &instr;
    return nullptr;
  }
  std::set<int> touched_;
  std::map<int, int> cost_;
};

}  // namespace lt::fusion
