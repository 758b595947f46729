// VJP rules, one per op, keyed by Op (DESIGN.md "Ops are data"). A rule maps the gradient of an
// op's output to gradients of its operands, using tensor ops (so on lazy they are traced too).
#pragma once
#include <functional>
#include <vector>

#include "ir/node.h"
#include "runtime/saved.h"
#include "runtime/tensor.h"

namespace lt {

struct VjpCtx {
  Op op;
  Attrs attrs;
  std::vector<Saved> inputs;  // the operands as the op saw them (after promotion casts)
  Saved output;
  std::vector<bool> needs_grad;  // per operand: whether its source requires grad
  Tensor x(size_t i) const { return inputs.at(i).get(); }
  // Whether operand i's gradient is used: a rule may skip a costly one (a conv's grad_input for
  // the network's input) that eager execution would otherwise compute and discard.
  bool needs(size_t i) const { return i >= needs_grad.size() || needs_grad[i]; }
  Tensor y() const { return output.get(); }
};

using VjpRule = std::function<std::vector<Tensor>(const VjpCtx& ctx, const Tensor& g)>;
const VjpRule* vjp_rule(Op op);  // nullptr when the op has none (leaves, bool-valued ops)
// Ops whose outputs are never differentiable (comparisons, logical ops, rand).
bool non_differentiable(Op op);

// The tape's record_op (runtime/tape.h's, past its check): a node applying op's rule to the
// operands and output it saves (those the rule reads live, runtime/saved.h).
void record_rule(Op op, const Attrs& attrs, const Tensor& out, const NodeList& operands,
                 const std::vector<Tensor>& sources);

}  // namespace lt
