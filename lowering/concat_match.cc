// Fusion's concat matcher and emitter (lowering/library_match.h). A concat prim (ir/ops.def: a DDP
// bucket's flattened gradients) computes nothing of its own: each operand's producer writes
// straight into the operand's range of the result (its buffer becomes a BufferSpec::alias of the
// result's), so the bucket costs no copy. The gradients of GPT-2 124M are 0.5 GB a step: copied
// into their buckets that was ~0.25 ms of an H200's step. An operand that cannot live there (a
// graph input, a graph output, a value already inside another concat, a range not 256-byte aligned
// for the libraries and vector stores that write it) is copied in by a kernel of its own. Symbolic
// plans keep the operands in place: a concat's sizes are pinned (ir/symbolic_graph.cc), so the
// offsets are the same at every size, which generalize_plan checks.
#include <ostream>

#include "lowering/library_match.h"

namespace lt::fusion {
namespace {

// The value whose buffer holds a concat operand's elements in order: reshapes read their input's
// row-major order unchanged, so the operand is its first non-reshape ancestor's buffer.
int stored_value(const PrimGraph& g, int node) {
  while (op_info(g.nodes[node].op).cls == OpClass::Reshape) node = g.nodes[node].inputs[0];
  return node;
}

// Whether buffer `src` may live inside `out` from element `offset` on.
bool can_alias(const Plan& plan, int src, int out, int64_t offset) {
  if (src < 0 || src == out) return false;
  const BufferSpec& s = plan.buffers[src];
  if (s.kind != BufferSpec::Kind::Temp || s.alias >= 0 || s.dtype != plan.buffers[out].dtype)
    return false;
  if (static_cast<size_t>(offset) * dtype_size(s.dtype) % 256 != 0) return false;
  for (const BufferSpec& b : plan.buffers)  // src holds other buffers: it stays where it is
    if (b.alias == src) return false;
  return true;
}

// A kernel copying buffer `src` (n elements) into `out` from element `offset` on.
loop::Kernel copy_kernel(const Plan& plan, const std::string& name, int src, int out, int64_t n,
                         int64_t offset) {
  const BufferSpec &s = plan.buffers[src], &o = plan.buffers[out];
  loop::Kernel k;
  k.name = name;
  k.outer = {n};
  k.args = {{src, s.dtype, s.numel}, {out, o.dtype, o.numel, false, true}};
  loop::Stage st{loop::StageKind::MapOuter};
  loop::Instr load{loop::IKind::Load};
  load.dtype = s.dtype;
  load.arg = 0;
  load.index.strides = {1};
  st.body.push_back(load);
  loop::Store store{1, {}, 0};
  store.index.offset = offset;
  store.index.strides = {1};
  st.stores.push_back(store);
  k.stages.push_back(std::move(st));
  return k;
}

}  // namespace

std::optional<LibraryMatch> match_concat_step(const MatchContext& c, int node) {
  const PNode& p = c.g.nodes[node];
  if (op_info(p.op).cls != OpClass::Concat) return std::nullopt;
  LibraryMatch m{PlanStep::Kind::Kernel, node, node};
  for (int in : p.inputs) m.operands.push_back(stored_value(c.g, in));
  m.outputs = {node};
  return m;
}

void emit_concat_step(const PrimGraph& g, const LibraryMatch& m, const FusionNodes& nodes,
                      Plan& plan, std::ostream& grouping) {
  const PNode& p = g.nodes[m.prim];
  const int out = nodes[m.root].buffer;
  int64_t offset = 0;
  int placed = 0, copied = 0;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const int64_t n = numel(g.nodes[p.inputs[i]].shape);
    const int src = nodes[m.operands[i]].buffer;
    if (n > 0 && can_alias(plan, src, out, offset)) {
      plan.buffers[src].alias = out;
      plan.buffers[src].alias_offset = offset;
      ++placed;
    } else if (n > 0) {
      const std::string name = "k" + std::to_string(m.prim) + "_concat_" + std::to_string(i);
      plan.steps.push_back({PlanStep::Kind::Kernel, static_cast<int>(plan.kernels.size())});
      plan.kernels.push_back(copy_kernel(plan, name, src, out, n, offset));
      grouping << name << ": outer " << shape_str({n}) << ", copies %" << m.operands[i]
               << " into concat %" << m.prim << " at " << offset << "\n";
      ++copied;
    }
    offset += n;
  }
  grouping << "x" << m.prim << "_concat: " << p.inputs.size() << " operands, " << placed
           << " written in place, " << copied << " copied, node %" << m.prim << "\n";
}

}  // namespace lt::fusion
