// Fusion's convolution matcher and emitter (lowering/library_match.h): every conv prim is a
// library Conv step (lowering/conv.h).
#include <algorithm>
#include <ostream>

#include "ir/error.h"
#include "lowering/library_match.h"

namespace lt::fusion {

// Every operand gets a buffer. A forward conv whose only user is a ReLU (maximum with 0) writes
// that node's buffer with the ReLU as a oneDNN post-op instead.
std::optional<LibraryMatch> match_conv_step(const MatchContext& c, int node) {
  const PrimGraph& g = c.g;
  const PNode& p = g.nodes[node];
  if (op_info(p.op).cls != OpClass::Conv) return std::nullopt;
  if (!c.opts.conv(p.dtype))
    fail(ErrorKind::Runtime, "internal: ", op_name(p.op), " in ", dtype_name(p.dtype),
         " reached fusion without a convolution library (decompose expands it for such "
         "backends)");
  int root = node;
  if (p.op == Op::Conv2d && c.nodes[node].users == 1 && !c.nodes[node].realized) {
    for (int u = node + 1; u < static_cast<int>(g.nodes.size()); ++u) {
      const PNode& q = g.nodes[u];
      if (std::find(q.inputs.begin(), q.inputs.end(), node) == q.inputs.end()) continue;
      const int other = q.inputs.size() == 2 ? q.inputs[q.inputs[0] == node ? 1 : 0] : -1;
      if (q.op == Op::Maximum && other >= 0 && other != node && q.shape == p.shape &&
          g.nodes[other].op == Op::Constant && g.nodes[other].attrs.value == 0.0)
        root = u;
      break;
    }
  }
  LibraryMatch m{PlanStep::Kind::Conv, node, root};
  m.operands = p.inputs;
  m.outputs = {root};
  m.relu = root != node;
  return m;
}

void emit_conv_step(const PrimGraph& g, const LibraryMatch& m, const FusionNodes& nodes, Plan& plan,
                    std::ostream& grouping) {
  const PNode& p = g.nodes[m.prim];
  ConvStep c;
  c.kind = ConvStep::kind_of(p.op);
  c.name = "c" + std::to_string(m.prim) + "_" + std::string(op_name(p.op));
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
  c.a = nodes[p.inputs[0]].buffer, c.b = nodes[p.inputs[1]].buffer, c.out = nodes[m.root].buffer;
  if (p.inputs.size() == 3) c.bias = nodes[p.inputs[2]].buffer;
  c.relu = m.relu;
  grouping << c.name << ": conv " << dtype_name(c.dtype) << " input " << shape_str(c.x)
           << " weight " << shape_str(c.w) << " output " << shape_str(c.y)
           << (c.bias >= 0 ? " +bias" : "") << (c.relu ? " +relu" : "") << ", nodes %" << m.prim
           << (m.prim != m.root ? " %" + std::to_string(m.root) : "") << "\n";
  plan.steps.push_back({PlanStep::Kind::Conv, static_cast<int>(plan.convs.size())});
  plan.convs.push_back(std::move(c));
}

}  // namespace lt::fusion
