// The kernel builder of fusion (lowering/fuse.cc): one loop::Kernel rooted at a realized node,
// computing every unrealized value it needs inline and hosting the reductions of its row. When a
// value cannot be computed there it returns no kernel and says which value (a Refusal): fuse() then
// realizes it, or gives it its own kernel, and tries again. Real errors throw lt::Error. Internal
// to lowering.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "lowering/fusion_node.h"
#include "lowering/loop_ir.h"
#include "lowering/plan.h"
#include "lowering/prim_graph.h"
#include "lowering/symbolic.h"

namespace lt::fusion {

using loop::IKind;
using loop::Instr;
using loop::Stage;
using loop::StageKind;

// Why a kernel was not built. Unhostable: value `node` (a reduction of another row, or a costly
// value recomputed per outer point) cannot be computed in it; fuse() realizes it. Unabsorbable:
// realized reduction `node`, absorbed into the kernel rooted at `host` (see absorb_targets), cannot
// be computed there after all; it gets its own kernel again (or a later reader's).
struct Refusal {
  enum class Kind : uint8_t { Unhostable, Unabsorbable } kind;
  int node;
  int host = -1;  // Unabsorbable only
};

struct ReduceSig {
  Shape in_shape;
  std::vector<int64_t> axes;  // sorted, non-negative
  bool operator==(const ReduceSig& o) const { return in_shape == o.in_shape && axes == o.axes; }
};

class KernelBuilder {
 public:
  // nodes[r].absorbed_into == root: realized reduction r is computed by this kernel (not its own),
  // which writes its buffer as a second output when nodes[r].store_absorbed.
  KernelBuilder(const PrimGraph& g, const FusionNodes& nodes,
                const std::vector<BufferSpec>& buffers, int root)
      : g_(g), nodes_(nodes), buffers_(buffers), root_(root) {}

  // The kernel, or nullopt with refusal() saying why. A builder builds one kernel.
  // `absorbed_values`: the elementwise values absorbed into this kernel; one the root's
  // computation does not reach (a sibling of the root over its shape) is computed and stored at
  // the root's point too.
  std::optional<loop::Kernel> build(std::vector<int>* touched,
                                    const std::vector<int>& absorbed_values = {});
  // scatter_add's two kernels: `init` copies base into the output buffer; the other runs over the
  // index's shape and adds src into it at the indexed positions (accumulating stores).
  std::optional<loop::Kernel> build_scatter(bool init, std::vector<int>* touched);
  const Refusal& refusal() const { return refusal_; }

 private:
  // emit's result when the value cannot be computed here (refusal_ says why); every caller passes
  // it on before using the instruction.
  static constexpr int kRefused = -1;
  // Record why the kernel is refused; return kRefused.
  int unhostable(int node) {
    refusal_ = {Refusal::Kind::Unhostable, node};
    return kRefused;
  }
  int unabsorbable(int node) {
    refusal_ = {Refusal::Kind::Unabsorbable, node, root_};
    return kRefused;
  }
  // A reduction that cannot be computed here: given back when absorbed, else realized.
  int refuse_reduction(int node) { return absorbed(node) ? unabsorbable(node) : unhostable(node); }
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
  bool absorbed(int node) const { return node != root_ && nodes_[node].absorbed_into == root_; }
  bool absorbed_value(int node) const {
    return absorbed(node) && op_info(g_.nodes[node].op).cls != OpClass::Reduce;
  }
  bool realized(int node) const { return nodes_[node].realized; }

  const PrimGraph& g_;
  const FusionNodes& nodes_;
  const std::vector<BufferSpec>& buffers_;
  int root_;
  Refusal refusal_{Refusal::Kind::Unhostable, -1};
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
  // The store stage and the root's flat index there, once known: an absorbed elementwise value
  // is computed only at that point (absorb_targets in fuse.cc), and stored with the root.
  int store_stage_ = -1;
  Lin store_flat_;
  std::vector<std::pair<int, int>> absorbed_values_;  // (node, instruction) in the store stage
  std::set<int> touched_;
  std::map<int, int> cost_;
};

}  // namespace lt::fusion
