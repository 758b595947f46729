// Fusion's attention matcher and emitter (lowering/library_match.h): attention prims are library
// Attention steps (lowering/attention.h), one per group of prims over the same operands.
#include <ostream>

#include "ir/attention.h"
#include "ir/error.h"
#include "lowering/library_match.h"

namespace lt::fusion {
namespace {

bool forward_attention(Op op) { return op == Op::Attention || op == Op::AttentionLse; }

void check_supported(const MatchContext& c, const PNode& p) {
  const PNode &q = c.g.nodes[p.inputs[0]], &v = c.g.nodes[p.inputs[2]];
  if (!c.opts.attention(q.dtype, q.shape.back(), v.shape.back()))
    fail(ErrorKind::Runtime, "internal: ", op_name(p.op), " in ", dtype_name(q.dtype),
         " with head dims ", q.shape.back(), " and ", v.shape.back(),
         " reached fusion without an attention library (decompose expands it for such "
         "backends)");
}

}  // namespace

// Operands and the prims get buffers. The prims over the same (q, k, v) and attributes, forward
// (output, logsumexp) or backward (dq, dk, dv), are one step: matched at the first of them (every
// operand comes before it, every reader after), which takes each later prim of its kind that it
// lacks; a repeated prim starts a group of its own when it is reached.
std::optional<LibraryMatch> match_attention_step(const MatchContext& c, int node) {
  const PrimGraph& g = c.g;
  const PNode& first = g.nodes[node];
  if (op_info(first.op).cls != OpClass::Attention) return std::nullopt;
  check_supported(c, first);
  LibraryMatch m{PlanStep::Kind::Attention, node, node};
  m.operands = first.inputs;
  m.outputs = {node};
  for (int j = node + 1; j < static_cast<int>(g.nodes.size()); ++j) {
    const PNode& p = g.nodes[j];
    if (op_info(p.op).cls != OpClass::Attention || c.nodes[j].library >= 0) continue;
    if (forward_attention(p.op) != forward_attention(first.op) || p.inputs != first.inputs ||
        p.attrs.ints != first.attrs.ints || p.attrs.value != first.attrs.value)
      continue;
    bool repeated = false;
    for (int o : m.outputs) repeated |= g.nodes[o].op == p.op;
    if (!repeated) m.outputs.push_back(j);
  }
  return m;
}

void emit_attention_step(const PrimGraph& g, const LibraryMatch& m, const FusionNodes& nodes,
                         Plan& plan, std::ostream& grouping) {
  const std::vector<int>& members = m.outputs;
  const PNode& first = g.nodes[members.front()];
  auto buffer = [&](int node) { return nodes[node].buffer; };
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
  a.q = buffer(first.inputs[0]), a.k = buffer(first.inputs[1]), a.v = buffer(first.inputs[2]);
  if (a.kind == AttentionStep::Kind::Backward) {
    a.dout = buffer(first.inputs[3]), a.lse = buffer(first.inputs[4]);
    a.dsum = buffer(first.inputs[5]);
  }
  for (int member : members) {
    const int b = buffer(member);
    switch (g.nodes[member].op) {
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
  grouping << a.name << ": attention " << dtype_name(a.dtype)
           << (a.kind == AttentionStep::Kind::Forward ? " forward" : " backward") << " batch "
           << a.batch << " L " << a.L << " S " << a.S << " E " << a.E << " Ev " << a.Ev
           << (a.causal ? " causal" : "") << ", nodes";
  for (int member : members) grouping << " %" << member << ":" << op_name(g.nodes[member].op);
  grouping << "\n";
  plan.steps.push_back({PlanStep::Kind::Attention, static_cast<int>(plan.attentions.size())});
  plan.attentions.push_back(std::move(a));
}

}  // namespace lt::fusion
