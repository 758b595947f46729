// Fusion's collective matcher and emitter (lowering/library_match.h): every all_reduce, broadcast
// and all_gather prim is a library Collective step (lowering/collective.h) on every backend.
#include <ostream>

#include "lowering/collective.h"
#include "lowering/library_match.h"

namespace lt::fusion {

std::optional<LibraryMatch> match_collective_step(const MatchContext& c, int node) {
  const PNode& p = c.g.nodes[node];
  if (op_info(p.op).cls != OpClass::Collective) return std::nullopt;
  LibraryMatch m{PlanStep::Kind::Collective, node, node};
  m.operands = p.inputs;
  m.outputs = {node};
  return m;
}

void emit_collective_step(const PrimGraph& g, const LibraryMatch& m, const FusionNodes& nodes,
                          Plan& plan, std::ostream& grouping) {
  const PNode& p = g.nodes[m.prim];
  CollectiveStep c = collective_step_of(p.op, p.dtype, p.attrs, numel(g.nodes[p.inputs[0]].shape));
  c.name = "x" + std::to_string(m.prim) + "_" + std::string(op_name(p.op));
  c.in = nodes[p.inputs[0]].buffer, c.out = nodes[m.root].buffer;
  grouping << c.name << ": " << op_name(p.op) << " " << dtype_name(c.dtype) << " "
           << shape_str(g.nodes[p.inputs[0]].shape) << " over " << c.world << " ranks";
  if (c.group) grouping << ", call group=" << c.group;
  grouping << ", node %" << m.prim << "\n";
  plan.steps.push_back({PlanStep::Kind::Collective, static_cast<int>(plan.collectives.size())});
  plan.collectives.push_back(std::move(c));
}

}  // namespace lt::fusion
